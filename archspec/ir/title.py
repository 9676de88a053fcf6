"""A model's name with what was asked of it, for titles: light enough for any command to import
(the IR's nodes pull in sympy)."""

from __future__ import annotations

from collections.abc import Sequence


def titled(name: str, overrides: Sequence[str] = ()) -> str:
    """The name and its `--set` overrides, so that a changed model never passes for the
    published one: `gpt2 (n_layers=48, d_model=1024)`."""
    return f"{name} ({', '.join(overrides)})" if overrides else name
