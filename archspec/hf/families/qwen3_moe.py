"""Qwen3-MoE (`model_type: qwen3_moe`, Qwen3-30B-A3B): Qwen3's decoder (an RMSNorm over each
head's queries and keys before RoPE) whose MLPs are mixtures of narrow experts
(`moe_intermediate_size`), softmax top-k routing renormalised only when `norm_topk_prob`, no
shared expert. Checkpoints keep one module per expert; transformers 5 stacks them in memory
(`mlp.experts.gate_up_proj`), as for Mixtral."""

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
from archspec.hf.families.qwen2_moe import moe_layers
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(d_ff=6144, kv_heads=4, max_positions=32768, rms_eps=1e-6, vocab_size=151936)
# Qwen3MoeConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2048, "num_hidden_layers": 24}


def import_qwen3_moe(
    f: Fields, cls: HFClass, variant: LlamaVariant = VARIANT, windows: bool = True
) -> dict[str, Any]:
    """Qwen3-MoE's fields; `variant`: the config class's defaults, and `windows`: whether its
    attention reads use_sliding_window (Qwen3-VL-MoE's text model's does not)."""
    f.data = {**DEFAULTS, **f.data}
    if windows:
        # Qwen3MoeConfig windows every layer when use_sliding_window; inert without.
        f.expect("use_sliding_window", False, False, "sliding-window attention on every layer")
        f.harmless("sliding_window", "max_window_layers")
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    spec = import_llama_like(f, cls, variant)
    spec["attention"] = {**spec["attention"], "bias": f.bool("attention_bias", False)}
    spec["attention"]["qk_norm"] = True
    spec["moe"] = {
        "n_experts": f.int("num_experts", 128, "num_local_experts"),
        "top_k": f.int("num_experts_per_tok", 8),
        "router_bias": False,
        "dense_layers": moe_layers(f, spec["n_layers"]),
        "d_ff": f.int("moe_intermediate_size", 768),
        "normalize": f.bool("norm_topk_prob", False),
    }
    return spec


def export_qwen3_moe(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if moe is None or moe.shared_d_ff or not spec.attention.qk_norm:
        raise SpecError(
            "Qwen3MoeForCausalLM has q/k norms and experts without a shared one in every MoE "
            "layer: the spec needs attention.qk_norm and moe, without moe.shared_d_ff"
        )
    return {
        **export_llama_like(spec),
        "attention_bias": spec.attention.bias,
        "use_sliding_window": False,
        "num_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "moe_intermediate_size": moe.d_ff or spec.d_ff,
        "norm_topk_prob": moe.normalize,
        "decoder_sparse_step": 1,
        "mlp_only_layers": list(range(moe.dense_layers)),
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
    model_type="qwen3_moe",
    classes=(
        HFClass("Qwen3MoeForCausalLM", "qwen3_moe", "lm", base=False),
        HFClass("Qwen3MoeModel", "qwen3_moe", "none", base=True),
    ),
    bases=("_qwen3_moe",),
    import_config=import_qwen3_moe,
    export_config=export_qwen3_moe,
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
