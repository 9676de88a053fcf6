"""`archspec count`, `archspec list` and `archspec validate`: the parameter counter's commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from archspec.cli.app import app
from archspec.cli.common import (
    DebugOpt,
    JsonOpt,
    SetOpt,
    SpecArg,
    compile_spec,
    human,
    print_json,
    stderr,
    stdout,
    user_errors,
)
from archspec.errors import SpecError


@app.command()
def count(
    spec: SpecArg,
    set_: SetOpt = None,
    symbolic: Annotated[
        bool,
        typer.Option("--symbolic", help="Also show the total and group subtotals as formulas."),
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
        table.add_row(
            row["name"], shape, copies, f"{row['count']:,}", f"{row['count'] / total:.1%}"
        )
    table.add_section()
    for group, n in params["groups"].items():
        table.add_row(f"[italic]{group}[/italic]", "", "", f"{n:,}", f"{n / total:.1%}")
    table.add_section()
    table.add_row("[bold]total[/bold]", "", "", f"[bold]{total:,}[/bold]", "100.0%")
    if "active" in params:
        active = params["active"]
        table.add_row(
            "active per token", "(top-k experts)", "", f"{active:,}", f"{active / total:.1%}"
        )
    out = stdout()
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
    stdout().print(table)


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
        stderr().print(
            f"[green]ok[/green]: {file} is a valid spec ({ir.spec.name}, {total:,} parameters)"
        )
