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
import shlex
from collections.abc import Iterable

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


def shell_word(word: str) -> str:
    """`word` as a POSIX shell reads it back (shlex.quote), for a command shown to the user or
    recorded in a file. A word holding a character no terminal shows as it is (a control,
    an invisible character, a byte of a file name that is not UTF-8) is written in the
    $'...' quoting of bash and zsh, each such character as the escapes of its bytes, so that
    the command stays visible and still names that file. So is a word with three double
    quotes in a row, which a Python docstring (build's header) cannot hold."""
    if not has_unsafe(word) and '"""' not in word:
        return shlex.quote(word)
    return "$'" + "".join(_ansi_c(c) for c in word) + "'"


def shell_join(words: Iterable[str]) -> str:
    """A command line of `words`, each quoted by `shell_word`."""
    return " ".join(shell_word(w) for w in words)


def _ansi_c(char: str) -> str:
    if char in "\\'\"":
        return "\\" + char
    if not _UNSAFE.match(char):
        return char
    try:  # surrogateescape turns an undecodable byte of a file name back into that byte
        data = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        data = char.encode("utf-8", "surrogatepass")
    return "".join(f"\\x{byte:02x}" for byte in data)
