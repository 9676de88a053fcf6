"""Cohere (`model_type: cohere`; Command-R): attention and a gated MLP in parallel from one
LayerNorm without a bias (`residual: parallel`), RoPE turning interleaved channel pairs
(`rotate_half` takes x[..., ::2] and x[..., 1::2]), a head tied by default, and the logits
multiplied by `logit_scale` (`head.logit_scale`).

`use_qk_norm` (Command R+) gives every head its own LayerNorm weights for queries and keys;
archspec's `attention.qk_norm` shares one over the heads, so it is refused."""

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
    rope_theta=500000.0,
    d_ff=22528,
    kv_heads=None,
    max_positions=8192,
    rms_eps=1e-5,
    vocab_size=256000,
    norm_kind="layernorm",
    eps_key="layer_norm_eps",
)
# CohereConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 8192, "num_hidden_layers": 40, "num_attention_heads": 64}
LOGIT_SCALE = 0.0625


def import_cohere_like(f: Fields, cls: HFClass, v: LlamaVariant) -> dict[str, Any]:
    """What Cohere and Cohere 2 share: the parallel block, its norms, rotation and head."""
    f.refuse_null("logit_scale", f"transformers' {cls.name}")
    f.expect(
        "use_qk_norm",
        (False, None),
        False,
        "a LayerNorm of its own for each head's queries and keys (attention.qk_norm shares one)",
    )
    spec = import_llama_like(f, cls, v)
    spec["residual"] = "parallel"
    spec["norm"] = {**spec["norm"], "bias": False}
    spec["position"] = {**spec["position"], "interleaved": True}
    spec["attention"] = {**spec["attention"], "bias": f.bool("attention_bias", False)}
    spec["head"] = {
        **spec["head"],
        "tied": f.bool("tie_word_embeddings", True),
        "logit_scale": f.float("logit_scale", LOGIT_SCALE),
    }
    return spec


def import_cohere(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    return import_cohere_like(f, cls, VARIANT)


def export_cohere_like(spec: Spec) -> dict[str, Any]:
    if spec.residual != "parallel" or spec.norm.has_bias or not spec.position.interleaved:
        raise SpecError(
            f"{spec.hf_class} blocks are parallel blocks with a LayerNorm without bias and "
            "RoPE on interleaved channel pairs"
        )
    fields = export_llama_like(spec)
    fields["layer_norm_eps"] = fields.pop("rms_norm_eps")
    return {
        **fields,
        "attention_bias": spec.attention.bias,
        "use_qk_norm": False,
        "logit_scale": spec.head.logit_scale,
    }


BLOCK = table(
    {
        "norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
    }
)

FAMILY = Family(
    model_type="cohere",
    classes=(
        HFClass("CohereForCausalLM", "cohere", "lm", base=False),
        HFClass("CohereModel", "cohere", "none", base=True),
    ),
    bases=("_cohere",),
    import_config=import_cohere,
    export_config=export_cohere_like,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
