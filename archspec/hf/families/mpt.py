"""MPT (`model_type: mpt`, MPT-7B and -30B): a pre-norm decoder with ALiBi, a fused q/k/v
(`Wqkv`, q then k then v), no linear biases, LayerNorms without bias (`no_bias`), an exact-GELU
MLP four times the width and a tied head.

transformers' MPT reads less of the config than MosaicML's code did: it always applies ALiBi
and builds the 4x MLP and the bias-free projections whatever `attn_config.alibi`,
`expansion_ratio`, `no_bias` or `attn_type` say, so other values there are refused (the
checkpoint would not be the model transformers computes). Its ALiBi slopes are MosaicML's, 2^(-k *
alibi_bias_max / n) for a power-of-two head count n, which is BLOOM's for alibi_bias_max 8;
other head counts take a different interleaving than BLOOM's and are refused.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields, as_number, harmless_anywhere, head_fields, read_head
from archspec.hf.dropouts import read_dropout, write_dropout
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, lm_head, table
from archspec.safety.text import shortened
from archspec.spec.schema import Spec

DROPOUTS = {"hidden": ("resid_pdrop", 0.0), "embedding": ("emb_pdrop", 0.0)}
# MptAttentionConfig's fields and defaults; those transformers' code never reads are harmless
# (attn_impl, attn_uses_sequence_id: kernels and packing), attn_pdrop is the attention's and
# the MLP output's dropout.
ATTN_DEFAULTS: dict[str, Any] = {
    "attn_type": "multihead_attention",
    "attn_pdrop": 0,
    "attn_impl": "torch",
    "clip_qkv": None,
    "softmax_scale": None,
    "prefix_lm": False,
    "qk_ln": False,
    "attn_uses_sequence_id": False,
    "alibi": True,
    "alibi_bias_max": 8,
}
# Fields transformers' MPT ignores, refused where the value would make the checkpoint a model
# other than the one transformers computes: (value transformers assumes, why).
ATTN_FIXED = {
    "attn_type": ("multihead_attention", "transformers' MPT builds multi-head attention"),
    "prefix_lm": (False, "transformers' MPT attends causally over the prefix too"),
    "qk_ln": (False, "transformers' MPT has no q/k LayerNorms"),
    "alibi": (True, "transformers' MPT always applies ALiBi"),
    "alibi_bias_max": (8, "archspec's ALiBi slopes are those of alibi_bias_max 8 (BLOOM's)"),
}


def _attn_config(f: Fields) -> dict[str, Any]:
    found = f.get("attn_config") or {}
    if not isinstance(found, dict):
        raise f.error("attn_config", f"expected a mapping, got {found!r}")
    # a sub-config transformers saved carries PretrainedConfig's own fields too
    saved = ("is_encoder_decoder", "is_decoder")
    found = {
        k: v
        for k, v in found.items()
        if k == "attn_pdrop" or not (harmless_anywhere(k) or k in saved)
    }
    unknown = sorted(map(str, set(found) - set(ATTN_DEFAULTS)))
    if unknown:
        listed = shortened(", ".join(unknown), 200)
        raise f.error("attn_config", f"attn_config field(s) not understood: {listed}")
    attn = {**ATTN_DEFAULTS, **found}
    for key, (value, why) in ATTN_FIXED.items():
        if attn[key] != value:
            raise f.error(
                "attn_config", f"attn_config.{key} = {attn[key]!r} is not supported: {why}"
            )
    return attn


def import_mpt(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map(
        {
            "num_attention_heads": "n_heads",
            "hidden_size": "d_model",
            "num_hidden_layers": "n_layers",
        }
    )
    attn = _attn_config(f)
    d = f.int("d_model", 2048)
    heads = f.count("n_heads", 16)
    if heads & (heads - 1):
        raise f.error(
            "n_heads",
            f"n_heads = {heads}: MPT's ALiBi slopes for a head count that is not a power of two "
            "interleave differently from BLOOM's, which archspec computes",
        )
    f.expect("no_bias", True, True, "transformers' MPT has no biases, norms' included")
    f.expect("expansion_ratio", 4, 4, "transformers' MPT builds an MLP 4 x d_model wide")
    f.expect("logit_scale", None, None, "transformers' MPT does not scale the logits")
    f.expect("embedding_fraction", (1, 1.0), 1.0, "transformers' MPT takes the embeddings whole")
    # Kernel and initialisation choices; learned_pos_emb: transformers' MPT has no position
    # table (ALiBi only), as the released checkpoints.
    f.harmless("norm_type", "init_device", "learned_pos_emb", "init_config", "verbose")
    attention: dict[str, Any] = {"bias": False, "scale_scores": True}
    at = "attn_config.{}".format
    if attn["softmax_scale"] is not None:
        attention["scale"] = as_number(f, at("softmax_scale"), attn["softmax_scale"], True)
    if attn["clip_qkv"]:
        attention["clip_qkv"] = as_number(f, at("clip_qkv"), attn["clip_qkv"], True)
    pdrop = as_number(f, at("attn_pdrop"), attn["attn_pdrop"])
    dropout = read_dropout(f, DROPOUTS) | {"attention": pdrop}
    return {
        "d_model": d,
        "n_layers": f.int("n_layers", 24),
        "n_heads": heads,
        "d_ff": 4 * d,
        "vocab_size": f.int("vocab_size", 50368),
        "max_seq_len": f.int("max_seq_len", 2048),
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": False, "eps": f.float("layer_norm_epsilon", 1e-5)},
        "position": {"kind": "alibi"},
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": attention,
        "mlp": {"gated": False, "activation": "gelu", "bias": False},
        "head": {**read_head(f, cls, True), "bias": False},
        "dropout": dropout,
    }


def export_mpt(spec: Spec) -> dict[str, Any]:
    attn: dict[str, Any] = {}
    if spec.dropout.attention:
        attn["attn_pdrop"] = spec.dropout.attention
    if spec.attention.scale is not None:
        attn["softmax_scale"] = spec.attention.scale
    if spec.attention.clip_qkv is not None:
        attn["clip_qkv"] = spec.attention.clip_qkv
    return {
        "d_model": spec.d_model,
        "n_layers": spec.n_layers,
        "n_heads": spec.n_heads,
        "vocab_size": spec.vocab_size,
        "max_seq_len": spec.max_seq_len,
        "layer_norm_epsilon": spec.norm.eps,
        "attn_config": attn,
        **write_dropout(spec, DROPOUTS),
        **head_fields(spec),
    }


def _qkv(part: int) -> Target:
    return Target("attn.Wqkv", "concat", part, 3, note=f"{'qkv'[part]} rows")


FAMILY = Family(
    model_type="mpt",
    classes=(
        HFClass("MptForCausalLM", "mpt", "lm", base=False),
        HFClass("MptModel", "mpt", "none", base=True),
    ),
    bases=("_mpt",),
    # MosaicML's own code, which the released files name (transformers runs its own class)
    class_aliases={"MPTForCausalLM": "MptForCausalLM"},
    import_config=import_mpt,
    export_config=export_mpt,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"final_norm": "norm_f"}),
        blocks=lambda role: "blocks",
        block=table(
            {
                "attn_norm": "norm_1",
                "attn.q": _qkv(0),
                "attn.k": _qkv(1),
                "attn.v": _qkv(2),
                "attn.o": "attn.out_proj",
                "mlp_norm": "norm_2",
                "mlp.up": "ffn.up_proj",
                "mlp.down": "ffn.down_proj",
            }
        ),
    ),
)
