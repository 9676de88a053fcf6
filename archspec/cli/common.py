"""What every command shares: the options, error handling, spec compilation and output."""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from archspec.errors import SpecError

SpecArg = Annotated[
    str,
    typer.Argument(help="A built-in spec name (see `archspec list`) or a path to a .yaml spec."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a spec field, e.g. `--set n_layers=48` (repeatable).",
        metavar="KEY=VALUE",
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print JSON for machines instead of a table.")
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Replace FILE even if it holds different content.")
]


def stdout():
    from rich.console import Console

    return Console(highlight=False)


def stderr():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@contextmanager
def user_errors(debug: bool = False) -> Iterator[None]:
    """Turn a SpecError into one clear message on stderr and exit code 2."""
    try:
        yield
    except SpecError as exc:
        if debug:
            raise
        print(str(exc), file=sys.stderr)
        raise typer.Exit(2) from None


def resolve_spec(spec: str, overrides: list[str] | None):
    """Resolve and validate a spec reference (a file, or a built-in name) with its overrides."""
    from archspec.spec.resolve import load_spec

    path = Path(spec)
    return load_spec(path if path.is_file() else spec, overrides or [])


def compile_spec(spec: str, overrides: list[str] | None, symbolic: bool = True):
    """Resolve, validate and compile a spec reference to the IR."""
    from archspec.ir.build import build_ir

    return build_ir(resolve_spec(spec, overrides), symbolic=symbolic)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def human(n: float) -> str:
    """1234567 -> 1.23M: for people; JSON always carries exact integers."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return str(int(n))


def write_output(path: Path, text: str, force: bool, what: str) -> bool:
    """Write `text` to `path` (a command's `-o FILE`) unless it already holds exactly that;
    False when unchanged.

    An existing file with other content may hold someone's edits, so it is only replaced with
    `force`; the refusal says it differs from `what` ("the generated code"). The text goes to a
    temporary file in the same folder first, then `os.replace` swaps it in, so the file is
    never seen half-written.
    """
    data = text.encode()
    if path.is_dir():
        # The -o options refuse a directory already; this guards other callers.
        raise SpecError(f"{path} is a directory", hint="give a file name inside it")
    if not path.parent.is_dir():
        raise SpecError(f"no such directory: {path.parent}")
    if path.exists():
        if path.read_bytes() == data:
            return False
        if not force:
            raise SpecError(
                f"{path} exists and differs from {what}; not overwriting it",
                hint="pass --force to replace it",
            )
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temporary, "xb") as file:  # created with the usual permissions (umask)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o777)  # keep the replaced file's mode
        os.replace(temporary, path)
    except OSError as exc:
        raise SpecError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        temporary.unlink(missing_ok=True)
    return True
