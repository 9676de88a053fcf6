"""Mixtral (`model_type: mixtral`): Mistral's decoder with a sparse mixture of experts.

Its checkpoints keep one module per expert (`block_sparse_moe.experts.3.w1`); transformers 5
holds all experts of a layer in two stacked tensors in memory (`mlp.experts.gate_up_proj`),
renaming on load and back on save. Both layouts are name variants of this family.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    export_window,
    import_llama_like,
)
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, table
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    rope_theta=1000000.0,
    d_ff=14336,
    kv_heads=8,
    max_positions=4096 * 32,
    rms_eps=1e-5,
    sliding_window=True,
    window_default=None,
    experts=True,
)


def export_mixtral(spec: Spec) -> dict[str, Any]:
    fields = export_llama_like(spec)
    if spec.moe is not None:  # else the import back refuses the spec: it lacks the experts
        fields |= {
            "num_local_experts": spec.moe.n_experts,
            "num_experts_per_tok": spec.moe.top_k,
            "router_jitter_noise": 0.0,
        }
    return {**fields, "sliding_window": export_window(spec)}


# As the checkpoint files store it.
CHECKPOINT_BLOCK = chain(
    table(
        {
            "moe.router": "block_sparse_moe.gate",
            "moe.experts.*.gate": "block_sparse_moe.experts.*.w1",
            "moe.experts.*.up": "block_sparse_moe.experts.*.w3",
            "moe.experts.*.down": "block_sparse_moe.experts.*.w2",
        }
    ),
    DENSE_BLOCK,
)

# As transformers 5 holds it in memory: all experts of a layer in two tensors.
MODULE_BLOCK = chain(
    table(
        {
            "moe.router": "mlp.gate",
            "moe.experts.*.gate": Target(
                "mlp.experts",
                "experts",
                0,
                2,
                params={"weight": "gate_up_proj"},
                note="gate half, experts stacked",
            ),
            "moe.experts.*.up": Target(
                "mlp.experts",
                "experts",
                1,
                2,
                params={"weight": "gate_up_proj"},
                note="up half, experts stacked",
            ),
            "moe.experts.*.down": Target(
                "mlp.experts",
                "experts",
                0,
                1,
                params={"weight": "down_proj"},
                note="experts stacked",
            ),
        }
    ),
    DENSE_BLOCK,
)

FAMILY = Family(
    model_type="mixtral",
    classes=(
        HFClass("MixtralForCausalLM", "mixtral", "lm", base=False),
        HFClass("MixtralModel", "mixtral", "none", base=True),
    ),
    bases=("_llama",),
    spec_family="mixtral",
    import_config=lambda f, cls: import_llama_like(f, cls, VARIANT),
    export_config=export_mixtral,
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
