"""Cohere 2 (`model_type: cohere2`; Command R7B, Command A): Cohere's parallel block, tied
head and logit scale, with three 4096-token windowed layers to each full one (`layer_types`,
or the older `sliding_window_pattern`: 4), and RoPE on the windowed layers only: the full
layers attend without positions (the spec's `position_pattern` marks them N). transformers
rotates a layer only when it has a window, so a config without `sliding_window` would have no
positions at all: it is refused.

Cohere2Config sets head_dim to hidden_size // num_attention_heads whatever the file says, and
real files carry the original Cohere settings (use_parallel_block, rotary_pct, ...) that no
transformers code reads."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._llama_like import LlamaVariant
from archspec.hf.families._windows import check_layer_types, layer_types, window_pattern
from archspec.hf.families.cohere import FAMILY as COHERE
from archspec.hf.families.cohere import export_cohere_like, import_cohere_like
from archspec.hf.family import Family, HFClass
from archspec.spec.schema import Spec

VARIANT = LlamaVariant(
    d_ff=22528,
    kv_heads=None,
    max_positions=8192,
    rms_eps=1e-5,
    vocab_size=256000,
    norm_kind="layernorm",
    eps_key="layer_norm_eps",
)
# Cohere2Config's defaults where they differ from what import_llama_like assumes.
DEFAULTS = {"hidden_size": 8192, "num_hidden_layers": 40, "num_attention_heads": 64}
WINDOW = 4096
PATTERN = 4  # sliding_window_pattern: every 4th layer is a full one
# Settings of Cohere's own format that real config.json files carry; Cohere2Config and
# Cohere2Model read none of them.
COHERE_FORMAT = (
    "use_parallel_block",
    "rotary_pct",
    "position_embedding_type",
    "use_gated_activation",
    "use_parallel_embedding",
    "use_embedding_sharing",
    "use_qk_norm",
)


def _layer_types(f: Fields, n_layers: int) -> list[str]:
    """`layer_types`, or the older sliding_window_pattern's (every n-th layer full)."""
    every = f.int("sliding_window_pattern", PATTERN)
    if every < 1:
        raise f.error("sliding_window_pattern", f"expected a positive integer, got {every}")
    default = [
        "sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)
    ]
    return check_layer_types(f, f.get("layer_types") or default, n_layers)


def import_cohere2(f: Fields, cls: HFClass) -> dict[str, Any]:
    f.refuse_null("head_dim", "transformers' Cohere2RotaryEmbedding")
    # An explicit head_dim is the attention's: Cohere2Config's __post_init__ sets hidden_size
    # // num_attention_heads, and the field given in the file is set after it (transformers
    # 5.24: Cohere2Config(hidden_size=64, num_attention_heads=4, head_dim=8).head_dim is 8).
    data = {**DEFAULTS, **f.data}
    for key in COHERE_FORMAT:
        f.ignored(key, "Cohere2Config and Cohere2Model")
    f.data = {k: v for k, v in data.items() if k not in COHERE_FORMAT}
    f.harmless("cache_implementation")  # which KV cache class generate() builds
    spec = import_cohere_like(f, cls, VARIANT)
    types = _layer_types(f, spec["n_layers"])
    pattern = window_pattern(f, types)
    window = (
        f.size("sliding_window", WINDOW) if f.data.get("sliding_window", 0) is not None else None
    )
    f.harmless("sliding_window")
    if window is None or "L" not in pattern:
        raise f.error(
            "sliding_window" if window is None else "layer_types",
            "Cohere 2 rotates its windowed layers alone: without any, no layer has positions, "
            "which an import from Cohere's base spec (RoPE on interleaved pairs) does not "
            "express",
            hint="give a sliding_window and sliding_attention layers, as every released "
            "Cohere 2 model has",
        )
    spec["attention"] |= {"sliding_window": window, "window_pattern": pattern}
    # The full layers attend without positions; written either way, as the base spec's
    # every fourth layer without them is not the config's where all its layers slide.
    spec["position_pattern"] = pattern.replace("L", "P").replace("G", "N")
    return spec


def export_cohere2(spec: Spec) -> dict[str, Any]:
    windowed = [spec.windowed(i) for i in range(spec.n_layers)]
    rotated = [spec.layer_position(i).entry.rotary for i in range(spec.n_layers)]
    if windowed != rotated:
        raise SpecError(
            "Cohere 2 rotates exactly its windowed layers; the spec's position_pattern "
            f"{spec.position_pattern!r} rotates others than window_pattern "
            f"{spec.attention.window_pattern!r} windows",
            path="position_pattern",
        )
    if not any(windowed):
        raise SpecError(
            "Cohere 2 rotates its windowed layers alone; the spec windows none",
            path="attention.sliding_window",
        )
    fields = export_cohere_like(spec)
    del fields["use_qk_norm"]  # Cohere2Config does not read it
    return fields | {
        "sliding_window": spec.attention.sliding_window,
        "layer_types": layer_types(spec),
    }


FAMILY = Family(
    model_type="cohere2",
    classes=(
        HFClass("Cohere2ForCausalLM", "cohere2", "lm", base=False),
        HFClass("Cohere2Model", "cohere2", "none", base=True),
    ),
    bases=("_cohere2",),
    import_config=import_cohere2,
    export_config=export_cohere2,
    names=COHERE.names,
    buffers=COHERE.buffers,
)
