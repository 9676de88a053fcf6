"""One sanitiser for every string that reaches a terminal, a generated file or a spec.

A user's text (a spec value, a key, a file name, an error from a library) may carry characters
that a terminal acts on (ESC and C1 controls such as U+009B start escape sequences), that
reorder or hide what is shown (bidi overrides U+202E, zero-width spaces U+200B), newlines that
forge extra message lines, or lone surrogates from undecodable file names, which cannot even be
encoded for output. `visible` replaces each such character with its `\\uXXXX` escape, so the
text stays readable and unambiguous; `markup_safe` also neutralises rich markup.
"""

from __future__ import annotations

import re

# Characters that never belong in shown or generated text: C0 and C1 controls and DEL, bidi
# embeddings, overrides and isolates, zero-width and other invisible format characters, line
# and paragraph separators, the BOM, and lone surrogates (from surrogateescape).
_LAYOUT = r"\t\n"  # kept by `visible_lines`
_OTHER_C0 = r"\x00-\x08\x0b-\x1f"
_REST = (
    r"\x7f-\x9f"
    r"\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e"
    r"\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
    r"\ud800-\udfff"
)
UNSAFE_CLASS = _LAYOUT + _OTHER_C0 + _REST  # for a regular expression's [...] or [^...]
_UNSAFE = re.compile(f"[{UNSAFE_CLASS}]")
# Newlines and tabs are kept only where a message is laid out over several lines on purpose.
_UNSAFE_EXCEPT_LAYOUT = re.compile(f"[{_OTHER_C0 + _REST}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """`text` with every unsafe character written as its escape: one line, nothing hidden."""
    return _UNSAFE.sub(_escape, str(text))


def visible_lines(text: object) -> str:
    """Like `visible`, but keeps newlines and tabs: for a message laid out by archspec itself."""
    return _UNSAFE_EXCEPT_LAYOUT.sub(_escape, str(text))


def shortened(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and how many there were: a value echoed in a
    message (a config field, a spec's string) may be megabytes long."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def has_unsafe(text: str) -> bool:
    return _UNSAFE.search(text) is not None


def markup_safe(text: object) -> str:
    """`visible(text)` that rich prints as written (`[/bold]` is not markup)."""
    from rich.markup import escape

    return escape(visible(text))
