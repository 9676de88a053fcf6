"""A spec -> the transformers config.json of the same architecture (for `bench --vs-hf`).

This is the inverse of `import_config`, and is checked against it: the config written by the
spec's family (`Family.export_config`) is imported back, and the spec that comes out must equal
the one that went in, field for field. A spec that a transformers class cannot express exactly
(a GPT-2 with RMSNorm, say) is refused with the first field that differs, so a comparison is
never made against a different model.

Every dropout is 0: a spec has none, and a dropout the generated model does not run would make
the transformers side do extra work in training.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from archspec.errors import SpecError
from archspec.spec.schema import Spec

__all__ = ["hf_config_dict"]

# Fields that the import fills from the family base rather than from config.json: not part of
# the architecture.
_NOT_ARCHITECTURE = {"name", "source", "family", "abstract"}


def hf_config_dict(spec: Spec) -> dict[str, Any]:
    """config.json's mapping for the spec's transformers class (`hf_class`), checked to import
    back to exactly this spec; a SpecError when the spec has no class or differs from it."""
    from archspec.hf.classes import hf_class
    from archspec.hf.families import family_of
    from archspec.hf.import_config import import_config

    if not spec.hf_class:
        raise SpecError(
            f"'{spec.name}' names no transformers class (hf_class), so --vs-hf has nothing to "
            "compare with"
        )
    cls = hf_class(spec.hf_class)
    data = {"model_type": cls.model_type, "architectures": [cls.name]}
    data |= family_of(cls).export_config(spec)
    try:
        back = import_config(data, source=spec.source).spec
    except SpecError as exc:
        raise SpecError(
            f"'{spec.name}' cannot be written as a {cls.name} config: {exc.message}",
            hint="--vs-hf needs a spec that the transformers class reproduces exactly",
        ) from None
    for f in dataclasses.fields(Spec):
        if f.name in _NOT_ARCHITECTURE:
            continue
        ours, theirs = getattr(spec, f.name), getattr(back, f.name)
        if ours != theirs:
            raise SpecError(
                f"'{spec.name}' is not a {cls.name}: its {f.name} is {ours}, the class's "
                f"config gives {theirs}",
                hint="--vs-hf needs a spec that the transformers class reproduces exactly",
            )
    return data
