"""Granite (`model_type: granite`): LLaMA's decoder with four scalar multipliers, spec fields
that every backend reads: `embedding_multiplier` (`embedding.multiplier`), `residual_multiplier`
(each sublayer's output, before the residual add), `attention_multiplier` (the scores' factor
itself, `attention.scale`, instead of 1/sqrt(head_dim); GraniteConfig's default 1.0 does not
scale them at all) and `logits_scaling` (the logits divided by it, `head.logits_divisor`)."""

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
    d_ff=11008, kv_heads=None, max_positions=2048, rms_eps=1e-6, biases=True, vocab_size=32000
)


def _attention_multiplier(f: Fields) -> float | None:
    """The scores' factor. GraniteMoeConfig (and GraniteMoeSharedConfig) keep an explicit null,
    which their attention passes on as scaling=None: SDPA's 1/sqrt(head_dim), the spec's
    default (None); GraniteConfig refuses it."""
    if not f.is_null("attention_multiplier"):
        return f.float("attention_multiplier", 1.0)
    if f.model_type in ("granite", "granite4_vision_text"):
        raise f.error("attention_multiplier", "GraniteConfig takes a number here, not null")
    f.harmless("attention_multiplier")
    return None


def import_granite(f: Fields, cls: HFClass) -> dict[str, Any]:
    for key in ("embedding_multiplier", "residual_multiplier", "logits_scaling"):
        f.refuse_null(key, f"transformers' {cls.name}")
    spec = import_llama_like(f, cls, VARIANT)
    spec["embedding"] = {**spec["embedding"], "multiplier": f.float("embedding_multiplier", 1.0)}
    spec["residual_multiplier"] = f.float("residual_multiplier", 1.0)
    spec["attention"] = {**spec["attention"], "scale": _attention_multiplier(f)}
    spec["head"] = {**spec["head"], "logits_divisor": f.float("logits_scaling", 1.0)}
    return spec


def export_granite(spec: Spec) -> dict[str, Any]:
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "mlp_bias": spec.mlp.bias,
        "embedding_multiplier": spec.embedding.multiplier,
        "residual_multiplier": spec.residual_multiplier,
        # no attention.scale is transformers' usual 1/sqrt(head_dim)
        "attention_multiplier": spec.attention.scale or spec.resolved_head_dim**-0.5,
        "logits_scaling": spec.head.logits_divisor,
    }


FAMILY = Family(
    model_type="granite",
    classes=(
        HFClass("GraniteForCausalLM", "granite", "lm", base=False),
        HFClass("GraniteModel", "granite", "none", base=True),
    ),
    bases=("_granite",),
    import_config=import_granite,
    export_config=export_granite,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
