"""Youtu-LLM (`model_type: youtu`, tencent/Youtu-LLM-2B): LLaMA's dense decoder with
DeepSeek-V3's multi-head latent attention.

As transformers 5 builds it (modular_youtu.py): YoutuDecoderLayer is LlamaDecoderLayer around
YoutuAttention, which is DeepseekV3Attention (latent queries and keys/values, the latents'
RMSNorms at epsilon 1e-6 whatever `rms_norm_eps` says, YaRN's `mscale_all_dim` on the scores),
and YoutuMLP, which is Qwen3's bias-free gated MLP; the rotation turns interleaved channel
pairs when `rope_interleave` (the default) and rotate_half's halves otherwise. YoutuConfig is
DeepseekV3Config without its experts (it deletes `n_routed_experts` and the other MoE fields),
with its own sizes and a tied head by default.
"""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import MODEL_NAMES, ROPE_BUFFERS, STACK_NAMES
from archspec.hf.families.deepseek_v2 import (
    ATTENTION,
    DecoderDefaults,
    latent_decoder,
    latent_fields,
)
from archspec.hf.family import Family, HFClass, NameRules
from archspec.spec.schema import Spec

# YoutuConfig's sizes (tencent/Youtu-LLM-2B's, its docstring says), DeepseekV3Config's latent
# sizes and eps, a tied head, one key/value head per head.
DEFAULTS = DecoderDefaults(
    2048, 16, 32, 6144, 128256, 131072, latent=(512, 1536, 64, 128, 128), tied=True,
    kv_heads=16,
)  # fmt: skip


def import_youtu(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = latent_decoder(f, cls, f.bool("rope_interleave", True), DEFAULTS)
    spec["moe"] = None  # every layer dense: the base spec's experts must not stand in
    return spec


def export_youtu(spec: Spec) -> dict[str, Any]:
    if spec.moe is not None:
        raise SpecError("YoutuForCausalLM's MLPs are dense", path="moe")
    return latent_fields(spec) | {"rope_interleave": spec.position.interleaved}


FAMILY = Family(
    model_type="youtu",
    classes=(
        HFClass("YoutuForCausalLM", "youtu", "lm", base=False),
        HFClass("YoutuModel", "youtu", "none", base=True),
    ),
    bases=("_youtu",),
    import_config=import_youtu,
    export_config=export_youtu,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=ATTENTION,
    ),
    buffers=ROPE_BUFFERS,
)
