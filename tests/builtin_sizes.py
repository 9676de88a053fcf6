"""Built-ins that repeat another built-in's architecture at other sizes.

A per-built-in check of a formula or a printout (FLOPs against FlopCounterMode, the printed
module tree, the count on the meta device) exercises the same code at every size of one
architecture: the default run takes one size of each (the smallest), `-m long` every size
(`each_size`). Two built-ins share an architecture when their resolved specs differ only in
sizes; grouped-query attention (n_kv_heads below n_heads) and a head width set apart from
d_model / n_heads count as architecture."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.spec.resolve import builtin_names

SIZES = {"name", "source", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff",
         "vocab_size", "max_seq_len", "head_dim", "encoder_layers", "decoder_layers"}  # fmt: skip


def _architecture(name: str) -> str:
    spec = load_spec(name)
    fields = {
        f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in SIZES
    }
    kv = spec.n_kv_heads
    fields["attention_kind"] = "mha" if kv in (None, spec.n_heads) else "mqa" if kv == 1 else "gqa"
    fields["head_dim_set"] = spec.head_dim is not None
    return repr(sorted(fields.items()))


@cache
def smallest_of_each() -> frozenset[str]:
    """The smallest built-in (by parameters) of each architecture."""
    best: dict[str, tuple[int, str]] = {}
    for name in builtin_names():
        ir = build_ir(load_spec(name))
        size = int(ir.value(parameter_count(ir.root)))
        key = _architecture(name)
        if key not in best or (size, name) < best[key]:
            best[key] = (size, name)
    return frozenset(name for _, name in best.values())


def other_size(name: str) -> bool:
    """A built-in whose architecture a smaller built-in has."""
    return name in builtin_names() and name not in smallest_of_each()


def each_size(names: list[str]) -> list:
    """`names` as parameters: the smallest of each architecture in the default run, the other
    sizes marked long."""
    return [pytest.param(n, marks=pytest.mark.long) if other_size(n) else n for n in names]
