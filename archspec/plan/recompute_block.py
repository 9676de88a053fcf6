"""Full recomputation of some of the layers: Megatron-Core's `recompute_method: block`.

With `recompute_granularity: full`, Megatron-Core checkpoints whole layers; `block` with
`recompute_num_layers: N` checkpoints the first N layers of each pipeline chunk, each alone,
and runs the others with every activation kept (megatron/core/recompute.py at Megatron-LM
d98e8a6: `use_checkpoint = layer_idx < recompute_num_layers`, over the chunk's
`num_layers_per_pipeline_rank`). A chunk of fewer layers recomputes them all. NeMo's presets
set it so (Megatron-Bridge scripts/performance/utils/overrides.py at 00b7660:
`recompute_num_layers` sets the granularity full and the method block).

Written `full:N`, one string as every recompute setting is (`selective:layernorm,moe_act` the
same way); `full` recomputes every layer (the `uniform` method at one layer a checkpoint). A
checkpointed layer keeps its input and replays its forward before its backward; the others
keep what they keep without recomputation: the memory and the replayed time are those of
full recomputation over the share of each chunk's layers it checkpoints (exact where a chunk's
layers are alike; the chunk's mean layer otherwise).
"""

from __future__ import annotations

from archspec.errors import SpecError

FULL = "full"


def block_layers(recompute: str) -> int | None:
    """N of `full:N` (None for any other setting), refused unless a whole number above 0."""
    if not recompute.startswith(FULL + ":"):
        return None
    text = recompute.split(":", 1)[1]
    if not text.isdigit() or int(text) < 1:
        raise SpecError(
            f"--recompute {recompute}: full:N recomputes the first N layers of each pipeline "
            f"chunk (Megatron-Core's recompute_method block): N is a whole number, at least 1",
            hint="full:1, full:5, ...; or full (every layer)",
        )
    return int(text)


def is_full(recompute: str) -> bool:
    """Whether whole layers are recomputed: `full`, or `full:N` of them a chunk."""
    return recompute == FULL or block_layers(recompute) is not None


def full_share(recompute: str, chunk_layers: float) -> float:
    """The share of a chunk's `chunk_layers` layers recomputed whole: 1 under `full`, N of
    them (all, in a chunk of fewer) under `full:N`, none otherwise."""
    if recompute == FULL:
        return 1.0
    n = block_layers(recompute)
    if n is None or chunk_layers <= 0:
        return 0.0
    return min(n, chunk_layers) / chunk_layers
