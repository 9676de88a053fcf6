"""Qwen3-Omni-MoE's thinker language model (`model_type: qwen3_omni_moe_text`, built as
`Qwen3OmniMoeThinkerTextModel`, hidden states without a head): Qwen3-VL-MoE's
(`qwen3_vl_moe_text.py`: Qwen3-MoE's block without a window, under interleaved M-RoPE, which on
text is RoPE) whose router renormalises its top-k weights only when `norm_topk_prob` says so,
which its config class does by default; transformers saves its experts one module each, under
Qwen3-MoE's names."""

from __future__ import annotations

from dataclasses import replace

from archspec.hf.families import qwen3_moe
from archspec.hf.families.qwen3_vl_moe_text import import_moe_text, moe_text_family

# Qwen3OmniMoeTextConfig's defaults where they differ from Qwen3MoeConfig's (transformers'
# configuration_qwen3_omni_moe.py).
VARIANT = replace(qwen3_moe.VARIANT, d_ff=18944, vocab_size=3584, rope_theta=1e6)
DEFAULTS = {"hidden_size": 2048, "num_hidden_layers": 28, "num_attention_heads": 28,
            "num_experts_per_tok": 8, "moe_intermediate_size": 768,
            "norm_topk_prob": True}  # fmt: skip

FAMILY = moe_text_family(
    "qwen3_omni_moe_text",
    "Qwen3OmniMoeThinkerTextModel",
    lambda f, cls: import_moe_text(f, cls, VARIANT, DEFAULTS, experts=128, reads_norm=True),
    stacked=False,
)
