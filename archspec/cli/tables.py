"""Tables that never lose data, whatever the terminal's width.

rich shrinks a table too wide for the terminal by cutting cells ("6.…") or folding them
mid-number ("6,738,415,6" / "16"). A figure cut or split is a wrong figure, so here a table
that does not fit is printed as several tables, each repeating the key column(s) (the
sequence length, the row label) beside as many value columns as fit. Labels and headers may
wrap between words; numbers are never wrapped or cut.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from archspec.cli.common import stdout

BORDER = 3  # per column: a rule and one space of padding on each side
WIDEST_PIPE = 160  # to a file or a pipe with no COLUMNS: as wide as a table needs, up to this
LABEL_MIN = 16  # a label column may wrap between words down to this width


@dataclass
class Column:
    header: str
    justify: str = "right"
    label: bool = False  # text that may wrap between words (a row label), not a figure


def _text_width(text: str) -> int:
    from rich.cells import cell_len
    from rich.text import Text

    return cell_len(Text.from_markup(text).plain)


def _header_width(text: str) -> int:
    """Headers may be given on several lines ("training\\nmemory"): the longest line."""
    return max(_text_width(line) for line in text.split("\n"))


def _longest_word(text: str) -> int:
    from rich.text import Text

    return max((len(w) for w in Text.from_markup(text).plain.split()), default=0)


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    """The narrowest each column can be without cutting a figure or splitting a word."""
    widths = []
    for i, column in enumerate(columns):
        cells = [row[i] for row in rows]
        if column.label:
            full = max([_text_width(c) for c in cells] + [_text_width(column.header)])
            words = max([_longest_word(c) for c in cells] + [_longest_word(column.header)])
            widths.append(max(words, min(full, LABEL_MIN)))
        else:
            need = max((_text_width(c) for c in cells), default=0)
            widths.append(max(need, _header_width(column.header)))
    return widths


def _groups(widths: list[int], keys: int, room: int) -> list[list[int]]:
    """Value columns packed into as few tables as fit beside the key columns."""
    key_width = sum(w + BORDER for w in widths[:keys]) + 1
    groups: list[list[int]] = [[]]
    used = key_width
    for i in range(keys, len(widths)):
        need = widths[i] + BORDER
        if groups[-1] and used + need > room:
            groups.append([])
            used = key_width
        groups[-1].append(i)
        used += need
    return groups


def console_width(console) -> int:
    if not console.is_terminal and "COLUMNS" not in os.environ:
        return WIDEST_PIPE
    return console.width


def print_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    keys: int = 1,
    sections: Sequence[int] = (),
    caption: str | None = None,
) -> None:
    """Print `rows` under `columns`, split into several tables if the console is too narrow;
    `keys` leading columns repeat in each part; `sections` are row indices a rule precedes."""
    from rich.table import Table

    out = stdout()
    room = console_width(out)
    widths = _widths(columns, rows)
    groups = _groups(widths, keys, room)
    for n, group in enumerate(groups):
        part = f" ({n + 1} of {len(groups)})" if len(groups) > 1 else ""
        table = Table(
            title=title + part,
            title_justify="left",
            caption=caption if n == len(groups) - 1 else None,
            caption_justify="left",
        )
        chosen = [*range(keys), *group]
        for i in chosen:
            column = columns[i]
            table.add_column(
                column.header,
                justify=column.justify,  # type: ignore[arg-type]
                min_width=widths[i],
                max_width=widths[i] if column.label else None,
                no_wrap=not column.label,
                overflow="fold",
            )
        for r, row in enumerate(rows):
            if r in sections:
                table.add_section()
            table.add_row(*(row[i] for i in chosen))
        if not out.is_terminal and "COLUMNS" not in os.environ:
            out.width = min(room, sum(widths[i] + BORDER for i in chosen) + 1)
        out.print(table)
