"""`archspec report`: one self-contained HTML file describing one or more specs."""

from __future__ import annotations

from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    ForceOpt,
    JsonOpt,
    SetOpt,
    compile_spec,
    print_json,
    say,
    shown,
    user_errors,
    write_stdout,
)
from archspec.cli.options import ReportOutput, ReportSpecsArg
from archspec.errors import SpecError

MAX_SPECS = 8  # a page wider than this is not read side by side


@app.command()
def report(
    specs: ReportSpecsArg, set_: SetOpt = None, output: ReportOutput = None,
    force: ForceOpt = False, json_: JsonOpt = False, debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Write one HTML file (no network needed: inline SVG, CSS and script) with each spec's
    block diagram, parameter table, collapsible module tree, FLOPs and memory against
    sequence length and memory per device for a few layouts; for several specs, a
    side-by-side comparison at one common sequence length. Every table names the `archspec
    count` command that prints its figures. `--json` prints those figures instead.

    Examples:

        archspec report gpt2 -o gpt2.html

        archspec report gpt2 llama-2-7b mixtral-8x7b -o report.html

        archspec report my-model.yaml --set n_layers=48 -o mine.html

        archspec report t5-small --json
    """
    from archspec.backends.report import build_report

    with user_errors(debug, json_):
        if len(specs) > MAX_SPECS:
            raise SpecError(f"a report takes at most {MAX_SPECS} specs, got {len(specs)}")
        if output is not None:
            if output.suffix.lower() not in (".html", ".htm"):
                raise SpecError(
                    f"cannot write the report to '{shown(output)}': the name must end in .html",
                    hint="for example -o report.html",
                )
            from archspec.safety.writing import check_places

            check_places([output])
        entries = [(spec, list(set_ or []), compile_spec(spec, set_)) for spec in specs]
        page, figures = build_report(entries)
        if output is not None:
            from archspec.safety.writing import Output, write_files

            written = write_files([Output(output, page.encode(), "the report")], force=force)[0]
            names = ", ".join(ir.identity.title for _, _, ir in entries)
            say(f"{'wrote' if written else 'unchanged:'} {shown(output)} (report on {names})")
    if json_:
        print_json(figures)
    elif output is None:
        write_stdout(page)
