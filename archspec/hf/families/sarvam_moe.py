"""Sarvam-30B (`model_type: sarvam_moe`): GLM-4-MoE's decoder under other defaults.
transformers' auto mappings build it as Glm4MoeForCausalLM / Glm4MoeModel (`glm4_moe.py`: a
LLaMA block with biases on q, k and v alone when `attention_bias`, per-head q/k RMSNorms when
`use_qk_norm`, DeepSeek-V3's sigmoid-routed experts after `first_k_dense_replace` dense
layers); SarvamMoEConfig changes the defaults (a 262,144 vocabulary, hidden 4096, d_ff 8192,
19 layers, 64 heads of 64, 4 key/value heads, q/k norms on, 128 experts of 1024, top-6,
scaled 2.5, RoPE base 8,000,000) and rotates the whole head: `partial_rotary_factor` is 1.0
unless a file says otherwise (GLM-4-MoE's 0.5).

The original files' names (Sarvam's own code, `SarvamMoEForCausalLM`) are read as
SarvamMoEConfig's attribute_map reads them (`num_experts`, `num_shared_experts`,
`use_qkv_bias`). Its checkpoints, which transformers' conversion mapping renames on loading
and writes back on saving, keep the original tensors: `model.word_embeddings`, one fused
`attention.query_key_value` (q rows, then k, then v), `attention.dense`,
`attention.query_layernorm` / `key_layernorm`, the router's correction as
`mlp.gate.expert_bias`, one module per expert. transformers' memory is GLM-4-MoE's names
with the experts stacked (the `module` variant).
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families import glm4_moe
from archspec.hf.families._llama_like import (
    MODEL_NAMES,
    ROPE_BUFFERS,
    STACK_NAMES,
    LlamaVariant,
    import_llama_like,
)
from archspec.hf.families._sigmoid_moe import ExpertDefaults, read_sigmoid_moe
from archspec.hf.families.deepseek_v2 import SHARED
from archspec.hf.families.phi3 import fused_rows
from archspec.hf.family import Family, HFClass, NameRules, Target
from archspec.hf.name_rules import chain, lm_head, table

VARIANT = LlamaVariant(
    d_ff=8192,
    kv_heads=4,
    max_positions=131072,
    rms_eps=1e-6,
    vocab_size=262144,
    rotary_fraction=1.0,
    # an explicit null leaves rope_parameters without it: the rotary table's 1.0
    rotary_fraction_null=1.0,
    rope_theta=8_000_000.0,
)
# SarvamMoEConfig's defaults where they differ from import_llama_like's.
DEFAULTS = {"hidden_size": 4096, "num_hidden_layers": 19, "num_attention_heads": 64, "head_dim": 64}
EXPERTS = ExpertDefaults(
    dense=1,
    experts=128,
    top_k=6,
    width=1024,
    shared=1,
    scale=2.5,
    normalize=True,
    groups=1,
    top_groups=1,
)
ATTRIBUTE_MAP = {
    "num_local_experts": "n_routed_experts",
    "num_experts": "n_routed_experts",
    "num_shared_experts": "n_shared_experts",
    "use_qkv_bias": "attention_bias",
    "num_mtp_layers": "num_nextn_predict_layers",
}


def import_sarvam_moe(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map(ATTRIBUTE_MAP)
    f.refuse_null("head_dim", "SarvamMoEConfig (an int field)")
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    # qk_norm written false too: the base spec's norms must not stand in
    spec["attention"] = {
        **spec["attention"],
        "qkv_bias": f.bool("attention_bias", False),
        "qk_norm": f.bool("use_qk_norm", True),
    }
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = read_sigmoid_moe(f, spec["n_layers"], EXPERTS)
    return spec


# The original checkpoints' names, which transformers' save_pretrained writes back.
ATTENTION = table(
    {
        "attn_norm": "input_layernorm",
        "attn.q": fused_rows("attention.query_key_value", 0, 3, "q"),
        "attn.k": fused_rows("attention.query_key_value", 1, 3, "k"),
        "attn.v": fused_rows("attention.query_key_value", 2, 3, "v"),
        "attn.o": "attention.dense",
        "attn.q_norm": "attention.query_layernorm",
        "attn.k_norm": "attention.key_layernorm",
        "mlp_norm": "post_attention_layernorm",
        "mlp.gate": "mlp.gate_proj",
        "mlp.up": "mlp.up_proj",
        "mlp.down": "mlp.down_proj",
    }
)
EXPERT_MODULES = table(
    {
        "moe.router": Target(
            "mlp.gate",
            params={"e_score_correction_bias": "expert_bias"},
            note="the correction as expert_bias",
        ),
        "moe.experts.*.gate": "mlp.experts.*.gate_proj",
        "moe.experts.*.up": "mlp.experts.*.up_proj",
        "moe.experts.*.down": "mlp.experts.*.down_proj",
    }
)

FAMILY = Family(
    model_type="sarvam_moe",
    classes=(
        HFClass("SarvamMoEForCausalLM", "sarvam_moe", "lm", False, None, "Glm4MoeForCausalLM"),
        HFClass("SarvamMoEModel", "sarvam_moe", "none", True, None, "Glm4MoeModel"),
    ),
    bases=("_sarvam_moe",),
    import_config=import_sarvam_moe,
    export_config=glm4_moe.export_glm4_moe,
    names=NameRules(
        "model.",
        model=chain(table({"tok_emb": "word_embeddings"}), lm_head),
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=chain(EXPERT_MODULES, SHARED, ATTENTION),
        # transformers' memory: GLM-4-MoE's names, every layer's experts stacked.
        block_variants={"module": glm4_moe.FAMILY.names.block_variants["module"]},
        model_variants={"module": MODEL_NAMES},
    ),
    buffers=ROPE_BUFFERS,
)
