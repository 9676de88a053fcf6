"""GLM (`model_type: glm`, GLM-4-9B): LLaMA's decoder with RoPE on the first
`partial_rotary_factor` (0.5) of each head, turning interleaved channel pairs there (as GPT-J),
biases on q, k and v alone (`attention_bias`, on by default), and gate and up fused into
`gate_up_proj` (gate rows, then up, as Phi-3). GLM 4 (`glm4.py`) adds sandwich norms."""

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
from archspec.hf.families._rotary import rope_parameters
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=13696,
    kv_heads=2,
    max_positions=131072,
    rms_eps=1.5625e-07,
    vocab_size=151552,
    rotary_fraction=0.5,
    rotary_fraction_null=1.0,
)
# GlmConfig's (and Glm4Config's) defaults where they differ from import_llama_like's.
DEFAULTS = {"hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32}
HEAD_DIM = 128  # GlmConfig's default, not hidden_size / num_attention_heads


def import_glm(
    f: Fields, cls: HFClass, variant: LlamaVariant = VARIANT, head_dim: int | None = HEAD_DIM
) -> dict[str, Any]:
    """GLM's fields; `variant` and `head_dim`: the config class's defaults (GLM-4V's text
    model's: its heads hidden_size / num_attention_heads wide, every channel turned)."""
    f.refuse_null("num_key_value_heads", "transformers' GlmAttention")
    if head_dim is not None:
        f.refuse_null("head_dim", "transformers' GlmRotaryEmbedding")
    f.data = {**DEFAULTS, **({"head_dim": head_dim} if head_dim else {}), **f.data}
    spec = import_llama_like(f, cls, variant)
    spec["position"] = {**spec["position"], "interleaved": True}
    spec["attention"] = {**spec["attention"], "qkv_bias": f.bool("attention_bias", True)}
    return spec


def export_glm(spec: Spec) -> dict[str, Any]:
    if not spec.position.interleaved or spec.attention.bias or spec.mlp.bias:
        raise SpecError(
            f"{spec.hf_class} turns interleaved channel pairs and has biases on q, k and v alone"
        )
    parameters = rope_parameters(spec)
    return {
        **export_llama_like(spec),
        "rope_parameters": parameters,
        "partial_rotary_factor": parameters["partial_rotary_factor"],
        "attention_bias": bool(spec.attention.qkv_bias),
    }


def fused(module: str, part: int, what: str) -> Target:
    return Target(module, "concat", part, 2, note=f"{what} rows")


BLOCK_NAMES = {
    "attn_norm": "input_layernorm",
    "attn.q": "self_attn.q_proj",
    "attn.k": "self_attn.k_proj",
    "attn.v": "self_attn.v_proj",
    "attn.o": "self_attn.o_proj",
    "mlp_norm": "post_attention_layernorm",
    "mlp.gate": fused("mlp.gate_up_proj", 0, "gate"),
    "mlp.up": fused("mlp.gate_up_proj", 1, "up"),
    "mlp.down": "mlp.down_proj",
}

FAMILY = Family(
    model_type="glm",
    classes=(
        HFClass("GlmForCausalLM", "glm", "lm", base=False),
        HFClass("GlmModel", "glm", "none", base=True),
    ),
    bases=("_glm",),
    import_config=import_glm,
    export_config=export_glm,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=table(BLOCK_NAMES),
    ),
    buffers=ROPE_BUFFERS,
)
