"""SmolLM3 (`model_type: smollm3`): LLaMA's block and a tied head, with RoPE left out of
every `no_rope_layer_interval`-th layer (`no_rope_layers`: 1 rotates, 0 does not; by default
every 4th layer is a NoPE layer), read as the spec's `position_pattern` (PPPN). A sliding
window (`use_sliding_window` with `sliding_window`) is on the layers `layer_types` names.

Real files carry `max_window_layers`, which SmolLM3Config does not define and no SmolLM3 code
reads."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families._windows import (
    check_layer_types,
    layer_types,
    shortest_cycle,
    window_pattern,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=11008,
    kv_heads=4,
    max_positions=32768,
    rms_eps=1e-6,
    biases=True,
    vocab_size=128256,
)
# SmolLM3Config's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16}
INTERVAL = 4  # no_rope_layer_interval
THETA = 2000000.0


def _rotated(f: Fields, n_layers: int) -> list[int]:
    """`no_rope_layers` (1: the layer rotates), or no_rope_layer_interval's default."""
    every = f.int("no_rope_layer_interval", INTERVAL)
    if every < 1:
        raise f.error("no_rope_layer_interval", f"expected a positive integer, got {every}")
    default = [int((i + 1) % every != 0) for i in range(n_layers)]
    given = f.get("no_rope_layers") or default
    if (
        not isinstance(given, list)
        or len(given) != n_layers
        or any(x not in (0, 1) or isinstance(x, bool) for x in given)
    ):
        raise f.error(
            "no_rope_layers", f"expected {n_layers} of 1 (RoPE) / 0 (none), got {given!r}"
        )
    return given


def import_smollm3(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    inner = f.data.get("rope_parameters")
    if not f.present("rope_theta") and not (isinstance(inner, dict) and "rope_theta" in inner):
        f.data["rope_theta"] = THETA  # SmolLM3Config's default_theta, not LLaMA's
    f.ignored("max_window_layers", "SmolLM3Config and SmolLM3Model")
    spec = import_llama_like(f, cls, VARIANT)
    spec["head"]["tied"] = f.bool("tie_word_embeddings", True)
    n = spec["n_layers"]
    rotated = _rotated(f, n)
    # Written either way: the base spec's every fourth layer without RoPE is not the config's
    # where no_rope_layers says otherwise.
    letters = "".join("P" if r else "N" for r in rotated)
    spec["position_pattern"] = shortest_cycle(f, "no_rope_layers", letters)
    # As SmolLM3Config: without layer_types, a window where sliding is on, on the NoPE layers.
    windowed = f.bool("use_sliding_window", False)
    window = f.size("sliding_window", None)
    default = [
        "sliding_attention" if windowed and window is not None and not r else "full_attention"
        for r in rotated
    ]
    types = check_layer_types(f, f.get("layer_types") or default, n)
    if "sliding_attention" in types:
        if not windowed or window is None:
            raise f.error(
                "layer_types",
                "sliding_attention layers without use_sliding_window and a sliding_window: "
                "SmolLM3Model would mask them by a window its attention does not have",
            )
        spec["attention"] |= {"sliding_window": window, "window_pattern": window_pattern(f, types)}
    return spec


def export_smollm3(spec: Spec) -> dict[str, Any]:
    if not all(spec.layer_position(i).kind in ("rope", "none") for i in range(spec.n_layers)):
        raise SpecError("SmolLM3 rotates its layers (RoPE) or leaves them without positions")
    fields = export_llama_like(spec)
    types = layer_types(spec)
    return {
        **fields,
        "attention_bias": spec.attention.bias,
        "mlp_bias": spec.mlp.bias,
        "no_rope_layers": [int(spec.layer_position(i).entry.rotary) for i in range(spec.n_layers)],
        "use_sliding_window": "sliding_attention" in types,
        "sliding_window": spec.attention.sliding_window,
        "layer_types": types,
    }


FAMILY = Family(
    model_type="smollm3",
    classes=(
        HFClass("SmolLM3ForCausalLM", "smollm3", "lm", base=False),
        HFClass("SmolLM3Model", "smollm3", "none", base=True),
    ),
    bases=("_smollm3",),
    import_config=import_smollm3,
    export_config=export_smollm3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
