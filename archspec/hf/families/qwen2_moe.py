"""Qwen2-MoE (`model_type: qwen2_moe`, Qwen1.5-MoE): Qwen2's decoder whose MLPs are mixtures
of narrow experts (`moe_intermediate_size`) plus a shared expert every token goes through,
scaled by a sigmoid gate; the top-k probabilities are not renormalised unless
`norm_topk_prob`. Checkpoints keep one module per expert; transformers 5 stacks them in memory
(`mlp.experts.gate_up_proj`), as for Mixtral."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields, shown
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

VARIANT = LlamaVariant(d_ff=5632, kv_heads=16, max_positions=32768, rms_eps=1e-6, vocab_size=151936)
# Qwen2MoeConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16}


def moe_layers(f: Fields, n_layers: int) -> int:
    """The number of dense first layers: transformers builds an MLP, not experts, on the layers
    of `mlp_only_layers` and on those `decoder_sparse_step` skips. archspec expresses dense
    first layers only."""
    step = f.int("decoder_sparse_step", 1)
    only = f.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) for i in only):
        raise f.error("mlp_only_layers", f"expected a list of layer indices, got {only!r}")
    dense = [i for i in range(n_layers) if i in only or step < 1 or (i + 1) % step]
    if dense != list(range(len(dense))):
        field = "decoder_sparse_step" if step != 1 else "mlp_only_layers"
        raise f.error(
            field,
            f"dense MLPs on layers {dense}: archspec expresses dense layers only as the first "
            "ones of the stack (moe.dense_layers)",
        )
    return len(dense)


def import_qwen2_moe(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("num_key_value_heads", "transformers' Qwen2MoeAttention")
    f.data = {**DEFAULTS, **f.data}
    f.expect("use_sliding_window", False, False, "sliding-window attention")
    types = f.get("layer_types")
    if types is not None and (not isinstance(types, list) or
                              any(t != "full_attention" for t in types)):  # fmt: skip
        raise f.error(
            "layer_types",
            f"expected full_attention on every layer (only full attention is supported), "
            f"got {shown(types)}",
        )
    f.harmless("sliding_window", "max_window_layers")  # inert without use_sliding_window
    f.harmless("output_router_logits", "router_aux_loss_coef")  # training losses only
    spec = import_llama_like(f, cls, VARIANT)
    spec["attention"] = {**spec["attention"], "bias": False, "qkv_bias": f.bool("qkv_bias", True)}
    shared = f.int("shared_expert_intermediate_size", 5632)
    if shared < 1:
        raise f.error("shared_expert_intermediate_size", "expected a positive width")
    spec["moe"] = {
        "n_experts": f.int("num_experts", 60),
        "top_k": f.int("num_experts_per_tok", 4),
        "router_bias": False,
        "dense_layers": moe_layers(f, spec["n_layers"]),
        "d_ff": f.int("moe_intermediate_size", 1408),
        "normalize": f.bool("norm_topk_prob", False),
        "shared_d_ff": shared,
        "shared_gate": True,
    }
    return spec


def export_qwen2_moe(spec: Spec) -> dict[str, Any]:
    moe = spec.moe
    if moe is None or not moe.shared_d_ff or not moe.shared_gate:
        raise SpecError(
            "Qwen2MoeForCausalLM has experts and a gated shared expert in every MoE layer: "
            "the spec needs moe.shared_d_ff and moe.shared_gate"
        )
    return {
        **export_llama_like(spec),
        "qkv_bias": bool(spec.attention.qkv_bias),
        "use_sliding_window": False,
        "num_experts": moe.n_experts,
        "num_experts_per_tok": moe.top_k,
        "moe_intermediate_size": moe.d_ff or spec.d_ff,
        "shared_expert_intermediate_size": moe.shared_d_ff,
        "norm_topk_prob": moe.normalize,
        "decoder_sparse_step": 1,
        "mlp_only_layers": list(range(moe.dense_layers)),
    }


SHARED = {
    "moe.shared.gate": "mlp.shared_expert.gate_proj",
    "moe.shared.up": "mlp.shared_expert.up_proj",
    "moe.shared.down": "mlp.shared_expert.down_proj",
    "moe.shared_gate": "mlp.shared_expert_gate",
}
# As the checkpoint files store it: one module per expert.
CHECKPOINT_BLOCK = chain(
    table(
        {
            "moe.router": "mlp.gate",
            "moe.experts.*.gate": "mlp.experts.*.gate_proj",
            "moe.experts.*.up": "mlp.experts.*.up_proj",
            "moe.experts.*.down": "mlp.experts.*.down_proj",
            **SHARED,
        }
    ),
    DENSE_BLOCK,
)

FAMILY = Family(
    model_type="qwen2_moe",
    classes=(
        HFClass("Qwen2MoeForCausalLM", "qwen2_moe", "lm", base=False),
        HFClass("Qwen2MoeModel", "qwen2_moe", "none", base=True),
    ),
    bases=("_qwen2_moe",),
    import_config=import_qwen2_moe,
    export_config=export_qwen2_moe,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=CHECKPOINT_BLOCK,
        block_variants={"module": chain(table(SHARED), MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
