"""MiniCPM3 (`model_type: minicpm3`, transformers 5's MiniCPM3ForCausalLM): DeepSeek-V2's
latent attention under LLaMA's dense block, with MiniCPM's three muP scalings.

As transformers computes it (modeling_minicpm3.py): the attention is DeepseekV2Attention's
(latents' RMSNorms at epsilon 1e-6, keys and values expanded to every head, YaRN's
`mscale_all_dim` on the scores) but rotated by `apply_rotary_pos_emb`, the two halves of
the `qk_rope_head_dim` channels (`position.interleaved: false`); LongRoPE as LLaMA reads it.
The scalings:

- `scale_emb`: MiniCPM3ScaledWordEmbedding multiplies the embeddings by it after rounding
  it to the weights' dtype (`embed_scale.to(weight.dtype)`), where `embedding.multiplier`
  multiplies by the float. The two agree in every dtype exactly when the float is a
  bfloat16 and a float16 value (12, the released model's, is): any other is refused.
- `scale_depth / sqrt(num_hidden_layers)`: each sublayer's output times that float before
  the residual add, `residual_multiplier` (computed the same way, so the same float).
- `hidden_size / dim_model_base` (the config's `logits_scaling`): the final hidden states
  divided by it before the bias-free `lm_head`, `head.hidden_divisor`.
"""

from __future__ import annotations

import math
import struct
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

# MiniCPM3Config's defaults (openbmb/MiniCPM3-4B's sizes), RMSNorm eps 1e-5, a tied head;
# its num_key_value_heads is 40 whatever the head count (a config with other heads must say).
DEFAULTS = DecoderDefaults(
    2560, 40, 62, 6400, 73448, 32768, latent=(256, 768, 32, 64, None), eps=1e-5, tied=True,
    longrope=True, kv_heads=40,
)  # fmt: skip


def _in_every_dtype(x: float) -> bool:
    """Whether rounding x to bfloat16 and to float16 leaves it as it is (without torch,
    which a family record does not import): a float32 whose low 16 bits are zero is a
    bfloat16; struct's "e" is IEEE half precision."""
    try:
        single = struct.unpack("<f", struct.pack("<f", x))[0]
        half = struct.unpack("<e", struct.pack("<e", x))[0]
    except OverflowError:
        return False
    low_bits = struct.unpack("<I", struct.pack("<f", x))[0] & 0xFFFF
    return single == x and low_bits == 0 and half == x


def import_minicpm3(f: Fields, cls: HFClass) -> dict[str, Any]:
    spec = latent_decoder(f, cls, interleaved=False, defaults=DEFAULTS)
    spec["mlp"]["bias"] = f.bool("mlp_bias", False)
    f.refuse_null("scale_emb", "MiniCPM3Config")
    scale = f.float("scale_emb", 12.0)
    if not _in_every_dtype(scale):
        raise f.error(
            "scale_emb",
            f"transformers rounds {scale} to the weights' dtype before multiplying, "
            "archspec's embedding.multiplier multiplies by the float itself: they agree only "
            "for a value bfloat16 and float16 hold exactly (such as 12)",
        )
    n = spec["n_layers"]
    depth = math.sqrt(n) if f.is_null("scale_depth") else f.float("scale_depth", 1.4)
    base = spec["d_model"] if f.is_null("dim_model_base") else f.int("dim_model_base", 256)
    if base <= 0:
        raise f.error("dim_model_base", f"expected a positive width, got {base}")
    spec["embedding"] = {**spec["embedding"], "multiplier": scale}
    spec["residual_multiplier"] = depth / math.sqrt(n)  # as MiniCPM3DecoderLayer computes it
    spec["head"] = {**spec["head"], "hidden_divisor": spec["d_model"] / base}
    return spec


def _scale_depth(m: float, n: int) -> float:
    """The shortest scale_depth whose scale_depth / sqrt(n) is the float m."""
    exact = m * math.sqrt(n)
    for digits in range(1, 18):
        if round(exact, digits) / math.sqrt(n) == m:
            return round(exact, digits)
    return exact


def export_minicpm3(spec: Spec) -> dict[str, Any]:
    divisor = spec.head.hidden_divisor
    base = round(spec.d_model / divisor)
    if base < 1 or spec.d_model / base != divisor:
        raise SpecError(
            f"MiniCPM3 divides by hidden_size / dim_model_base for a whole dim_model_base: "
            f"{spec.d_model} / {divisor} is not one",
            path="head.hidden_divisor",
        )
    if spec.head.logits_divisor != 1:
        raise SpecError("MiniCPM3 divides the head's input, not its logits",
                        path="head.logits_divisor")  # fmt: skip
    if spec.moe is not None:
        raise SpecError("MiniCPM3's MLPs are dense", path="moe")
    return {
        **latent_fields(spec),
        "mlp_bias": spec.mlp.bias,
        "scale_emb": spec.embedding.multiplier,
        "scale_depth": _scale_depth(spec.residual_multiplier, spec.n_layers),
        "dim_model_base": base,
    }


FAMILY = Family(
    model_type="minicpm3",
    classes=(
        HFClass("MiniCPM3ForCausalLM", "minicpm3", "lm", base=False),
        HFClass("MiniCPM3Model", "minicpm3", "none", base=True),
    ),
    bases=("_minicpm3",),
    import_config=import_minicpm3,
    export_config=export_minicpm3,
    names=NameRules(
        "model.",
        model=MODEL_NAMES,
        stack=STACK_NAMES,
        blocks=lambda role: "layers",
        block=ATTENTION,
    ),
    buffers=ROPE_BUFFERS,
)
