"""ERNIE 4.5 (`model_type: ernie4_5`, ERNIE-4.5-0.3B): LLaMA's decoder with RoPE turning
interleaved channel pairs (transformers repeats each frequency twice and rotates x[..., ::2]
against x[..., 1::2]), biases on every projection or none (`use_bias`), 128-wide heads
whatever the width and a head tied by default."""

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
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    rope_theta=500000.0,
    d_ff=3072,
    kv_heads=2,
    max_positions=131072,
    rms_eps=1e-5,
    vocab_size=103424,
)
# Ernie4_5Config's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 1024, "num_hidden_layers": 18, "num_attention_heads": 16}
HEAD_DIM = 128  # Ernie4_5Config's default, not hidden_size / num_attention_heads


def import_ernie4_5(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, "head_dim": HEAD_DIM, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    bias = f.bool("use_bias", False)
    spec["position"] = {**spec["position"], "interleaved": True}
    spec["attention"] = {**spec["attention"], "bias": bias}
    spec["mlp"] = {**spec["mlp"], "bias": bias}
    spec["head"] = {**spec["head"], "tied": f.bool("tie_word_embeddings", True)}
    return spec


def export_ernie4_5(spec: Spec) -> dict[str, Any]:
    if spec.attention.bias != spec.mlp.bias or spec.attention.qkv_bias is not None:
        raise SpecError("Ernie4_5ForCausalLM has biases on every projection or on none")
    if not spec.position.interleaved:
        raise SpecError("ERNIE 4.5 turns interleaved channel pairs", path="position.interleaved")
    return {**export_llama_like(spec), "use_bias": spec.attention.bias}


FAMILY = Family(
    model_type="ernie4_5",
    classes=(
        HFClass("Ernie4_5ForCausalLM", "ernie4_5", "lm", base=False),
        HFClass("Ernie4_5Model", "ernie4_5", "none", base=True),
    ),
    bases=("_ernie4_5",),
    import_config=import_ernie4_5,
    export_config=export_ernie4_5,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
