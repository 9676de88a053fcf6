"""Qwen3-VL-MoE's language model (`model_type: qwen3_vl_moe_text`, the `text_config` of a
`qwen3_vl_moe` config, Qwen3-VL-30B-A3B's and -235B-A22B's): Qwen3-MoE's block (q and k
normalised per head, experts without a shared one after any dense first layers) whose router
always renormalises its top-k weights (`norm_topk_prob` is not read), without a sliding
window, under interleaved M-RoPE, which on text is RoPE (`_mrope.py`). transformers builds it
as `Qwen3VLMoeTextModel`, hidden states without a head, its experts stacked in two tensors a
layer, as it saves them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.hf.config_fields import Fields
from archspec.hf.families import qwen3_moe
from archspec.hf.families._llama_like import LlamaVariant
from archspec.hf.families._mrope import check_sections, text_rope
from archspec.hf.families.mixtral import MODULE_BLOCK
from archspec.hf.family import Family, HFClass
from archspec.hf.name_rules import chain

# Qwen3VLMoeTextConfig's defaults where they differ from Qwen3MoeConfig's (transformers'
# configuration_qwen3_vl_moe.py).
VARIANT = replace(qwen3_moe.VARIANT, d_ff=5632, kv_heads=16, max_positions=128000,
                  rope_theta=5e5)  # fmt: skip
DEFAULTS = {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
            "num_experts_per_tok": 4, "moe_intermediate_size": 1408}  # fmt: skip
EXPERTS = 60  # num_experts, which the config class also reads as num_local_experts


def import_moe_text(
    f: Fields,
    cls: HFClass,
    variant: LlamaVariant = VARIANT,
    defaults: dict[str, Any] = DEFAULTS,
    experts: int = EXPERTS,
    reads_norm: bool = False,
) -> dict[str, Any]:
    """A Qwen3-MoE-like multimodal language model's fields over its config class's defaults.
    `reads_norm`: whether its router reads `norm_topk_prob` (Qwen3-Omni's does; Qwen3-VL's
    always renormalises)."""
    f.data = {**defaults, **f.data}
    if f.get("num_experts") is None and f.get("num_local_experts") is None:
        f.data["num_experts"] = experts
    sections = text_rope(f)
    reader = f"{cls.name} and its attention and router"
    for key in ("use_sliding_window", "sliding_window", "max_window_layers", "layer_types"):
        f.ignored(key, reader)
    if not reads_norm:
        f.ignored("norm_topk_prob", reader)
        f.data = {k: v for k, v in f.data.items() if k != "norm_topk_prob"}
    spec = qwen3_moe.import_qwen3_moe(f, cls, variant, windows=False)
    if not reads_norm:
        spec["moe"]["normalize"] = True
    check_sections(f, sections, spec, split=False)
    return spec


def moe_text_family(
    model_type: str, class_name: str, import_config: Any, stacked: bool = True
) -> Family:
    """The record of a Qwen3-MoE-like multimodal language model. `stacked`: transformers saves
    its experts stacked, two tensors a layer (Qwen3-VL-MoE's), not one module each
    (Qwen3-MoE's names, which Qwen3-Omni-MoE's checkpoints keep)."""
    names = qwen3_moe.FAMILY.names
    if stacked:
        names = replace(names, block=chain(qwen3_moe.QK_NORMS, MODULE_BLOCK), block_variants={})
    return replace(
        qwen3_moe.FAMILY,
        model_type=model_type,
        classes=(HFClass(class_name, model_type, "none", base=True),),
        import_config=import_config,
        spec_family=model_type,
        names=names,
    )


FAMILY = moe_text_family("qwen3_vl_moe_text", "Qwen3VLMoeTextModel", import_moe_text)
