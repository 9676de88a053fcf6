"""FlexOlmo (`model_type: flex_olmo`, FlexOlmo-7x7B-1T): OLMo 2's block (its norms on the
sublayers' outputs, RMSNorms over the whole q and k projections) whose MLPs are OLMoE's
mixtures of experts (softmax top-k, renormalised only when `norm_topk_prob`). Checkpoints keep
one module per expert, transformers 5 stacks them in memory, as for OLMoE."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    import_llama_like,
)
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.families.olmoe import CHECKPOINT_BLOCK, QK_NORMS, export_olmoe
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=11008, kv_heads=None, max_positions=4096, rms_eps=1e-6, vocab_size=100352
)
THETA = 500000.0  # FlexOlmoConfig's default_theta


def import_flex_olmo(f: Fields, cls: HFClass) -> dict[str, Any]:
    params = f.get("rope_parameters") or {}
    params = params if isinstance(params, dict) else {}  # the RoPE reader refuses it
    if not f.present("rope_theta") and "rope_theta" not in params:
        f.data = {**f.data, "rope_theta": THETA}
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    spec = import_llama_like(f, cls, VARIANT)
    spec["residual"] = "output_norm"
    spec["attention"] = {
        **spec["attention"],
        "bias": f.bool("attention_bias", False),
        "qk_norm": True,
        "qk_norm_scope": "all",
    }
    spec["moe"] = {
        "n_experts": f.int("num_experts", 7, "num_local_experts"),
        "top_k": f.int("num_experts_per_tok", 5),
        "router_bias": False,
        "normalize": f.bool("norm_topk_prob", False),
    }
    return spec


def export_flex_olmo(spec: Spec) -> dict[str, Any]:
    out = export_olmoe(spec)  # it checks the experts and the q/k norms
    del out["clip_qkv"]
    # FlexOlmoConfig's default pad_token_id (100277) is a row of its own vocabulary only:
    # the padding row changes no computation, and none fits any vocabulary
    return {**out, "pad_token_id": None}


POST_NORMS = table(
    {
        "attn_post_norm": "post_attention_layernorm",
        "mlp_post_norm": "post_feedforward_layernorm",
    }
)

FAMILY = Family(
    model_type="flex_olmo",
    classes=(
        HFClass("FlexOlmoForCausalLM", "flex_olmo", "lm", base=False),
        HFClass("FlexOlmoModel", "flex_olmo", "none", base=True),
    ),
    bases=("_olmoe",),
    spec_family="flex_olmo",
    import_config=import_flex_olmo,
    export_config=export_flex_olmo,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=chain(POST_NORMS, CHECKPOINT_BLOCK),
        block_variants={"module": chain(QK_NORMS, POST_NORMS, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
