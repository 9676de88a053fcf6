"""DBRX (`model_type: dbrx`, databricks/dbrx-base and -instruct): a pre-norm decoder with
LayerNorms without bias (torch's eps 1e-5, no config field), one fused bias-free `Wqkv` (q
rows, then k, then v, grouped-query), its output clamped to ±`clip_qkv` (the clamp of each of
q, k and v: `attention.clip_qkv`), RoPE, and in every layer a mixture of SwiGLU experts: a
softmax over the router's logits, the top_k kept and divided by their p-norm with p =
`moe_normalize_expert_weights` (1, the sum: `moe.normalize`; null: none).

The config nests its settings in `attn_config` and `ffn_config` (sub-configs that transformers
4.x saved with PretrainedConfig's own fields in them). transformers 5 takes RoPE's base from
the top level (`rope_parameters`, default 10,000) and ignores `attn_config.rope_theta`, where
the released files keep theirs (500,000): a file whose two bases differ is refused, since the
checkpoint would not be the model transformers computes. DbrxAttention still reads
`attn_config.rope_theta` (without it transformers 5 cannot build the model), so the exporter
writes both, equal. Without a `clip_qkv`, transformers 5's DbrxAttention calls
clamp(None, None), which torch refuses: archspec imports such a file without a clamp, as
transformers 4.x computed it.

The experts of a layer are three 2-D tensors, each expert's rows after the last
(`ffn.experts.mlp.w1` the gates, `v1` the ups, `w2` the downs stored (in, out)), in files and
in memory alike. The router computes its softmax and the 1-norm in the logits' dtype, not in
float32 as Mixtral's does: `moe.router: softmax_in_dtype`.
"""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import EXPORT_ACTIVATIONS, Fields, as_number, harmless_anywhere
from archspec.hf.families._llama_like import _rope, position_parameters
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, lm_head, table
from archspec.safety.text import shortened
from archspec.spec.schema import Spec

# What transformers 4.x wrote into a sub-config besides its own fields; none reaches the model.
_SAVED = {
    "is_encoder_decoder", "is_decoder", "add_cross_attention", "cross_attention_hidden_size",
    "tie_encoder_decoder", "tie_word_embeddings", "pruned_heads",
}  # fmt: skip
ATTN_FIELDS = {"attn_pdrop", "clip_qkv", "kv_n_heads", "rope_theta"}
FFN_FIELDS = {
    "hidden_size", "ffn_act_fn", "ffn_hidden_size", "moe_num_experts", "moe_top_k",
    "moe_jitter_eps", "moe_loss_weight", "moe_normalize_expert_weights",
    "uniform_expert_assignment",
}  # fmt: skip


class _Section(Fields):
    """One nested sub-config (`attn_config`, `ffn_config`), its errors naming `section.key`."""

    def __init__(self, f: Fields, name: str, known: set[str]) -> None:
        found = f.get(name)  # null: the sub-config class's defaults, as DbrxConfig does
        if found is None:
            found = {}
        if not isinstance(found, dict):
            raise f.error(name, f"expected a mapping, got {found!r}")
        super().__init__(found, f.where, f.model_type)
        self.name = name
        unknown = sorted(str(k) for k in found if k not in known and not self._saved(k))
        if unknown:
            listed = shortened(", ".join(unknown), 200)
            raise self.error(unknown[0], f"{name} field(s) not understood: {listed}")

    @staticmethod
    def _saved(key: str) -> bool:
        return key in _SAVED or (harmless_anywhere(key) and "pdrop" not in str(key))

    def error(self, key: str | None, message: str, hint: str | None = None) -> SpecError:
        return super().error(f"{self.name}.{key}" if key else self.name, message, hint)


def _normalize(ffn: _Section) -> bool:
    """moe_normalize_expert_weights: the p of the p-norm dividing the top_k weights."""
    if ffn.is_null("moe_normalize_expert_weights"):
        ffn.harmless("moe_normalize_expert_weights")
        return False  # DbrxFFN keeps None: the weights are not renormalised
    p = ffn.float("moe_normalize_expert_weights", 1.0)
    if p != 1.0:
        raise ffn.error(
            "moe_normalize_expert_weights",
            f"a {p:g}-norm: archspec renormalises the top_k weights by their sum (p = 1) or not "
            "at all (null)",
        )
    return True


def _activation(ffn: _Section) -> str:
    act = ffn.get("ffn_act_fn") or {"name": "silu"}
    if not isinstance(act, dict) or set(act) - {"name"}:
        # DbrxExpertGLU reads the name alone: other settings (approximate=...) would be lost
        raise ffn.error("ffn_act_fn", f"expected {{'name': ...}} alone, got {act!r}")
    return Fields({"name": act.get("name", "silu")}, ffn.where, ffn.model_type).activation(
        "name", "silu"
    )


def import_dbrx(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map(
        {
            "num_attention_heads": "n_heads",
            "hidden_size": "d_model",
            "num_hidden_layers": "n_layers",
            "max_position_embeddings": "max_seq_len",
        }
    )
    attn = _Section(f, "attn_config", ATTN_FIELDS)
    ffn = _Section(f, "ffn_config", FFN_FIELDS)
    d = f.int("d_model", 2048)
    heads = f.count("n_heads", 16)
    if d % heads:
        raise f.error("n_heads", f"{heads} heads do not divide d_model {d} (DBRX's Wqkv splits it)")
    kv = attn.count("kv_n_heads", 1)
    if heads % kv:
        raise attn.error("kv_n_heads", f"{kv} key/value heads do not divide the {heads} heads")
    max_pos = f.int("max_seq_len", 2048)
    position = _rope(f, 10000.0, max_pos)
    theta = attn.get("rope_theta")
    if theta is not None and as_number(attn, "rope_theta", theta) != position["theta"]:
        raise attn.error(
            "rope_theta",
            f"{theta:g}, which transformers 5 ignores: DbrxModel rotates by rope_parameters' "
            f"base, here {position['theta']:g}",
            hint=f'add "rope_parameters": {{"rope_type": "default", "rope_theta": {theta:g}}} '
            "to rotate as the checkpoint was trained",
        )
    clip = attn.get("clip_qkv")
    if clip is not None:
        clip = attn.float("clip_qkv", None)
        if clip <= 0:
            raise attn.error("clip_qkv", f"{clip:g}: a clamp to ±clip_qkv needs a positive bound")
    # DbrxConfig overwrites these two with kv_n_heads and d_model: any value builds the same.
    f.ignored("num_key_value_heads", "DbrxConfig (it sets it to attn_config.kv_n_heads)")
    ffn.harmless("hidden_size")  # DbrxConfig sets it to d_model
    f.expect("tie_word_embeddings", False, False, "DbrxConfig refuses tied embeddings")
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    ffn.harmless("moe_jitter_eps", "moe_loss_weight")  # training-time noise and loss only
    ffn.expect("uniform_expert_assignment", False, False, "transformers' DBRX routes by the router")
    return {
        "d_model": d,
        "n_layers": f.int("n_layers", 24),
        "n_heads": heads,
        "n_kv_heads": kv if kv != heads else None,
        "d_ff": ffn.int("ffn_hidden_size", 3584),
        "vocab_size": f.int("vocab_size", 32000),
        "max_seq_len": max_pos,
        "layout": "decoder",
        "residual": "pre",
        "final_norm": True,
        "norm": {"kind": "layernorm", "bias": False, "eps": 1e-5},
        "position": position,
        "embedding": {"token_types": 0, "norm": False, "scale": False},
        "attention": {"bias": False, "scale_scores": True, "clip_qkv": clip},
        "mlp": {"gated": True, "activation": _activation(ffn), "bias": False},
        "moe": {
            "n_experts": ffn.int("moe_num_experts", 4),
            "top_k": ffn.int("moe_top_k", 1),
            "router": "softmax_in_dtype",
            "router_bias": False,
            "normalize": _normalize(ffn),
        },
        "head": {"lm_head": cls.head == "lm", "pooler": False, "tied": False, "bias": False},
        # emb_pdrop: DbrxModel never applies it (a dropout, harmless by name)
        "dropout": {
            "attention": attn.float("attn_pdrop", 0.0),
            "hidden": f.float("resid_pdrop", 0.0),
            "embedding": 0.0,
            "mlp": 0.0,
            "output": 0.0,
        },
    }


def export_dbrx(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if (moe is None or moe.shared_d_ff or moe.dense_layers or moe.router != "softmax_in_dtype"
            or (moe.d_ff or spec.d_ff) != spec.d_ff):  # fmt: skip
        raise SpecError(
            "DbrxForCausalLM has, in every layer, experts of width ffn_hidden_size and no "
            "shared expert, routed by a softmax in the logits' dtype: the spec needs "
            "moe.router: softmax_in_dtype"
        )
    return {
        "d_model": spec.d_model,
        "n_heads": spec.n_heads,
        "n_layers": spec.n_layers,
        "max_seq_len": spec.max_seq_len,
        "vocab_size": spec.vocab_size,
        "resid_pdrop": spec.dropout.hidden,
        "attn_config": {
            "kv_n_heads": spec.n_kv_heads or spec.n_heads,
            "clip_qkv": spec.attention.clip_qkv,
            "attn_pdrop": spec.dropout.attention,
            "rope_theta": spec.position.theta,
        },
        "ffn_config": {
            "ffn_hidden_size": spec.d_ff,
            "moe_num_experts": moe.n_experts,
            "moe_top_k": moe.top_k,
            "moe_normalize_expert_weights": 1.0 if moe.normalize else None,
            "ffn_act_fn": {"name": EXPORT_ACTIVATIONS[spec.mlp.activation]},
        },
        "rope_parameters": position_parameters(spec.position),
        "tie_word_embeddings": False,
    }


def _qkv(part: int) -> Target:
    return Target("norm_attn_norm.attn.Wqkv", "concat", part, 3, note=f"{'qkv'[part]} rows")


def _experts(tensor: str, note: str, transposed: bool = False) -> Target:
    return Target(
        "ffn.experts.mlp",
        "experts",
        params={"weight": tensor},
        transposed=transposed,
        flat=True,
        note=note,
    )


BLOCK = table(
    {
        "attn_norm": "norm_attn_norm.norm_1",
        "attn.q": _qkv(0),
        "attn.k": _qkv(1),
        "attn.v": _qkv(2),
        "attn.o": "norm_attn_norm.attn.out_proj",
        "mlp_norm": "norm_attn_norm.norm_2",
        "moe.router": "ffn.router.layer",
        "moe.experts.*.gate": _experts("w1", "gates, experts' rows one after another"),
        "moe.experts.*.up": _experts("v1", "ups, experts' rows one after another"),
        "moe.experts.*.down": _experts("w2", "downs stored (in, out), one after another", True),
    }
)

FAMILY = Family(
    model_type="dbrx",
    classes=(
        HFClass("DbrxForCausalLM", "dbrx", "lm", base=False),
        HFClass("DbrxModel", "dbrx", "none", base=True),
    ),
    bases=("_dbrx",),
    import_config=import_dbrx,
    export_config=export_dbrx,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"final_norm": "norm_f"}),
        blocks=lambda role: "blocks",
        block=BLOCK,
    ),
)
