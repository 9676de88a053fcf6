"""Solar Open (`model_type: solar_open`, Solar-Open-100B): GLM-4-MoE's experts on every layer
under LLaMA's attention. As transformers' modeling_solar_open.py builds it: LlamaAttention
with biases on q, k and v alone (`attention_bias`; o_proj has none), no q/k norms, RoPE on
rotate_half's halves of the whole head (LlamaAttention rotates whole heads: a
`partial_rotary_factor` other than 1, on which transformers fails, is refused), and on every
layer (no dense one) DeepSeek-V3's sigmoid-routed experts with `n_shared_experts` shared ones
(`_sigmoid_moe.py`). Checkpoints keep GLM-4-MoE's names, one module per expert; transformers
5 stacks them in memory.

SolarOpenConfig has no `intermediate_size`, `first_k_dense_replace`, `use_qk_norm` nor
multi-token-prediction layers: real files carry the first two (and GLM-4-MoE's others may),
which no SolarOpen class reads, so they are reported as ignored.
"""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families import glm4_moe
from archspec.hf.families._llama_like import LlamaVariant, import_llama_like
from archspec.hf.families._sigmoid_moe import ExpertDefaults, read_sigmoid_moe
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=1280,  # no dense MLP: the spec's d_ff is the experts' width, unread
    kv_heads=8,
    max_positions=131072,
    rms_eps=1e-5,
    vocab_size=196608,
    rotary_fraction=1.0,
    # an explicit null leaves rope_parameters without it: the rotary table's 1.0
    rotary_fraction_null=1.0,
    rope_theta=1_000_000.0,
)
# SolarOpenConfig's defaults where they differ from import_llama_like's.
DEFAULTS = {
    "hidden_size": 4096,
    "num_hidden_layers": 48,
    "num_attention_heads": 64,
    "head_dim": 128,
}
EXPERTS = ExpertDefaults(
    dense=0,  # unread: every layer has experts
    experts=128,
    top_k=8,
    width=1280,
    shared=1,
    scale=1.0,
    normalize=True,
    groups=1,
    top_groups=1,
)
READER = "transformers' SolarOpen classes (experts on every layer, no q/k norms)"


def import_solar_open(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("head_dim", "SolarOpenConfig (an int field)")
    for key in ("intermediate_size", "first_k_dense_replace", "use_qk_norm"):
        f.ignored(key, READER)
    f.data = {k: v for k, v in f.data.items() if k != "intermediate_size"}
    f.data = {**DEFAULTS, **f.data}
    spec = import_llama_like(f, cls, VARIANT)
    if "rotary_dim" in spec["position"]:
        # LlamaAttention rotates the whole head by a table of partial_rotary_factor's width:
        # transformers' SolarOpen fails on any other fraction than 1.
        raise f.error(
            "partial_rotary_factor",
            "transformers' SolarOpen rotates whole heads (LlamaAttention), and fails on a "
            "rotary table narrower than the head",
        )
    spec["attention"] = {**spec["attention"], "qkv_bias": f.bool("attention_bias", False)}
    spec["moe"] = read_sigmoid_moe(f, spec["n_layers"], EXPERTS, dense=0)
    spec["d_ff"] = spec["moe"]["d_ff"]
    return spec


def export_solar_open(spec: Spec) -> dict[str, Any]:
    if spec.moe is None or spec.moe.dense_layers:
        raise SpecError(
            f"{spec.hf_class} has experts on every layer (moe.dense_layers 0)",
            path="moe.dense_layers",
        )
    if spec.attention.qk_norm:
        raise SpecError(f"{spec.hf_class} has no q/k norms", path="attention.qk_norm")
    out = glm4_moe.export_glm4_moe(spec)
    for key in ("intermediate_size", "first_k_dense_replace", "use_qk_norm"):
        del out[key]
    return out


FAMILY = Family(
    model_type="solar_open",
    classes=(
        HFClass("SolarOpenForCausalLM", "solar_open", "lm", base=False),
        HFClass("SolarOpenModel", "solar_open", "none", base=True),
    ),
    bases=("_solar_open",),
    import_config=import_solar_open,
    export_config=export_solar_open,
    names=glm4_moe.FAMILY.names,
    buffers=glm4_moe.FAMILY.buffers,
)
