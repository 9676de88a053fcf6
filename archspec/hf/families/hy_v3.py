"""Hunyuan 3 (`model_type: hy_v3`): Qwen3's attention (an RMSNorm over each head's queries and
keys before RoPE; `attention_bias` on all four projections) in a plain pre-norm block, with,
after the dense first layers (`mlp_layer_types`, by default the first), experts chosen as
modeling_hy_v3.py's HYV3TopKRouter does: float32 sigmoid scores, `e_score_correction_bias`
for choosing only among all experts (no groups), always renormalised (with DeepSeek's 1e-20)
and times `router_scaling_factor`, beside a shared expert `moe_intermediate_size ×
num_shared_experts` wide: the sigmoid router of `_sigmoid_moe.py` with one group.

`mlp_bias` biases the dense and shared MLPs but not the routed experts, which a spec's one
MLP bias setting cannot say: refused. `enable_moe_fp32_combine` adds the shared expert in
float32, the same sum in float32 (harmless). Checkpoints name the router
`mlp.router.gate`, its bias correction `mlp.expert_bias` and the shared expert
`mlp.shared_mlp`; transformers 5 renames them (`mlp.gate`, `mlp.e_score_correction_bias`,
`mlp.shared_experts`) and stacks the experts in memory."""

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
from archspec.hf.families._sigmoid_moe import (
    ExpertDefaults,
    ExpertKeys,
    dense_from_layer_types,
    read_sigmoid_moe,
    write_sigmoid_moe,
)
from archspec.hf.families.deepseek_v2 import SHARED
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.families.qwen3_moe import QK_NORMS
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=13312,
    kv_heads=8,
    max_positions=131072,
    rms_eps=1e-5,
    vocab_size=120832,
    biases=True,
    rope_theta=11_158_840.0,
)
# HYV3Config's defaults where they differ from import_llama_like's.
DEFAULTS = {"num_hidden_layers": 80, "num_attention_heads": 64, "head_dim": 128}
EXPERTS = ExpertDefaults(
    dense=1,
    experts=192,
    top_k=8,
    width=1536,
    shared=1,
    scale=2.826,
    normalize=True,  # HYV3TopKRouter always renormalises
    groups=1,
    top_groups=1,
)
KEYS = ExpertKeys(
    experts="num_experts",
    shared="num_shared_experts",
    scale="router_scaling_factor",
    experts_aliases=("num_local_experts",),  # HYV3Config's attribute_map
    groups=False,
    normalize=None,
)


def import_hy_v3(f: Fields, cls: HFClass) -> dict[str, Any]:
    # HYV3Config keeps these nulls (`int | None`), with which its model cannot build.
    for key in ("num_experts", "num_experts_per_tok", "num_shared_experts"):
        f.refuse_null(key, "HYV3Config's model")
    f.data = {**DEFAULTS, **f.data}
    if f.bool("mlp_bias", False):
        raise f.error(
            "mlp_bias",
            "true biases the dense and shared-expert MLPs but not the routed experts, which a "
            "spec's one MLP bias setting does not express",
        )
    f.harmless("enable_moe_fp32_combine")  # the same sum, kept in float32
    spec = import_llama_like(f, cls, VARIANT)
    spec["attention"] = {**spec["attention"], "qk_norm": True, "qk_norm_scope": "head"}
    n_layers = spec["n_layers"]
    dense = dense_from_layer_types(f, n_layers)
    # HYV3Config's default: the first layer dense, then experts
    dense = min(1, n_layers) if dense is None else dense
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = read_sigmoid_moe(f, n_layers, EXPERTS, KEYS, dense)
    return spec


def export_hy_v3(spec: Spec) -> dict[str, Any]:
    if spec.attention.qk_norm_scope != "head" or not spec.attention.qk_norm:
        raise SpecError("HYV3 normalises each head's queries and keys", path="attention.qk_norm")
    experts = write_sigmoid_moe(spec, KEYS)
    dense = experts.pop("first_k_dense_replace")  # HYV3Config reads mlp_layer_types alone
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "mlp_bias": False,
        "mlp_layer_types": ["dense" if i < dense else "sparse" for i in range(spec.n_layers)],
        **experts,
    }


# The checkpoints' names: the router's weight under `router`, its bias correction and the
# shared expert on the MoE block.
CHECKPOINT_NAMES = table(
    {
        "moe.router": Target(
            "mlp", params={"weight": "router.gate.weight", "e_score_correction_bias": "expert_bias"}
        ),
        "moe.experts.*.gate": "mlp.experts.*.gate_proj",
        "moe.experts.*.up": "mlp.experts.*.up_proj",
        "moe.experts.*.down": "mlp.experts.*.down_proj",
        "moe.shared.gate": "mlp.shared_mlp.gate_proj",
        "moe.shared.up": "mlp.shared_mlp.up_proj",
        "moe.shared.down": "mlp.shared_mlp.down_proj",
    }
)
# transformers 5's memory: the bias correction on the MoE block, the experts stacked.
MEMORY_ROUTER = table(
    {
        "moe.router": Target(
            "mlp",
            params={"weight": "gate.weight", "e_score_correction_bias": "e_score_correction_bias"},
        )
    }
)

FAMILY = Family(
    model_type="hy_v3",
    classes=(
        HFClass("HYV3ForCausalLM", "hy_v3", "lm", base=False),
        HFClass("HYV3Model", "hy_v3", "none", base=True),
    ),
    bases=("_hy_v3",),
    import_config=import_hy_v3,
    export_config=export_hy_v3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=chain(CHECKPOINT_NAMES, QK_NORMS, DENSE_BLOCK),
        block_variants={"module": chain(MEMORY_ROUTER, SHARED, QK_NORMS, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
