"""dots.llm1 (`model_type: dots1`, rednote-hilab's dots.llm1): Qwen3's decoder (an RMSNorm over
each head's queries and keys, biases on all four projections when `attention_bias`) with, after
`first_k_dense_replace` dense layers, DeepSeek-V3's experts: the sigmoid router with its bias
correction and shared experts (`_sigmoid_moe.py`), as transformers' modeling_dots1.py
computes them. Its windowed layers are those `layer_types` names (transformers derives them:
the layers from `max_window_layers` on, when `sliding_window` is set), as a window pattern.
Checkpoints keep one module per expert; transformers 5 stacks them in memory."""

from __future__ import annotations

from typing import Any

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
from archspec.hf.families._sigmoid_moe import ExpertDefaults, read_sigmoid_moe, write_sigmoid_moe
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern
from archspec.hf.families.deepseek_v2 import CHECKPOINT_BLOCK, SHARED
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.families.qwen3_moe import QK_NORMS
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=10944, kv_heads=32, max_positions=2048, rms_eps=1e-6, vocab_size=152064)
# Dots1Config's defaults where they differ from import_llama_like's.
DEFAULTS = {"hidden_size": 4608, "num_hidden_layers": 62}
EXPERTS = ExpertDefaults(
    dense=0,
    experts=None,
    top_k=None,
    width=1408,
    shared=None,
    scale=1.0,
    normalize=False,
    groups=1,
    top_groups=1,
)
WINDOW, WINDOW_FROM = 4096, 62  # Dots1Config's sliding_window and max_window_layers


def _window(f: Fields, n_layers: int) -> dict[str, Any]:
    """The layers `layer_types` windows (by default those from max_window_layers on, when
    sliding_window is not null) as a window pattern."""
    window = f.get("sliding_window") if "sliding_window" in f.data else WINDOW
    if window is not None and (
        isinstance(window, bool) or not isinstance(window, int) or window < 1
    ):
        raise f.error("sliding_window", f"expected a positive integer or null, got {window!r}")
    first = f.int("max_window_layers", WINDOW_FROM)
    default = [
        "sliding_attention" if window is not None and i >= first else "full_attention"
        for i in range(n_layers)
    ]
    types = check_layer_types(f, f.get("layer_types") or default, n_layers)
    if window is None or "sliding_attention" not in types:
        return {}
    return {"sliding_window": window, "window_pattern": window_pattern(f, types)}


def import_dots1(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    window = _window(f, spec["n_layers"])
    spec["attention"] = {
        **spec["attention"],
        "bias": f.bool("attention_bias", False),
        "qk_norm": True,
        **window,
    }
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = read_sigmoid_moe(f, spec["n_layers"], EXPERTS)
    return spec


def export_dots1(spec: Spec) -> dict[str, Any]:
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "sliding_window": spec.attention.sliding_window,
        "layer_types": layer_types(spec),
        **write_sigmoid_moe(spec),
    }


FAMILY = Family(
    model_type="dots1",
    classes=(
        HFClass("Dots1ForCausalLM", "dots1", "lm", base=False),
        HFClass("Dots1Model", "dots1", "none", base=True),
    ),
    bases=("_dots1",),
    import_config=import_dots1,
    export_config=export_dots1,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        # As the checkpoint files store it: one module per expert (DeepSeek's names).
        block=chain(CHECKPOINT_BLOCK, QK_NORMS, DENSE_BLOCK),
        # transformers 5's memory: every layer's experts stacked (as Mixtral's).
        block_variants={"module": chain(SHARED, QK_NORMS, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
