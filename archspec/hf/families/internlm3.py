"""InternLM3 (`model_type: internlm3`, InternLM3-8B): LLaMA's decoder, which transformers
builds as LlamaForCausalLM; InternLM's own files name `InternLM3ForCausalLM` (their remote
code) and the biases `qkv_bias` and `bias`, which InternLM3Config maps onto `attention_bias`
and `mlp_bias` and requires equal."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    import_llama_like,
)
from archspec.hf.families.llama import export_llama
from archspec.hf.family import Family, HFClass, NameRules

VARIANT = LlamaVariant(
    d_ff=10240, kv_heads=2, max_positions=32768, rms_eps=1e-5, biases=True, vocab_size=128512
)
# InternLM3Config's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"num_hidden_layers": 48, "head_dim": 128}


def import_internlm3(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map({"qkv_bias": "attention_bias", "bias": "mlp_bias"})
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    if spec["attention"]["bias"] != spec["mlp"]["bias"]:
        # InternLM3Config refuses it: LLaMA's code has one bias setting for q, k, v and o
        raise f.error("attention_bias", "InternLM3 needs qkv_bias (attention_bias) = bias")
    return spec


FAMILY = Family(
    model_type="internlm3",
    classes=(
        HFClass("InternLM3ForCausalLM", "internlm3", "lm", False, None, "LlamaForCausalLM"),
        HFClass("InternLM3Model", "internlm3", "none", True, None, "LlamaModel"),
    ),
    bases=("_llama",),
    spec_family="internlm3",
    import_config=import_internlm3,
    export_config=export_llama,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
