"""transformers model_types import-hf knows and refuses, each with what the spec language
lacks to express it exactly; any other model_type is refused as unknown."""

from __future__ import annotations

# model_type -> what archspec cannot express of it (the error's reason).
REFUSED: dict[str, str] = {
    "gemma3_text": (
        "Gemma 3 rotates its windowed and its full layers with different RoPE settings "
        "(rope_local_base_freq on the windowed ones, rope_theta and its scaling on the "
        "others); a spec has one position setting per stack"
    ),
    "cohere2": (
        "Cohere 2 applies RoPE on its windowed layers only (its full layers have no "
        "positions); a spec applies one position setting to every layer"
    ),
    "smollm3": (
        "SmolLM3 leaves RoPE out of every no_rope_layer_interval-th layer (no_rope_layers); "
        "a spec applies one position setting to every layer"
    ),
    "deepseek_v3": (
        "DeepSeek-V3 routes with sigmoid scores plus a learned bias correction "
        "(e_score_correction_bias) and picks groups by the sum of their two best experts; "
        "archspec's router is a softmax whose groups are ranked by their best expert"
    ),
}


def refusal(model_type: str) -> str | None:
    """Why import-hf refuses this model_type, or None when it is simply unknown."""
    return REFUSED.get(model_type)
