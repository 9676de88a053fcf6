"""Importers for the decoder-only families: GPT-2, GPT-1, LLaMA/Mistral/Mixtral, BLOOM, OPT.

Each importer reads the fields of its model_type that shape the architecture and returns the
spec fields they determine, as a nested mapping; a field it leaves out is inherited from the
family base. Defaults are transformers' config-class defaults. A value archspec cannot express
is refused with `Fields.expect` or `Fields.error`, naming the field.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.classes import HFClass
from archspec.hf.config_fields import Fields, read_head

# The sequence-summary head of the *DoubleHeadsModel classes; the LM classes have none.
_SUMMARY = (
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_proj_to_labels",
    "summary_first_dropout",
)


def gpt2(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect(
        "scale_attn_by_inverse_layer_idx",
        False,
        False,
        "attention scores divided by (layer index + 1) cannot be expressed in a spec",
    )
    if f.get("reorder_and_upcast_attn", False):
        f.notes.append(
            "reorder_and_upcast_attn only changes half-precision rounding, not the function"
        )
    f.harmless("n_ctx", *_SUMMARY)
    d = f.int("n_embd", 768, "hidden_size")
    return {
        "d_model": d,
        "n_layers": f.int("n_layer", 12, "num_hidden_layers"),
        "n_heads": f.int("n_head", 12, "num_attention_heads"),
        "d_ff": f.get("n_inner") or 4 * d,
        "vocab_size": f.int("vocab_size", 50257),
        "max_seq_len": f.int("n_positions", 1024, "max_position_embeddings"),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "learned", "offset": 0},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": True, "scale_scores": f.bool("scale_attn_weights", True)},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "gelu_new"),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
    }


# OpenAI GPT's own table: its "gelu" is the tanh approximation (modeling_openai.ACT_FNS).
_OPENAI_ACTIVATIONS = {"gelu": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}


def openai_gpt(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("n_special", (0, None), 0, "extra special-token rows in the embedding")
    f.harmless("n_ctx", "predict_special_tokens", *_SUMMARY)
    d = f.int("n_embd", 768, "hidden_size")
    return {
        "d_model": d,
        "n_layers": f.int("n_layer", 12, "num_hidden_layers"),
        "n_heads": f.int("n_head", 12, "num_attention_heads"),
        "d_ff": 4 * d,
        "vocab_size": f.int("vocab_size", 40478),
        "max_seq_len": f.int("n_positions", 512, "max_position_embeddings"),
        "layout": "decoder",
        "residual": "post",
        "final_norm": False,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "learned", "offset": 0},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("afn", "gelu", _OPENAI_ACTIVATIONS),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
    }


def _rope_theta(f: Fields, default: float) -> float:
    """RoPE's base, from rope_parameters (transformers 5) or rope_theta + rope_scaling."""
    params = f.get("rope_parameters") or {}
    scaling = f.get("rope_scaling") or {}
    kind = params.get("rope_type", params.get("type", "default"))
    scaling_kind = scaling.get("rope_type", scaling.get("type", "default"))
    for key, value in (("rope_parameters", kind), ("rope_scaling", scaling_kind)):
        if value != "default":
            raise f.error(
                key,
                f"RoPE scaling of type {value!r} is not supported (only the default rotary "
                "embedding)",
            )
    extra = set(params) - {"rope_type", "type", "rope_theta"}
    extra |= set(scaling) - {"rope_type", "type"}
    if extra:
        raise f.error("rope_parameters", f"RoPE settings not supported: {', '.join(sorted(extra))}")
    f.expect("partial_rotary_factor", (None, 1, 1.0), None, "rotary embedding on part of a head")
    theta = params.get("rope_theta", f.get("rope_theta", default))
    if f.present("rope_theta") and float(f.get("rope_theta")) != float(theta):
        raise f.error("rope_theta", "rope_theta and rope_parameters.rope_theta disagree")
    return float(theta)


def llama_like(f: Fields, cls: HFClass) -> dict[str, Any]:
    kind = f.model_type
    defaults = {
        "llama": (11008, None, 2048, 1e-6),
        "mistral": (14336, 8, 4096 * 32, 1e-6),
        "mixtral": (14336, 8, 4096 * 32, 1e-5),
    }
    ff, kv_default, max_pos_default, eps = defaults[kind]
    d = f.int("hidden_size", 4096)
    heads = f.int("num_attention_heads", 32)
    kv = f.get("num_key_value_heads", kv_default) or heads
    head_dim = f.get("head_dim") or d // heads
    max_pos = f.int("max_position_embeddings", max_pos_default)
    if kind == "llama":
        bias = {"attention": f.bool("attention_bias", False), "mlp": f.bool("mlp_bias", False)}
        f.harmless("pretraining_tp")  # a different order of the same sums
    else:
        bias = {"attention": False, "mlp": False}
    if kind in ("mistral", "mixtral"):
        window = f.get("sliding_window", 4096 if kind == "mistral" else None)
        if window is not None and window < max_pos:
            # Inside a window that covers the whole sequence, sliding-window attention is plain
            # causal attention; build for sequences that short.
            f.notes.append(
                f"sliding_window {window} < max_position_embeddings {max_pos}: built for "
                f"sequences of up to {window} tokens, where the window masks nothing"
            )
            max_pos = window
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 32),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "head_dim": head_dim if head_dim * heads != d else None,
        "d_ff": f.int("intermediate_size", ff),
        "vocab_size": f.int("vocab_size", 32000),
        "max_seq_len": max_pos,
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "rmsnorm", "eps": f.float("rms_norm_eps", eps)},
        "position": {"kind": "rope", "theta": _rope_theta(f, 10000.0)},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": bias["attention"], "scale_scores": True},
        "mlp": {
            "gated": True,
            "activation": f.activation("hidden_act", "silu"),
            "bias": bias["mlp"],
        },
        "head": {**read_head(f, cls, False), "bias": False},
    }
    if kind == "mixtral":
        f.harmless("output_router_logits", "router_aux_loss_coef", "router_jitter_noise")
        spec["moe"] = {
            "n_experts": f.int("num_local_experts", 8, "num_experts"),
            "top_k": f.int("num_experts_per_tok", 2),
            "router_bias": False,
        }
    return spec


def bloom(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect(
        "apply_residual_connection_post_layernorm",
        False,
        False,
        "the residual taken after the layer norm",
    )
    # Megatron training settings stored in BLOOM configs; transformers ignores them too.
    f.harmless(
        "attention_softmax_in_fp32",
        "bias_dropout_fusion",
        "masked_softmax_fusion",
        "offset_alibi",
        "skip_bias_add",
        "skip_bias_add_qkv",
        "pretraining_tp",
        "slow_but_exact",
    )
    d = f.int("hidden_size", 64, "n_embed")
    f.expect("n_inner", (None, 4 * d), None, "transformers' BLOOM always uses 4 * hidden_size")
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": f.int("n_layer", 2, "num_hidden_layers"),
        "n_heads": f.int("n_head", 8, "num_attention_heads"),
        "d_ff": 4 * d,
        "vocab_size": f.int("vocab_size", 250880),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "alibi"},
        "embedding": {"token_types": 0, "norm": True, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {"gated": False, "activation": "gelu_tanh", "bias": True},
        "head": {**read_head(f, cls, True), "bias": False},
    }
    if f.present("seq_length"):
        spec["max_seq_len"] = f.int("seq_length")
    return spec


def opt(f: Fields, cls: HFClass) -> dict[str, Any]:
    d = f.int("hidden_size", 768)
    proj = f.get("word_embed_proj_dim") or d
    if proj != d:
        raise f.error(
            "word_embed_proj_dim",
            f"word_embed_proj_dim ({proj}) differs from hidden_size ({d}): OPT's project_in / "
            "project_out layers around the decoder cannot be expressed in a spec",
        )
    f.expect("layer_norm_elementwise_affine", True, True, "layer norms without a learned scale")
    pre = f.bool("do_layer_norm_before", True)
    remove_final = f.bool("_remove_final_layer_norm", False)
    bias = f.bool("enable_bias", True)
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 12),
        "n_heads": f.int("num_attention_heads", 12),
        "d_ff": f.int("ffn_dim", 3072),
        "vocab_size": f.int("vocab_size", 50272),
        "max_seq_len": f.int("max_position_embeddings", 2048),
        "layout": "decoder",
        "residual": "pre" if pre else "post",
        # transformers builds the final norm only for pre-norm OPT.
        "final_norm": pre and not remove_final,
        "norm": {"kind": "layernorm", "bias": True, "eps": 1e-5},
        "position": {"kind": "learned", "offset": 2},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": bias, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "relu"),
            "bias": bias,
        },
        "head": {**read_head(f, cls, True), "bias": False},
    }
