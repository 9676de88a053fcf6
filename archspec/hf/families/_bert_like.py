"""What BERT and RoBERTa share: RobertaModel is a BertModel with other position numbering.

The two differ in their defaults, their base model's attribute (`bert.` / `roberta.`) and
RoBERTa's positions, which start after the padding index; the rest is built here once.
"""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Buffer, HFClass, NameRules, Target, UnsupportedHeads
from archspec.hf.name_rules import table
from archspec.spec.schema import Spec

# BertConfig's defaults; ALBERT and ELECTRA have other ones for the same fields.
BERT_DEFAULTS = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
}


def _token_types(f: Fields) -> int:
    """type_vocab_size. Zero is refused: these classes build the token-type table whatever
    its size, and an empty one fails in their forward (index_select on no rows)."""
    types = f.int("type_vocab_size", 2)
    if types == 0:
        raise f.error(
            "type_vocab_size",
            "0: transformers builds an empty token-type table and cannot run the model",
            hint="1 is one token type (RoBERTa's)",
        )
    return types


def import_bert_like(
    f: Fields,
    cls: HFClass,
    roberta: bool,
    vocab_default: int | None = None,
    defaults: dict[str, Any] = BERT_DEFAULTS,
    places: dropouts.Places = dropouts.BERT,
    factorised: bool = False,
    separate_bias: bool = True,
) -> dict[str, Any]:
    """The spec of a BERT-like encoder; with `factorised`, `embedding_size` (default 128, as
    ALBERT and ELECTRA have it) is the embeddings' width. `separate_bias`: the masked-LM head
    keeps an output bias of its own beside its decoder's, so untied it has two."""
    f.expect("position_embedding_type", ("absolute",), "absolute", "only absolute positions")
    f.expect("is_decoder", False, False, "a causal BERT")
    d = f.int("hidden_size", defaults["hidden_size"])
    if factorised:
        width = f.int("embedding_size", 128)
    else:
        f.expect("embedding_size", (None, d), None, "factorised embeddings")
        width = d
    max_pos = f.int("max_position_embeddings", 512)
    offset = 0
    if roberta:
        # RoBERTa numbers positions after the padding index: position ids start at pad + 1.
        offset = f.int("pad_token_id", 1) + 1
        f.notes.append(
            f"RoBERTa numbers positions from pad_token_id + 1 = {offset}; they equal "
            "transformers' for right-padded batches whose text holds no pad_token_id "
            "(transformers skips every such token, archspec only the masked ones)"
        )
    spec: dict[str, Any] = {
        "d_model": d,
        "n_layers": f.int("num_hidden_layers", defaults["num_hidden_layers"]),
        "n_heads": f.count("num_attention_heads", defaults["num_attention_heads"]),
        "d_ff": f.int("intermediate_size", defaults["intermediate_size"]),
        "vocab_size": f.int("vocab_size", vocab_default or (50265 if roberta else 30522)),
        "max_seq_len": max_pos - offset,
        "layout": "encoder",
        "residual": "post",
        "norm": {"kind": "layernorm", "bias": True, "eps": f.float("layer_norm_eps", 1e-12)},
        "position": {"kind": "learned", "offset": offset},
        "embedding": {
            "token_types": _token_types(f),
            "norm": True,
            "scale": False,
            "dim": None if width == d else width,
        },
        "attention": {"bias": True, "scale_scores": True},
        "mlp": {
            "gated": False,
            "activation": f.activation("hidden_act", defaults["hidden_act"]),
            "bias": True,
        },
        "head": read_head(f, cls, True),
        "dropout": read_dropout(f, places),
    }
    if cls.head == "lm":  # the masked-LM classes: transform, then a projection with a bias
        # BERT's head holds its output bias beside its decoder's (one tensor while tied);
        # ELECTRA's generator head has the decoder's alone (`separate_bias` False).
        if not spec["head"]["tied"] and separate_bias:
            raise f.error(
                "tie_word_embeddings",
                "false on a masked-LM head: transformers 5 then keeps the output bias twice "
                "(the head's `bias` and its decoder's, no longer one tensor), a head archspec "
                "does not build",
            )
        spec["head"] |= {"transform": True, "bias": True, "pooler": False}
        if roberta and spec["mlp"]["activation"] != "gelu":
            spec["head"]["transform_activation"] = "gelu"  # RobertaLMHead calls gelu itself
    return spec


def export_bert_like(spec: Spec, places: dropouts.Places = dropouts.BERT) -> dict[str, Any]:
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
        "hidden_act": EXPORT_ACTIVATIONS[spec.mlp.activation],
        **write_dropout(spec, places),
    }
    if spec.family == "roberta" or offset:
        fields["pad_token_id"] = offset - 1  # RoBERTa numbers positions from pad + 1
    if spec.head.lm_head:
        fields["tie_word_embeddings"] = spec.head.tied
    return fields


def mlm_head(transform: str, norm: str, head: str, bias: str | None) -> dict[str, Target]:
    """A masked-LM head's names (outside the base model): the transform's dense and norm, and
    the projection; with `bias`, the projection's bias is a parameter of `bias`'s module
    (BERT's `cls.predictions.bias`), which transformers also registers as `decoder.bias`."""
    if bias is None:
        projection = Target(head, outside=True)
    else:
        projection = Target(
            bias,
            outside=True,
            params={"weight": head.removeprefix(bias + ".") + ".weight"},
            aliases=(head,),
        )
    return {
        "lm_transform": Target(transform, outside=True),
        "lm_norm": Target(norm, outside=True),
        "lm_head": projection,
    }


BERT_MLM = mlm_head(
    "cls.predictions.transform.dense",
    "cls.predictions.transform.LayerNorm",
    "cls.predictions.decoder",
    "cls.predictions",
)
ROBERTA_MLM = mlm_head("lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", "lm_head")


def bert_like_names(prefix: str, mlm: dict[str, Target] | None = None) -> NameRules:
    return NameRules(
        prefix,
        model=table(
            {
                "tok_emb": "embeddings.word_embeddings",
                "type_emb": "embeddings.token_type_embeddings",
                "pooler": "pooler.dense",
                **(mlm or {}),
            }
        ),
        stack=table(
            {"pos_emb": "embeddings.position_embeddings", "emb_norm": "embeddings.LayerNorm"}
        ),
        blocks=lambda role: "encoder.layer",
        block=table(
            {
                "attn.q": "attention.self.query",
                "attn.k": "attention.self.key",
                "attn.v": "attention.self.value",
                "attn.o": "attention.output.dense",
                "attn_norm": "attention.output.LayerNorm",
                "mlp.up": "intermediate.dense",
                "mlp.down": "output.dense",
                "mlp_norm": "output.LayerNorm",
            }
        ),
    )


# Some checkpoints store the position ids (0, 1, 2, ...) and the all-zero token type ids.
BERT_LIKE_BUFFERS = (
    Buffer("embeddings.position_ids", "arange"),
    Buffer("embeddings.token_type_ids", "zeros"),
)


# What the spec language lacks for the heads refused (the masked-LM head itself, a dense +
# LayerNorm transform before the vocabulary, is `head.transform`).
PRETRAINING = "a classifier over the pooled output beside the masked-LM head: {}"
CAUSAL = "the encoder run as a causal decoder (is_decoder), which a BERT-like import lacks"


def bert_like_unsupported_heads(
    what: dict[str, str], instead: str, *weights: str
) -> UnsupportedHeads:
    return UnsupportedHeads(tuple(what), what=what, instead=instead, weights=weights)
