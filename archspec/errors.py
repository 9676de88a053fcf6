"""User-facing errors: one exception type that carries where the mistake is and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from archspec.safety.text import shortened, visible

# The most of one message (or hint) shown: whatever it echoes, an error stays a few lines.
MAX_MESSAGE_CHARS = 2_000
MAX_PATH_CHARS = 200  # the field a message is about: a key may be as long as any value


@dataclass(frozen=True)
class Location:
    """A place in a spec file (1-based line and column) or on the command line."""

    file: str | Path
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        file = visible(_display_path(self.file))
        if self.line is None:
            return file
        return f"{file}:{self.line}:{self.column}"


def _display_path(file: str | Path) -> str:
    """Paths below the working directory are shown relative to it, as the user typed them."""
    try:
        return str(Path(file).relative_to(Path.cwd()))
    except ValueError:
        return str(file)


class SpecError(Exception):
    """A mistake in a spec or in a command's input. The CLI prints it and exits with code 2."""

    def __init__(
        self,
        message: str,
        *,
        location: Location | None = None,
        path: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        # Every part may carry the user's text (a key, a value, a file name): each is made
        # visible on one line, so no control character reaches the terminal and no newline in
        # a key can forge a line of the message. The hint's line break is archspec's own.
        where = f"{self.location}: " if self.location else ""
        at = f"at '{visible(shortened(self.path, MAX_PATH_CHARS))}': " if self.path else ""
        text = f"{where}error: {at}{visible(shortened(self.message, MAX_MESSAGE_CHARS))}"
        if self.hint:
            text += f"\n  hint: {visible(shortened(self.hint, MAX_MESSAGE_CHARS))}"
        return text


class SpecErrors(SpecError):
    """Several mistakes in one spec, each in the usual format, one after the other. It reads
    as its first error where one is expected (`message`, `location`, `path`, `hint`)."""

    def __init__(self, errors: list[SpecError], stopped: bool) -> None:
        first = errors[0]
        super().__init__(first.message, location=first.location, path=first.path, hint=first.hint)
        self.errors = errors
        self.stopped = stopped  # there may be more: checking stopped at len(errors)

    def __str__(self) -> str:
        text = "\n".join(str(e) for e in self.errors)
        if self.stopped:
            text += f"\nerror: stopped after {len(self.errors)} errors; fix these and run again"
        return text


def all_errors(exc: SpecError) -> list[SpecError]:
    """The mistakes an error stands for: its list, or itself."""
    return exc.errors if isinstance(exc, SpecErrors) else [exc]


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A 'did you mean' hint for a misspelt name, or None when nothing is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None
