"""The default run's share of a long list of like cases: the first case of each shape, where a
shape is what the code under test branches on; `-m long` runs every case.

The published runs and figures each go through the CLI as the validation harness times them
(tests/test_plan_published_cli.py, tests/test_plan_serve_published_cli.py): the same code for
every row of a source that sets the same options, so the default run takes one row per
source and set of options."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import pytest


def one_of_each(items: Iterable[Any], shape: Callable[[Any], Hashable], ids: Callable) -> list:
    """`items` as parameters (with `ids`), all but the first of each shape marked long."""
    seen: set[Hashable] = set()
    params = []
    for item in items:
        key = shape(item)
        marks = pytest.mark.long if key in seen else ()
        seen.add(key)
        params.append(pytest.param(item, marks=marks, id=ids(item)))
    return params


def options_set(record: Any, ignore: set[str]) -> frozenset[str]:
    """The dataclass fields of `record` that differ from their defaults, `ignore` aside."""
    return frozenset(
        f.name
        for f in dataclasses.fields(record)
        if f.name not in ignore
        and f.default is not dataclasses.MISSING
        and getattr(record, f.name) != f.default
    )
