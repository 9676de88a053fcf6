"""A stack's second rotation: the angles of its local_position (Gemma 3's and ModernBERT's
local layers rotate by a base of their own), beside its position's.

The local tables are the rotation's own code (its kind's `init` and `build_angles`), reading
Config fields and buffers of their own: each Config field of the kind's parameters and each
table buffer gets the prefix `local_` (`local_rope_theta`, `local_rope_cos`). Both rotations
turn the same channels (validation: equal rotary_dim), so `rope_dim` is shared. The stack
hands every block both angles, `rope` and `local_rope`; a block passes its attention the one
its layer rotates by, so every attention class reads `rope`.
"""

from __future__ import annotations

import re

from archspec.ir.nodes import Stack
from archspec.kinds.positions import StackContext

PREFIX = "local_"
LOCAL_ANGLES = "local_rope"
_BUFFERS = ("rope_cos", "rope_sin")
_SHARED_FIELDS = ("rope_dim",)


def local_fields(stack: Stack) -> list[str]:
    """The Config fields of the local rotation's parameters, unprefixed (`rope_theta`)."""
    assert stack.local_position is not None
    entry = stack.local_position.entry
    return [field for _, field in entry.parameters if field not in _SHARED_FIELDS]


def _prefixed(line: str, fields: list[str]) -> str:
    """`line` reading the local rotation's Config fields and buffers."""
    for name in fields:
        line = re.sub(rf"\bconfig\.{name}\b", f"config.{PREFIX}{name}", line)
    for name in _BUFFERS:
        line = re.sub(rf"\b{name}\b", f"{PREFIX}{name}", line)
    return line


def local_init(stack: Stack, ctx: StackContext) -> list[str]:
    """Lines of the stack's `__init__` building the local rotation's tables."""
    assert stack.local_position is not None
    fields = local_fields(stack)
    lines = stack.local_position.code.init(ctx)
    return [
        "# The local layers' angles, by local_position's settings.",
        *(_prefixed(line, fields) for line in lines if not line.startswith("#")),
    ]


def local_angles(stack: Stack, ctx: StackContext, positions: str) -> str:
    """The expression of the local layers' angles."""
    assert stack.local_position is not None
    code = stack.local_position.code
    return _prefixed(code.build_angles(ctx, positions), local_fields(stack))
