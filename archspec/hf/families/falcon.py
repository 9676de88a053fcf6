"""Falcon (`model_type: falcon`): attention and MLP in parallel, RoPE, a fused query/key/value
projection, no biases in the dense layers, an exact GELU and a tied head.

Falcon 7B (`new_decoder_architecture: false`) has multi-query attention and one LayerNorm for
both branches; Falcon 40B and 180B (`new_decoder_architecture: true`) have grouped keys and
values (`num_kv_heads`) and a LayerNorm per branch (`ln_attn`, `ln_mlp`). `parallel_attn:
false` is a pre-norm block. The fused projection holds, per key/value head, its query heads'
rows, then its key rows, then its value rows: one plain concatenation with multi-query
attention, per-head interleaving with as many key/value heads as query heads.

ALiBi (`alibi: true`, Falcon-RW) is refused: Falcon rounds its bias to bfloat16 and scales it
by 1/sqrt(head_dim) with the scores, which archspec's ALiBi (BLOOM's) does not.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, head_fields, read_head
from archspec.hf.families._llama_like import ROPE_BUFFERS
from archspec.hf.families._rotary import read_rope, rope_parameters
from archspec.hf.family import Family, HFClass, NameRules, Target, Where
from archspec.hf.name_rules import chain, lm_head, table
from archspec.spec.schema import Spec


def import_falcon(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("activation", "transformers' FalconMLP")
    d = f.int("hidden_size", 4544, "n_embed")
    # FalconConfig reads the old RefinedWeb name n_embed (its __post_init__) but not n_head or
    # n_layer: they are left as attributes nothing reads, so the defaults build the model.
    heads = f.count("num_attention_heads", 71)
    for old in ("n_head", "n_layer"):
        f.ignored(old, "transformers' FalconConfig and FalconModel")
    new = f.flag("new_decoder_architecture", False)
    multi_query = f.flag("multi_query", True)
    parallel = f.flag("parallel_attn", True)
    f.expect(
        "alibi",
        False,
        False,
        "Falcon's ALiBi rounds slopes × positions to bfloat16 and divides the bias by "
        "sqrt(head_dim) (it is added before the scores' scaling); archspec's ALiBi is "
        "BLOOM's, in float32 and unscaled",
    )
    # transformers' FalconConfig has no such field and ignores it; only False is the same model.
    f.expect("apply_residual_connection_post_layernorm", False, False, "a post-norm residual")
    # Falcon drops out the sum of both branches, and no attention probabilities with RoPE:
    # dropout archspec cannot place. Released configs train without it.
    f.expect("hidden_dropout", (0, 0.0), 0.0, "dropout on the sum of attention and MLP")
    f.expect("attention_dropout", (0, 0.0), 0.0, "Falcon's attention dropout placement")
    if new:
        kv = f.size("num_kv_heads", heads)  # null: one per head, as FalconConfig reads it
        f.harmless("multi_query")  # the new architecture reads num_kv_heads alone
        norms = f.expect("num_ln_in_parallel_attn", (None, 1, 2), None, "1 or 2 norms") or 2
        f.expect("parallel_attn", True, True, "the new architecture's block is parallel")
        residual = "parallel_two_norms" if norms == 2 else "parallel"
    else:
        kv = 1 if multi_query else heads
        f.harmless("num_kv_heads")  # transformers ignores it without the new architecture
        # Two norms outside the new architecture build modules transformers' forward never
        # calls: refused rather than guessed.
        f.expect("num_ln_in_parallel_attn", (None, 1), None, "two norms need the new architecture")
        residual = "parallel" if parallel else "pre"
    ffn = f.size("ffn_hidden_size", None) or 4 * d
    bias = f.bool("bias", False)
    position = read_rope(f, d // heads)
    if "rotary_dim" in position:
        raise f.error("rope_parameters", "Falcon rotates every channel of a head")
    return {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", 32),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "d_ff": ffn,
        "vocab_size": f.int("vocab_size", 65024),
        "max_seq_len": f.int("max_position_embeddings", 2048),
        "layout": "decoder",
        "residual": residual,
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": position,
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": bias, "scale_scores": True},
        "mlp": {"gated": False, "activation": f.activation("activation", "gelu"), "bias": bias},
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": {"attention": 0.0, "hidden": 0.0, "embedding": 0.0},
    }


def export_falcon(spec: Spec) -> dict[str, Any]:
    kv = spec.kv_heads
    two_norms = spec.residual == "parallel_two_norms"
    # Grouped keys and values, or a norm per branch, need the new architecture.
    new = two_norms or kv not in (1, spec.n_heads)
    out: dict[str, Any] = {
        "hidden_size": spec.d_model,
        "num_hidden_layers": spec.n_layers,
        "num_attention_heads": spec.n_heads,
        "new_decoder_architecture": new,
        "multi_query": kv == 1,
        "parallel_attn": spec.residual != "pre",
        "bias": spec.attention.bias,
        "ffn_hidden_size": spec.d_ff,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "activation": EXPORT_ACTIVATIONS[spec.mlp.activation],
        "alibi": False,
        "rope_parameters": {
            k: v for k, v in rope_parameters(spec).items() if k != "partial_rotary_factor"
        },
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        **head_fields(spec),
    }
    if new:
        out["num_kv_heads"] = kv
        out["num_ln_in_parallel_attn"] = 2 if two_norms else 1
    return out


def _qkv(part: int) -> Target:
    return Target(
        "self_attention.query_key_value",
        "heads",
        part,
        3,
        note=f"{'qkv'[part]} rows of each key/value group",
    )


_ATTENTION = {
    "attn.q": _qkv(0),
    "attn.k": _qkv(1),
    "attn.v": _qkv(2),
    "attn.o": "self_attention.dense",
    "mlp.up": "mlp.dense_h_to_4h",
    "mlp.down": "mlp.dense_4h_to_h",
}
# One norm for both branches; a norm per branch (new architecture); a pre-norm block.
_NORMS = {
    "norm": "input_layernorm",
    "attn_norm": "input_layernorm",
    "mlp_norm": "post_attention_layernorm",
}
_TWO_NORMS = {"attn_norm": "ln_attn", "mlp_norm": "ln_mlp"}


def _block(w: Where) -> Target | str | None:
    norms = _TWO_NORMS if w.residual == "parallel_two_norms" else _NORMS
    return _ATTENTION.get(w.local) or norms.get(w.local)


FAMILY = Family(
    model_type="falcon",
    classes=(
        HFClass("FalconForCausalLM", "falcon", "lm", base=False),
        HFClass("FalconModel", "falcon", "none", base=True),
    ),
    bases=("_falcon",),
    import_config=import_falcon,
    export_config=export_falcon,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "word_embeddings"}), lm_head),
        stack=table({"final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=_block,
    ),
    buffers=ROPE_BUFFERS,
)
