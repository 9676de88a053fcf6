"""OLMoE (`model_type: olmoe`, OLMoE-1B-7B): OLMo 2's RMSNorms over the whole q and k
projections (all heads together, before RoPE) in a pre-norm LLaMA block whose MLPs are
mixtures of experts, softmax top-k routing renormalised only when `norm_topk_prob`.
Checkpoints keep one module per expert; transformers 5 stacks them in memory, as for Mixtral.

OlmoeAttention clamps q, k and v (`clip_qkv`) after those norms, where archspec's
`attention.clip_qkv` clamps the projections before them (OLMo): a clip_qkv is refused."""

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
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=2048, kv_heads=None, max_positions=4096, rms_eps=1e-5, vocab_size=50304)
# OlmoeConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 16}


def import_olmoe(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    f.expect("clip_qkv", None, None, "OLMoE clamps q, k and v after its q/k norms")
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    spec = import_llama_like(f, cls, VARIANT)
    if spec["head_dim"] is not None:  # OlmoeAttention's norms are hidden_size wide
        raise f.error("head_dim", "OLMoE's heads are hidden_size / num_attention_heads wide")
    spec["attention"] = {
        **spec["attention"],
        "bias": f.bool("attention_bias", False),
        "qk_norm": True,
        "qk_norm_scope": "all",
    }
    spec["moe"] = {
        "n_experts": f.int("num_experts", 64, "num_local_experts"),
        "top_k": f.int("num_experts_per_tok", 8),
        "router_bias": False,
        "normalize": f.bool("norm_topk_prob", False),
    }
    return spec


def export_olmoe(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if (
        moe is None
        or moe.shared_d_ff
        or moe.dense_layers
        or (moe.d_ff or spec.d_ff) != spec.d_ff
        or spec.attention.qk_norm_scope != "all"
        or not spec.attention.qk_norm
    ):
        raise SpecError(
            "OlmoeForCausalLM has q/k norms over all heads and, in every layer, experts of "
            "width intermediate_size without a shared one"
        )
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "clip_qkv": None,
        "num_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "norm_topk_prob": moe.normalize,
    }


QK_NORMS = table({"attn.q_norm": "self_attn.q_norm", "attn.k_norm": "self_attn.k_norm"})
# As the checkpoint files store it: one module per expert.
CHECKPOINT_BLOCK = chain(
    QK_NORMS,
    table(
        {
            "moe.router": "mlp.gate",
            "moe.experts.*.gate": "mlp.experts.*.gate_proj",
            "moe.experts.*.up": "mlp.experts.*.up_proj",
            "moe.experts.*.down": "mlp.experts.*.down_proj",
        }
    ),
    DENSE_BLOCK,
)

FAMILY = Family(
    model_type="olmoe",
    classes=(
        HFClass("OlmoeForCausalLM", "olmoe", "lm", base=False),
        HFClass("OlmoeModel", "olmoe", "none", base=True),
    ),
    bases=("_olmoe",),
    import_config=import_olmoe,
    export_config=export_olmoe,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        block_variants={"module": chain(QK_NORMS, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
