"""DeepSeek-V3 (`model_type: deepseek_v3`, transformers 5's DeepseekV3ForCausalLM): DeepSeek-V2's
decoder (multi-head latent attention, `first_k_dense_replace` dense layers, then experts with
`n_shared_experts` shared ones) with the sigmoid router (`moe.router: sigmoid`).

As transformers computes it (modeling_deepseek_v3.py): the rotated parts turn as interleaved
channel pairs when `rope_interleave` (the default) and as rotate_half's halves otherwise, with
YaRN's frequencies and score scale (`mscale_all_dim`) as DeepSeek-V2's; the router
(DeepseekV3TopkRouter) scores every expert by a float32 sigmoid, chooses by the scores plus
`e_score_correction_bias` among the experts of the `topk_group` of `n_group` groups whose two
best biased scores sum highest, weighs by the unbiased scores, renormalised when
`norm_topk_prob`, times `routed_scaling_factor`. It reads no `topk_method` nor
`scoring_func`: the values it computes ("noaux_tc", "sigmoid") are the only ones accepted.

The checkpoints' multi-token-prediction module (`num_nextn_predict_layers`, DeepSeek-V3's
layer 61) is built by no transformers model class: archspec leaves it out too, reporting the
field as ignored (its tensors, in a checkpoint, are left unloaded by transformers).
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families.deepseek_v2 import (
    ATTENTION,
    CHECKPOINT_BLOCK,
    SHARED,
    latent_decoder,
    latent_fields,
    shared_experts,
)
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain
from archspec.spec.schema import Spec

MTP_READER = (
    "transformers' DeepseekV3 model classes (they build no multi-token-prediction layer, "
    "and leave its tensors unloaded)"
)


def _groups(f: Fields, experts: int, top_k: int) -> tuple[int, int]:
    """n_group and topk_group, checked as transformers' router needs them."""
    groups, top_groups = f.int("n_group", 8), f.int("topk_group", 4)
    if groups < 1 or experts % groups or experts // groups < 2:
        raise f.error(
            "n_group",
            f"{groups} groups of {experts} experts: transformers' router ranks each group by "
            "its two best experts, so n_group must divide n_routed_experts into groups of 2 "
            "or more",
        )
    if not 1 <= top_groups <= groups:
        raise f.error("topk_group", f"expected 1 to n_group ({groups}), got {top_groups}")
    if top_k > top_groups * (experts // groups):
        raise f.error(
            "num_experts_per_tok",
            f"{top_k} experts from {top_groups} groups of {experts // groups}",
        )
    return groups, top_groups


def _moe(f: Fields, n_layers: int) -> dict[str, Any] | None:
    f.expect("scoring_func", "sigmoid", "sigmoid", "transformers' DeepseekV3 scores by sigmoid")
    f.expect(
        "topk_method",
        "noaux_tc",
        "noaux_tc",
        "transformers' DeepseekV3 routes noaux_tc (sigmoid scores plus the bias correction)",
    )
    f.expect(
        "moe_layer_freq",
        1,
        1,
        "transformers' DeepseekV3 puts experts on every layer from first_k_dense_replace on",
    )
    f.harmless("aux_loss_alpha", "seq_aux", "output_router_logits")  # training losses only
    f.expect("ep_size", 1, 1, "expert parallelism of the original code")
    f.ignored("num_nextn_predict_layers", MTP_READER)
    f.ignored("num_mtp_layers", MTP_READER)
    dense = f.int("first_k_dense_replace", 3)
    if dense < 0:
        raise f.error("first_k_dense_replace", f"expected at least 0, got {dense}")
    experts = f.int("n_routed_experts", 256, "num_local_experts")
    top_k = f.int("num_experts_per_tok", 8)
    width = f.int("moe_intermediate_size", 2048)
    shared = f.int("n_shared_experts", 1)
    scale = f.float("routed_scaling_factor", 2.5)
    normalize = f.bool("norm_topk_prob", True)
    if dense >= n_layers:
        f.harmless("n_group", "topk_group")
        return None  # every layer dense: the expert fields are inert
    groups, top_groups = _groups(f, experts, top_k)
    if shared < 1:
        raise f.error("n_shared_experts", f"expected at least 1 shared expert, got {shared}")
    if scale <= 0:
        raise f.error("routed_scaling_factor", f"expected a positive number, got {scale}")
    return {
        "n_experts": experts,
        "top_k": top_k,
        "router": "sigmoid",
        "router_bias": False,
        "dense_layers": dense,
        "d_ff": width,
        "normalize": normalize,
        "shared_d_ff": shared * width,
        "shared_gate": False,
        "routed_scale": scale,
        # one group of all the experts chooses as no grouping does
        "groups": groups if groups > 1 else 1,
        "top_groups": top_groups if groups > 1 else 1,
    }


def import_deepseek_v3(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = latent_decoder(f, cls, interleaved=f.bool("rope_interleave", True))
    moe = _moe(f, spec["n_layers"])
    if moe is not None:
        spec["moe"] = moe
    return spec


def export_deepseek_v3(spec: Spec) -> dict[str, Any]:
    out = latent_fields(spec) | {"rope_interleave": spec.position.interleaved}
    moe = spec.moe
    if moe is None:
        return out | {"first_k_dense_replace": spec.n_layers}
    return out | {
        "first_k_dense_replace": moe.dense_layers,
        "n_routed_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "moe_intermediate_size": moe.d_ff or spec.d_ff,
        "n_shared_experts": shared_experts(spec),
        "routed_scaling_factor": moe.routed_scale,
        "norm_topk_prob": moe.normalize,
        "n_group": moe.groups,
        "topk_group": moe.top_groups,
    }


FAMILY = Family(
    model_type="deepseek_v3",
    classes=(
        HFClass("DeepseekV3ForCausalLM", "deepseek_v3", "lm", base=False),
        HFClass("DeepseekV3Model", "deepseek_v3", "none", base=True),
    ),
    bases=("_deepseek_v3",),
    import_config=import_deepseek_v3,
    export_config=export_deepseek_v3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        # transformers 5's memory: every layer's experts stacked (as Mixtral's).
        block_variants={"module": chain(SHARED, ATTENTION, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
