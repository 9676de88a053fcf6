"""RoFormer (`model_type: roformer`): BERT's post-norm encoder without a pooler or learned
positions, its queries and keys turned by RoPE on interleaved channel pairs (GPT-J's rotation:
sin and cos each repeated per pair, rotate_half as [-q[1::2], q[::2]]) at theta 10000 over
head_dim = hidden_size // num_attention_heads; embeddings `embedding_size` wide are projected
to `hidden_size` (`embeddings_project`) after their LayerNorm, as ELECTRA's.

transformers keeps the rotary sin/cos table as a frozen nn.Embedding (`encoder.embed_positions`,
max_position_embeddings x head_dim, sines then cosines), so it is in its state dict and among
its parameters (not trainable ones); archspec computes the angles, counts the trainable
parameters, and checks a checkpoint's table against theta 10000.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._bert_like import (
    BERT_LIKE_BUFFERS,
    BERT_MLM,
    CAUSAL,
    bert_like_names,
    bert_like_unsupported_heads,
    export_bert_like,
    import_bert_like,
)
from archspec.hf.family import Buffer, Family, HFClass, NameRules
from archspec.spec.schema import Spec

# RoFormerConfig's defaults where they differ from BertConfig's.
VOCAB = 50000
MAX_POSITIONS = 1536
# RoFormerSinusoidalPositionalEmbedding: pos / 10000 ** (2 * (j // 2) / head_dim), fixed.
THETA = 10000.0


def import_roformer(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect(
        "rotary_value",
        False,
        False,
        "RoFormer then turns the values by the rotary angles too, which a spec's RoPE "
        "(queries and keys only) cannot say",
    )
    d = f.int("hidden_size", 768)
    heads = f.count("num_attention_heads", 12)
    if d % heads:
        raise f.error(
            "num_attention_heads",
            f"hidden_size ({d}) is not a multiple of num_attention_heads ({heads}): RoFormer "
            "then builds heads of int(hidden_size / heads) channels, projections narrower "
            "than hidden_size, which a spec does not express",
        )
    width = f.get("embedding_size")
    spec = import_bert_like(
        f, cls, roberta=False, vocab_default=VOCAB, factorised=width not in (None, d)
    )
    rows = f.int("max_position_embeddings", MAX_POSITIONS)
    spec["max_seq_len"] = rows
    spec["position"] = {"kind": "rope", "theta": THETA, "interleaved": True}
    spec["head"]["pooler"] = False
    head_dim = d // heads
    f.notes.append(
        f"transformers keeps RoFormer's rotary sin/cos table as a frozen parameter, "
        f"{rows} x {head_dim} = {rows * head_dim:,} in num_parameters() but not trainable; "
        "archspec computes the angles and counts the trainable parameters"
    )
    return spec


def export_roformer(spec: Spec) -> dict[str, Any]:
    fields = export_bert_like(spec)
    fields["max_position_embeddings"] = spec.max_seq_len
    fields["embedding_size"] = spec.embedding_dim
    fields["rotary_value"] = False
    return fields


_BERT = bert_like_names("roformer.", BERT_MLM)
FAMILY = Family(
    model_type="roformer",
    classes=(
        HFClass("RoFormerModel", "roformer", "none", base=True),
        HFClass("RoFormerForMaskedLM", "roformer", "lm", base=False),
    ),
    bases=("_roformer",),
    import_config=import_roformer,
    export_config=export_roformer,
    names=NameRules(
        "roformer.",
        model=_BERT.model,
        stack=lambda w: "embeddings_project" if w.local == "emb_proj" else _BERT.stack(w),
        blocks=_BERT.blocks,
        block=_BERT.block,
    ),
    buffers=(
        *BERT_LIKE_BUFFERS,
        Buffer("encoder.embed_positions.weight", "rope_sinusoids"),
    ),
    unsupported_heads=bert_like_unsupported_heads(
        {"RoFormerForCausalLM": CAUSAL}, "RoFormerModel", "cls.*"
    ),
)
