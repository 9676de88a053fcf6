"""GPT-Neo (`model_type: gpt_neo`): GPT-2's pre-norm decoder with learned positions and a
tied head, in plain Linear layers (q, k and v without biases, the output projection with
one), scores not scaled by 1/sqrt(head_dim), and local layers that attend within a causal
window (`attention_types`, `window_size`): GPT-Neo 125M to 2.7B alternate global and local
layers, each local query seeing itself and the window_size - 1 tokens before it."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.families._windows import LONGEST_PATTERN
from archspec.hf.family import Buffer, Family, HFClass, NameRules
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec

DROPOUTS = {
    "attention": ("attention_dropout", 0.0),
    "hidden": ("resid_dropout", 0.0),
    "embedding": ("embed_dropout", 0.0),
}
LETTERS = {"global": "G", "local": "L"}
WORDS = {letter: word for word, letter in LETTERS.items()}


def _layers(f: Fields, n_layers: int) -> str:
    """attention_types ([[types, repeats], ...], as GPTNeoConfig expands it) as one letter
    per layer."""
    types = f.get("attention_types", [[["global", "local"], 12]])
    letters = ""
    try:
        for kinds, repeats in types:
            for _ in range(repeats):
                letters += "".join(LETTERS[k] for k in kinds)
    except (TypeError, ValueError, KeyError):
        raise f.error("attention_types", "expected [[[global|local, ...], repeats], ...]") from None
    if len(letters) != n_layers:
        raise f.error(
            "attention_types",
            f"it expands to {len(letters)} layers, but num_layers is {n_layers} (GPTNeoConfig "
            "refuses it)",
        )
    return letters


def _pattern(f: Fields, letters: str) -> str:
    n = len(letters)
    period = next(p for p in range(1, n + 1) if all(letters[i] == letters[i % p] for i in range(n)))
    if period > LONGEST_PATTERN:
        raise f.error(
            "attention_types",
            f"the layers' pattern repeats only every {period} layers; a spec's window_pattern "
            f"holds at most {LONGEST_PATTERN}",
        )
    return letters[:period]


def import_gpt_neo(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map({"num_attention_heads": "num_heads", "num_hidden_layers": "num_layers"})
    f.harmless("attention_layers")  # GPTNeoConfig recomputes it from attention_types
    d = f.int("hidden_size", 2048)
    n_layers = f.int("num_layers", 24)
    letters = _layers(f, n_layers)
    window = f.int("window_size", 256)
    attention: dict[str, Any] = {"bias": True, "qkv_bias": False, "scale_scores": False}
    if "L" in letters:
        attention |= {"sliding_window": window, "window_pattern": _pattern(f, letters)}
    else:  # written: the base spec alternates global and local layers
        attention |= {"sliding_window": None}
    return {
        "d_model": d,
        "n_layers": n_layers,
        "n_heads": f.count("num_heads", 16),
        "d_ff": f.size("intermediate_size", None) or 4 * d,
        "vocab_size": f.int("vocab_size", 50257),
        "max_seq_len": f.int("max_position_embeddings", 2048),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "learned", "offset": 0},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": attention,
        "mlp": {
            "gated": False,
            "activation": f.activation("activation_function", "gelu_new"),
            "bias": True,
        },
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": read_dropout(f, DROPOUTS),
    }


def export_gpt_neo(spec: Spec) -> dict[str, Any]:
    pattern = spec.attention.window_pattern if spec.attention.sliding_window else "G"
    n = spec.n_layers
    if n % len(pattern):
        types = [[[WORDS[pattern[i % len(pattern)]] for i in range(n)], 1]]
    else:
        types = [[[WORDS[c] for c in pattern], n // len(pattern)]]
    return {
        "hidden_size": spec.d_model,
        "num_layers": n,
        "num_heads": spec.n_heads,
        "intermediate_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "activation_function": EXPORT_ACTIVATIONS[spec.mlp.activation],
        "attention_types": types,
        "window_size": spec.attention.sliding_window or 256,
        **write_dropout(spec, DROPOUTS),
        **head_fields(spec),
    }


FAMILY = Family(
    model_type="gpt_neo",
    classes=(
        HFClass("GPTNeoForCausalLM", "gpt_neo", "lm", base=False),
        HFClass("GPTNeoModel", "gpt_neo", "none", base=True),
    ),
    bases=("_gpt_neo",),
    import_config=import_gpt_neo,
    export_config=export_gpt_neo,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"pos_emb": "wpe", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=table(
            {
                "attn_norm": "ln_1",
                "attn.q": "attn.attention.q_proj",
                "attn.k": "attn.attention.k_proj",
                "attn.v": "attn.attention.v_proj",
                "attn.o": "attn.attention.out_proj",
                "mlp_norm": "ln_2",
                "mlp.up": "mlp.c_fc",
                "mlp.down": "mlp.c_proj",
            }
        ),
    ),
    # Older checkpoints store each layer's mask (a window's band in the local layers).
    buffers=(
        Buffer("h.{i}.attn.attention.bias", "anything"),
        Buffer("h.{i}.attn.attention.masked_bias", "anything"),
    ),
)
