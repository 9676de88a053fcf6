"""Nemotron (`model_type: nemotron`, Nemotron-3/4, Minitron): a pre-norm decoder with
LayerNorm1P (a LayerNorm with a bias whose scale is 1 + weight: `norm.kind:
offset_layernorm`, eps `norm_eps`), RoPE on the first `partial_rotary_factor` (0.5) of each
head, grouped keys and values, and an ungated MLP with squared ReLU (`relu2`)."""

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
from archspec.hf.families.arcee import BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=24576,
    kv_heads=None,
    max_positions=4096,
    rms_eps=1e-5,
    vocab_size=256000,
    biases=True,
    norm_kind="offset_layernorm",
    eps_key="norm_eps",
    rotary_fraction=0.5,
)
# NemotronConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {
    "hidden_size": 6144,
    "num_attention_heads": 48,
    "hidden_act": "relu2",
}


def import_nemotron(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("num_key_value_heads", "transformers' NemotronAttention")
    f.refuse_null("partial_rotary_factor", "transformers' NemotronRotaryEmbedding")
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    spec["mlp"] = {**spec["mlp"], "gated": False}
    return spec


def export_nemotron(spec: Spec) -> dict[str, Any]:
    if spec.mlp.gated or spec.norm.kind != "offset_layernorm":
        raise SpecError("Nemotron has LayerNorm1P norms (offset_layernorm) and an ungated MLP")
    fields = export_llama_like(spec)
    fields["norm_eps"] = fields.pop("rms_norm_eps")
    parameters = rope_parameters(spec)
    return {
        **fields,
        "rope_parameters": parameters,
        "partial_rotary_factor": parameters["partial_rotary_factor"],
        "attention_bias": spec.attention.bias,
        "mlp_bias": spec.mlp.bias,
    }


FAMILY = Family(
    model_type="nemotron",
    classes=(
        HFClass("NemotronForCausalLM", "nemotron", "lm", base=False),
        HFClass("NemotronModel", "nemotron", "none", base=True),
    ),
    bases=("_nemotron",),
    import_config=import_nemotron,
    export_config=export_nemotron,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
