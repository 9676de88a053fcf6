"""What a rank keeps when its experts receive `load` times the rows its own tokens route.

Under expert parallelism a rank's experts run on the rows every rank routes to them: the
dispatched rows they receive and everything they make from them are `load` times what
balanced routing gives (the rank's own tokens' routed copies), while what the rank keeps
around them is its own tokens': the dispatch's permutation of its own rows before they are
sent, and the combine's expert outputs, which come back to it for its own tokens. `loaded`
makes any counter (the plain one, Transformer Engine's, the torch engine's rank counter,
rank_activations.layout_counter) count so: the values the dispatch makes and the experts'
call makes from them are the received ones, their bytes times the load, as is what an op
keeps inside the experts (`keep_new`: masks, statistics).

What is kept is linear in the load, so the plan counts a layout at two loads and interpolates
(`fit.MemoryModel`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import sympy as sp

from archspec.backends.count.activations import ActivationCounter
from archspec.ir import ops


def loaded(base: type[ActivationCounter], load: Any) -> type[ActivationCounter]:
    """`base`, its experts' received rows `load` times balanced routing's."""

    class Loaded(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            # The values over the rows the rank's experts receive (the dispatched rows and
            # every value the experts make from them), and whether the experts' call is
            # being interpreted.
            self.received: set[ops.Value] = set()
            self.in_experts = 0

        def op_dispatch(self, op: ops.Dispatch) -> None:
            super().op_dispatch(op)
            self.received.add(op.out)

        def op_call(self, op: ops.Call) -> None:
            # The experts' MLP, called on the dispatched rows (the combine after it reads
            # the rows sent back: the rank's own pairs).
            experts = int(bool(op.args) and op.args[0] in self.received)
            self.in_experts += experts
            super().op_call(op)
            self.in_experts -= experts

        def made(self, value: ops.Value | None) -> None:
            super().made(value)
            if self.in_experts and value is not None:
                self.received.add(value)

        def bytes(self, value: ops.Value) -> sp.Expr:
            own = super().bytes(value)
            return own * load if value in self.received else own

        def keep_new(
            self, elements: sp.Expr, per_element, split: bool = False, rows="tokens"
        ) -> None:
            if self.in_experts and rows == "tokens":  # made inside an expert (dropout)
                elements = elements * load
            super().keep_new(elements, per_element, split, rows)

    return Loaded


def routed_load_counter(counter: Any, load: Any) -> Any:
    """The counter class (or `partial` of one; None: the plain one) `counter`, loaded."""
    base = counter.func if isinstance(counter, partial) else counter or ActivationCounter
    keywords = counter.keywords if isinstance(counter, partial) else {}
    return partial(loaded(base, load), **keywords)
