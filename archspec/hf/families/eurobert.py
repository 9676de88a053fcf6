"""EuroBERT (`model_type: eurobert`): LLaMA's layers as a bidirectional encoder (no causal
mask: every token sees the whole padded sequence), RoPE, a final RMSNorm, and for
EuroBertForMaskedLM a plain projection to the vocabulary (its bias `mlp_bias`, untied by
default)."""

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
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=3072, kv_heads=None, max_positions=8192, rms_eps=1e-5, biases=True, vocab_size=128256
)
DEFAULTS = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12}


def import_eurobert(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.data = {**DEFAULTS, **f.data}
    # the sequence classifier's pooling and the masking token: not the encoder's
    f.harmless("classifier_pooling", "mask_token_id")
    spec = import_llama_like(f, cls, VARIANT)
    spec["layout"] = "encoder"
    if cls.head == "lm":
        spec["head"] = {**spec["head"], "bias": spec["mlp"]["bias"]}
    return spec


def export_eurobert(spec: Spec) -> dict[str, Any]:
    # EuroBertConfig's default pad_token_id (128001) is a row of its own vocabulary only: the
    # padding row changes no computation, and none fits any vocabulary
    return {**export_llama(spec), "pad_token_id": None}


FAMILY = Family(
    model_type="eurobert",
    classes=(
        HFClass("EuroBertModel", "eurobert", "none", base=True),
        HFClass("EuroBertForMaskedLM", "eurobert", "lm", base=False),
    ),
    bases=("_llama",),
    spec_family="eurobert",
    import_config=import_eurobert,
    export_config=export_eurobert,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=DENSE_BLOCK,
    ),
    buffers=ROPE_BUFFERS,
)
