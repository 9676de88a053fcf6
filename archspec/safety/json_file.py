"""Strict JSON for the files archspec reads (config.json, a checkpoint's index.json).

Python's `json` keeps the last of duplicate keys without a word (a second `num_hidden_layers`
would silently win), recurses once per nesting level (RecursionError at about a thousand), and
turns a 5,000-digit number into a ValueError from the int conversion, and it reads NaN,
Infinity and -Infinity, which JSON does not have (RFC 8259), as floats no size or rate can
be. Here a duplicate key, nesting beyond MAX_DEPTH, an integer beyond MAX_INT_DIGITS digits,
NaN or an infinity, a file that is not UTF-8 or is not a regular file each become one
SpecError naming the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from archspec.errors import Location, SpecError
from archspec.safety.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_INT_DIGITS
from archspec.safety.reading import decode_utf8, read_bounded

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")
_NOT_NUMBERS = re.compile(r"-?Infinity|NaN")


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting beyond MAX_DEPTH before `json` recurses into it."""
    depth = 0
    for char in _BRACKETS.findall(_STRINGS.sub('""', text)):
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(
                    f"the JSON is nested more than {MAX_DEPTH} levels deep",
                    location=Location(file),
                )
        elif char in "]}":
            depth -= 1


def parse_json(text: str, file: str) -> Any:
    """Parse JSON text strictly (see the module's docstring)."""
    _check_depth(text, file)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                raise SpecError(
                    f"duplicate key {json.dumps(key)[:80]} in a JSON object; which one is meant?",
                    location=Location(file),
                )
            result[key] = value
        return result

    def integer(digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_INT_DIGITS:
            raise SpecError(
                f"an integer of {len(digits):,} digits (over {MAX_INT_DIGITS}) in the JSON",
                location=Location(file),
            )
        return int(digits)

    def not_a_number(word: str) -> float:
        # Where: the first such word outside the strings (blanked, keeping every offset).
        blanked = _STRINGS.sub(lambda m: '"' + " " * (len(m.group()) - 2) + '"', text)
        at = _NOT_NUMBERS.search(blanked)
        start = at.start() if at else 0
        line = text.count("\n", 0, start) + 1
        column = start - text.rfind("\n", 0, start)
        raise SpecError(
            f"{word} is not a JSON number (JSON has no NaN or infinities)",
            location=Location(file, line, column),
            hint="give a finite number, or null where the field allows one",
        )

    try:
        return json.loads(
            text, object_pairs_hook=pairs, parse_int=integer, parse_constant=not_a_number
        )
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"not valid JSON: {exc.msg}", location=Location(file, exc.lineno, exc.colno)
        ) from None
    except RecursionError:  # pragma: no cover - _check_depth keeps well below the limit
        raise SpecError("the JSON is nested too deeply", location=Location(file)) from None


def read_json(path: str | Path, limit: int = MAX_FILE_BYTES, what: str = "file") -> Any:
    """The value in a JSON file: a regular, UTF-8 file of at most `limit` bytes, strictly."""
    path = Path(path)
    text = decode_utf8(read_bounded(path, limit, what), str(path), what)
    return parse_json(text, str(path))
