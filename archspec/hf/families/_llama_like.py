"""What LLaMA, Mistral and Mixtral share: pre-norm RMSNorm decoders with RoPE and a gated MLP.

The three model_types differ in their config defaults, in a few fields only one of them reads
(LLaMA's biases, Mistral's and Mixtral's sliding window, Mixtral's experts) and in Mixtral's
expert names; a `LlamaVariant` states those differences, the rest is here once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from archspec.errors import SpecError
from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head, shown
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families import _longrope as longrope
from archspec.hf.families import _yarn as yarn
from archspec.hf.family import Buffer, HFClass
from archspec.hf.name_rules import chain, lm_head, table
from archspec.hf.transformers_reads import rope_keys_read
from archspec.safety.text import shortened
from archspec.spec.schema import Spec


@dataclass(frozen=True)
class LlamaVariant:
    """One model_type's config-class defaults, and the optional parts it reads."""

    d_ff: int
    kv_heads: int | None
    max_positions: int
    rms_eps: float
    biases: bool = False  # reads attention_bias / mlp_bias (LLaMA); else there are none
    # With `biases`, whether the MLP reads mlp_bias (Qwen3's builds its linears without, and
    # the field is reported as ignored).
    mlp_bias: bool = True
    sliding_window: bool = False  # reads sliding_window, whose default is `window_default`
    window_default: int | None = None
    experts: bool = False  # a sparse mixture of experts (Mixtral)
    vocab_size: int = 32000
    norm_kind: str = "rmsnorm"  # StarCoder2's and StableLM's LayerNorm has a bias
    # RoPE on the first partial_rotary_factor of each head (GLM: 0.5 by default); None: all
    rotary_fraction: float | None = None
    # What an explicit null partial_rotary_factor means, where the config class keeps it and
    # the model reads it (GLM's: left out of rope_parameters, rotating the whole head, 1.0);
    # None: read as left out.
    rotary_fraction_null: float | None = None
    eps_key: str = "rms_norm_eps"  # the config key of the norms' eps
    rope_theta: float = 10000.0  # the config class's RoPE base, for files that leave it out


# transformers' rope_type -> the scaling's fields: (config key, spec key) beyond rope_theta.
_SCALINGS: dict[str, tuple[tuple[str, str], ...]] = {
    "default": (),
    "linear": (("factor", "factor"),),
    # the context trained on is max_position_embeddings, read as max_seq_len
    "dynamic": (("factor", "factor"),),
    "llama3": (
        ("factor", "factor"),
        ("low_freq_factor", "low_freq_factor"),
        ("high_freq_factor", "high_freq_factor"),
        ("original_max_position_embeddings", "original_max_seq_len"),
    ),
    # and the optional settings of _yarn.py
    "yarn": (
        ("factor", "factor"),
        ("original_max_position_embeddings", "original_max_seq_len"),
    ),
    # and the optional settings of _longrope.py
    "longrope": (
        ("short_factor", "short_factor"),
        ("long_factor", "long_factor"),
        ("original_max_position_embeddings", "original_max_seq_len"),
    ),
}
# The optional settings of each rope_type that has some.
_OPTIONAL = {"yarn": yarn.OPTIONAL, "longrope": longrope.OPTIONAL}


def rope_settings(
    f: Fields,
    also: tuple[str, ...] = (),
    aliases: dict[str, str] | None = None,
    outer: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any], str, dict[str, str]]:
    """A config's RoPE settings, from rope_parameters (transformers 5) or rope_scaling (4.x),
    which must agree: (the field they came from, the settings, the rope_type, that type's
    fields as config key -> spec key). A rope_type or a setting not listed in _SCALINGS (nor
    in `also`) is refused, naming the field. `aliases` renames a family's older rope_types
    (Phi-3's su); `outer` holds settings a config class takes from its top level, over
    rope_parameters' (Phi-3's original_max_position_embeddings)."""
    key = "rope_parameters" if f.present("rope_parameters") else "rope_scaling"
    params = f.get("rope_parameters") or {}
    scaling = f.get("rope_scaling") or {}
    for name, value in (("rope_parameters", params), ("rope_scaling", scaling)):
        if not isinstance(value, dict):
            raise f.error(name, f"expected a mapping of RoPE settings, got {shown(value)}")
    if params and scaling and {**scaling, **params} != params:
        raise f.error("rope_scaling", "rope_scaling and rope_parameters disagree")
    found = {**scaling, **params}
    if not all(isinstance(name, str) for name in found):
        raise f.error(key, "expected RoPE settings named by strings")
    kind = found.get("rope_type", found.get("type", "default"))
    if not isinstance(kind, str):
        raise f.error(key, f"expected a rope_type name, got {shown(kind)}")
    kind = (aliases or {}).get(kind, kind)
    if kind not in _SCALINGS:
        raise f.error(
            key,
            f"RoPE scaling of type {kind!r} is not supported (default, "
            f"{', '.join(k for k in _SCALINGS if k != 'default')})",
        )
    fields = dict(_SCALINGS[kind])
    found |= {k: v for k, v in (outer or {}).items() if k in fields}
    optional = _OPTIONAL.get(kind, ())
    extra = set(found) - {"rope_type", "type", "rope_theta", *also, *fields, *optional}
    for name in sorted(_unread_rope_keys(f.model_type, extra)):
        f.notes.append(
            f"RoPE setting '{shortened(name, 80)}' (= {shown(found.pop(name), as_json=True)}) "
            f"in {key} is ignored, as transformers' {f.model_type} code and RoPE functions "
            "ignore it"
        )
        extra.discard(name)
    if extra:
        raise f.error(key, f"RoPE settings not supported: {', '.join(sorted(extra))}")
    missing = set(fields) - set(found)
    if missing:
        raise f.error(key, f"rope_type {kind!r} needs {', '.join(sorted(missing))}")
    # (the factors are checked as numbers below, naming each)
    nulls = sorted(n for n in fields if found[n] is None and not n.endswith("factor"))
    if nulls:  # transformers' RoPE functions compute with them: null fails there too
        raise f.error(key, f"rope_type {kind!r} needs {', '.join(nulls)}, got null")
    original = found.get("original_max_position_embeddings")
    if original is not None and (
        isinstance(original, bool) or not isinstance(original, int) or original < 1
    ):
        raise f.error(
            f"{key}.original_max_position_embeddings",
            f"expected a positive integer (positions), got {shown(original)}",
        )
    for name in fields:  # LongRoPE's short_factor and long_factor lists are _longrope.py's
        if name.endswith("factor") and name not in ("short_factor", "long_factor"):
            yarn.scaling_number(f, key, name, found[name])
    return key, found, kind, fields


def _unread_rope_keys(model_type: str, keys: set[str]) -> set[str]:
    """Those RoPE settings no transformers code for `model_type` names (none when that cannot
    be known): any value builds the same model, as transformers' validator says of them
    ("Unrecognized keys in `rope_parameters`")."""
    if not keys:  # the usual case: no scan of transformers' sources
        return set()
    read = rope_keys_read(model_type)
    return set() if read is None else {k for k in keys if k not in read}


def _rope(
    f: Fields,
    default: float,
    max_positions: int | None = None,
    aliases: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The spec's `position`: RoPE's base and scaling, from rope_parameters (transformers 5) or
    rope_theta + rope_scaling (4.x). A rope_type or setting not listed in _SCALINGS is refused;
    `aliases` are rope_settings' (a family's older rope_types)."""
    key, found, kind, fields = rope_settings(f, aliases=aliases)
    f.expect("partial_rotary_factor", (None, 1, 1.0), None, "rotary embedding on part of a head")
    theta = found.get("rope_theta", f.get("rope_theta", default))
    given = [("rope_theta", f.get("rope_theta"))] if f.present("rope_theta") else []
    for name, value in [*given, (key, theta)]:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not (math.isfinite(value) and value > 0)
        ):
            raise f.error(name, f"expected RoPE's base, a positive number, got {shown(value)}")
    if f.present("rope_theta") and float(f.get("rope_theta")) != float(theta):
        raise f.error("rope_theta", "rope_theta and rope_parameters.rope_theta disagree")
    position: dict[str, Any] = {"kind": "rope", "theta": float(theta)}
    if kind != "default":
        position["scaling"] = kind
        position |= {spec: found[hf] for hf, spec in fields.items()}
    if kind == "yarn":
        position |= yarn.read_yarn(f, key, found)
    if kind == "longrope":
        if max_positions is None:  # LongRoPE's default factor needs max_position_embeddings
            raise f.error(key, "longrope scaling is not supported for this model_type")
        position |= longrope.read_longrope(f, key, found, max_positions)
    return position


def _partial_rope(f: Fields, head_dim: int, v: LlamaVariant, max_pos: int) -> dict[str, Any]:
    from archspec.hf.families._rotary import read_rope  # it builds on this module

    return read_rope(
        f, head_dim, default_fraction=v.rotary_fraction, max_positions=max_pos,
        default_theta=v.rope_theta, null_fraction=v.rotary_fraction_null,
    )  # fmt: skip


def rope_parameters(spec: Spec) -> dict[str, Any]:
    """`_rope`'s inverse, in transformers 5's rope_parameters."""
    return position_parameters(spec.position)


def position_parameters(p) -> dict[str, Any]:
    """A rope record (a spec's `position` or `local_position`) as rope_parameters."""
    scaling = p.scaling
    kind = "default" if scaling.type == "none" else scaling.type
    out: dict[str, Any] = {"rope_type": kind, "rope_theta": p.theta}
    if kind == "yarn":
        out |= yarn.write_yarn(scaling)
    out |= {hf: getattr(scaling, key) for hf, key in _SCALINGS[kind]}
    return out | longrope.write_longrope(scaling) if kind == "longrope" else out


def _window(f: Fields, v: LlamaVariant) -> int | None:
    """The sliding window, every layer's (Mistral, Mixtral): transformers hides the keys
    `sliding_window` or more positions before each query."""
    # `"sliding_window": null` (Mistral v0.2 on) means no window; only an absent field takes the
    # config class's default (4096 for Mistral).
    window = f.get("sliding_window") if "sliding_window" in f.data else v.window_default
    if window is not None and (not isinstance(window, int) or window < 1):
        raise f.error("sliding_window", f"expected a positive integer or null, got {window!r}")
    return window


def export_window(spec: Spec) -> int | None:
    """The spec's sliding window as `sliding_window`, which Mistral and Mixtral apply to every
    layer: a window on some layers only is refused."""
    window = spec.attention.sliding_window
    if window is not None and set(spec.attention.window_pattern) != {"L"}:
        raise SpecError(
            f"{spec.hf_class or 'this config class'} windows every layer; the spec windows "
            f"only the layers of window_pattern {spec.attention.window_pattern!r}",
            path="attention.window_pattern",
        )
    return window


def import_llama_like(f: Fields, cls: HFClass, v: LlamaVariant) -> dict[str, Any]:
    d = f.int("hidden_size", 4096)
    heads = f.count("num_attention_heads", 32)
    kv = f.optional_size("num_key_value_heads", v.kv_heads) or heads
    if "num_key_value_heads" not in f.data and heads % kv:
        raise f.error(
            "num_key_value_heads",
            f"left out, it is the config class's default, {kv}, which does not divide the "
            f"{heads} attention heads",
        )
    head_dim = f.size("head_dim", None) or d // heads
    max_pos = f.int("max_position_embeddings", v.max_positions)
    if v.biases:
        bias = {"attention": f.bool("attention_bias", False), "mlp": False}
        if v.mlp_bias:
            bias["mlp"] = f.bool("mlp_bias", False)
        else:
            f.ignored("mlp_bias", f"transformers' {f.model_type} MLPs (built without biases)")
        f.harmless("pretraining_tp")  # a different order of the same sums
    else:
        bias = {"attention": False, "mlp": False}
    window = _window(f, v) if v.sliding_window else None
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 32),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "head_dim": head_dim if head_dim * heads != d else None,
        "d_ff": f.int("intermediate_size", v.d_ff),
        "vocab_size": f.int("vocab_size", v.vocab_size),
        "max_seq_len": max_pos,
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": v.norm_kind, "eps": f.float(v.eps_key, v.rms_eps)},
        "position": _rope(f, v.rope_theta, max_pos)
        if v.rotary_fraction is None
        else _partial_rope(f, head_dim, v, max_pos),
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": bias["attention"], "scale_scores": True}
        | ({"sliding_window": window} if window is not None else {}),
        "mlp": {
            "gated": True,
            "activation": f.activation("hidden_act", "silu"),
            "bias": bias["mlp"],
        },
        "head": {**read_head(f, cls, False), "bias": False},
        "dropout": read_dropout(f, dropouts.LLAMA),
    }
    if v.experts:
        f.harmless("output_router_logits", "router_aux_loss_coef", "router_jitter_noise")
        spec["moe"] = {
            "n_experts": f.int("num_local_experts", 8, "num_experts"),
            "top_k": f.int("num_experts_per_tok", 2),
            "router_bias": False,
        }
    return spec


def export_llama_like(
    spec: Spec, dropout_places: dropouts.Places = dropouts.LLAMA
) -> dict[str, Any]:
    """The fields all three config classes share; each family adds its own."""
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.n_kv_heads or spec.n_heads,
        "head_dim": spec.resolved_head_dim,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "rms_norm_eps": spec.norm.eps,
        # transformers 5 reads rope_parameters, 4.x rope_theta: both, equal.
        "rope_parameters": rope_parameters(spec),
        "rope_theta": spec.position.theta,
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, dropout_places),
        **head_fields(spec),
    }


MODEL_NAMES = chain(table({"tok_emb": "embed_tokens"}), lm_head)
STACK_NAMES = table({"final_norm": "norm"})

# A dense LLaMA-style block; Mixtral adds its experts (`families/mixtral.py`).
DENSE_BLOCK = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": "self_attn.q_proj",
        "attn.k": "self_attn.k_proj",
        "attn.v": "self_attn.v_proj",
        "attn.o": "self_attn.o_proj",
        "mlp_norm": "post_attention_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
    }
)

# Older checkpoints store the rotary frequencies of every layer.
ROPE_BUFFERS = (
    Buffer("layers.{i}.self_attn.rotary_emb.inv_freq", "rope_inv_freq"),
    Buffer("rotary_emb.inv_freq", "rope_inv_freq"),
)
