"""Copying runtime code into a generated file: the source of a function or class of
`archspec.runtime`, exactly as it is written and tested there.
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
from collections.abc import Callable


def source_of(*objects: type | Callable) -> str:
    """The source of each object, dedented, separated by two blank lines (PEP 8 between
    top-level definitions). What the generated file holds is then byte for byte what
    `archspec.runtime` defines, which a test checks."""
    return "\n\n\n".join(textwrap.dedent(inspect.getsource(o)).rstrip() for o in objects)


def runtime_sources(module: str, *names: str) -> list[str]:
    """The source of each named function or class of `archspec.runtime.<module>`, one
    string each. The module is imported here, as a file is generated, not with archspec:
    runtime modules import torch, which counting, comparing and the CLI never load."""
    loaded = importlib.import_module(f"archspec.runtime.{module}")
    return [source_of(getattr(loaded, name)) for name in names]
