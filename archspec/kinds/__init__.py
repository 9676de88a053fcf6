"""The catalogue of kinds: norms, activations, positions, residuals and the attention mask.

Each kind is one object holding everything true of it (parameters, FLOPs, what autograd keeps,
the code it generates, its label). The spec schema names the choices (`NormKind`, ...); the IR
carries the kind's name; backends look the kind up here instead of comparing strings.
Adding a kind is one entry in its table here plus its literal in `archspec/spec/schema.py`
(a position kind or RoPE scaling is instead one module of `archspec/kinds/positions/`).
"""

from __future__ import annotations

from archspec.kinds.activations import ACTIVATIONS, ActivationKind
from archspec.kinds.masks import Mask
from archspec.kinds.norms import NORMS, NormKind
from archspec.kinds.positions import POSITIONS, PositionKind
from archspec.kinds.residuals import RESIDUALS, ResidualKind
from archspec.kinds.routers import ROUTERS, RouterKind

__all__ = [
    "ACTIVATIONS",
    "NORMS",
    "POSITIONS",
    "RESIDUALS",
    "ROUTERS",
    "ActivationKind",
    "Mask",
    "NormKind",
    "PositionKind",
    "ResidualKind",
    "RouterKind",
    "activation",
    "norm",
    "position",
    "residual",
    "router",
]


def _lookup(table: dict, what: str, name: str):
    try:
        return table[name]
    except KeyError:
        raise KeyError(f"unknown {what} kind '{name}'; known: {', '.join(table)}") from None


def norm(name: str) -> NormKind:
    return _lookup(NORMS, "norm", name)


def activation(name: str) -> ActivationKind:
    return _lookup(ACTIVATIONS, "activation", name)


def position(name: str) -> PositionKind:
    return _lookup(POSITIONS, "position", name)


def residual(name: str) -> ResidualKind:
    return _lookup(RESIDUALS, "residual", name)


def router(name: str) -> RouterKind:
    return _lookup(ROUTERS, "router", name)
