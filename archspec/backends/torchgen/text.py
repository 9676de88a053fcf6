"""Laying out generated Python so that it is already in `ruff format` style.

The generator writes most code from templates whose lines are short by design. The few lines
whose length depends on the spec (signatures, calls with optional arguments, docstrings with a
spec's name or source) go through the helpers here, which lay them out the way `ruff format`
does. The layouts are chosen to be stable at both line lengths people use, 88 (ruff's default)
and 100: a line is joined only if it fits in 88, and a call that must be split at 88 but might
fit in 100 is split one argument per line with a trailing comma, which ruff never re-joins.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

LINE_LENGTH = 88
WIDEST = 100  # the output must also be stable at this line length
INDENT = "    "

Lines = Iterable["str | None | Lines"]


def lines(*items: str | None | Lines) -> str:
    """Join code fragments with newlines, skipping None (a feature the spec does not use)."""
    out: list[str] = []

    def add(item: str | None | Lines) -> None:
        if item is None:
            return
        if isinstance(item, str):
            out.append(item)
            return
        for sub in item:
            add(sub)

    for item in items:
        add(item)
    return "\n".join(out)


def indent(code: str, level: int) -> str:
    """Indent every non-empty line of `code` by `level` steps of four spaces."""
    return textwrap.indent(code, INDENT * level, lambda line: bool(line.strip()))


def call(head: str, args: Sequence[str], level: int, tail: str = "") -> str:
    """`head(arg, ...)tail`, laid out as ruff formats it at indentation `level`.

    `head` is everything before the parenthesis (`y = F.gelu` or `def forward`), `tail`
    everything after it (` -> Tensor:`). The result is relative: its first line starts at
    column 0; `indent` moves it to its level.
    """
    pad = len(INDENT) * level
    inner = ", ".join(args)
    one_line = f"{head}({inner}){tail}"
    if pad + len(one_line) <= LINE_LENGTH:
        return one_line
    if pad + len(one_line) > WIDEST and pad + len(INDENT) + len(inner) <= LINE_LENGTH:
        return f"{head}(\n{INDENT}{inner}\n){tail}"
    exploded = "".join(f"{INDENT}{arg},\n" for arg in args)
    return f"{head}(\n{exploded}){tail}"


def signature(name: str, params: Sequence[str], returns: str, level: int = 1) -> str:
    """A method's `def` line (`self` is added), for a method at indentation `level`."""
    return call(f"def {name}", ["self", *params], level, f" -> {returns}:")


def method(name: str, params: Sequence[str], returns: str, *body: str | None | Lines) -> str:
    """A method of a top-level class: signature and body, relative to the class body."""
    return lines(signature(name, params, returns), indent(lines(*body), 1))


def class_(header: str, doc: str, *members: str | None | Lines) -> str:
    """A top-level class: `class X(...):`, its docstring, then members separated by blank
    lines (None members are skipped)."""
    parts = [docstring(doc, 1)] + [m for m in members if m is not None]
    return lines(header, indent("\n\n".join(parts), 1))


def docstring(text: str, level: int) -> str:
    """A docstring at indentation `level`: one line if it fits, else a summary line and
    wrapped paragraphs. The result is relative, like `call`'s.

    `text` is a summary, optionally followed by paragraphs separated by blank lines. A
    paragraph indented by four spaces is kept verbatim (a command to copy).
    """
    pad = len(INDENT) * level
    quote = 'r"""' if "\\" in text else '"""'
    text = text.strip().replace('"""', "'''")
    if "\n" not in text and pad + len(quote) + len(text) + 3 <= LINE_LENGTH:
        return f'{quote}{text}"""'
    width = LINE_LENGTH - pad
    out: list[str] = []
    for i, paragraph in enumerate(text.split("\n\n")):
        if i:
            out.append("")
        if paragraph.startswith(INDENT):
            out += paragraph.splitlines()
            continue
        first = quote if i == 0 else ""
        out += _wrap(first + " ".join(paragraph.split()), width)
    if len(out) == 1:
        # ruff would join a one-line docstring with its closing quotes, making it too long.
        out = _wrap(out[0], len(out[0]) // 2 + 8)
    out.append('"""')
    return "\n".join(out)


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
