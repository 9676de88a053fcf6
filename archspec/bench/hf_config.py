"""A spec -> the transformers config of the same architecture (for `bench --vs-hf`).

This is the inverse of `archspec.hf.import_config`, and is checked against it: the config
written here is imported back, and the spec that comes out must equal the one that went in,
field for field. A spec that a transformers class cannot express exactly (a GPT-2 with RMSNorm,
say) is refused with the first field that differs, so a comparison is never made against a
different model.

Every dropout is 0: a spec has none, and a dropout the generated model does not run would make
the transformers side do extra work in training.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from archspec.errors import SpecError
from archspec.spec.schema import Spec

# The spec's activation names -> transformers' (ACT2FN).
_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}
_OPENAI_ACT = {"gelu_tanh": "gelu", "relu": "relu", "silu": "silu"}


def _lm(spec: Spec) -> dict[str, Any]:
    return {"tie_word_embeddings": spec.head.tied}


def _bert(spec: Spec) -> dict[str, Any]:
    offset = spec.position.offset
    fields = {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len + offset,
        "type_vocab_size": spec.embedding.token_types,
        "layer_norm_eps": spec.norm.eps,
        "hidden_act": _ACT[spec.mlp.activation],
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    if spec.family == "roberta" or offset:
        fields["pad_token_id"] = offset - 1  # RoBERTa numbers positions from pad + 1
    return fields


def _gpt2(spec: Spec) -> dict[str, Any]:
    return {
        "n_embd": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "n_inner": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "activation_function": _ACT[spec.mlp.activation],
        "scale_attn_weights": spec.attention.scale_scores,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        **_lm(spec),
    }


def _openai_gpt(spec: Spec) -> dict[str, Any]:
    return {
        "n_embd": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "afn": _OPENAI_ACT.get(spec.mlp.activation, spec.mlp.activation),
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        **_lm(spec),
    }


def _t5(spec: Spec) -> dict[str, Any]:
    act = _ACT[spec.mlp.activation]
    if spec.mlp.gated:
        # transformers reads "gated-gelu" as the tanh approximation (gelu_new).
        proj = "gated-gelu" if act == "gelu_new" else f"gated-{act}"
    else:
        proj = act
    return {
        "d_model": spec.d_model,
        "num_layers": spec.encoder.n_layers or spec.n_layers,
        "num_decoder_layers": spec.decoder.n_layers or spec.n_layers,
        "num_heads": spec.n_heads,
        "d_kv": spec.head_dim,
        "d_ff": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "n_positions": spec.max_seq_len,
        "feed_forward_proj": proj,
        "layer_norm_epsilon": spec.norm.eps,
        "relative_attention_num_buckets": spec.position.num_buckets,
        "relative_attention_max_distance": spec.position.max_distance,
        "scale_decoder_outputs": spec.head.scale_tied_output,
        "dropout_rate": 0.0,
        "decoder_start_token_id": 0,
        **_lm(spec),
    }


def _bart(spec: Spec) -> dict[str, Any]:
    return {
        "d_model": spec.d_model,
        "encoder_layers": spec.encoder.n_layers or spec.n_layers,
        "decoder_layers": spec.decoder.n_layers or spec.n_layers,
        "encoder_attention_heads": spec.n_heads,
        "decoder_attention_heads": spec.n_heads,
        "encoder_ffn_dim": spec.d_ff,
        "decoder_ffn_dim": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "activation_function": _ACT[spec.mlp.activation],
        "scale_embedding": spec.embedding.scale,
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "decoder_start_token_id": 2,
        **_lm(spec),
    }


def _llama_like(spec: Spec) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.n_kv_heads or spec.n_heads,
        "head_dim": spec.head_dim or spec.d_model // spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "rms_norm_eps": spec.norm.eps,
        # transformers 5 reads rope_parameters, 4.x rope_theta: both, equal.
        "rope_parameters": {"rope_type": "default", "rope_theta": spec.position.theta},
        "rope_theta": spec.position.theta,
        "hidden_act": _ACT[spec.mlp.activation],
        "attention_dropout": 0.0,
        **_lm(spec),
    }
    if spec.moe is not None:
        fields |= {
            "num_local_experts": spec.moe.n_experts,
            "num_experts_per_tok": spec.moe.top_k,
            "router_jitter_noise": 0.0,
            "sliding_window": None,
        }
    elif spec.hf_class and spec.hf_class.startswith("Mistral"):
        fields["sliding_window"] = None
    else:
        fields |= {"attention_bias": spec.attention.bias, "mlp_bias": spec.mlp.bias}
    return fields


def _bloom(spec: Spec) -> dict[str, Any]:
    return {
        "hidden_size": spec.d_model,
        "n_layer": spec.n_layers,
        "n_head": spec.n_heads,
        "vocab_size": spec.vocab_size,
        "seq_length": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        **_lm(spec),
    }


def _opt(spec: Spec) -> dict[str, Any]:
    pre = spec.residual == "pre"
    return {
        "hidden_size": spec.d_model,
        "word_embed_proj_dim": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "ffn_dim": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "do_layer_norm_before": pre,
        "_remove_final_layer_norm": pre and not spec.final_norm,
        "enable_bias": spec.attention.bias,
        "activation_function": _ACT[spec.mlp.activation],
        "dropout": 0.0,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
        "layerdrop": 0.0,
        **_lm(spec),
    }


# transformers model_type -> the fields of its config.json for a spec.
_EXPORTERS: dict[str, Callable[[Spec], dict[str, Any]]] = {
    "bert": _bert,
    "roberta": _bert,
    "gpt2": _gpt2,
    "openai-gpt": _openai_gpt,
    "t5": _t5,
    "bart": _bart,
    "llama": _llama_like,
    "mistral": _llama_like,
    "mixtral": _llama_like,
    "bloom": _bloom,
    "opt": _opt,
}

# Fields that the import fills from the family base rather than from config.json: not part of
# the architecture.
_NOT_ARCHITECTURE = {"name", "source", "family", "abstract"}


def hf_config_dict(spec: Spec) -> dict[str, Any]:
    """config.json's mapping for the spec's transformers class (`hf_class`), checked to import
    back to exactly this spec; a SpecError when the spec has no class or differs from it."""
    from archspec.hf.classes import hf_class
    from archspec.hf.import_config import import_config

    if not spec.hf_class:
        raise SpecError(
            f"'{spec.name}' names no transformers class (hf_class), so --vs-hf has nothing to "
            "compare with"
        )
    cls = hf_class(spec.hf_class)
    data = {"model_type": cls.model_type, "architectures": [cls.name]}
    data |= _EXPORTERS[cls.model_type](spec)
    try:
        back = import_config(data, source=spec.source).spec
    except SpecError as exc:
        raise SpecError(
            f"'{spec.name}' cannot be written as a {cls.name} config: {exc.message}",
            hint="--vs-hf needs a spec that the transformers class reproduces exactly",
        ) from None
    for f in dataclasses.fields(Spec):
        if f.name in _NOT_ARCHITECTURE:
            continue
        ours, theirs = getattr(spec, f.name), getattr(back, f.name)
        if ours != theirs:
            raise SpecError(
                f"'{spec.name}' is not a {cls.name}: its {f.name} is {ours}, the class's "
                f"config gives {theirs}",
                hint="--vs-hf needs a spec that the transformers class reproduces exactly",
            )
    return data
