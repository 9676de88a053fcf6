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


def dimensions(ir: IR) -> dict[str, Any]:
    """The model's resolved sizes, read from the tree (an integer IR has no symbol table)."""
    model = ir.root
    block = model.stacks[0].block_variants[-1]
    attn, ff = block.attn, block.ff
    dims: dict[str, Any] = {
        "d_model": ir.value(model.d_model),
        "vocab_size": ir.value(model.vocab_size),
        "max_seq_len": ir.value(model.max_seq_len),
        "n_layers": {s.role: sum(ir.value(r.count) for r in s.blocks.runs) for s in model.stacks},
        "n_heads": ir.value(attn.n_heads),
        "n_kv_heads": ir.value(attn.n_kv_heads),
        "head_dim": ir.value(attn.head_dim),
    }
    if isinstance(ff, MoE):
        dims |= {"d_ff": ir.value(ff.expert.hidden), "n_experts": ir.value(ff.n_experts),
                 "top_k": ir.value(ff.top_k)}  # fmt: skip
    else:
        dims["d_ff"] = ir.value(ff.hidden)
    return dims


def param_report(ir: IR, symbolic: bool = False) -> dict[str, Any]:
    """Everything `archspec count` shows about parameters, as JSON-ready data."""
    who = ir.identity
    rows = parameter_rows(ir)
    total_expr = parameter_count(ir.root)
    report: dict[str, Any] = {
        "name": who.name,
        "overrides": list(who.overrides),
        "family": who.family,
        "layout": ir.root.layout,
        "hf_class": who.hf_class,
        "source": who.source,
        # The resolved dimensions: what the figures describe, whatever --set changed.
        "dims": dimensions(ir),
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
                    # The same shape for programs: the weight's dimensions as PyTorch stores
                    # them (null when tied) and the bias's (null when none).
                    "weight_shape": None if row.tied_to else [ir.value(t) for t in row.shape_terms],
                    "bias_shape": [ir.value(row.bias)] if row.bias is not None else None,
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
