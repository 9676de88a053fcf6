"""OLMo (`model_type: olmo`): LLaMA's decoder with a LayerNorm that has no parameters at all
(transformers' OlmoLayerNorm: no weight, no bias, eps 1e-5 whatever the config says, in
float32), biases on all four attention projections or none (`attention_bias`), and a tied or
untied head, and `clip_qkv` (OLMo-7B-0424 clamps q, k and v to ±8 after their projections:
`attention.clip_qkv`)."""

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
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=11008, kv_heads=None, max_positions=2048, rms_eps=1e-5, vocab_size=50304
)
EPS = 1e-5  # OlmoLayerNorm's, hard-coded


def import_olmo(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.harmless("pretraining_tp")  # a different order of the same sums
    spec = import_llama_like(f, cls, VARIANT)
    spec["norm"] = {"kind": "nonparametric_layernorm", "eps": EPS}
    clip = f.float("clip_qkv", None) if f.present("clip_qkv") else None
    f.harmless("clip_qkv")  # null: no clamping
    spec["attention"] = {
        **spec["attention"],
        "bias": f.bool("attention_bias", False),
        "clip_qkv": clip,
    }
    return spec


def export_olmo(spec: Spec) -> dict[str, Any]:
    fields = export_llama_like(spec)
    del fields["rms_norm_eps"]  # OlmoLayerNorm's eps is fixed
    return {**fields, "attention_bias": spec.attention.bias, "clip_qkv": spec.attention.clip_qkv}


FAMILY = Family(
    model_type="olmo",
    classes=(
        HFClass("OlmoForCausalLM", "olmo", "lm", base=False),
        HFClass("OlmoModel", "olmo", "none", base=True),
    ),
    bases=("_olmo",),
    import_config=import_olmo,
    export_config=export_olmo,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
