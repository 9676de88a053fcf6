"""Gemma 3's language model (`model_type: gemma3_text`): Gemma 2's sandwich-norm blocks with
QK-norm (Gemma's offset RMSNorm over each head's queries and keys, before RoPE), five windowed
layers to each full one (`layer_types`, or the older `sliding_window_pattern`: 6), and RoPE
per layer type: the windowed layers rotate by `rope_local_base_freq` (10,000), the full ones by
`rope_theta` (1,000,000) with its scaling (`rope_scaling`: linear, factor 8 in the 4B and
larger). Scores are scaled by `query_pre_attn_scalar`; soft-capping is off by default."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._layer_rope import (
    check_local_layers,
    local_layers,
    rope_per_type,
    write_rope_per_type,
)
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern, windows
from archspec.hf.families.gemma import export_gemma_like, import_gemma_like
from archspec.hf.families.gemma2 import BLOCK as GEMMA2_BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

# Gemma3TextConfig's defaults.
DEFAULTS = {
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "num_hidden_layers": 26,
    "intermediate_size": 9216,
    "vocab_size": 262208,
    "max_seq_len": 131072,
}
THETAS = {
    "sliding_attention": ("rope_local_base_freq", 10000.0),
    "full_attention": ("rope_theta", 1000000.0),
}
WINDOW = 4096
PATTERN = 6  # sliding_window_pattern: every 6th layer is a full one


def _layer_types(f: Fields, n_layers: int) -> list[str]:
    """`layer_types`, or the older sliding_window_pattern's (every n-th layer full)."""
    every = f.int("sliding_window_pattern", PATTERN)
    f.harmless("_sliding_window_pattern")  # the config class's own echo of the field above
    if every < 1:
        raise f.error("sliding_window_pattern", f"expected a positive integer, got {every}")
    default = [
        "sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)
    ]
    return check_layer_types(f, f.get("layer_types") or default, n_layers)


def _cap(f: Fields, key: str) -> float | None:
    return None if f.get(key) is None else f.float(key, None)


def import_gemma3(f: Fields, cls: HFClass) -> dict[str, Any]:
    ropes = rope_per_type(f, THETAS)
    spec = import_gemma_like(
        f, cls, DEFAULTS, activation="hidden_activation", position=ropes["full_attention"]
    )
    f.harmless("cache_implementation")  # which KV cache class generate() builds
    types = _layer_types(f, spec["n_layers"])
    pattern = window_pattern(f, types)
    attention = windows(f, types, WINDOW)
    head_dim = spec["head_dim"] or spec["d_model"] // spec["n_heads"]
    scalar = f.int("query_pre_attn_scalar", 256)
    spec["residual"] = "sandwich"
    spec["attention"] |= {
        "qk_norm": True,
        "softcap": _cap(f, "attn_logit_softcapping"),
        "scale_dim": scalar if scalar != head_dim else None,
    }
    # Written either way (windows): the base spec's five windowed layers to each full one,
    # and their rotation, are not the config's when its layer_types say otherwise.
    spec["attention"] |= attention
    local_layers(f, spec, pattern, ropes["sliding_attention"])
    spec["head"]["softcap"] = _cap(f, "final_logit_softcapping")
    return spec


def export_gemma3(spec: Spec) -> dict[str, Any]:
    if spec.residual != "sandwich" or not spec.attention.qk_norm:
        raise SpecError("Gemma 3 blocks are sandwich-norm blocks with QK-norm", path="residual")
    check_local_layers(spec, "Gemma 3")
    fields = export_gemma_like(spec)
    del fields["rope_theta"], fields["hidden_act"]  # Gemma3TextConfig reads neither
    windowed = [spec.windowed(i) for i in range(spec.n_layers)]
    return fields | {
        "hidden_activation": "gelu_pytorch_tanh",
        "rope_parameters": write_rope_per_type(spec),
        "query_pre_attn_scalar": spec.attention.scale_dim or spec.resolved_head_dim,
        "attn_logit_softcapping": spec.attention.softcap,
        "final_logit_softcapping": spec.head.softcap,
        "sliding_window": spec.attention.sliding_window if any(windowed) else None,
        "layer_types": layer_types(spec),
    }


BLOCK = chain(
    table({"attn.q_norm": "self_attn.q_norm", "attn.k_norm": "self_attn.k_norm"}), GEMMA2_BLOCK
)

FAMILY = Family(
    model_type="gemma3_text",
    classes=(
        HFClass("Gemma3ForCausalLM", "gemma3_text", "lm", base=False),
        HFClass("Gemma3TextModel", "gemma3_text", "none", base=True),
    ),
    bases=("_gemma3",),
    import_config=import_gemma3,
    export_config=export_gemma3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
