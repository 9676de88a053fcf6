"""StarCoder2 (`model_type: starcoder2`): a pre-norm decoder with LayerNorms (weight and
bias, `norm_epsilon`), RoPE, grouped keys and values, a plain two-layer MLP (`c_fc`, `c_proj`,
gelu_tanh), biases on every projection or none (`use_bias`), a sliding window on every layer
(`sliding_window`, none by default) and a head tied by default."""

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
    export_window,
    import_llama_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=12288,
    kv_heads=2,
    max_positions=4096,
    rms_eps=1e-5,
    sliding_window=True,
    window_default=None,
    vocab_size=49152,
    norm_kind="layernorm",
    eps_key="norm_epsilon",
)
# Starcoder2Config's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 3072, "num_hidden_layers": 30, "num_attention_heads": 24}


def import_starcoder2(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, "hidden_act": "gelu_pytorch_tanh", **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    bias = f.bool("use_bias", True)
    spec["attention"] = {**spec["attention"], "bias": bias}
    spec["mlp"] = {**spec["mlp"], "gated": False, "bias": bias}
    spec["head"] = {**spec["head"], "tied": f.bool("tie_word_embeddings", True)}
    return spec


def export_starcoder2(spec: Spec) -> dict[str, Any]:
    if spec.mlp.gated or spec.mlp.bias != spec.attention.bias or spec.norm.kind != "layernorm":
        raise SpecError(
            "Starcoder2ForCausalLM has LayerNorms and a plain MLP whose biases are the "
            "attention's (use_bias)"
        )
    fields = export_llama_like(spec)
    fields["norm_epsilon"] = fields.pop("rms_norm_eps")
    return {**fields, "use_bias": spec.attention.bias, "sliding_window": export_window(spec)}


BLOCK = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "mlp_norm": "post_attention_layernorm",
        "mlp.up": "mlp.c_fc",
        "mlp.down": "mlp.c_proj",
    }
)

FAMILY = Family(
    model_type="starcoder2",
    classes=(
        HFClass("Starcoder2ForCausalLM", "starcoder2", "lm", base=False),
        HFClass("Starcoder2Model", "starcoder2", "none", base=True),
    ),
    bases=("_starcoder2",),
    import_config=import_starcoder2,
    export_config=export_starcoder2,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
