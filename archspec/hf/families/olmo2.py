"""OLMo 2 (`model_type: olmo2`): LLaMA's decoder with its norms moved onto the sublayers'
outputs, x + norm(f(x)) (`residual: output_norm`: `post_attention_layernorm`,
`post_feedforward_layernorm`, nothing before attention and the MLP), and RMSNorms over the
whole q and k projections, all heads together, before RoPE (`attention.qk_norm_scope: all`)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=11008, kv_heads=None, max_positions=2048, rms_eps=1e-5, vocab_size=50304
)


def import_olmo2(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = import_llama_like(f, cls, VARIANT)
    spec["residual"] = "output_norm"
    spec["attention"] = {
        **spec["attention"],
        "bias": f.bool("attention_bias", False),
        "qk_norm": True,
        "qk_norm_scope": "all",
    }
    return spec


def export_olmo2(spec: Spec) -> dict[str, Any]:
    if spec.residual != "output_norm" or spec.attention.qk_norm_scope != "all":
        raise SpecError(
            "OLMo 2 blocks normalise the sublayers' outputs and the whole q and k projections",
            path="residual" if spec.residual != "output_norm" else "attention.qk_norm_scope",
        )
    return {**export_llama_like(spec), "attention_bias": spec.attention.bias}


BLOCK = table(
    {
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "attn.q_norm": "self_attn.q_norm",
        "attn.k_norm": "self_attn.k_norm",
        "attn_post_norm": "post_attention_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
        "mlp_post_norm": "post_feedforward_layernorm",
    }
)

FAMILY = Family(
    model_type="olmo2",
    classes=(
        HFClass("Olmo2ForCausalLM", "olmo2", "lm", base=False),
        HFClass("Olmo2Model", "olmo2", "none", base=True),
    ),
    bases=("_olmo2",),
    import_config=import_olmo2,
    export_config=export_olmo2,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
