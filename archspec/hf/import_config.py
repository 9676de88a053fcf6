"""A transformers config.json -> a readable, minimal archspec spec.

Each supported `model_type` has an importer that reads the fields shaping the architecture
(with transformers' defaults for the ones a file leaves out) into the spec's terms. Every field
of the file must be either read by that importer or known not to change the architecture
(dropouts, token ids, generation settings); anything else is an error naming the field, so a
config is never silently turned into a different model. The spec is then written as
`extends:` on the family base that needs the fewest overrides, and checked: resolving the
written spec must give back exactly what was read.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archspec.errors import Location, SpecError, did_you_mean
from archspec.hf.classes import CLASSES, HFClass, hf_class
from archspec.spec.resolve import _load_chain, builtin_dir, deep_merge
from archspec.spec.schema import MoESpec, Spec
from archspec.spec.validate import validate

# Fields every config may carry that do not change the function a model computes in eval mode.
# fmt: off
GENERIC_HARMLESS = {
    "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype",
    "dtype", "use_cache", "id2label", "label2id", "num_labels", "problem_type",
    "finetuning_task", "task_specific_params", "tokenizer_class", "prefix", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16",
    "tf_legacy_loss", "chunk_size_feed_forward", "gradient_checkpointing", "output_past",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
    "forced_decoder_ids", "_attn_implementation", "attn_implementation", "_commit_hash",
    "keys_to_ignore_at_inference", "xla_device", "_attn_implementation_autoset",
}
HARMLESS_SUFFIXES = ("_token_id", "_token_ids")
HARMLESS_PARTS = ("dropout", "pdrop", "layerdrop", "initializer_range", "initializer_factor",
                  "init_std")
# fmt: on

# transformers activation names (ACT2FN) -> the spec's.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",  # 0.5x(1 + tanh(0.79788456 x (1 + 0.044715 x²))): the same curve
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}

_MISSING = object()


class Fields:
    """A config.json mapping that records which fields an importer read."""

    def __init__(self, data: dict[str, Any], where: Location, model_type: str) -> None:
        self.data = data
        self.where = where
        self.model_type = model_type
        self.used: set[str] = {"model_type", "architectures"}
        self.notes: list[str] = []

    def error(self, key: str | None, message: str, hint: str | None = None) -> SpecError:
        return SpecError(message, location=self.where, path=key, hint=hint)

    def present(self, key: str) -> bool:
        return self.data.get(key) is not None

    def get(self, key: str, default: Any = None, *aliases: str) -> Any:
        """The value of `key` (or of an alias transformers maps onto it), else `default`."""
        found: list[tuple[str, Any]] = []
        for name in (key, *aliases):
            self.used.add(name)
            if self.data.get(name) is not None:
                found.append((name, self.data[name]))
        if len({json.dumps(v, sort_keys=True) for _, v in found}) > 1:
            listed = ", ".join(f"{k} = {v!r}" for k, v in found)
            raise self.error(key, f"fields that mean the same disagree: {listed}")
        return found[0][1] if found else default

    def int(self, key: str, default: Any = _MISSING, *aliases: str) -> int:
        value = self.get(key, default, *aliases)
        if value is _MISSING:
            raise self.error(key, f"config.json has no '{key}'")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {value!r}")
        return value

    def float(self, key: str, default: Any, *aliases: str) -> float:
        value = self.get(key, default, *aliases)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"expected a number, got {value!r}")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def expect(self, key: str, allowed: Any, default: Any, why: str) -> Any:
        """A field archspec supports only at some values: refuse the others, saying why."""
        value = self.get(key, default)
        ok = value in allowed if isinstance(allowed, (set, tuple, list)) else value == allowed
        if not ok:
            raise self.error(
                key,
                f"{key} = {json.dumps(value)} is not supported: {why}",
                hint="archspec refuses a config it cannot reproduce exactly",
            )
        return value

    def activation(self, key: str, default: str, table: dict[str, str] = ACTIVATIONS) -> str:
        value = self.get(key, default)
        if value not in table:
            raise self.error(
                key,
                f"activation {value!r} is not supported",
                hint=f"supported: {', '.join(table)}",
            )
        return table[value]

    def harmless(self, *keys: str) -> None:
        self.used.update(keys)

    def leftovers(self) -> list[str]:
        return [
            k
            for k in self.data
            if k not in self.used
            and k not in GENERIC_HARMLESS
            and not k.endswith(HARMLESS_SUFFIXES)
            and not any(p in k for p in HARMLESS_PARTS)
        ]


# --- One importer per model_type -----------------------------------------------------------
#
# Each returns the spec fields it determined, as a nested mapping; a field it leaves out is
# inherited from the family base. Defaults are transformers' config-class defaults.


def _head(f: Fields, cls: HFClass, tie_default: bool) -> dict[str, Any]:
    if cls.head == "lm":
        return {
            "lm_head": True,
            "pooler": False,
            "tied": f.bool("tie_word_embeddings", tie_default),
        }
    f.harmless("tie_word_embeddings")
    return {"lm_head": False, "pooler": cls.head == "pooler"}


def _generic(f: Fields) -> None:
    f.expect("add_cross_attention", False, False, "cross-attention blocks in this family")
    f.expect("tie_encoder_decoder", False, False, "the encoder sharing the decoder's weights")
    f.expect("pruned_heads", ({}, None), {}, "pruned attention heads change the layer shapes")
    f.expect("cross_attention_hidden_size", (None,), None, "a cross-attention projection")
    if f.present("quantization_config"):
        raise f.error("quantization_config", "quantized checkpoints are not supported")
    if f.present("auto_map"):
        raise f.error(
            "auto_map",
            "config.json points to custom modeling code (auto_map); archspec maps only "
            "transformers' own implementation of a model_type",
        )


def _bert_like(f: Fields, cls: HFClass, roberta: bool) -> dict[str, Any]:
    f.expect("position_embedding_type", ("absolute",), "absolute", "only absolute positions")
    f.expect("is_decoder", False, False, "a causal BERT")
    f.expect("embedding_size", (None, f.get("hidden_size", 768)), None, "factorised embeddings")
    d = f.int("hidden_size", 768)
    max_pos = f.int("max_position_embeddings", 512)
    offset = 0
    if roberta:
        # RoBERTa numbers positions after the padding index: position ids start at pad + 1.
        offset = f.int("pad_token_id", 1) + 1
        f.notes.append(
            f"RoBERTa numbers positions from pad_token_id + 1 = {offset}; they equal "
            "transformers' for right-padded batches"
        )
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 12),
        "n_heads": f.int("num_attention_heads", 12),
        "d_ff": f.int("intermediate_size", 3072),
        "vocab_size": f.int("vocab_size", 50265 if roberta else 30522),
        "max_seq_len": max_pos - offset,
        "layout": "encoder",
        "residual": "post",
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_eps", 1e-12)},
        "position": {"kind": "learned", "offset": offset},
        "embedding": {"token_types": f.int("type_vocab_size", 2), "norm": True, "scale": False},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {"gated": False, "activation": f.activation("hidden_act", "gelu"), "bias": True},
        "head": _head(f, cls, True),
    }


# The sequence-summary head of the *DoubleHeadsModel classes; the LM classes have none.
_SUMMARY = (
    "summary_type",
    "summary_use_proj",
    "summary_activation",
    "summary_proj_to_labels",
    "summary_first_dropout",
)


def _gpt2(f: Fields, cls: HFClass) -> dict[str, Any]:
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
        "head": {**_head(f, cls, True), "bias": False},
    }


# OpenAI GPT's own table: its "gelu" is the tanh approximation (modeling_openai.ACT_FNS).
_OPENAI_ACTIVATIONS = {"gelu": "gelu_tanh", "relu": "relu", "silu": "silu", "swish": "silu"}


def _openai_gpt(f: Fields, cls: HFClass) -> dict[str, Any]:
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
        "head": {**_head(f, cls, True), "bias": False},
    }


def _t5(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("is_decoder", False, False, "a decoder-only T5")
    proj = f.get("feed_forward_proj", "relu")
    act_info = proj.split("-")
    gated = act_info[0] == "gated" and len(act_info) == 2
    if len(act_info) > 2 or (len(act_info) == 2 and not gated):
        raise f.error("feed_forward_proj", f"feed_forward_proj {proj!r} is not valid")
    act_name = "gelu_new" if proj == "gated-gelu" else act_info[-1]
    if act_name not in ACTIVATIONS:
        raise f.error("feed_forward_proj", f"activation {act_info[-1]!r} is not supported")
    # Fields transformers derives from feed_forward_proj must agree with it.
    f.expect(
        "dense_act_fn", (None, act_name), None, f"feed_forward_proj {proj!r} implies {act_name}"
    )
    f.expect("is_gated_act", (None, gated), None, f"feed_forward_proj {proj!r} implies {gated}")
    n_layers = f.int("num_layers", 6, "num_hidden_layers")
    decoder_layers = f.int("num_decoder_layers", n_layers)
    d = f.int("d_model", 512, "hidden_size")
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": n_layers,
        "n_heads": f.int("num_heads", 8, "num_attention_heads"),
        "head_dim": f.int("d_kv", 64, "head_dim"),
        "d_ff": f.int("d_ff", 2048),
        "vocab_size": f.int("vocab_size", 32128),
        "layout": cls.layout or "encoder-decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "rmsnorm", "eps": f.float("layer_norm_epsilon", 1e-6)},
        "position": {
            "kind": "relative_bias",
            "num_buckets": f.int("relative_attention_num_buckets", 32),
            "max_distance": f.int("relative_attention_max_distance", 128),
        },
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": False, "scale_scores": False},
        "mlp": {"gated": gated, "activation": ACTIVATIONS[act_name], "bias": False},
    }
    if f.present("n_positions"):
        spec["max_seq_len"] = f.int("n_positions")
    if cls.layout == "encoder":
        f.harmless(
            "num_decoder_layers",
            "is_encoder_decoder",
            "tie_word_embeddings",
            "scale_decoder_outputs",
        )
        spec["head"] = {"lm_head": False, "pooler": False}
        return spec
    f.expect("is_encoder_decoder", True, True, "T5 is an encoder-decoder")
    if decoder_layers != n_layers:
        spec["decoder"] = {"n_layers": decoder_layers}
    head = _head(f, cls, True)
    if cls.head == "lm":
        # transformers scales the decoder output by d_model**-0.5 before a tied head (T5 v1.0);
        # 5.x states it as scale_decoder_outputs, defaulting to "the head is tied".
        scale = f.get("scale_decoder_outputs", head["tied"])
        if scale and not head["tied"]:
            raise f.error(
                "scale_decoder_outputs",
                "scaling the decoder output before an untied head is not supported",
            )
        head["scale_tied_output"] = bool(scale)
    else:
        f.harmless("scale_decoder_outputs")
    spec["head"] = {**head, "bias": False}
    return spec


def _bart(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("is_decoder", False, False, "a decoder-only BART")
    f.expect("is_encoder_decoder", True, True, "BART is an encoder-decoder")
    # Old fairseq-era fields that transformers' BART no longer reads: only BART's values.
    f.expect("add_bias_logits", False, False, "a learned logits bias")
    f.expect("add_final_layer_norm", False, False, "a final norm after each stack (mBART)")
    f.expect("normalize_before", False, False, "pre-norm blocks (mBART)")
    f.expect("normalize_embedding", True, True, "BART normalises its embeddings")
    f.expect("static_position_embeddings", False, False, "sinusoidal positions")
    f.expect("extra_pos_embeddings", 2, 2, "BART's position offset is 2")
    f.harmless("force_bos_token_to_be_generated")
    enc_layers = f.int("encoder_layers", 12, "num_hidden_layers")
    dec_layers = f.int("decoder_layers", 12)
    heads = f.int("encoder_attention_heads", 16, "num_attention_heads")
    ffn = f.int("encoder_ffn_dim", 4096)
    if f.int("decoder_attention_heads", 16) != heads:
        raise f.error(
            "decoder_attention_heads",
            f"decoder_attention_heads ({f.get('decoder_attention_heads')}) differs from "
            f"encoder_attention_heads ({heads}); a spec has one n_heads",
        )
    if f.int("decoder_ffn_dim", 4096) != ffn:
        raise f.error(
            "decoder_ffn_dim",
            f"decoder_ffn_dim ({f.get('decoder_ffn_dim')}) differs from encoder_ffn_dim "
            f"({ffn}); a spec has one d_ff",
        )
    spec: dict[str, Any] = {
        "d_model": f.int("d_model", 1024, "hidden_size"),
        "n_layers": enc_layers,
        "n_heads": heads,
        "d_ff": ffn,
        "vocab_size": f.int("vocab_size", 50265),
        "max_seq_len": f.int("max_position_embeddings", 1024),
        "layout": "encoder-decoder",
        "residual": "post",
        "final_norm": False,
        "norm": {"kind": "layernorm", "bias": True, "eps": 1e-5},
        "position": {"kind": "learned", "offset": 2},
        "embedding": {"token_types": 0, "norm": True, "scale": f.bool("scale_embedding", False)},
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "gelu"),
            "bias": True,
        },
        "head": {**_head(f, cls, True), "bias": False},
    }
    if dec_layers != enc_layers:
        spec["decoder"] = {"n_layers": dec_layers}
    return spec


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


def _llama_like(f: Fields, cls: HFClass) -> dict[str, Any]:
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
        "head": {**_head(f, cls, False), "bias": False},
    }
    if kind == "mixtral":
        f.harmless("output_router_logits", "router_aux_loss_coef", "router_jitter_noise")
        spec["moe"] = {
            "n_experts": f.int("num_local_experts", 8, "num_experts"),
            "top_k": f.int("num_experts_per_tok", 2),
            "router_bias": False,
        }
    return spec


def _bloom(f: Fields, cls: HFClass) -> dict[str, Any]:
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
        "head": {**_head(f, cls, True), "bias": False},
    }
    if f.present("seq_length"):
        spec["max_seq_len"] = f.int("seq_length")
    return spec


def _opt(f: Fields, cls: HFClass) -> dict[str, Any]:
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
        "head": {**_head(f, cls, True), "bias": False},
    }


@dataclass(frozen=True)
class _Family:
    importer: Callable[[Fields, HFClass], dict[str, Any]]
    bases: tuple[str, ...]  # candidate built-in bases, best first on a tie
    family: str | None = None  # a family name to set over the base's


FAMILIES: dict[str, _Family] = {
    "bert": _Family(lambda f, c: _bert_like(f, c, roberta=False), ("_bert",)),
    "roberta": _Family(lambda f, c: _bert_like(f, c, roberta=True), ("_roberta",)),
    "gpt2": _Family(_gpt2, ("_gpt2",)),
    "openai-gpt": _Family(_openai_gpt, ("gpt-1",)),
    "t5": _Family(_t5, ("_t5", "_flan-t5")),
    "bart": _Family(_bart, ("_bart",)),
    "llama": _Family(_llama_like, ("_llama",)),
    "mistral": _Family(_llama_like, ("_mistral",)),
    "mixtral": _Family(_llama_like, ("_llama",), family="mixtral"),
    "bloom": _Family(_bloom, ("_bloom",)),
    "opt": _Family(_opt, ("_opt",)),
}


# --- From config.json to a spec --------------------------------------------------------------


@dataclass(frozen=True)
class Imported:
    """An imported config: the spec as written (minimal, over `base`) and as resolved."""

    data: dict[str, Any]  # the spec file's mapping, without `extends`
    base: str
    spec: Spec
    notes: tuple[str, ...]
    config_path: str
    model_type: str
    hf_class: str

    def yaml(self) -> str:
        return _render(self)


def read_config(path: str | Path) -> tuple[dict[str, Any], Path]:
    """The mapping in a config.json (or in the config.json of a folder), and its path."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise SpecError(f"no such file: {path}", hint="pass a transformers config.json")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"not valid JSON: {exc.msg}", location=Location(str(path), exc.lineno, exc.colno)
        ) from None
    if not isinstance(data, dict):
        raise SpecError("config.json must hold a JSON object", location=Location(str(path)))
    return data, path


def _choose_class(f: Fields, model_type: str, architecture: str | None) -> HFClass:
    archs = f.data.get("architectures") or []
    if architecture is not None:
        name = architecture
    elif archs:
        if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
            raise f.error("architectures", "expected a list of class names")
        name = archs[0]
    else:
        name = next(c.name for c in CLASSES.values() if c.model_type == model_type)
        f.notes.append(f"config.json names no architecture; imported as {name}")
    try:
        cls = hf_class(name)
    except SpecError as exc:
        where = "--architecture" if architecture is not None else "architectures[0]"
        raise SpecError(exc.message, location=f.where, path=where, hint=exc.hint) from None
    if cls.model_type != model_type:
        raise f.error(
            "architectures",
            f"{name} is a {cls.model_type} class, but model_type is {model_type!r}",
        )
    return cls


def _source(data: dict[str, Any], path: str) -> str:
    hub_id = data.get("_name_or_path")
    if (
        isinstance(hub_id, str)
        and hub_id.count("/") <= 1
        and hub_id
        and not hub_id.startswith(("/", "."))
    ):
        return f"https://huggingface.co/{hub_id}/blob/main/config.json"
    return path


def import_config(
    config: str | Path | dict[str, Any],
    *,
    architecture: str | None = None,
    source: str | None = None,
) -> Imported:
    """Turn a transformers config (a path to config.json or its folder, or the mapping) into a
    spec over the matching family base. Raises SpecError on anything it cannot reproduce."""
    if isinstance(config, dict):
        data, path = config, "config.json"
    else:
        data, config_path = read_config(config)
        path = str(config_path)
    where = Location(path)
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        hint = did_you_mean(str(model_type), FAMILIES) or f"supported: {', '.join(FAMILIES)}"
        message = (
            f"model_type {model_type!r} is not supported by import-hf"
            if model_type
            else "config.json has no model_type"
        )
        raise SpecError(message, location=where, path="model_type", hint=hint)
    family = FAMILIES[model_type]
    f = Fields(data, where, model_type)
    cls = _choose_class(f, model_type, architecture)
    _generic(f)
    target = family.importer(f, cls)
    target["hf_class"] = cls.name
    f.harmless("is_decoder", "is_encoder_decoder", "tie_word_embeddings")
    unknown = f.leftovers()
    if unknown:
        key = unknown[0]
        raise f.error(
            key,
            f"field '{key}' (= {json.dumps(data[key])}) is not understood for model_type "
            f"'{model_type}'; archspec cannot tell whether it changes the architecture",
            hint="if it does not change the model, delete it from config.json",
        )
    src = source or _source(data, path)
    best: Imported | None = None
    for base in family.bases:
        minimal, spec = _minimal(base, target, family.family, src, where)
        candidate = Imported(minimal, base, spec, tuple(f.notes), path, model_type, cls.name)
        if best is None or len(_flat(minimal)) < len(_flat(best.data)):
            best = candidate
    assert best is not None
    return best


# --- Writing the minimal spec ------------------------------------------------------------

DIMS = ("d_model", "n_layers", "n_heads", "d_ff", "vocab_size", "max_seq_len")
ORDER = [f.name for f in dataclasses.fields(Spec)]


def _base_data(base: str) -> dict[str, Any]:
    data, _ = _load_chain(builtin_dir() / f"{base}.yaml", ())
    for key in ("name", "abstract"):
        data.pop(key, None)
    return data


def _effective(spec: Spec, path: tuple[str, ...]) -> Any:
    """A spec field's value as the IR sees it: derived defaults filled in."""
    if path == ("n_kv_heads",):
        return spec.kv_heads
    if path == ("head_dim",):
        return spec.head_dim or spec.d_model // spec.n_heads
    if path == ("final_norm",):
        return spec.has_final_norm
    if path == ("norm", "bias"):
        return spec.norm.has_bias
    if path[0] in ("encoder", "decoder") and path[1:] == ("n_layers",):
        return spec.stack_layers(path[0])
    value: Any = spec
    for key in path:
        if value is None:
            return None
        value = getattr(value, key)
    return value


def _wanted(target: dict[str, Any], d_model: int, n_heads: int) -> dict[tuple[str, ...], Any]:
    """The target as (path, effective value) pairs."""
    out: dict[tuple[str, ...], Any] = {}
    for key, value in target.items():
        if key == "moe" and value is not None:
            for sub, v in value.items():
                out[("moe", sub)] = v
        elif isinstance(value, dict):
            for sub, v in value.items():
                out[(key, sub)] = v
        else:
            out[(key,)] = value
    if out.get(("n_kv_heads",)) is None:
        out[("n_kv_heads",)] = n_heads
    if out.get(("head_dim",)) is None:
        out[("head_dim",)] = d_model // n_heads
    return out


def _minimal(
    base: str, target: dict[str, Any], family: str | None, source: str, where: Location
) -> tuple[dict[str, Any], Spec]:
    base_data = _base_data(base)
    fixed: dict[str, Any] = {"source": source}
    if family is not None:
        fixed["family"] = family
    for key in DIMS:
        if key in target:
            fixed[key] = target[key]
    # Head counts first: the base's may not fit these dimensions (validation would refuse).
    d_model, n_heads = target["d_model"], target["n_heads"]
    default_head_dim = d_model // n_heads if d_model % n_heads == 0 else None
    for key, derived in (("n_kv_heads", n_heads), ("head_dim", default_head_dim)):
        want = target.get(key) or derived
        if want != (base_data.get(key) or derived):
            fixed[key] = want
    probe = _validate(deep_merge(base_data, fixed), where)
    wanted = _wanted(target, probe.d_model, probe.n_heads)
    minimal: dict[str, Any] = dict(fixed)
    for path, value in wanted.items():
        if path[0] in fixed:
            continue
        if path[0] == "moe" and probe.moe is None:
            minimal.setdefault("moe", {})[path[1]] = value
            continue
        if _effective(probe, path) != value:
            if len(path) == 1:
                minimal[path[0]] = value
            else:
                minimal.setdefault(path[0], {})[path[1]] = value
    if "moe" in minimal and probe.moe is None:
        # A new MoE section: the expert counts, and other fields where not the defaults.
        defaults = dataclasses.asdict(MoESpec())
        minimal["moe"] = {
            k: v
            for k, v in minimal["moe"].items()
            if k in ("n_experts", "top_k") or defaults[k] != v
        }
    spec = _validate(deep_merge(base_data, minimal), where)
    for path, value in wanted.items():
        got = _effective(spec, path)
        if got != value:  # pragma: no cover - a bug in the importer, not a user mistake
            raise AssertionError(f"import-hf: {'.'.join(path)} came out {got!r}, not {value!r}")
    ordered = {k: minimal[k] for k in sorted(minimal, key=_order_key)}
    return ordered, spec


def _order_key(key: str) -> tuple[int, int]:
    # source first, then the family, the dimensions, and the rest in the schema's order
    if key == "source":
        return (0, 0)
    if key in ("family", "hf_class"):
        return (1, ORDER.index(key))
    if key in DIMS or key in ("n_kv_heads", "head_dim"):
        return (2, ORDER.index(key))
    return (3, ORDER.index(key))


def _validate(data: dict[str, Any], where: Location) -> Spec:
    try:
        return validate({"name": "imported", **data}, {}, where)
    except SpecError as exc:
        raise SpecError(
            f"the config describes a model archspec cannot build: {exc.message}",
            location=where,
            hint=exc.hint,
        ) from None


def _flat(data: dict[str, Any]) -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += [f"{key}.{sub}" for sub in value]
        else:
            out.append(key)
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e7):
            mantissa, exponent = f"{value:e}".split("e")
            mantissa = mantissa.rstrip("0")
            mantissa = mantissa + "0" if mantissa.endswith(".") else mantissa
            return f"{mantissa}e{int(exponent)}"
        return repr(value)
    if isinstance(value, str):
        plain = value and all(c.isalnum() or c in "-_./" for c in value)
        return value if plain and not value[0].isdigit() else json.dumps(value)
    return str(value)


def _render(imported: Imported) -> str:
    lines = [
        f"# Imported by `archspec import-hf` from {imported.config_path}",
        f"# (model_type {imported.model_type}, {imported.hf_class}).",
    ]
    for note in imported.notes:
        lines += textwrap.wrap(f"Note: {note}.", 96, initial_indent="# ", subsequent_indent="# ")
    lines.append(f"extends: {imported.base}")
    for key, value in imported.data.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items())
            lines.append(f"{key}: {{{inner}}}")
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"
