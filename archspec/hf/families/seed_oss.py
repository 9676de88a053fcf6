"""Seed-OSS (`model_type: seed_oss`, Seed-OSS-36B): LLaMA's decoder with biases on q, k and v
(`attention_bias`, on by default) apart from the output projection's (`attention_out_bias`),
MLP biases (`mlp_bias`) and 128-wide heads whatever the width."""

from __future__ import annotations

from typing import Any

from archspec.hf import dropouts
from archspec.hf.config_fields import Fields
from archspec.hf.dropouts import read_dropout
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    export_llama_like,
    import_llama_like,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=27648, kv_heads=8, max_positions=524288, rms_eps=1e-6, vocab_size=155136
)
# SeedOssConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 4096, "num_hidden_layers": 64, "num_attention_heads": 80}
HEAD_DIM = 128  # SeedOssConfig's default, not hidden_size / num_attention_heads


def import_seed_oss(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, "head_dim": HEAD_DIM, **f.data}
    f.harmless("pretraining_tp")  # a different order of the same sums
    spec = import_llama_like(f, cls, VARIANT)
    spec["attention"] = {
        **spec["attention"],
        "bias": f.bool("attention_out_bias", False),
        "qkv_bias": f.bool("attention_bias", True),
    }
    spec["mlp"] = {**spec["mlp"], "bias": f.bool("mlp_bias", False)}
    spec["dropout"] = read_dropout(f, dropouts.SEED_OSS)
    return spec


def export_seed_oss(spec: Spec) -> dict[str, Any]:
    qkv = spec.attention.bias if spec.attention.qkv_bias is None else spec.attention.qkv_bias
    return {
        **export_llama_like(spec, dropouts.SEED_OSS),
        "attention_bias": qkv,
        "attention_out_bias": spec.attention.bias,
        "mlp_bias": spec.mlp.bias,
    }


FAMILY = Family(
    model_type="seed_oss",
    classes=(
        HFClass("SeedOssForCausalLM", "seed_oss", "lm", base=False),
        HFClass("SeedOssModel", "seed_oss", "none", base=True),
    ),
    bases=("_seed_oss",),
    import_config=import_seed_oss,
    export_config=export_seed_oss,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
