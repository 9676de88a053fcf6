"""What every command shares: the options, error handling, spec compilation and output."""

from __future__ import annotations

import json
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


def compile_spec(spec: str, overrides: list[str] | None):
    """Resolve, validate and compile a spec reference to the IR."""
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec

    path = Path(spec)
    return build_ir(load_spec(path if path.is_file() else spec, overrides or []))


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def human(n: float) -> str:
    """1234567 -> 1.23M: for people; JSON always carries exact integers."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return str(int(n))
