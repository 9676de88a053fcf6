"""The mixtures of experts that transformers routes as DeepseekV3TopkRouter does (DeepSeek-V3,
GLM-4-MoE, dots1): `first_k_dense_replace` dense layers, then `n_routed_experts` experts of
width `moe_intermediate_size` chosen by the sigmoid router (`moe.router: sigmoid`: sigmoid
scores, `e_score_correction_bias` for choosing only, the `topk_group` of `n_group` groups
ranked by their two best), renormalised when `norm_topk_prob`, times
`routed_scaling_factor`, beside `n_shared_experts` shared ones every token goes through.

The checkpoints' multi-token-prediction layers (`num_nextn_predict_layers`) are built by no
transformers model class of these types (their tensors are left unloaded): archspec leaves
them out too, reporting the field as ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, shown
from archspec.spec.schema import Spec


@dataclass(frozen=True)
class ExpertDefaults:
    """A config class's defaults for the expert fields (None: it has none, a file must say)."""

    dense: int
    experts: int | None
    top_k: int | None
    width: int
    shared: int | None
    scale: float
    normalize: bool
    groups: int
    top_groups: int


@dataclass(frozen=True)
class ExpertKeys:
    """The config fields a family names its experts by (DeepSeek's unless it says)."""

    experts: str = "n_routed_experts"
    shared: str = "n_shared_experts"
    scale: str = "routed_scaling_factor"
    experts_aliases: tuple[str, ...] = ("num_local_experts",)
    # False / None: the config class has no such field (one group of all experts; always
    # renormalised), and a file's n_group / norm_topk_prob are left unread, reported ignored.
    groups: bool = True
    normalize: str | None = "norm_topk_prob"


DEEPSEEK_KEYS = ExpertKeys()


def _groups(f: Fields, d: ExpertDefaults, experts: int, top_k: int) -> tuple[int, int]:
    """n_group and topk_group, checked as transformers' router needs them."""
    groups, top_groups = f.int("n_group", d.groups), f.int("topk_group", d.top_groups)
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


def _count(f: Fields, key: str, default: int | None, *aliases: str) -> int:
    if default is None and f.get(key, None, *aliases) is None:
        given = "gives null for" if any(n in f.data for n in (key, *aliases)) else "has no"
        raise f.error(key, f"config.json {given} '{key}', for which {f.model_type} has no default")
    return f.int(key, default, *aliases)


def dense_from_layer_types(f: Fields, n_layers: int) -> int | None:
    """The number of dense first layers `mlp_layer_types` gives (None: left out); refused
    unless they come first (the spec's `moe.dense_layers`) or a type is not dense / sparse
    (transformers builds experts on "sparse" alone)."""
    types = f.get("mlp_layer_types")
    if types is None:
        return None
    if (
        not isinstance(types, list)
        or len(types) != n_layers
        or any(t not in ("dense", "sparse") for t in types)
    ):
        raise f.error(
            "mlp_layer_types", f"expected {n_layers} of dense / sparse, got {shown(types)}"
        )
    dense = types.index("sparse") if "sparse" in types else n_layers
    if "dense" in types[dense:]:
        raise f.error(
            "mlp_layer_types",
            f"{shown(types)}: a dense layer after an expert layer; a spec's dense layers "
            "(moe.dense_layers) come first",
        )
    return dense


def read_sigmoid_moe(
    f: Fields,
    n_layers: int,
    d: ExpertDefaults,
    keys: ExpertKeys = DEEPSEEK_KEYS,
    dense: int | None = None,
) -> dict[str, Any] | None:
    """The spec's `moe` section, or None when every layer is dense. `dense`: the number of
    dense first layers where the family says it otherwise (`mlp_layer_types`); else
    `first_k_dense_replace`."""
    reader = (
        f"transformers' {f.model_type} model classes (they build no multi-token-prediction "
        "layer, and leave its tensors unloaded)"
    )
    f.ignored("num_nextn_predict_layers", reader)
    f.ignored("num_mtp_layers", reader)
    f.harmless("output_router_logits")  # a training loss only
    if dense is None:
        dense = f.int("first_k_dense_replace", d.dense)
    if dense < 0:
        raise f.error("first_k_dense_replace", f"expected at least 0, got {dense}")
    experts = _count(f, keys.experts, d.experts, *keys.experts_aliases)
    top_k = _count(f, "num_experts_per_tok", d.top_k)
    width = f.int("moe_intermediate_size", d.width)
    shared = _count(f, keys.shared, d.shared)
    scale = f.float(keys.scale, d.scale)
    normalize = f.bool(keys.normalize, d.normalize) if keys.normalize else d.normalize
    if dense >= n_layers:
        if keys.groups:
            f.harmless("n_group", "topk_group")
        return None  # every layer dense: the expert fields are inert
    groups, top_groups = _groups(f, d, experts, top_k) if keys.groups else (1, 1)
    if shared < 1:
        raise f.error(keys.shared, f"expected at least 1 shared expert, got {shared}")
    if scale <= 0:
        raise f.error(keys.scale, f"expected a positive number, got {scale}")
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
        "groups": groups,
        "top_groups": top_groups if groups > 1 else 1,
    }


def write_sigmoid_moe(spec: Spec, keys: ExpertKeys = DEEPSEEK_KEYS) -> dict[str, Any]:
    """`read_sigmoid_moe`'s inverse."""
    moe = spec.moe
    if moe is None:
        return {"first_k_dense_replace": spec.n_layers}
    width = moe.d_ff or spec.d_ff
    if not moe.shared_d_ff or moe.shared_d_ff % width:
        raise SpecError(
            f"{spec.hf_class}'s shared experts are n_shared_experts experts of moe.d_ff: "
            "moe.shared_d_ff must be a multiple of it",
            path="moe.shared_d_ff",
        )
    fields = {
        "first_k_dense_replace": moe.dense_layers,
        keys.experts: moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "moe_intermediate_size": width,
        keys.shared: moe.shared_d_ff // width,
        keys.scale: moe.routed_scale,
    }
    if keys.normalize:
        fields[keys.normalize] = moe.normalize
    elif not moe.normalize:
        raise SpecError(
            f"{spec.hf_class} always renormalises its experts' weights", path="moe.normalize"
        )
    if keys.groups:
        fields |= {"n_group": moe.groups, "topk_group": moe.top_groups}
    elif moe.groups != 1:
        raise SpecError(
            f"{spec.hf_class} routes among all its experts, ungrouped", path="moe.groups"
        )
    return fields
