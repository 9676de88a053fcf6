"""The parameter report of a compiled spec: plain data for `--json` and for the rich table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archspec.backends.count.params import Row, group_totals, parameter_count, parameter_rows
from archspec.ir.nodes import IR, MoE
from archspec.ir.visit import walk

if TYPE_CHECKING:
    import sympy as sp


def simplify(expr: sp.Expr) -> sp.Expr:
    """A readable closed form: factor out common terms, grouped by the layer count."""
    import sympy as sp

    expr = sp.expand(expr)
    layers = sorted((s for s in expr.free_symbols if "layers" in s.name), key=str)
    return sp.collect(expr, layers, func=sp.factor) if layers else sp.factor(expr)


def shape_text(ir: IR, row: Row, symbolic: bool = False) -> str:
    """`768 × 768 + 768` (weight shape, then bias) as in the BERT table of the seed documents."""
    show = (lambda e: str(e)) if symbolic else (lambda e: f"{ir.value(e)}")
    text = " × ".join(show(t) for t in row.shape_terms)
    if row.bias is not None:
        text += f" + {show(row.bias)}"
    return text


def has_moe(ir: IR) -> bool:
    return any(isinstance(p.node, MoE) for p in walk(ir.root))


def param_report(ir: IR, symbolic: bool = False) -> dict[str, Any]:
    """Everything `archspec count` shows about parameters, as JSON-ready data."""
    who = ir.identity
    rows = parameter_rows(ir)
    total_expr = parameter_count(ir.root)
    report: dict[str, Any] = {
        "name": who.name,
        "family": who.family,
        "layout": ir.root.layout,
        "hf_class": who.hf_class,
        "source": who.source,
        "params": {
            "total": ir.value(total_expr),
            "rows": [
                {
                    "name": row.name,
                    "group": row.group,
                    "count": ir.value(row.count),
                    "per_copy": ir.value(row.per_copy),
                    "copies": ir.value(row.copies),
                    "shape": shape_text(ir, row),
                    "tied_to": row.tied_to,
                    # The shape in the spec's dimension names, when the IR carries them.
                    **({"formula": shape_text(ir, row, symbolic=True)} if ir.symbolic else {}),
                }
                for row in rows
            ],
            "groups": {g: ir.value(t) for g, t in group_totals(rows).items()},
        },
    }
    if has_moe(ir):
        report["params"]["active"] = ir.value(parameter_count(ir.root, active=True))
    if symbolic:
        if not ir.symbolic:
            raise ValueError("formulas need an IR built with symbolic=True")
        report["symbolic"] = {
            "total": str(simplify(total_expr)),
            "groups": {g: str(simplify(t)) for g, t in group_totals(rows).items()},
        }
        if has_moe(ir):
            report["symbolic"]["active"] = str(simplify(parameter_count(ir.root, active=True)))
    return report
