"""The `archspec` command line.

Commands are thin: they resolve a spec, compile it to the IR, ask a backend, and render the
result as a rich table for people or JSON (`--json`) for machines. Data goes to stdout,
messages to stderr. Every user mistake is a `SpecError`: one message, exit code 2, and no
traceback unless `--debug`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from archspec.errors import SpecError

app = typer.Typer(
    name="archspec",
    help="Transformer architectures as short YAML specs: exact parameter counts, module trees "
    "and PyTorch code from one IR.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

SpecArg = Annotated[str, typer.Argument(help="A built-in spec name (see `archspec list`) or a path to a .yaml spec.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a spec field, e.g. `--set n_layers=48` (repeatable).", metavar="KEY=VALUE"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")]


def _stdout():
    from rich.console import Console

    return Console(highlight=False)


def _stderr():
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


@app.command()
def count(
    spec: SpecArg,
    set_: SetOpt = None,
    symbolic: Annotated[
        bool, typer.Option("--symbolic", help="Also show the total and group subtotals as formulas.")
    ] = False,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Count a spec's parameters exactly, row by row.

    Examples:

        archspec count bert-base

        archspec count llama-2-7b --symbolic

        archspec count gpt2 --set n_layers=48 --json

        archspec count my-model.yaml
    """
    from archspec.backends.count.report import param_report

    with user_errors(debug):
        ir = compile_spec(spec, set_)
        report = param_report(ir, symbolic=symbolic)
    if json_:
        print_json(report)
        return
    _render_params(report)


def _render_params(report: dict[str, Any]) -> None:
    from rich.table import Table

    params = report["params"]
    total = params["total"]
    table = Table(
        title=f"{report['name']}: {total:,} parameters ({human(total)})",
        caption=f"source: {report['source']}",
        title_justify="left",
    )
    table.add_column("module")
    table.add_column("shape")
    table.add_column("×", justify="right")
    table.add_column("parameters", justify="right")
    table.add_column("share", justify="right")
    for row in params["rows"]:
        if row["tied_to"]:
            shape = f"[dim]tied to {row['tied_to']}[/dim]"
            if row["count"]:
                shape += f" + bias {row['shape'].split(' + ')[-1]}"
        else:
            shape = row["shape"]
        copies = f"{row['copies']}" if row["copies"] != 1 else ""
        table.add_row(row["name"], shape, copies, f"{row['count']:,}", f"{row['count'] / total:.1%}")
    table.add_section()
    for group, n in params["groups"].items():
        table.add_row(f"[italic]{group}[/italic]", "", "", f"{n:,}", f"{n / total:.1%}")
    table.add_section()
    table.add_row("[bold]total[/bold]", "", "", f"[bold]{total:,}[/bold]", "100.0%")
    if "active" in params:
        active = params["active"]
        table.add_row("active per token", "(top-k experts)", "", f"{active:,}", f"{active / total:.1%}")
    out = _stdout()
    out.print(table)
    if "symbolic" in report:
        formulas = Table(title="formulas", title_justify="left", show_header=False)
        formulas.add_column("group")
        formulas.add_column("expression")
        for group, expr in report["symbolic"]["groups"].items():
            formulas.add_row(group, expr)
        formulas.add_section()
        formulas.add_row("[bold]total[/bold]", report["symbolic"]["total"])
        if "active" in report["symbolic"]:
            formulas.add_row("active", report["symbolic"]["active"])
        out.print(formulas)


@app.command("list")
def list_(json_: JsonOpt = False) -> None:
    """List the built-in specs with their family and parameter count.

    Examples:

        archspec list

        archspec list --json
    """
    from archspec.backends.count.params import parameter_count
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import builtin_names, load_spec

    entries = []
    for name in builtin_names():
        ir = build_ir(load_spec(name))
        entries.append(
            {
                "name": name,
                "family": ir.spec.family,
                "layout": ir.spec.layout,
                "hf_class": ir.spec.hf_class,
                "params": ir.value(parameter_count(ir.root)),
            }
        )
    if json_:
        print_json(entries)
        return
    from rich.table import Table

    table = Table(title="built-in specs", title_justify="left")
    for column in ("name", "family", "layout", "transformers class"):
        table.add_column(column)
    table.add_column("parameters", justify="right")
    for e in entries:
        table.add_row(e["name"], e["family"], e["layout"], e["hf_class"] or "-", f"{e['params']:,}")
    _stdout().print(table)


@app.command()
def validate(
    file: Annotated[Path, typer.Argument(help="A spec file to check.")],
    set_: SetOpt = None,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Check a spec file: YAML, `extends`, keys, types and shapes. Exit code 2 on a mistake.

    Examples:

        archspec validate my-model.yaml

        archspec validate my-model.yaml --set n_heads=16 --json
    """
    from archspec.backends.count.params import parameter_count

    with user_errors(debug):
        if not file.is_file():
            raise SpecError(f"no such file: {file}")
        ir = compile_spec(str(file), set_)
    total = ir.value(parameter_count(ir.root))
    if json_:
        print_json({"name": ir.spec.name, "valid": True, "params": total})
    else:
        _stderr().print(f"[green]ok[/green]: {file} is a valid spec ({ir.spec.name}, {total:,} parameters)")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
