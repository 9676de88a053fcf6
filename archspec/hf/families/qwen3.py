"""Qwen3 (`model_type: qwen3`): LLaMA's decoder with an RMSNorm over each head's queries and
keys before RoPE (`q_norm`, `k_norm`), 128-wide heads whatever the width, no biases
(`attention_bias` puts them on all four projections), and Qwen2's sliding window
(`qwen2.read_window`)."""

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
from archspec.hf.families.qwen2 import export_window, read_window
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=22016,
    kv_heads=32,
    max_positions=32768,
    rms_eps=1e-6,
    vocab_size=151936,
    biases=True,
    mlp_bias=False,  # Qwen3MLP's linears take bias=False whatever mlp_bias says
)
HEAD_DIM = 128  # Qwen3Config's default, not hidden_size / num_attention_heads


def import_qwen3(
    f: Fields, cls: HFClass, variant: LlamaVariant = VARIANT, windows: bool = True
) -> dict[str, Any]:
    """Qwen3's fields; `variant`: the config class's defaults, and `windows`: whether its
    attention reads Qwen2's sliding window (Qwen3-VL's text model's does not)."""
    window = read_window(f) if windows else {}
    spec = import_llama_like(f, cls, variant)
    if f.get("head_dim") is None:
        spec["head_dim"] = HEAD_DIM if HEAD_DIM * spec["n_heads"] != spec["d_model"] else None
    spec["attention"] = {**spec["attention"], "qk_norm": True, **window}
    return spec


def export_qwen3(spec: Spec) -> dict[str, Any]:
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        **export_window(spec),
    }


BLOCK = chain(
    table({"attn.q_norm": "self_attn.q_norm", "attn.k_norm": "self_attn.k_norm"}), DENSE_BLOCK
)

FAMILY = Family(
    model_type="qwen3",
    classes=(
        HFClass("Qwen3ForCausalLM", "qwen3", "lm", base=False),
        HFClass("Qwen3Model", "qwen3", "none", base=True),
    ),
    bases=("_qwen3",),
    import_config=import_qwen3,
    export_config=export_qwen3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
