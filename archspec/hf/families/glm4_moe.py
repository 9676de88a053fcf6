"""GLM-4-MoE (`model_type: glm4_moe`, GLM-4.5 and GLM-4.6): LLaMA's decoder with RoPE on the
first `partial_rotary_factor` (0.5) of each head, rotate_half's halves there (not GLM's
interleaved pairs), biases on q, k and v alone (`attention_bias`), an RMSNorm over each
head's queries and keys when `use_qk_norm`, and after `first_k_dense_replace` dense layers
DeepSeek-V3's experts: the sigmoid router with its bias correction and shared experts
(`_sigmoid_moe.py`), as transformers' modeling_glm4_moe.py computes them. Checkpoints keep
one module per expert; transformers 5 stacks them in memory (`mlp.experts.gate_up_proj`)."""

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
from archspec.hf.families._rotary import rope_parameters
from archspec.hf.families._sigmoid_moe import ExpertDefaults, read_sigmoid_moe, write_sigmoid_moe
from archspec.hf.families.deepseek_v2 import CHECKPOINT_BLOCK, SHARED
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.families.qwen3_moe import QK_NORMS
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=10944,
    kv_heads=8,
    max_positions=131072,
    rms_eps=1e-5,
    vocab_size=151552,
    rotary_fraction=0.5,
    rotary_fraction_null=1.0,
)
# Glm4MoeConfig's defaults where they differ from import_llama_like's.
DEFAULTS = {"hidden_size": 4096, "num_hidden_layers": 46, "num_attention_heads": 96}
EXPERTS = ExpertDefaults(
    dense=1,
    experts=128,
    top_k=8,
    width=1408,
    shared=1,
    scale=1.0,
    normalize=True,
    groups=1,
    top_groups=1,
)


def import_glm4_moe(f: Fields, cls: HFClass, variant: LlamaVariant = VARIANT) -> dict[str, Any]:
    """GLM-4.5's fields; `variant`: the config class's defaults (GLM-4.5V's text model's)."""
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, variant)
    attention = {**spec["attention"], "qkv_bias": f.bool("attention_bias", False)}
    if f.bool("use_qk_norm", False):
        attention["qk_norm"] = True
    spec["attention"] = attention
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = read_sigmoid_moe(f, spec["n_layers"], EXPERTS)
    return spec


def export_glm4_moe(spec: Spec) -> dict[str, Any]:
    if spec.position.interleaved or spec.attention.bias or spec.mlp.bias:
        raise SpecError(
            f"{spec.hf_class} rotates rotate_half's halves and has biases on q, k and v alone"
        )
    parameters = rope_parameters(spec)
    return {
        **export_llama_like(spec),
        "rope_parameters": parameters,
        "partial_rotary_factor": parameters["partial_rotary_factor"],
        "attention_bias": bool(spec.attention.qkv_bias),
        "use_qk_norm": bool(spec.attention.qk_norm),
        **write_sigmoid_moe(spec),
    }


FAMILY = Family(
    model_type="glm4_moe",
    classes=(
        HFClass("Glm4MoeForCausalLM", "glm4_moe", "lm", base=False),
        HFClass("Glm4MoeModel", "glm4_moe", "none", base=True),
    ),
    bases=("_glm4_moe",),
    import_config=import_glm4_moe,
    export_config=export_glm4_moe,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        # As the checkpoint files store it: one module per expert (DeepSeek's names).
        block=chain(CHECKPOINT_BLOCK, QK_NORMS, DENSE_BLOCK),
        # transformers 5's memory: every layer's experts stacked (as Mixtral's).
        block_variants={"module": chain(SHARED, QK_NORMS, MODULE_BLOCK)},
    ),
    buffers=ROPE_BUFFERS,
)
