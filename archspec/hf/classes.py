"""The transformers classes archspec maps onto: which family's names they use, and their heads.

A head class (`GPT2LMHeadModel`) keeps its base model under an attribute (`transformer.`), so its
state-dict keys carry that prefix; a base class (`GPT2Model`, `BertModel`) has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from archspec.errors import SpecError

Head = Literal["lm", "pooler", "none"]


@dataclass(frozen=True)
class HFClass:
    name: str
    model_type: str  # the config.json `model_type` whose names it uses
    head: Head  # lm: a language-model head; pooler: BERT's pooler; none: hidden states only
    base: bool  # a base model: state-dict keys without the base-model prefix
    layout: str | None = None  # forced layout (T5EncoderModel), else the family's


_CLASSES = [
    HFClass("BertModel", "bert", "pooler", base=True),
    HFClass("RobertaModel", "roberta", "pooler", base=True),
    HFClass("GPT2LMHeadModel", "gpt2", "lm", base=False),
    HFClass("GPT2Model", "gpt2", "none", base=True),
    HFClass("OpenAIGPTLMHeadModel", "openai-gpt", "lm", base=False),
    HFClass("OpenAIGPTModel", "openai-gpt", "none", base=True),
    HFClass("T5ForConditionalGeneration", "t5", "lm", base=False),
    HFClass("T5Model", "t5", "none", base=True),
    HFClass("T5EncoderModel", "t5", "none", base=True, layout="encoder"),
    HFClass("BartForConditionalGeneration", "bart", "lm", base=False),
    HFClass("BartModel", "bart", "none", base=True),
    HFClass("LlamaForCausalLM", "llama", "lm", base=False),
    HFClass("LlamaModel", "llama", "none", base=True),
    HFClass("MistralForCausalLM", "mistral", "lm", base=False),
    HFClass("MistralModel", "mistral", "none", base=True),
    HFClass("MixtralForCausalLM", "mixtral", "lm", base=False),
    HFClass("MixtralModel", "mixtral", "none", base=True),
    HFClass("BloomForCausalLM", "bloom", "lm", base=False),
    HFClass("BloomModel", "bloom", "none", base=True),
    HFClass("OPTForCausalLM", "opt", "lm", base=False),
    HFClass("OPTModel", "opt", "none", base=True),
]
CLASSES: dict[str, HFClass] = {c.name: c for c in _CLASSES}
# Old class names that some published config.json files still carry.
ALIASES = {"T5WithLMHeadModel": "T5ForConditionalGeneration"}

# Heads that archspec cannot express, with what to do instead.
UNSUPPORTED_HEADS = {
    "BertForMaskedLM": "BertModel",
    "BertForPreTraining": "BertModel",
    "BertLMHeadModel": "BertModel",
    "RobertaForMaskedLM": "RobertaModel",
    "RobertaForCausalLM": "RobertaModel",
}


def hf_class(name: str) -> HFClass:
    """The class record for a transformers class name; a SpecError for one archspec lacks."""
    name = ALIASES.get(name, name)
    if name in CLASSES:
        return CLASSES[name]
    if name in UNSUPPORTED_HEADS:
        base = UNSUPPORTED_HEADS[name]
        head = "cls.*" if base == "BertModel" else "lm_head.*"
        raise SpecError(
            f"the head of {name} (a dense + LayerNorm transform before the vocabulary "
            "projection) cannot be expressed in a spec",
            hint=f"import the encoder alone with `--architecture {base}` (hidden states and "
            f"pooled output), and skip the head's weights with `--hf-ignore '{head}'` "
            f"(load_weights(..., ignore=['{head}']))",
        )
    raise SpecError(
        f"transformers class '{name}' is not supported",
        hint=f"supported classes: {', '.join(CLASSES)}",
    )
