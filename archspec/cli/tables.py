"""Tables that never lose data, whatever the terminal's width: one rule for every table.

rich shrinks a table too wide for the terminal by cutting cells ("decoder.blocks.i.at…") or
folding them mid-number ("6,738,415,6" / "16"), or between a figure and its unit ("11.56" /
"s"). A figure cut or split is a wrong figure, a name cut is one you cannot type. So every
table the CLI prints is built as a rich Table and printed by `print_table`, which, until the
table fits:
1. prints it as wide as its cells need;
2. drops the share column (a ratio of figures the table also shows);
3. wraps text at its natural breaks only: spaces, after the `.`, `-` or `_` of a name
   ("decoder.blocks.i." / "attn.q_proj"), between CamelCase words; never inside a number,
   never between a figure and its unit (`breaks`). The key column (the names you type) is
   wrapped last;
4. stacks the table: several tables, each repeating the key column(s) beside as many of the
   others as fit.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from archspec.cli.common import stdout

WIDEST_PIPE = 160  # to a file or a pipe with no COLUMNS: as wide as a table needs, up to this
DROPPABLE = ("share",)  # headers of columns derived from others: dropped before any wrapping

# A number followed by a short unit word: "11.56 s", "40 GiB", "1.5 TFLOP/s", "21.4%".
_UNIT = re.compile(r"[A-Za-zµ%/]{1,8}[),;:]*")
# A break inside a word: after . - _ before a letter (not "1.5", "1e-5"), or before a
# capital that follows a lowercase letter (CamelCase).
_INNER = re.compile(r"(?<=[A-Za-z0-9])[._-](?=[A-Za-z])|(?<=[a-z])(?=[A-Z])")


@dataclass
class Column:
    header: str
    justify: str = "right"


def breaks(text: str) -> list[str]:
    """`text` cut into the pieces a line may end after (each keeps its trailing space)."""
    pieces: list[str] = []
    for word in re.findall(r"\S+\s*", text):
        glued = pieces and _is_number(pieces[-1]) and _UNIT.fullmatch(word.strip())
        if glued:
            pieces[-1] += word
            continue
        start = 0
        for m in _INNER.finditer(word.rstrip()):
            end = m.end() if m.group() else m.start()
            pieces.append(word[start:end])
            start = end
        pieces.append(word[start:])
    return pieces


def _is_number(piece: str) -> bool:
    return bool(re.fullmatch(r"[(~≈+-]?[\d,.]*\d[\d,.]*[A-Za-z]?\s+", piece))


def _wrap(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) of each line of `text` wrapped at `breaks` into `width` cells (a piece
    wider than that keeps its own line)."""
    from rich.cells import cell_len

    lines: list[tuple[int, int]] = []
    offset = 0
    for line in text.split("\n"):
        start = end = offset
        for piece in breaks(line):
            if end > start and cell_len(text[start : end + len(piece.rstrip())]) > width:
                lines.append((start, end))
                start = end
            end += len(piece)
        lines.append((start, end))
        offset += len(line) + 1
    return lines


def _text(cell: Any):
    from rich.text import Text

    if isinstance(cell, Text):
        return cell
    return Text.from_markup(cell, emoji=False) if isinstance(cell, str) else None


def _rewrap(cell: Any, width: int):
    """The cell as rich Text with its lines wrapped at `width`; anything else unchanged."""
    from rich.text import Text

    text = _text(cell)
    if text is None:
        return cell
    lines = []
    for start, end in _wrap(text.plain, width):
        line = text[start:end]
        line.rstrip()
        lines.append(line)
    return Text("\n").join(lines)


def _measure(cell: Any) -> tuple[int, int]:
    """(natural, narrowest) width of a cell: its longest line, its widest unbreakable piece."""
    from rich.cells import cell_len

    text = _text(cell)
    if text is None:
        return 0, 0
    lines = text.plain.split("\n")
    pieces = [p.rstrip() for line in lines for p in breaks(line)]
    return max(cell_len(s) for s in lines), max((cell_len(p) for p in pieces), default=0)


def _columns_measured(table) -> list[tuple[int, int]]:
    sizes = []
    for column in table.columns:
        cells = [*column._cells, column.header if table.show_header else ""]
        measured = [_measure(c) for c in cells]
        sizes.append((max(n for n, _ in measured), max(m for _, m in measured)))
    return sizes


def _overhead(table) -> int:
    """Borders and padding: the table's width beyond its cells'. (rich keeps these, and a
    column's cells, in private fields; tests/test_tables_never_cut.py renders every command's
    tables, so a rich that moves them fails there.)"""
    padding = sum(table._get_padding_width(i) for i in range(len(table.columns)))
    return table._extra_width + padding


def _shrunk(sizes: list[tuple[int, int]], room: int, keys: int) -> list[int] | None:
    """Column widths that fit `room`, narrowing the widest wrappable column first, the key
    columns last; None if even the narrowest do not fit."""
    widths = [natural for natural, _ in sizes]
    if sum(m for _, m in sizes) > room:
        return None
    while sum(widths) > room:
        narrowable = [i for i, (_, least) in enumerate(sizes) if widths[i] > least]
        i = max(narrowable, key=lambda i: (i >= keys, widths[i]))
        widths[i] -= 1
    return widths


def _copy(table):
    """A copy whose columns can be changed; the box is shared, as rich finds its variants by
    identity (a deep copy would show a header rule on a table without a header)."""
    part = copy.copy(table)
    part.columns = [copy.copy(column) for column in table.columns]
    for column in part.columns:
        column._cells = list(column._cells)
    part.rows = list(table.rows)
    return part


def _only(table, keep: Sequence[int], title: str | None = None):
    """A copy of `table` with only the columns `keep`."""
    part = _copy(table)
    part.columns = [part.columns[i] for i in keep]
    for i, column in enumerate(part.columns):
        column._index = i
    if title is not None:
        part.title = title
    return part


def _fitted(table, room: int, keys: int, wrap: bool = True):
    """`table` with its columns wrapped to fit `room`, or None if it cannot."""
    sizes = _columns_measured(table)
    if not wrap:
        sizes = [(natural, natural) for natural, _ in sizes]
    widths = _shrunk(sizes, room - _overhead(table), keys)
    if widths is None:
        return None
    for column, width, (natural, _) in zip(table.columns, widths, sizes, strict=True):
        column.no_wrap = True
        column.overflow = "fold"  # never reached: every line fits; never an ellipsis
        if width < natural:
            column.width = width
            column._cells = [_rewrap(c, width) for c in column._cells]
            if table.show_header:
                column.header = _rewrap(column.header, width)
    return table


def fit(table, room: int, keys: int = 1) -> list:
    """`table` as the tables that show all of it within `room` columns (the rule above)."""
    whole = _fitted(_copy(table), room, keys, wrap=False)
    if whole is not None:
        return [whole]
    kept = [i for i, c in enumerate(table.columns) if str(c.header) not in DROPPABLE]
    if len(kept) < len(table.columns):
        table = _only(table, kept)
    whole = _fitted(_copy(table), room, keys)
    if whole is not None:
        return [whole]
    return _stacked(table, room, keys)


def _stacked(table, room: int, keys: int) -> list:
    """The value columns packed into as few tables as fit beside the key columns."""
    groups: list[list[int]] = [[]]
    for i in range(keys, len(table.columns)):
        trial = _only(table, [*range(keys), *groups[-1], i])
        if groups[-1] and _fitted(trial, room, keys) is None:
            groups.append([])
        groups[-1].append(i)
    parts = []
    for n, group in enumerate(groups):
        title = f"{table.title} ({n + 1} of {len(groups)})" if table.title else None
        part = _only(table, [*range(keys), *group], title)
        if n < len(groups) - 1:
            part.caption = None
        fitted = _fitted(_copy(part), room, keys)
        if fitted is None:  # narrower than a key and a figure: folded, still never cut
            for column in part.columns:
                column.overflow = "fold"
        parts.append(fitted or part)
    return parts


def console_width(console) -> int:
    if not console.is_terminal and "COLUMNS" not in os.environ:
        return WIDEST_PIPE
    return console.width


def print_tables(*tables, keys: int = 1) -> None:
    """Print each table by the rule above, side by side where they fit."""
    from rich.columns import Columns
    from rich.measure import Measurement

    out = stdout()
    room = console_width(out)
    parts = [part for table in tables for part in fit(table, room, keys)]
    for part in parts:  # a title or caption wider than its table (a long URL) folds too
        part.title, part.caption = _folding(part.title), _folding(part.caption)
    shown: Any = parts[0] if len(parts) == 1 else Columns(parts)
    out.width = min(room, Measurement.get(out, out.options.update_width(room), shown).maximum)
    out.print(shown)


def _folding(annotation: Any):
    from rich.text import Text

    if isinstance(annotation, str):
        return Text.from_markup(annotation, overflow="fold", emoji=False)
    return annotation


def print_table(table, keys: int = 1) -> None:
    print_tables(table, keys=keys)


def make_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    sections: Sequence[int] = (),
    caption: str | None = None,
):
    """A rich Table of `rows` under `columns`; `sections` are row indices a rule precedes."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for column in columns:
        table.add_column(column.header, justify=column.justify)  # type: ignore[arg-type]
    for r, row in enumerate(rows):
        if r in sections:
            table.add_section()
        table.add_row(*row)
    return table
