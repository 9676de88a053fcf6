"""MiniMax-M2 (`model_type: minimax_m2`, MiniMaxAI/MiniMax-M2), as transformers'
modeling_minimax_m2.py computes it: LLaMA's pre-norm decoder whose attention normalises the
whole q and k projections, all heads together, before RoPE (FlexOlmoAttention's RMSNorms:
`attention.qk_norm_scope: all`), rotates the first `rotary_dim` channels of each head by
rotate_half's halves, and whose every MLP is a mixture of experts of width
`intermediate_size` with no shared expert, chosen by the sigmoid router (`moe.router:
sigmoid`: float32 sigmoid scores, `e_score_correction_bias` added for choosing only, one
group, the top-k scores renormalised, unscaled).

The released files keep the partial rotation as a legacy `rotary_dim`, which MiniMaxM2Config
reads as `partial_rotary_factor` = rotary_dim / head_dim when neither rope_parameters nor the
file gives a factor. They also describe, in fields no transformers code for this type reads,
what transformers' class computes whatever they say (`scoring_func`, `use_qk_norm`,
`qk_norm_type`, `use_routing_bias`, `shared_intermediate_size`, `attn_type_list`): only the
values it computes are accepted, as for DeepSeek-V3's `scoring_func`. Their
multi-token-prediction modules (`use_mtp`, ...) no transformers class builds: ignored.

Checkpoints keep Mixtral's names (`block_sparse_moe.experts.3.w1`) with the bias correction
on the MoE block (`block_sparse_moe.e_score_correction_bias`), not on its gate as DeepSeek's;
transformers 5 renames `block_sparse_moe` to `mlp` and stacks the experts in memory.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.families._rotary import rope_parameters
from archspec.hf.families.mixtral import CHECKPOINT_BLOCK as MIXTRAL_FILES
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.families.qwen3_moe import QK_NORMS
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

# MiniMaxM2Config's defaults. rotary_fraction is replaced per file (rotary_dim / head_dim;
# the class's own default rotates the whole head).
VARIANT = LlamaVariant(
    d_ff=1536,
    kv_heads=8,
    max_positions=196608,
    rms_eps=1e-6,
    vocab_size=200064,
    rotary_fraction=1.0,
    # an explicit null partial_rotary_factor outranks rotary_dim and sets no factor: all
    rotary_fraction_null=1.0,
    rope_theta=5000000.0,
)
# ... and those import_llama_like would otherwise take from LLaMA (head_dim is 128, not
# hidden_size / num_attention_heads).
DEFAULTS = {
    "hidden_size": 3072,
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "head_dim": 128,
}
EXPERTS, TOP_K = 256, 8

# Fields of the released files that transformers' class never reads, at the one value whose
# meaning is what it computes (key: (accepted, why)).
FIXED: dict[str, tuple[Any, str]] = {
    "scoring_func": ("sigmoid", "MiniMaxM2TopKRouter scores the experts by a sigmoid"),
    "use_routing_bias": (True, "MiniMaxM2SparseMoeBlock always adds e_score_correction_bias"),
    "use_qk_norm": (True, "MiniMaxM2Attention always normalises q and k"),
    "qk_norm_type": ("per_layer", "MiniMaxM2Attention normalises all heads' q and k at once"),
    "shared_intermediate_size": (0, "MiniMaxM2SparseMoeBlock has no shared expert"),
}
MTP = "transformers' minimax_m2 model classes (they build no multi-token-prediction module)"


def _fixed(f: Fields, n_layers: int) -> None:
    for key, (value, why) in FIXED.items():
        f.expect(key, value, value, why)
    # MiniMax-01's layer kinds: 0 lightning (linear) attention, 1 softmax attention
    types = f.get("attn_type_list")
    if types is not None and types != [1] * n_layers:
        raise f.error(
            "attn_type_list",
            f"expected {n_layers} 1s (softmax attention): transformers' MiniMaxM2 has no "
            "linear-attention layer",
        )
    for key in ("use_mtp", "num_mtp_modules", "mtp_transformer_layers"):
        f.ignored(key, MTP)
    # MiniMaxM2Model masks causally without a window, but transformers' DynamicCache would
    # keep only a window's keys: a window changes what generation sees, so only null is read.
    f.expect("sliding_window", None, None, "transformers' MiniMaxM2 attends without a window")


def _rotary_fraction(f: Fields) -> float:
    """MiniMaxM2Config's fallback partial_rotary_factor: rotary_dim / head_dim (1.0 without).
    A factor in rope_parameters or beside it outranks it (`setdefault`)."""
    f.refuse_null("head_dim", "MiniMaxM2Config")
    rotary_dim, head_dim = f.get("rotary_dim"), f.size("head_dim", 128)
    if rotary_dim is None:
        return 1.0
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
        raise f.error("rotary_dim", f"expected an integer or null, got {rotary_dim!r}")
    fraction = rotary_dim / head_dim
    given = [f.get(k) for k in ("rope_parameters", "rope_scaling")]
    decides = "partial_rotary_factor" not in f.data and not any(
        isinstance(d, dict) and "partial_rotary_factor" in d for d in given
    )
    rotated = int(head_dim * fraction)  # what transformers rotates
    if decides and (rotated % 2 or not 2 <= rotated <= head_dim):
        raise f.error(
            "rotary_dim",
            f"rotates {rotated} of head_dim {head_dim} channels: RoPE turns channel pairs, so "
            "archspec needs an even number of them, at least 2 and at most head_dim",
        )
    return fraction


def import_minimax_m2(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    f.harmless("router_jitter_noise")  # applied in training only
    variant = replace(VARIANT, rotary_fraction=_rotary_fraction(f))
    spec = import_llama_like(f, cls, variant)
    _fixed(f, spec["n_layers"])
    spec["attention"] = {**spec["attention"], "qk_norm": True, "qk_norm_scope": "all"}
    spec["moe"] = {
        "n_experts": f.int("num_local_experts", EXPERTS, "num_experts"),
        "top_k": f.int("num_experts_per_tok", TOP_K),
        "router": "sigmoid",
        "router_bias": False,
        "normalize": True,
    }
    return spec


def export_minimax_m2(spec: Spec) -> dict[str, Any]:
    moe, attention = spec.moe, spec.attention
    if (
        moe is None
        or (moe.router, moe.normalize, moe.routed_scale, moe.groups) != ("sigmoid", True, 1.0, 1)
        or moe.shared_d_ff
        or moe.dense_layers
        or (moe.d_ff or spec.d_ff) != spec.d_ff
        or (attention.qk_norm, attention.qk_norm_scope) != (True, "all")
        or attention.bias
        or spec.position.interleaved
    ):
        raise SpecError(
            "MiniMaxM2ForCausalLM has bias-free attention with q/k norms over all heads, "
            "rotate_half's RoPE, and in every layer intermediate_size-wide experts chosen by "
            "the sigmoid router, renormalised, unscaled, ungrouped, without a shared expert"
        )
    parameters = rope_parameters(spec)
    fraction = parameters["partial_rotary_factor"]
    return {
        **export_llama_like(spec),
        "rope_parameters": parameters,
        "rotary_dim": spec.position.rotary_dim or spec.resolved_head_dim,
        "partial_rotary_factor": fraction,
        "num_local_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "router_jitter_noise": 0.0,
    }


# The router's weight is its gate's; its bias correction sits on the MoE block.
def _router(block: str) -> Target:
    return Target(
        block,
        params={"weight": "gate.weight", "e_score_correction_bias": "e_score_correction_bias"},
    )


FAMILY = Family(
    model_type="minimax_m2",
    classes=(
        HFClass("MiniMaxM2ForCausalLM", "minimax_m2", "lm", base=False),
        HFClass("MiniMaxM2Model", "minimax_m2", "none", base=True),
    ),
    bases=("_minimax_m2",),
    import_config=import_minimax_m2,
    export_config=export_minimax_m2,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        # As the checkpoint files store it: Mixtral's one module per expert.
        block=chain(table({"moe.router": _router("block_sparse_moe")}), QK_NORMS, MIXTRAL_FILES),
        # transformers 5's memory: every layer's experts stacked.
        block_variants={
            "module": chain(table({"moe.router": _router("mlp")}), QK_NORMS, MODULE_BLOCK)
        },
    ),
    buffers=ROPE_BUFFERS,
)
