"""Granite MoE (`model_type: granitemoe`, Granite 3.x MoE): Granite's decoder (its four
multipliers, `granite.py`) whose MLPs are mixtures of experts: top-k of the router's logits,
softmax over those k (the same weights as a softmax over all experts renormalised to the k:
`moe.normalize`). Checkpoints stack each layer's experts (`input_linear`, gate rows then up
rows per expert; `output_linear`; the router's `router.layer`); transformers 5 renames them in
memory (`experts.gate_up_proj`, `experts.down_proj`, `router`)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import DENSE_BLOCK, MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families.granite import export_granite, import_granite
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec


def import_granitemoe(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    spec = import_granite(f, cls)
    # GraniteMoeConfig has no mlp_bias (the experts have no biases): import_granite's read of
    # it changes nothing here.
    f.ignored("mlp_bias", "GraniteMoeConfig and GraniteMoeModel")
    spec["mlp"] = {**spec["mlp"], "bias": False}
    spec["moe"] = {
        "n_experts": f.int("num_local_experts", 8),
        "top_k": f.int("num_experts_per_tok", 2),
        "router_bias": False,
        "normalize": True,
    }
    return spec


def export_granitemoe(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if moe is None or moe.shared_d_ff or moe.dense_layers or not moe.normalize:
        raise SpecError(
            "GraniteMoeForCausalLM has, in every layer, experts of width intermediate_size "
            "whose top_k weights sum to one, and no shared expert"
        )
    if (moe.d_ff or spec.d_ff) != spec.d_ff:
        raise SpecError("GraniteMoe's experts are intermediate_size wide", path="moe.d_ff")
    fields = export_granite(spec)
    del fields["mlp_bias"]
    return {
        **fields,
        "num_local_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
    }


def _stacked(module: str, part: int, parts: int, param: str, note: str) -> Target:
    return Target(module, "experts", part, parts, params={"weight": param}, note=note)


MOE = "block_sparse_moe"
CHECKPOINT_BLOCK = chain(
    table(
        {
            "moe.router": f"{MOE}.router.layer",
            "moe.experts.*.gate": _stacked(f"{MOE}.input_linear", 0, 2, "weight", "gate rows"),
            "moe.experts.*.up": _stacked(f"{MOE}.input_linear", 1, 2, "weight", "up rows"),
            "moe.experts.*.down": _stacked(f"{MOE}.output_linear", 0, 1, "weight", "stacked"),
        }
    ),
    DENSE_BLOCK,
)
MODULE_BLOCK = chain(
    table(
        {
            "moe.router": f"{MOE}.router",
            "moe.experts.*.gate": _stacked(f"{MOE}.experts", 0, 2, "gate_up_proj", "gate half"),
            "moe.experts.*.up": _stacked(f"{MOE}.experts", 1, 2, "gate_up_proj", "up half"),
            "moe.experts.*.down": _stacked(f"{MOE}.experts", 0, 1, "down_proj", "stacked"),
        }
    ),
    DENSE_BLOCK,
)

FAMILY = Family(
    model_type="granitemoe",
    classes=(
        HFClass("GraniteMoeForCausalLM", "granitemoe", "lm", base=False),
        HFClass("GraniteMoeModel", "granitemoe", "none", base=True),
    ),
    bases=("_granite",),
    spec_family="granitemoe",
    import_config=import_granitemoe,
    export_config=export_granitemoe,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        block_variants={"module": MODULE_BLOCK},
    ),
    buffers=ROPE_BUFFERS,
)
