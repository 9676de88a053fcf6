"""Shorthands: a section named by its kind alone, `position: rope` for `position: {kind: rope}`.

A section whose record has a `kind` field (a norm, the tagged `position` union) may be written
as that kind's name when nothing else in it changes. The shorthand is read as the mapping
`{kind: ...}` as soon as a file or a `--set` is read, so that it merges with what the spec
extends exactly as the mapping would (`norm: rmsnorm` over a parent's `norm: {eps: 1e-6}`
keeps the epsilon). `validate --resolved` shows the full form.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from archspec.errors import Location
from archspec.spec.schema import Spec

TAG = "kind"


def _has_kind(f: dataclasses.Field, hint: Any) -> bool:
    if f.metadata.get("tag") == TAG:
        return True
    return dataclasses.is_dataclass(hint) and TAG in {g.name for g in dataclasses.fields(hint)}


# The top-level sections that take a shorthand: norm and position.
SECTIONS = tuple(
    f.name for f in dataclasses.fields(Spec) if _has_kind(f, typing.get_type_hints(Spec)[f.name])
)


def expand_shorthands(
    data: dict[str, Any], locations: dict[tuple, Location]
) -> tuple[dict[str, Any], dict[tuple, Location]]:
    """`data` with each shorthand written out; an error about its kind points where the
    name was written (`position.kind` at the line of `position: rop`)."""
    short = [name for name in SECTIONS if isinstance(data.get(name), str)]
    if not short:
        return data, locations
    data, locations = dict(data), dict(locations)
    for name in short:
        data[name] = {TAG: data[name]}
        if (name,) in locations:
            locations[(name, TAG)] = locations[(name,)]
    return data, locations


def override_keys(keys: list[str], value: Any) -> list[str]:
    """`--set position=rope` is `--set position.kind=rope`: it changes the kind and merges
    like the mapping, as the shorthand in a file does."""
    if len(keys) == 1 and keys[0] in SECTIONS and isinstance(value, str):
        return [keys[0], TAG]
    return keys
