"""The bounds that hostile or careless input is held to, in one place.

Each is far above anything real (a spec is a few hundred bytes, nested three levels; the
largest published model has under 10^13 parameters) and far below what exhausts memory, time
or Python's recursion, so a value beyond one is refused with a message naming the limit.
"""

from __future__ import annotations

MAX_FILE_BYTES = 1_000_000  # a spec or config.json; a checkpoint index is larger
MAX_INDEX_BYTES = 50_000_000  # model.safetensors.index.json: one line per tensor
MAX_DEPTH = 64  # nesting of mappings and lists; a spec uses 3, a config.json about 5
MAX_NODES = 100_000  # YAML nodes after alias expansion ("billion laughs")
MAX_INT_DIGITS = 30  # an integer in config.json; int64 has 19 digits
MAX_EXTENDS = 32  # files in one `extends:` chain; the built-in specs use 2
MAX_SIZE = 10**9  # any integer size in a spec or a workload option (vocab, width, batch, ...)
# The sizes a spec's real numbers may have, zero apart (norm epsilons of 1e-12, RoPE bases of
# 1e7, multipliers and soft caps): beyond them a model's activations over- or underflow.
FLOAT_RANGE = (1e-30, 1e30)
MAX_LENGTHS = 64  # sequence lengths in one `--seq` sweep
# Layers a config.json may give: some families list a type per layer as they import (which
# layers attend through a window), and a billion of them took 8 GB. The deepest published
# model has a few hundred.
MAX_CONFIG_LAYERS = 100_000
# Modules named one by one (a checkpoint's tensors): DeepSeek-V3's 58 layers of 256 experts
# have under 50,000.
MAX_NAMED_COPIES = 1_000_000
# Modules print(model) lists one by one (a mixed window pattern's, which torch's ModuleList
# cannot fold): Gemma 2's 46 layers make 46 entries.
MAX_LAYER_RUNS = 1_000
# Pipeline stages a layout may have: a plan costs each stage on its own, and the search tries
# every depth that divides the layers. Published runs use at most a few dozen (MT-NLG's 35).
MAX_PIPELINE_STAGES = 1_024
# Parameter tensors count's torch engine walks one by one, as model.parameters() lists them on
# a rank (FSDP2 cuts each tensor alone): DeepSeek-V3 has about 45,000; 200,000 take seconds.
MAX_RANK_TENSORS = 200_000


def check_sizes(options: dict[str, object]) -> None:
    """Every whole-number option (named as given, "--seq") at most MAX_SIZE."""
    from archspec.errors import SpecError

    for name, value in options.items():
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SIZE:
            raise SpecError(f"{name} must be at most {MAX_SIZE:,}, got {value:,}")
