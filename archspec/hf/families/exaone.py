"""EXAONE 3 and 3.5 (`model_type: exaone`): LLaMA's decoder, which transformers builds as
LlamaForCausalLM. LG's files name their own code's class (`ExaoneForCausalLM`), its fields
(`num_layers`, `layer_norm_epsilon`, `activation_function`, which ExaoneConfig maps onto
LLaMA's) and its modules (`transformer.h.0.attn.attention.q_proj`): transformers renames
those on loading and back on saving, so a checkpoint carries them and its memory LLaMA's."""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import (
    DENSE_BLOCK,
    MODEL_NAMES,
    STACK_NAMES,
    LlamaVariant,
    import_llama_like,
)
from archspec.hf.families.llama import export_llama
from archspec.hf.family import Family, HFClass, NameRules
from archspec.hf.name_rules import chain, lm_head, table

VARIANT = LlamaVariant(
    d_ff=14336, kv_heads=8, max_positions=4096, rms_eps=1e-5, biases=True, vocab_size=102400
)
ATTRIBUTE_MAP = {
    "num_layers": "num_hidden_layers",
    "layer_norm_epsilon": "rms_norm_eps",
    "activation_function": "hidden_act",
}
THETA = 500000.0  # ExaoneConfig's default_theta


def import_exaone(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map(ATTRIBUTE_MAP)
    params = f.get("rope_parameters") or {}
    params = params if isinstance(params, dict) else {}  # the RoPE reader refuses it
    if "rope_theta" not in params and not f.present("rope_theta"):
        f.data = {**f.data, "rope_theta": THETA}
    return import_llama_like(f, cls, VARIANT)


# The modules of LG's code, as its checkpoints (and transformers' save_pretrained) name them.
CHECKPOINT_BLOCK = table(
    {
        "attn_norm": "ln_1",
        "attn.q": "attn.attention.q_proj",
        "attn.k": "attn.attention.k_proj",
        "attn.v": "attn.attention.v_proj",
        "attn.o": "attn.attention.out_proj",
        "mlp_norm": "ln_2",
        "mlp.gate": "mlp.c_fc_0",
        "mlp.up": "mlp.c_fc_1",
        "mlp.down": "mlp.c_proj",
    }
)
LLAMA_NAMES = NameRules(
    "model.", model=MODEL_NAMES, stack=STACK_NAMES, blocks=lambda role: "layers", block=DENSE_BLOCK
)

FAMILY = Family(
    model_type="exaone",
    classes=(
        HFClass("ExaoneForCausalLM", "exaone", "lm", False, None, "LlamaForCausalLM"),
        HFClass("ExaoneModel", "exaone", "none", True, None, "LlamaModel"),
    ),
    bases=("_llama",),
    spec_family="exaone",
    import_config=import_exaone,
    export_config=export_llama,
    names=NameRules(
        "transformer.",
        model=chain(table({"tok_emb": "wte"}), lm_head),
        stack=table({"final_norm": "ln_f"}),
        blocks=lambda role: "h",
        block=CHECKPOINT_BLOCK,
        layouts={"memory": LLAMA_NAMES},
    ),
)
