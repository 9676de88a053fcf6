"""Sarvam-105B (`model_type: sarvam_mla`): DeepSeek-V3's decoder under other defaults.
transformers' auto mappings build it as DeepseekV3ForCausalLM / DeepseekV3Model (its
conversion mapping is qwen2_moe's, as DeepSeek-V3's: the checkpoints keep one module per
expert under DeepSeek-V3's names), so everything `deepseek_v3.py` says of the attention and
the experts holds; SarvamMLAConfig changes only the defaults (a 262,144 vocabulary, hidden
4096, d_ff 16384, 32 layers, 64 heads with one key/value head each, no query latent, 128
experts of 2048, top-8, one group, scaled 2.5, 4096 positions, one dense first layer).

The original files (written for Sarvam's own code, `SarvamMLAForCausalLM`) are read as
SarvamMLAConfig translates them: `num_experts` and `num_shared_experts` are n_routed_experts
and n_shared_experts, a `rope_scaling` of type `deepseek_yarn` is YaRN, and `head_dim` and
`q_head_dim` are dropped whatever they say (the class derives them). No DeepseekV3 class
reads `topk_method` nor `scoring_func`: they are reported as ignored, as is
`num_nextn_predict_layers` (no class builds the multi-token-prediction layer).
"""

from __future__ import annotations

from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families import deepseek_v3
from archspec.hf.families._sigmoid_moe import ExpertDefaults, read_sigmoid_moe
from archspec.hf.families.deepseek_v2 import DecoderDefaults, latent_decoder
from archspec.hf.family import Family, HFClass

# SarvamMLAConfig's defaults (DeepseekV3Config's latent sizes, no query latent).
DECODER = DecoderDefaults(
    hidden=4096, heads=64, layers=32, d_ff=16384, vocab=262144, positions=4096,
    latent=(512, None, 64, 128, 128), rope_aliases=(("deepseek_yarn", "yarn"),),
)  # fmt: skip
EXPERTS = ExpertDefaults(
    dense=1,
    experts=128,
    top_k=8,
    width=2048,
    shared=1,
    scale=2.5,
    normalize=True,
    groups=1,
    top_groups=1,
)
# SarvamMLAConfig's attribute_map: the original config's names, and transformers' own.
ATTRIBUTE_MAP = {
    "num_local_experts": "n_routed_experts",
    "num_experts": "n_routed_experts",
    "num_shared_experts": "n_shared_experts",
    "num_mtp_layers": "num_nextn_predict_layers",
}
READER = "transformers' DeepseekV3 classes, which SarvamMLA builds,"


def import_sarvam_mla(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.follow_attribute_map(ATTRIBUTE_MAP)
    f.harmless("q_head_dim")  # SarvamMLAConfig drops it, whatever it says
    spec = latent_decoder(f, cls, f.bool("rope_interleave", True), DECODER)
    for key in ("topk_method", "scoring_func"):
        f.ignored(key, READER)
    f.expect(
        "moe_layer_freq",
        1,
        1,
        "transformers' DeepseekV3 puts experts on every layer from first_k_dense_replace on",
    )
    f.harmless("aux_loss_alpha", "seq_aux")  # training losses only
    f.expect("ep_size", 1, 1, "expert parallelism of the original code")
    # None (every layer dense) is written too: the base spec's experts must not stand in.
    spec["moe"] = read_sigmoid_moe(f, spec["n_layers"], EXPERTS)
    return spec


FAMILY = Family(
    model_type="sarvam_mla",
    classes=(
        HFClass("SarvamMLAForCausalLM", "sarvam_mla", "lm", False, None, "DeepseekV3ForCausalLM"),
        HFClass("SarvamMLAModel", "sarvam_mla", "none", True, None, "DeepseekV3Model"),
    ),
    bases=("_sarvam_mla",),
    import_config=import_sarvam_mla,
    export_config=deepseek_v3.export_deepseek_v3,
    names=deepseek_v3.FAMILY.names,
    buffers=deepseek_v3.FAMILY.buffers,
)
