"""Aria's language model (`model_type: aria_text`, AriaTextForCausalLM, the text half of
rhymes-ai/Aria): LLaMA's blocks whose MLP is, in every layer, a mixture of `moe_num_experts`
SwiGLU experts `intermediate_size` wide plus one shared gated MLP every token goes through
(`intermediate_size` × `moe_num_shared_experts` wide, added without a gate). The router
takes the top `moe_topk` of its raw logits and a softmax over those k in the logits' dtype,
as gpt-oss's (`moe.router: topk_softmax`, no bias).

The routed experts always apply SiLU whatever `hidden_act` (the shared MLP follows it), and
`mlp_bias` puts biases on the shared MLP alone: a spec has one activation and one bias
setting for both, so either other than SiLU and no bias is refused.

The experts of a layer are two stacked tensors stored (in, out), as `x @ W` multiplies them:
`mlp.experts.fc1.weight` (experts, hidden, gate columns then up columns) and `fc2.weight`
(experts, intermediate, hidden) in files (transformers 5 saves those names),
`mlp.experts.gate_up_proj` and `down_proj` in memory."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

# AriaTextConfig's defaults: LLaMA's sizes (4096 wide, 32 layers and heads, 2048 positions),
# as many key/value heads as heads, RMSNorm eps 1e-6.
VARIANT = LlamaVariant(d_ff=4096, kv_heads=None, max_positions=2048, rms_eps=1e-6)


def import_aria_text(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    f.harmless("pretraining_tp")  # a different order of the same sums
    if f.bool("mlp_bias", False):
        raise f.error(
            "mlp_bias",
            "AriaSharedExpertsMLP has biases and AriaExperts none; a spec's mlp.bias is both's",
        )
    spec = import_llama_like(f, cls, VARIANT)
    if spec["mlp"]["activation"] != "silu":
        raise f.error(
            "hidden_act",
            f"{f.get('hidden_act')!r} on the shared MLP alone: AriaExperts always apply SiLU, "
            "and a spec's mlp.activation is both's",
        )
    spec["attention"] = {**spec["attention"], "bias": f.bool("attention_bias", False)}
    shared = f.int("moe_num_shared_experts", 2)
    if shared < 0:
        raise f.error("moe_num_shared_experts", f"expected a count, got {shared}")
    spec["moe"] = {
        "n_experts": f.int("moe_num_experts", 8),
        "top_k": f.int("moe_topk", 2),
        "router": "topk_softmax",
        "router_bias": False,
        "d_ff": spec["d_ff"],
        # 0: AriaSharedExpertsMLP's linears are 0 wide and add nothing
        "shared_d_ff": spec["d_ff"] * shared,
        "shared_gate": False,
    }
    return spec


def export_aria_text(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if (
        moe is None
        or moe.router != "topk_softmax"
        or moe.router_bias
        or moe.expert_bias
        or moe.dense_layers
        or moe.shared_gate
        or moe.routed_scale != 1.0
        or (moe.d_ff or spec.d_ff) != spec.d_ff
        or moe.shared_d_ff % spec.d_ff
        or spec.mlp.activation != "silu"
        or spec.mlp.bias
    ):
        raise SpecError(
            "AriaTextForCausalLM has, in every layer, SiLU experts of width intermediate_size "
            "routed by an unbiased topk_softmax router, and an ungated shared MLP a multiple "
            "of that width: the spec needs moe.router: topk_softmax and moe.shared_d_ff a "
            "multiple of d_ff, without dense layers, biases or a shared gate"
        )
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "mlp_bias": False,
        "moe_num_experts": moe.n_experts,
        "moe_topk": moe.top_k,
        "moe_num_shared_experts": moe.shared_d_ff // spec.d_ff,
    }


def _experts(tensor: str, part: int, parts: int, note: str) -> Target:
    return Target(
        "mlp.experts",
        "experts",
        part,
        parts,
        params={"weight": tensor},
        transposed=True,
        note=note,
    )


SHARED = table(
    {
        "moe.router": "mlp.router",
        "moe.shared.gate": "mlp.shared_experts.gate_proj",
        "moe.shared.up": "mlp.shared_experts.up_proj",
        "moe.shared.down": "mlp.shared_experts.down_proj",
    }
)
# As the checkpoint files store it (transformers 5 saves these names too).
CHECKPOINT_BLOCK = chain(
    SHARED,
    table(
        {
            "moe.experts.*.gate": _experts("fc1.weight", 0, 2, "gate columns, stacked (in, out)"),
            "moe.experts.*.up": _experts("fc1.weight", 1, 2, "up columns, stacked (in, out)"),
            "moe.experts.*.down": _experts("fc2.weight", 0, 1, "stacked (in, out)"),
        }
    ),
    DENSE_BLOCK,
)
# As transformers 5 holds it in memory.
MODULE_BLOCK = chain(
    SHARED,
    table(
        {
            "moe.experts.*.gate": _experts("gate_up_proj", 0, 2, "gate columns, stacked"),
            "moe.experts.*.up": _experts("gate_up_proj", 1, 2, "up columns, stacked"),
            "moe.experts.*.down": _experts("down_proj", 0, 1, "stacked (in, out)"),
        }
    ),
    DENSE_BLOCK,
)

FAMILY = Family(
    model_type="aria_text",
    classes=(
        HFClass("AriaTextForCausalLM", "aria_text", "lm", base=False),
        HFClass("AriaTextModel", "aria_text", "none", base=True),
    ),
    bases=("_aria_text",),
    import_config=import_aria_text,
    export_config=export_aria_text,
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
