"""The `position` section's older, flat form, read into the tagged form.

Before each kind had its record, `position` was one bag of every kind's fields:

    position: {kind: rope, theta: 5e5, scaling: llama3, factor: 8, original_max_seq_len: 8192}

which now reads `position: {kind: rope, theta: 5e5, scaling: {type: llama3, factor: 8, ...}}`.
Built-in specs, users' files and `--set position.factor=4` still use it, so it is read here as
it always was: the chosen scaling's fields move into `scaling`; the fields of other kinds and
scalings are ignored, as the flat form ignored them (a spec extending a rope family may switch
to `kind: learned`), except those whose presence it refused, refused with the same words.
Errors about the moved fields name them where the user wrote them (`aliases`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from archspec.kinds.positions import POSITION_KINDS, SCALINGS, Position
from archspec.spec.yaml_loader import YamlPath

Error = Callable[[YamlPath, str], Exception]

SECTION: YamlPath = ("position",)


def _names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


# Every field of the flat form: those of each kind and each scaling.
_KIND_FIELDS = set().union(*(_names(cls) for cls in POSITION_KINDS.values()))
_SCALING_FIELDS = set().union(*(_names(cls) for cls in SCALINGS.values())) - {"type"}
_FLAT_FIELDS = _KIND_FIELDS | _SCALING_FIELDS


def nest_position(
    section: dict[str, Any], error: Error, where: YamlPath = SECTION
) -> tuple[dict[str, Any], dict[YamlPath, YamlPath]]:
    """The tagged form of a `position` mapping (or of `local_position`: `where`), and where
    each moved field was written."""
    kind = section.get("kind", "learned")
    if not isinstance(kind, str) or kind not in POSITION_KINDS:
        return section, {}  # the tagged union refuses it, listing the kinds
    scaling = section.get("scaling")
    nested = scaling if isinstance(scaling, dict) else None
    if nested is not None:
        scaling_type = nested.get("type", "none")
    else:
        scaling_type = scaling if isinstance(scaling, str) else "none"
    _refuse_foreign(section, kind, scaling_type, error, where)
    own = _names(POSITION_KINDS[kind])
    # Unknown keys stay, for the record to refuse with its fields as suggestions.
    out = {k: v for k, v in section.items() if k in own or k not in _FLAT_FIELDS}
    out.pop("scaling", None)
    moved = _SCALING_FIELDS & set(section)
    if kind != "rope" or (scaling is None and not moved):
        return out, {}
    if nested is None and scaling is not None and not isinstance(scaling, str):
        return out | {"scaling": scaling}, {}  # neither form: the record refuses it
    aliases: dict[YamlPath, YamlPath] = {}
    if nested is None:
        nested = {"type": scaling_type}
        aliases[(*where, "scaling", "type")] = (*where, "scaling")
    nested = dict(nested)
    known = isinstance(scaling_type, str) and scaling_type in SCALINGS
    chosen = _names(SCALINGS[scaling_type]) if known else set()
    for key in sorted(moved & chosen):
        nested[key] = section[key]
        aliases[(*where, "scaling", key)] = (*where, key)
    return out | {"scaling": nested}, aliases


def dropped_fields(section: dict[str, Any]) -> list[str]:
    """The flat form's fields `nest_position` leaves out of `section`: other kinds' fields,
    and other scalings' (in file order). They change nothing, so each is reported as ignored
    where the user wrote it (resolve.py)."""
    kind = section.get("kind", "learned")
    if not isinstance(kind, str) or kind not in POSITION_KINDS:
        return []
    own = _names(POSITION_KINDS[kind])
    chosen: set[str] = set()
    if kind == "rope":
        scaling = section.get("scaling")
        scaling_type = scaling.get("type", "none") if isinstance(scaling, dict) else scaling
        if isinstance(scaling_type, str) and scaling_type in SCALINGS:
            chosen = _names(SCALINGS[scaling_type])
    return [k for k in section if k in _FLAT_FIELDS and k not in own and k not in chosen]


def flat_override_keys(data: dict[str, Any], keys: list[str]) -> list[str]:
    """Where an override `--set position.scaling.<field>=...` belongs in `data`.

    `validate --resolved` shows the tagged form, so that is the path a user copies; over a
    spec written in the flat form (`scaling: llama3` beside `factor: 8`, as the built-ins
    are) the same field is the flat `position.<field>`, and the scaling's type is
    `position.scaling` itself. Any other path is unchanged.
    """
    position = data.get("position")
    if keys[:2] != ["position", "scaling"] or len(keys) != 3 or not isinstance(position, dict):
        return keys
    scaling = position.get("scaling")
    if not isinstance(scaling, str):
        return keys
    if keys[2] == "type":
        return ["position", "scaling"]
    if scaling in SCALINGS and keys[2] in _names(SCALINGS[scaling]):
        return ["position", keys[2]]
    return keys  # the tagged form, or a field its scaling lacks: the record says so


def _refuse_foreign(
    section: dict[str, Any], kind: str, scaling: Any, error: Error, where: YamlPath
) -> None:
    """The flat form's refusals of a field its kind or scaling does not read."""
    if kind != "rope":
        for name in ("rotary_dim", "interleaved"):
            if section.get(name) not in (None, False):
                raise error((*where, name), f"{name} needs {where[0]}.kind: rope")
    if kind not in ("learned", "sinusoidal") and section.get("from_mask"):
        raise error(
            (*where, "from_mask"),
            f"from_mask numbers absolute positions (learned or sinusoidal); {where[0]}.kind "
            f"is {kind!r}",
        )
    if scaling != "longrope":
        for name in ("short_factor", "long_factor"):
            if section.get(name) is not None:
                raise error((*where, name), f"{name} needs {where[0]}.scaling: longrope")


def flat_value(position: Position, name: str) -> Any:
    """The value of the flat form's field `name` in a record: its own, its scaling's (by
    name; `scaling` is the scaling's type), or what a kind without it means by it."""
    scaling = getattr(position, "scaling", None)
    if name == "scaling":
        return scaling.type if scaling is not None else "none"
    if name in _names(type(position)) or scaling is None:
        return getattr(position, name, None)
    return getattr(scaling, name, None)
