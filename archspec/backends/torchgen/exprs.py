"""Printing the IR's size expressions as Python over the generated `Config`.

`d_model` becomes `config.d_model`, `n_heads*head_dim` becomes `config.n_heads * config.head_dim`.
When a spec leaves `head_dim` to its default, the IR writes it as `d_model/n_heads`; the
generated Config then has a `head_dim` property and expressions are printed in terms of it
(`n_kv_heads*d_model/n_heads` -> `config.n_kv_heads * config.head_dim`).
"""

from __future__ import annotations

import sympy as sp

from archspec.ir.nodes import IR

# The order of the Config fields, and of the factors in a printed product.
DIM_ORDER = (
    "vocab_size",
    "max_seq_len",
    "d_model",
    "d_embedding",
    "n_layers",
    "n_layer_groups",
    "n_encoder_layers",
    "n_decoder_layers",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "d_ff",
    "d_ff_expert",
    "d_ff_shared",
    "n_experts",
    "top_k",
)


def _rank(symbol: sp.Symbol) -> tuple[int, str]:
    name = symbol.name
    return (DIM_ORDER.index(name) if name in DIM_ORDER else len(DIM_ORDER), name)


def dim_symbol(name: str) -> sp.Symbol:
    """The IR's symbol for a dimension (symbols are equal when name and assumptions are)."""
    return sp.Symbol(name, positive=True, integer=True)


class ExprPrinter:
    """Prints size expressions of one IR as Python code reading attributes of `owner`."""

    def __init__(self, ir: IR, owner: str = "config", derive_head_dim: bool = True,
                 norm_eps: float | None = None) -> None:  # fmt: skip
        self.owner = owner
        # The epsilon the Config holds for the norms (`config.norm_eps`); a norm with another
        # gets a literal of its own (leaves.py).
        self.norm_eps = norm_eps
        names = {symbol.name for symbol in ir.env}
        # The spec gave no head_dim: the generated Config derives it from d_model and n_heads.
        self.derived_head_dim = "head_dim" not in names
        self.substitute = derive_head_dim and self.derived_head_dim

    def __call__(self, expr: sp.Expr | int, constants: dict[int, str] | None = None) -> str:
        """Python for `expr`; `constants` names integer terms (`{2: "config.pos_offset"}`)."""
        expr = sp.sympify(expr)
        if self.substitute and sp.fraction(sp.together(expr))[1] != 1:
            d_model, n_heads = dim_symbol("d_model"), dim_symbol("n_heads")
            expr = sp.expand(expr.subs(d_model, n_heads * dim_symbol("head_dim")))
        return self._print(expr, constants or {})

    def _print(self, expr: sp.Expr, constants: dict[int, str]) -> str:
        if expr.is_Integer:
            return constants.get(int(expr), str(int(expr)))
        if expr.is_Symbol:
            return f"{self.owner}.{expr.name}"
        if expr.is_Add:
            return self._sum(expr, constants)
        if expr.is_Mul:
            return self._product(expr)
        raise ValueError(f"cannot print the size expression {expr} as Python")

    def _sum(self, expr: sp.Add, constants: dict[int, str]) -> str:
        # Dimensions first, subtracted ones after added ones, the constant last:
        # `config.n_layers - config.n_dense_layers - 1`.
        terms = sorted(expr.args, key=lambda t: (t.is_Number, t.could_extract_minus_sign(), str(t)))
        out = ""
        for term in terms:
            negative = term.could_extract_minus_sign()
            text = self._print(-term if negative else term, constants)
            if not out:
                out = f"-{text}" if negative else text
            else:
                out += f" - {text}" if negative else f" + {text}"
        return out

    def _product(self, expr: sp.Mul) -> str:
        numerator, denominator = sp.fraction(expr)
        top = self._factors(numerator)
        if denominator == 1:
            return top
        bottom = self._factors(denominator)
        if denominator.is_Mul:
            bottom = f"({bottom})"
        return f"{top} // {bottom}"

    def _factors(self, expr: sp.Expr) -> str:
        if not expr.is_Mul:
            return self._print(expr, {})
        coefficient, rest = expr.as_coeff_mul()
        symbols = sorted(rest, key=lambda s: _rank(s) if s.is_Symbol else (len(DIM_ORDER), str(s)))
        # A sum among the factors (n_heads * (nope_dim + rope_dim)) keeps its parentheses.
        parts = [f"({self._print(s, {})})" if s.is_Add else self._print(s, {}) for s in symbols]
        if coefficient != 1:
            parts.insert(0, str(coefficient))
        return " * ".join(parts)
