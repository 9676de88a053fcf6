"""archspec: transformer architectures as short YAML specs.

The pipeline flows one way: a YAML spec is loaded and validated (`archspec.spec`), compiled to
an intermediate representation (`archspec.ir`), and read by backends (`archspec.backends`).

`load_spec`, `build_ir` and `SpecError` are imported when first used, so that importing one
small part of the package (the command line's start-up, above all) does not import the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from archspec.errors import SpecError
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec

__all__ = ["SpecError", "build_ir", "load_spec"]
__version__ = "0.1.0"

_LAZY = {
    "SpecError": "archspec.errors",
    "build_ir": "archspec.ir.build",
    "load_spec": "archspec.spec.resolve",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
