"""Standard output and error that fail cleanly.

A command's data goes to stdout, which may be closed (`archspec count gpt2 >&-`: Python then
sets sys.stdout to None), a full device (`> /dev/full`) or a pipe whose reader has gone. Any
such failure becomes one SpecError ("cannot write to standard output"), so the command exits
with code 2 and one message rather than a traceback. Messages to stderr are made visible
(archspec/safety/text.py) and are never read as rich markup.
"""

from __future__ import annotations

import os
import sys

from archspec.errors import SpecError
from archspec.safety.text import visible_lines


def stdout_failed(exc: BaseException) -> SpecError:
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "it is closed"
    return SpecError(f"cannot write to standard output: {why}")


class GuardedStdout:
    """A file-like object for rich's Console that writes to the current sys.stdout and turns
    its failures into a SpecError."""

    def write(self, text: str) -> int:
        try:
            return sys.stdout.write(text)
        except (OSError, ValueError, AttributeError) as exc:  # closed, full, None
            raise stdout_failed(exc) from None

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except (OSError, ValueError, AttributeError) as exc:
            raise stdout_failed(exc) from None

    def isatty(self) -> bool:
        try:
            return sys.stdout.isatty()
        except (OSError, ValueError, AttributeError):
            return False

    def fileno(self) -> int:
        if sys.stdout is None:
            raise OSError("standard output is closed")
        return sys.stdout.fileno()

    @property
    def encoding(self) -> str:
        return getattr(sys.stdout, "encoding", None) or "utf-8"


def write_stdout(text: str) -> None:
    """Write the command's data to stdout, and flush it so that a failure is seen here."""
    out = GuardedStdout()
    out.write(text)
    out.flush()


def say(text: str) -> None:
    """One message for people on stderr: visible characters only, no markup."""
    try:
        print(visible_lines(text), file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # stderr itself is gone: nowhere left to say anything


def silence_stdout() -> None:
    """After stdout failed: point it at /dev/null so that the flush at exit cannot fail too."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
