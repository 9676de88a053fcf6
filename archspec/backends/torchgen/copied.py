"""Copying runtime code into a generated file: the source of a function or class of
`archspec.runtime`, exactly as it is written and tested there.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable


def source_of(*objects: type | Callable) -> str:
    """The source of each object, dedented, separated by two blank lines (PEP 8 between
    top-level definitions). What the generated file holds is then byte for byte what
    `archspec.runtime` defines, which a test checks."""
    return "\n\n\n".join(textwrap.dedent(inspect.getsource(o)).rstrip() for o in objects)
