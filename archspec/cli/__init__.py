"""The `archspec` command line.

Commands are thin: they resolve a spec, compile it to the IR, ask a backend, and render the
result as a rich table for people or JSON (`--json`) for machines. Data goes to stdout,
messages to stderr. Every user mistake is a `SpecError`: one message, exit code 2, and no
traceback unless `--debug`.

Each command lives in its own module in this package and registers itself on `app` (app.py);
import the module below to add a command.
"""

from __future__ import annotations

from archspec.cli import (
    bench,  # noqa: F401  (registers bench)
    build,  # noqa: F401  (registers build)
    compare,  # noqa: F401  (registers compare, diff)
    count,  # noqa: F401  (registers count, list, validate)
    draw,  # noqa: F401  (registers draw)
    hf,  # noqa: F401  (registers import-hf)
    plan,  # noqa: F401  (registers plan)
    printing,  # noqa: F401  (registers print)
    report,  # noqa: F401  (registers report)
)
from archspec.cli.app import app


def main() -> None:
    """Run the command line. A SpecError that escapes a command (stdout failing while a table
    is printed, after the command's own error handling) is still one message and exit code 2;
    stdout is flushed here, so that a failure at exit is reported too."""
    import sys

    from archspec.cli.streams import say, silence_stdout, stdout_failed
    from archspec.errors import SpecError

    try:
        try:
            app()
        finally:
            if sys.stdout is not None:
                try:
                    sys.stdout.flush()
                except (OSError, ValueError) as exc:
                    raise stdout_failed(exc) from None
    except SpecError as exc:
        if "--debug" in sys.argv:
            raise
        say(str(exc))
        silence_stdout()
        sys.exit(2)


if __name__ == "__main__":
    main()
