"""Granite MoE with a shared expert (`model_type: granitemoeshared`): Granite MoE's layers
(`granitemoe.py`) plus a gated MLP every token goes through, ungated in its sum with the
routed experts (`shared_intermediate_size` wide; `shared_mlp.input_linear` holds its gate rows
then its up rows, `shared_mlp.output_linear` its down projection). A width of 0 is no shared
expert: Granite MoE's layers exactly."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families.granitemoe import (
    CHECKPOINT_BLOCK,
    MODULE_BLOCK,
    export_granitemoe,
    import_granitemoe,
)
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec


def import_granitemoeshared(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = import_granitemoe(f, cls)
    shared = f.int("shared_intermediate_size", 0)
    if shared < 0:
        raise f.error("shared_intermediate_size", f"expected a width, got {shared}")
    if shared:
        spec["moe"] = {**spec["moe"], "shared_d_ff": shared, "shared_gate": False}
    return spec


def export_granitemoeshared(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    shared = moe.shared_d_ff if moe is not None and not moe.shared_gate else 0
    plain = replace(spec, moe=replace(moe, shared_d_ff=0)) if shared else spec
    return {**export_granitemoe(plain), "shared_intermediate_size": shared}


SHARED = table(
    {
        "moe.shared.gate": Target("shared_mlp.input_linear", "concat", 0, 2, note="gate rows"),
        "moe.shared.up": Target("shared_mlp.input_linear", "concat", 1, 2, note="up rows"),
        "moe.shared.down": "shared_mlp.output_linear",
    }
)

FAMILY = Family(
    model_type="granitemoeshared",
    classes=(
        HFClass("GraniteMoeSharedForCausalLM", "granitemoeshared", "lm", base=False),
        HFClass("GraniteMoeSharedModel", "granitemoeshared", "none", base=True),
    ),
    bases=("_granite",),
    spec_family="granitemoeshared",
    import_config=import_granitemoeshared,
    export_config=export_granitemoeshared,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=chain(SHARED, CHECKPOINT_BLOCK),
        block_variants={"module": chain(SHARED, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
