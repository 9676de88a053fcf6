"""LongRoPE's settings beyond its factor lists and original_max_position_embeddings, as
transformers reads them (`_compute_longrope_parameters` in transformers/modeling_rope_utils.py):
`factor` and `attention_factor`, both optional."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.hf.families._yarn import scaling_number
from archspec.kinds.positions.rope_longrope import LongRopeScaling

OPTIONAL = ("factor", "attention_factor")


def read_longrope(f: Fields, key: str, found: dict[str, Any], max_positions: int) -> dict[str, Any]:
    """The spec's longrope fields. transformers takes `factor`, when absent, as
    max_position_embeddings / original_max_position_embeddings (Phi-3's long-context
    models give none): the spec keeps the factor it resolves to, from which the default
    attention factor follows."""
    out: dict[str, Any] = {}
    for name in ("short_factor", "long_factor"):
        factors = found[name]
        if not isinstance(factors, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in factors
        ):
            raise f.error(key, f"{name}: expected a list of numbers, got {factors!r}")
        out[name] = [float(x) for x in factors]
    for name in OPTIONAL:
        if found.get(name) is not None:
            scaling_number(f, key, name, found[name])
    factor = found.get("factor")
    original = found["original_max_position_embeddings"]
    out["factor"] = float(factor if factor is not None else max_positions / original)
    if found.get("attention_factor") is not None:
        out["attention_factor"] = float(found["attention_factor"])
    return out


def write_longrope(p: LongRopeScaling, recompute_cache: bool = False) -> dict[str, Any]:
    """The rope_parameters of `p`, for a model type whose generation recomputes its cache
    past the original context (`recompute_cache`, Phi-3) or keeps it (Llama's): a spec
    that says otherwise is refused, since transformers would generate other tokens."""
    if p.recompute_cache != recompute_cache:
        does = "recomputes" if recompute_cache else "keeps"
        raise SpecError(
            f"transformers' generation {does} the cached keys of this model type when a "
            f"sequence outgrows original_max_seq_len; the spec says recompute_cache: "
            f"{str(p.recompute_cache).lower()}",
            path="position.scaling.recompute_cache",
        )
    out: dict[str, Any] = {
        "short_factor": list(p.short_factor or ()),
        "long_factor": list(p.long_factor or ()),
        "factor": p.factor,
    }
    if p.attention_factor is not None:
        out["attention_factor"] = p.attention_factor
    return out
