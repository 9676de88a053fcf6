"""Each family's vocabulary: what transformers calls each of our modules.

`attn.q` is `attention.self.query` in BERT and `self_attn.q_proj` in LLaMA. A family says so at
three levels (the model, a stack, a block), as a plain rename or as a `Target` that also names
the operation between the tensors (GPT-2's Conv1D transpose, a fused query/key/value
projection, Mixtral's stacked experts, a tied copy). `names.py` walks the IR with this
vocabulary; nothing here needs torch, so `count --names hf` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """The transformers module (or tensor) that holds one module of ours."""

    module: str  # path relative to the base model (or to the whole model when `outside`)
    kind: str = "copy"  # copy | conv1d | fused | heads | experts
    part: int = 0  # which slice of a fused tensor
    parts: int = 1  # slices in the fused tensor
    outside: bool = False  # outside the base model (the LM head), so never prefixed
    params: dict[str, str] | None = None  # our param -> transformers tensor name (experts)
    aliases: tuple[str, ...] = ()  # modules that hold the same tensor (tied embeddings)
    note: str = ""  # shown by `count --names hf`


@dataclass(frozen=True)
class Where:
    """Where a module sits: stack role, block index and what its block contains."""

    role: str | None  # encoder | decoder | None (model level)
    index: str | None  # block index: a digit or an index letter (i, j, ...)
    local: str  # path inside the block (or stack, or model) with expert indices as '*'
    experts: tuple[str, ...]  # the expert indices replaced by '*'
    cross: bool  # the block has cross-attention
    gated: bool  # the block's MLP is gated
    roles: tuple[str, ...]  # the stacks of the model


Lookup = Callable[[Where], "Target | str | None"]


@dataclass(frozen=True)
class Family:
    """One family's vocabulary. Names are relative to the base model. (The buffers some
    checkpoints carry are listed with their checks in `tensor_rules.py`: checking needs torch.)
    """

    model_type: str
    prefix: str  # the base model's attribute in head classes, with a dot ("transformer.")
    model: Lookup  # tok_emb, type_emb, pooler, lm_head
    stack: Lookup  # pos_emb, emb_norm, final_norm
    blocks: Callable[[str], str]  # role -> the block list ("encoder.layer")
    block: Lookup  # attn.q, attn_norm, mlp.up, ...
    # The layouts a state dict may come in: Mixtral's files differ from its in-memory module.
    variants: tuple[str, ...] = ("checkpoint",)


def _table(entries: dict[str, Target | str]) -> Lookup:
    return lambda w: entries.get(w.local)


def _lm_head(w: Where) -> Target | None:
    return Target("lm_head", outside=True) if w.local == "lm_head" else None


def _chain(*lookups: Lookup) -> Lookup:
    def find(w: Where) -> Target | str | None:
        for lookup in lookups:
            found = lookup(w)
            if found is not None:
                return found
        return None

    return find


# BERT and RoBERTa share their names (RobertaModel is a BertModel with other embeddings).
_BERT_BLOCK = _table(
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
)


def _bert(model_type: str, prefix: str) -> Family:
    return Family(
        model_type,
        prefix,
        model=_table(
            {
                "tok_emb": "embeddings.word_embeddings",
                "type_emb": "embeddings.token_type_embeddings",
                "pooler": "pooler.dense",
            }
        ),
        stack=_table(
            {"pos_emb": "embeddings.position_embeddings", "emb_norm": "embeddings.LayerNorm"}
        ),
        blocks=lambda role: "encoder.layer",
        block=_BERT_BLOCK,
    )


def _conv1d_block(attn_norm: str, mlp_norm: str) -> Lookup:
    """GPT-2 and GPT-1: Conv1D layers (weights stored transposed), one fused q/k/v."""
    return _table(
        {
            "attn_norm": attn_norm,
            "attn.q": Target("attn.c_attn", "fused", 0, 3, note="q slice, Conv1D"),
            "attn.k": Target("attn.c_attn", "fused", 1, 3, note="k slice, Conv1D"),
            "attn.v": Target("attn.c_attn", "fused", 2, 3, note="v slice, Conv1D"),
            "attn.o": Target("attn.c_proj", "conv1d", note="Conv1D"),
            "mlp_norm": mlp_norm,
            "mlp.up": Target("mlp.c_fc", "conv1d", note="Conv1D"),
            "mlp.down": Target("mlp.c_proj", "conv1d", note="Conv1D"),
        }
    )


def _t5_block(w: Where) -> Target | str | None:
    ff = 2 if w.cross else 1  # layer.0 self-attention, [layer.1 cross-attention], feed-forward
    names = {
        "attn_norm": "layer.0.layer_norm",
        "attn.rel_bias": "layer.0.SelfAttention.relative_attention_bias",
        "cross_norm": "layer.1.layer_norm",
        "mlp_norm": f"layer.{ff}.layer_norm",
        "mlp.gate": f"layer.{ff}.DenseReluDense.wi_0",
        "mlp.up": f"layer.{ff}.DenseReluDense.{'wi_1' if w.gated else 'wi'}",
        "mlp.down": f"layer.{ff}.DenseReluDense.wo",
    }
    for p in "qkvo":
        names[f"attn.{p}"] = f"layer.0.SelfAttention.{p}"
        names[f"cross_attn.{p}"] = f"layer.1.EncDecAttention.{p}"
    return names.get(w.local)


def _shared_embedding(w: Where) -> Target | None:
    """T5 and BART: `shared`, which each stack's `embed_tokens` ties to."""
    if w.local != "tok_emb":
        return None
    return Target("shared", aliases=tuple(f"{r}.embed_tokens" for r in w.roles))


def _bart_block(w: Where) -> str | None:
    names = {
        "attn_norm": "self_attn_layer_norm",
        "cross_norm": "encoder_attn_layer_norm",
        "mlp.up": "fc1",
        "mlp.down": "fc2",
        "mlp_norm": "final_layer_norm",
    }
    for ours, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
        names[f"attn.{ours}"] = f"self_attn.{theirs}"
        names[f"cross_attn.{ours}"] = f"encoder_attn.{theirs}"
    return names.get(w.local)


_LLAMA_BLOCK = _table(
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
        # Mixtral, as its checkpoints store it (transformers 5 renames on load, back on save).
        "moe.router": "block_sparse_moe.gate",
        "moe.experts.*.gate": "block_sparse_moe.experts.*.w1",
        "moe.experts.*.up": "block_sparse_moe.experts.*.w3",
        "moe.experts.*.down": "block_sparse_moe.experts.*.w2",
    }
)


def mixtral_module_block(w: Where) -> Target | str | None:
    """Mixtral as transformers 5 holds it in memory: all experts of a layer in two tensors."""
    names: dict[str, Target | str] = {
        "moe.router": "mlp.gate",
        "moe.experts.*.gate": Target(
            "mlp.experts",
            "experts",
            0,
            2,
            params={"weight": "gate_up_proj"},
            note="gate half, experts stacked",
        ),
        "moe.experts.*.up": Target(
            "mlp.experts",
            "experts",
            1,
            2,
            params={"weight": "gate_up_proj"},
            note="up half, experts stacked",
        ),
        "moe.experts.*.down": Target(
            "mlp.experts",
            "experts",
            0,
            1,
            params={"weight": "down_proj"},
            note="experts stacked",
        ),
    }
    return names.get(w.local) or _LLAMA_BLOCK(w)


def _llama(model_type: str) -> Family:
    return Family(
        model_type,
        "model.",
        model=_chain(_table({"tok_emb": "embed_tokens"}), _lm_head),
        stack=_table({"final_norm": "norm"}),
        blocks=lambda role: "layers",
        block=_LLAMA_BLOCK,
        variants=("checkpoint", "module") if model_type == "mixtral" else ("checkpoint",),
    )


FAMILIES: dict[str, Family] = {
    "bert": _bert("bert", "bert."),
    "roberta": _bert("roberta", "roberta."),
    "gpt2": Family(
        "gpt2",
        "transformer.",
        model=_chain(_table({"tok_emb": "wte"}), _lm_head),
        stack=_table({"pos_emb": "wpe", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=_conv1d_block("ln_1", "ln_2"),
    ),
    "openai-gpt": Family(
        "openai-gpt",
        "transformer.",
        model=_chain(_table({"tok_emb": "tokens_embed"}), _lm_head),
        stack=_table({"pos_emb": "positions_embed"}),
        blocks=lambda role: "h",
        block=_conv1d_block("ln_1", "ln_2"),  # post-norm: ln_1 after attention, ln_2 after MLP
    ),
    "t5": Family(
        "t5",
        "",
        model=_chain(_shared_embedding, _lm_head),
        stack=lambda w: {"final_norm": f"{w.role}.final_layer_norm"}.get(w.local),
        blocks=lambda role: f"{role}.block",
        block=_t5_block,
    ),
    "bart": Family(
        "bart",
        "model.",
        model=_chain(_shared_embedding, _lm_head),
        stack=lambda w: {
            "pos_emb": f"{w.role}.embed_positions",
            "emb_norm": f"{w.role}.layernorm_embedding",
        }.get(w.local),
        blocks=lambda role: f"{role}.layers",
        block=_bart_block,
    ),
    "llama": _llama("llama"),
    "mistral": _llama("mistral"),
    "mixtral": _llama("mixtral"),
    "bloom": Family(
        "bloom",
        "transformer.",
        model=_chain(_table({"tok_emb": "word_embeddings"}), _lm_head),
        stack=_table({"emb_norm": "word_embeddings_layernorm", "final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=_table(
            {
                "attn_norm": "input_layernorm",
                "attn.q": Target(
                    "self_attention.query_key_value",
                    "heads",
                    0,
                    3,
                    note="q slice, interleaved per head",
                ),
                "attn.k": Target(
                    "self_attention.query_key_value",
                    "heads",
                    1,
                    3,
                    note="k slice, interleaved per head",
                ),
                "attn.v": Target(
                    "self_attention.query_key_value",
                    "heads",
                    2,
                    3,
                    note="v slice, interleaved per head",
                ),
                "attn.o": "self_attention.dense",
                "mlp_norm": "post_attention_layernorm",
                "mlp.up": "mlp.dense_h_to_4h",
                "mlp.down": "mlp.dense_4h_to_h",
            }
        ),
    ),
    "opt": Family(
        "opt",
        "model.",
        model=_chain(_table({"tok_emb": "decoder.embed_tokens"}), _lm_head),
        stack=_table(
            {"pos_emb": "decoder.embed_positions", "final_norm": "decoder.final_layer_norm"}
        ),
        blocks=lambda role: "decoder.layers",
        block=_bart_block,
    ),
}
