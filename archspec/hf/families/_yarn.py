"""YaRN's settings beyond factor and original_max_position_embeddings, as transformers reads
them (`_compute_yarn_parameters` in transformers/modeling_rope_utils.py): all optional."""

from __future__ import annotations

import math
from typing import Any

from archspec.hf.config_fields import Fields, shown
from archspec.kinds.positions.rope_yarn import YarnScaling

NUMBERS = ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim")
OPTIONAL = (*NUMBERS, "truncate")


def _mscale(scale: float, mscale: float = 1.0) -> float:
    return 0.1 * mscale * math.log(scale) + 1.0 if scale > 1 else 1.0


def scaling_number(f: Fields, key: str, name: str, value: Any) -> float:
    """A RoPE scaling setting that is a number (factor, beta_fast, ...): a finite int or float,
    not text or a boolean, which transformers' arithmetic would take or trip over."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise f.error(key, f"{name}: expected a number, got {shown(value)}")
    return float(value)


def read_truncate(f: Fields, key: str, found: dict[str, Any]) -> bool:
    """Whether the ramp's ends are rounded: transformers tests `truncate` for truth, left out
    meaning true and null false (gpt-oss writes false); text or a number is refused, which
    it would read as true whatever it says."""
    value = found.get("truncate", True)
    if value is not None and not isinstance(value, bool):
        raise f.error(key, f"truncate: expected true or false, got {shown(value)}")
    return bool(value)


def read_yarn(f: Fields, key: str, found: dict[str, Any]) -> dict[str, Any]:
    """The spec's yarn fields. transformers reads `beta_fast or 32` and `beta_slow or 1`, and
    derives attention_factor from mscale / mscale_all_dim when both are set (DeepSeek)."""
    truncate = read_truncate(f, key, found)
    for name in ("factor", *NUMBERS):
        if found.get(name) is not None:
            scaling_number(f, key, name, found[name])
    factor = float(found["factor"])
    attention = found.get("attention_factor")
    mscale, mscale_all_dim = found.get("mscale"), found.get("mscale_all_dim")
    if attention is None and mscale and mscale_all_dim:
        attention = _mscale(factor, mscale) / _mscale(factor, mscale_all_dim)
    out = {
        "beta_fast": float(found.get("beta_fast") or 32),
        "beta_slow": float(found.get("beta_slow") or 1),
    }
    if attention is not None:
        out["attention_factor"] = float(attention)
    if not truncate:
        out["truncate"] = False
    return out


def write_yarn(p: YarnScaling) -> dict[str, Any]:
    out: dict[str, Any] = {"beta_fast": p.beta_fast, "beta_slow": p.beta_slow}
    if p.attention_factor is not None:
        out["attention_factor"] = p.attention_factor
    if not p.truncate:
        out["truncate"] = False
    return out
