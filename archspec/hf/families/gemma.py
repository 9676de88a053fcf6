"""Gemma (`model_type: gemma`): the LLaMA layout with Gemma's own parts: token embeddings
scaled by sqrt(hidden_size) rounded to their dtype, RMSNorms scaling by 1 + weight (in
float32), a GeGLU MLP (tanh GELU), a head_dim of its own (256) and a tied head."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    _rope,
    rope_parameters,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

TANH_GELU = "gelu_pytorch_tanh"


def gemma_activation(f: Fields, key: str = "hidden_act", other_key="hidden_activation") -> str:
    """transformers 5 reads `hidden_act` for Gemma (and, like the original releases meant,
    takes its legacy `gelu` for the tanh approximation), `hidden_activation` for Gemma 2; a
    config may carry both, which must then say the same."""
    act = f.get(key, TANH_GELU)
    act = TANH_GELU if act == "gelu" and key == "hidden_act" else act
    other = f.get(other_key)
    if other is not None and other != act and not (other == "gelu" and act == TANH_GELU):
        raise f.error(
            other_key, f"{other_key} = {other!r} disagrees with {key} = {act!r}, which is read"
        )
    f.harmless(other_key)
    if act != TANH_GELU:
        raise f.error(key, f"Gemma with {act!r} is not supported (only {TANH_GELU})")
    f.harmless(key)
    return "gelu_tanh"


def import_gemma_like(
    f: Fields,
    cls: HFClass,
    defaults: dict[str, Any],
    activation: str = "hidden_act",
    position: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What Gemma, Gemma 2 and Gemma 3 share, with their config classes' `defaults`;
    `position`, read by the caller where its RoPE settings are its own (Gemma 3's, per layer
    type)."""
    d = f.int("hidden_size", defaults["hidden_size"])
    heads = f.count("num_attention_heads", defaults["num_attention_heads"])
    kv = f.size("num_key_value_heads", defaults["num_key_value_heads"]) or heads
    head_dim = f.size("head_dim", 256) or 256
    f.expect(
        "use_bidirectional_attention",
        (None, False),
        None,
        "bidirectional attention (EmbeddingGemma)",
    )
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", defaults["num_hidden_layers"]),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "head_dim": head_dim if head_dim * heads != d else None,
        "d_ff": f.int("intermediate_size", defaults["intermediate_size"]),
        "vocab_size": f.int("vocab_size", defaults.get("vocab_size", 256000)),
        "max_seq_len": f.int("max_position_embeddings", defaults.get("max_seq_len", 8192)),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "offset_rmsnorm", "eps": f.float("rms_norm_eps", 1e-6)},
        "position": position if position is not None else _rope(f, 10000.0),
        "embedding": {"token_types": 0, "norm": False, "scale": True, "scale_in_dtype": True},
        "attention": {"bias": f.bool("attention_bias", False), "scale_scores": True},
        "mlp": {
            "gated": True,
            "activation": gemma_activation(
                f, activation, "hidden_activation" if activation == "hidden_act" else "hidden_act"
            ),
            "bias": False,
        },
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, dropouts.LLAMA),
    }


def export_gemma_like(spec: Spec) -> dict[str, Any]:
    return {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.resolved_head_dim,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "rms_norm_eps": spec.norm.eps,
        "rope_parameters": rope_parameters(spec),
        "rope_theta": spec.position.theta,
        "hidden_act": TANH_GELU,
        "attention_bias": spec.attention.bias,
        **write_dropout(spec, dropouts.LLAMA),
        **head_fields(spec),
    }


GEMMA_DEFAULTS = {
    "hidden_size": 3072,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "num_hidden_layers": 28,
    "intermediate_size": 24576,
}

FAMILY = Family(
    model_type="gemma",
    classes=(
        HFClass("GemmaForCausalLM", "gemma", "lm", base=False),
        HFClass("GemmaModel", "gemma", "none", base=True),
    ),
    bases=("_gemma",),
    import_config=lambda f, cls: import_gemma_like(f, cls, GEMMA_DEFAULTS),
    export_config=export_gemma_like,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
