"""The registry of Hugging Face families: one module per transformers model_type.

Each module holds one `Family` record (`FAMILY`). To add a family, write its module and list
it below; the order is the order in which `import-hf` names the supported model_types and
classes.
"""

from __future__ import annotations

from archspec.errors import SpecError
from archspec.hf.families import (
    albert,
    arcee,
    bart,
    bert,
    bert_generation,
    biogpt,
    blenderbot,
    bloom,
    camembert,
    codegen,
    cohere,
    cohere2,
    ctrl,
    cwm,
    data2vec_text,
    dbrx,
    deepseek_v2,
    deepseek_v3,
    distilbert,
    dots1,
    electra,
    ernie,
    ernie4_5,
    ernie4_5_moe,
    eurobert,
    exaone,
    exaone4,
    falcon,
    flex_olmo,
    gemma,
    gemma2,
    gemma3_text,
    glm,
    glm4,
    glm4_moe,
    glm4_moe_lite,
    gpt2,
    gpt_bigcode,
    gpt_neo,
    gpt_neox,
    gpt_oss,
    gptj,
    granite,
    granitemoe,
    granitemoeshared,
    helium,
    hyperclovax,
    internlm3,
    iquestcoder,
    jais2,
    llama,
    m2m_100,
    marian,
    mbart,
    megatron_bert,
    minicpm3,
    minimax_m2,
    ministral,
    mistral,
    mixtral,
    modernbert,
    mpt,
    mt5,
    mvp,
    nemotron,
    olmo,
    olmo2,
    olmo3,
    olmoe,
    openai_gpt,
    opt,
    pegasus,
    persimmon,
    phi,
    phi3,
    plbart,
    qwen2,
    qwen2_moe,
    qwen3,
    qwen3_moe,
    rembert,
    roberta,
    roberta_prelayernorm,
    sarvam_mla,
    sarvam_moe,
    seed_oss,
    smollm3,
    solar_open,
    stablelm,
    starcoder2,
    t5,
    vaultgemma,
    xglm,
    xlm_roberta,
    xlm_roberta_xl,
)
from archspec.hf.family import Family, HFClass

_MODULES = (
    bert,
    roberta,
    gpt2,
    openai_gpt,
    t5,
    bart,
    llama,
    mistral,
    gpt_oss,
    mixtral,
    gemma,
    gemma2,
    gemma3_text,
    modernbert,
    bloom,
    opt,
    qwen2,
    qwen3,
    xlm_roberta,
    mt5,
    gpt_bigcode,
    distilbert,
    albert,
    electra,
    qwen2_moe,
    gpt_neox,
    gptj,
    phi,
    falcon,
    phi3,
    olmo,
    olmo2,
    granite,
    deepseek_v2,
    deepseek_v3,
    dots1,
    glm4_moe,
    mbart,
    marian,
    pegasus,
    m2m_100,
    plbart,
    mvp,
    blenderbot,
    ernie,
    data2vec_text,
    megatron_bert,
    camembert,
    bert_generation,
    olmoe,
    qwen3_moe,
    starcoder2,
    stablelm,
    cohere,
    cohere2,
    seed_oss,
    smollm3,
    ernie4_5,
    ernie4_5_moe,
    helium,
    ministral,
    glm,
    glm4,
    cwm,
    arcee,
    nemotron,
    olmo3,
    jais2,
    vaultgemma,
    granitemoe,
    # zoo round 4
    exaone,
    internlm3,
    iquestcoder,
    gpt_neo,
    mpt,
    flex_olmo,
    exaone4,
    granitemoeshared,
    biogpt,
    persimmon,
    codegen,
    xlm_roberta_xl,
    roberta_prelayernorm,
    xglm,
    rembert,
    ctrl,
    hyperclovax,
    eurobert,
    minimax_m2,
    dbrx,
    glm4_moe_lite,
    sarvam_mla,
    minicpm3,
    sarvam_moe,
    solar_open,
)

FAMILIES: dict[str, Family] = {m.FAMILY.model_type: m.FAMILY for m in _MODULES}

# Every transformers class archspec maps onto, by name, in the registry's order.
CLASSES: dict[str, HFClass] = {c.name: c for f in FAMILIES.values() for c in f.classes}


def family_of(cls: HFClass) -> Family:
    """The family whose names and config a class uses."""
    return FAMILIES[cls.model_type]


def class_alias(name: str) -> str:
    """The current name of a transformers class that old config.json files still carry."""
    for family in FAMILIES.values():
        if name in family.class_aliases:
            return family.class_aliases[name]
    return name


def refuse_unsupported_head(name: str) -> None:
    """A SpecError for a head class that a spec cannot express, saying what to do instead."""
    for family in FAMILIES.values():
        heads = family.unsupported_heads
        if heads is not None and name in heads.classes:
            options = " ".join(f"--hf-ignore '{w}'" for w in heads.weights)
            raise SpecError(
                f"the head of {name} ({heads.what[name]}) cannot be expressed in a spec",
                hint=f"import the encoder alone with `--architecture {heads.instead}` (hidden "
                f"states and pooled output), and skip the head's weights with `{options}` "
                f"(load_weights(..., ignore={list(heads.weights)!r}))",
            )
