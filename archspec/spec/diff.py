"""The difference between two specs, field by field, with derived defaults made explicit.

`archspec diff` shows it above the module-level difference of the two compiled models.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from archspec.spec.schema import Spec

NOT_COMPARED = ("name", "abstract")


def _derived(spec: Spec) -> dict[str, Any]:
    """The effective values of the fields whose default depends on other fields."""
    derived = {
        "n_kv_heads": spec.kv_heads,
        "head_dim": spec.resolved_head_dim,
        "norm.bias": spec.norm.has_bias,
        "final_norm": spec.has_final_norm,
    }
    if spec.layout == "encoder-decoder":
        derived.update({f"{r}.n_layers": spec.stack_layers(r) for r in ("encoder", "decoder")})
    return derived


def spec_diff(a: Spec, b: Spec) -> list[dict[str, Any]]:
    """The fields whose effective values differ, in the order the schema declares them.
    Sections present on both sides are compared field by field (`moe.top_k`); a section one
    side lacks (`moe: null`) is one entry holding the other side's whole section."""
    derived_a, derived_b = _derived(a), _derived(b)
    out: list[dict[str, Any]] = []

    def side(value: Any, derived: dict[str, Any], key: str) -> tuple[Any, bool]:
        if value is None and key in derived:
            return derived[key], True
        return (dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value), False

    def compare(prefix: str, obj_a: Any, obj_b: Any) -> None:
        for f in dataclasses.fields(obj_a):
            key = f"{prefix}{f.name}"
            va, vb = getattr(obj_a, f.name), getattr(obj_b, f.name)
            if key in NOT_COMPARED:
                continue
            # Records of two kinds (a learned position, a rope one) differ as a whole.
            if dataclasses.is_dataclass(va) and type(va) is type(vb):
                compare(f"{key}.", va, vb)
                continue
            (va, da), (vb, db) = side(va, derived_a, key), side(vb, derived_b, key)
            if va != vb:
                out.append({"field": key, "a": va, "b": vb, "a_default": da, "b_default": db})

    compare("", a, b)
    return out
