"""IQuest-Coder (`model_type: iquestcoder`, IQuest-Coder-V1-40B): LLaMA's decoder, which
transformers builds as LlamaForCausalLM; IQuestLab's own files name `IQuestCoderForCausalLM`
(their remote code). IQuestCoderConfig refuses the options of that code no released
checkpoint sets (`clip_qkv`, `use_sliding_window`)."""

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
    d_ff=27648, kv_heads=8, max_positions=131072, rms_eps=1e-5, biases=True, vocab_size=76800
)
# IQuestCoderConfig's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 5120, "num_hidden_layers": 80, "num_attention_heads": 40,
            "head_dim": 128}  # fmt: skip


def import_iquestcoder(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.expect("clip_qkv", None, None, "IQuestCoderConfig refuses it (no checkpoint clamps)")
    f.expect("use_sliding_window", (None, False), None, "IQuestCoderConfig refuses it")
    f.data = {**DEFAULTS, **f.data}
    return import_llama_like(f, cls, VARIANT)


FAMILY = Family(
    model_type="iquestcoder",
    classes=(
        HFClass("IQuestCoderForCausalLM", "iquestcoder", "lm", False, None, "LlamaForCausalLM"),
        HFClass("IQuestCoderModel", "iquestcoder", "none", True, None, "LlamaModel"),
    ),
    bases=("_llama",),
    spec_family="iquestcoder",
    import_config=import_iquestcoder,
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
