"""Looking up a transformers class by name, across the families of `archspec.hf.families`.

Each family lists its own classes (`Family.classes`); this module answers "which class is
`name`", follows old class names, and refuses the head classes a spec cannot express with a
message that says what to do instead.
"""

from __future__ import annotations

from archspec.errors import SpecError
from archspec.hf.families import CLASSES, class_alias, refuse_unsupported_head
from archspec.hf.family import Head, HFClass
from archspec.hf.unsupported import known_class, typo_hint

__all__ = ["CLASSES", "HFClass", "Head", "hf_class"]


def hf_class(name: str) -> HFClass:
    """The class record for a transformers class name; a SpecError for one archspec lacks."""
    name = class_alias(name)
    if name in CLASSES:
        return CLASSES[name]
    refuse_unsupported_head(name)
    raise SpecError(
        f"transformers class '{name}' is not supported",
        hint=typo_hint(name, CLASSES, known_class) or f"supported classes: {', '.join(CLASSES)}",
    )
