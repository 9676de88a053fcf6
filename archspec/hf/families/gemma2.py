"""Gemma 2 (`model_type: gemma2`): Gemma with sandwich norms (a second norm on each sublayer's
output), windowed and full attention layers alternating (`layer_types`, by default windowed
first), attention scores soft-capped before the mask (`attn_logit_softcapping`) and scaled by
`query_pre_attn_scalar`, and soft-capped logits (`final_logit_softcapping`)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families._windows import alternating, check_layer_types, layer_types, windows
from archspec.hf.families.gemma import export_gemma_like, import_gemma_like
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

DEFAULTS = {
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "num_hidden_layers": 26,
    "intermediate_size": 9216,
}


def _cap(f: Fields, key: str, default: float) -> float | None:
    # An explicit null is no cap: Gemma2Config keeps the None and the model caps only when
    # given one; only a left-out field takes the config class's default.
    if f.is_null(key):
        f.harmless(key)
        return None
    return f.float(key, default)


def import_gemma2(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = import_gemma_like(f, cls, DEFAULTS, activation="hidden_activation")
    f.harmless("cache_implementation")  # which KV cache class generate() builds
    # Gemma-2's files repeat the window as sliding_window_size; only sliding_window is read.
    f.ignored("sliding_window_size", "Gemma2Config and Gemma2Model")
    types = check_layer_types(f, f.get("layer_types") or alternating(spec["n_layers"]),
                              spec["n_layers"])  # fmt: skip
    attention = windows(f, types, 4096)
    head_dim = spec["head_dim"] or spec["d_model"] // spec["n_heads"]
    scalar = f.int("query_pre_attn_scalar", 256)
    spec["residual"] = "sandwich"
    spec["attention"] |= {
        "softcap": _cap(f, "attn_logit_softcapping", 50.0),
        "scale_dim": scalar if scalar != head_dim else None,
    }
    spec["attention"] |= attention
    spec["head"]["softcap"] = _cap(f, "final_logit_softcapping", 30.0)
    return spec


def export_gemma2(spec: Spec) -> dict[str, Any]:
    if spec.residual != "sandwich":
        raise SpecError("Gemma 2 blocks are sandwich-norm blocks", path="residual")
    fields = export_gemma_like(spec)
    fields["hidden_activation"] = fields["hidden_act"]
    windowed = [spec.windowed(i) for i in range(spec.n_layers)]
    return fields | {
        "query_pre_attn_scalar": spec.attention.scale_dim or spec.resolved_head_dim,
        "attn_logit_softcapping": spec.attention.softcap,
        "final_logit_softcapping": spec.head.softcap,
        "sliding_window": spec.attention.sliding_window if any(windowed) else None,
        "layer_types": layer_types(spec),
    }


BLOCK = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "attn_post_norm": "post_attention_layernorm",
        "mlp_norm": "pre_feedforward_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
        "mlp_post_norm": "post_feedforward_layernorm",
    }
)

FAMILY = Family(
    model_type="gemma2",
    classes=(
        HFClass("Gemma2ForCausalLM", "gemma2", "lm", base=False),
        HFClass("Gemma2Model", "gemma2", "none", base=True),
    ),
    bases=("_gemma2",),
    import_config=import_gemma2,
    export_config=export_gemma2,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
