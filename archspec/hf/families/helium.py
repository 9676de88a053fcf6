"""Helium (`model_type: helium`, Kyutai's Helium-1): LLaMA's decoder with RoPE turning
interleaved channel pairs (as ERNIE 4.5), biases on q, k and v alone (`attention_bias`; the
output projection has none), 128-wide heads and RMSNorm eps 1e-8 by default."""

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
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    rope_theta=100000.0,
    d_ff=7040,
    kv_heads=20,
    max_positions=4096,
    rms_eps=1e-8,
    vocab_size=48000,
    biases=True,
)
# HeliumConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2560, "num_hidden_layers": 24, "num_attention_heads": 20}
HEAD_DIM = 128  # HeliumConfig's default, not hidden_size / num_attention_heads


def import_helium(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, "head_dim": HEAD_DIM, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    head_dim = spec["head_dim"] or spec["d_model"] // spec["n_heads"]
    if head_dim * spec["n_heads"] != spec["d_model"]:
        # HeliumAttention's o_proj is hidden_size wide on both sides
        raise f.error(
            "head_dim", "Helium needs num_attention_heads * head_dim equal to hidden_size"
        )
    bias = spec["attention"]["bias"]
    spec["position"] = {**spec["position"], "interleaved": True}
    spec["attention"] = {**spec["attention"], "bias": False, "qkv_bias": bias}
    return spec


def export_helium(spec: Spec) -> dict[str, Any]:
    if not spec.position.interleaved:
        raise SpecError("Helium turns interleaved channel pairs", path="position.interleaved")
    if spec.attention.bias:
        raise SpecError("Helium's output projection has no bias", path="attention.bias")
    return {
        **export_llama_like(spec),
        "attention_bias": bool(spec.attention.qkv_bias),
        "mlp_bias": spec.mlp.bias,
    }


FAMILY = Family(
    model_type="helium",
    classes=(
        HFClass("HeliumForCausalLM", "helium", "lm", base=False),
        HFClass("HeliumModel", "helium", "none", base=True),
    ),
    bases=("_helium",),
    import_config=import_helium,
    export_config=export_helium,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
