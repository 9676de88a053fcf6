"""`archspec draw`: the paper-style block diagram of a spec (SVG, PNG or Mermaid)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    ForceOpt,
    JsonOpt,
    SetOpt,
    SpecArg,
    compile_spec,
    print_json,
    say,
    shown,
    user_errors,
    write_stdout,
)
from archspec.errors import SpecError

FORMATS = {".svg": "svg", ".png": "png", ".mmd": "mmd", ".mermaid": "mmd"}


def output_format(output: Path | None, fmt: str | None) -> str:
    """The format `-o` and `--format` ask for (they must agree); Mermaid by default."""
    if fmt is not None and fmt not in FORMATS.values():
        raise SpecError(f"--format takes svg, png or mmd, not {fmt!r}")
    if output is None:
        chosen = fmt or "mmd"
        if chosen == "png":
            raise SpecError("a PNG is not text: give a file for it", hint="-o diagram.png")
        return chosen
    by_name = FORMATS.get(output.suffix.lower())
    if by_name is None:
        raise SpecError(
            f"cannot tell what to draw into '{shown(output)}': the name must end in .svg, .png "
            "or .mmd",
            hint="for example -o model.svg",
        )
    if fmt is not None and fmt != by_name:
        raise SpecError(f"--format {fmt} does not match the file name '{shown(output)}'")
    return by_name


def render(diagram, fmt: str) -> bytes:
    """The diagram in `fmt` (svg, png or mmd), as the bytes of a file."""
    if fmt == "mmd":
        from archspec.backends.draw.mermaid import render as mermaid

        return mermaid(diagram).encode()
    from archspec.backends.draw.layout import layout

    canvas = layout(diagram)
    if fmt == "png":
        from archspec.backends.draw.png import render as png

        return png(canvas)
    from archspec.backends.draw.svg import render as svg

    return svg(canvas).encode()


@app.command()
def draw(
    spec: SpecArg,
    set_: SetOpt = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Write the diagram to FILE: .svg, .png (needs matplotlib) or .mmd (Mermaid).",
            metavar="FILE",
        ),
    ] = None,  # fmt: skip
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="svg, png or mmd (default: from FILE's name; Mermaid on stdout without -o).",
            metavar="FORMAT",
        ),
    ] = None,  # fmt: skip
    params: Annotated[
        bool, typer.Option("--params", help="Label every box with its parameter count.")
    ] = False,
    force: ForceOpt = False,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Draw a spec's block diagram the way papers do: the stacks side by side (cross-attention
    arrows in encoder-decoders), one block with its sublayers in order and its residual
    wiring, "× N" on the repeat, each block variant on its own, MoE as router and experts,
    and every box labelled with its kind and shape.

    Without `-o` the Mermaid text goes to stdout (paste it into Markdown); `--json` prints
    the diagram's boxes as data (and still writes `-o FILE`).

    Examples:

        archspec draw llama-2-7b -o llama.svg

        archspec draw t5-small -o t5.png --params

        archspec draw mixtral-8x7b > mixtral.mmd

        archspec draw gpt2 --set n_layers=48 --json
    """
    from archspec.backends.draw.build import build_diagram

    with user_errors(debug, json_):
        chosen = output_format(output, fmt)
        if chosen == "png":
            from archspec.backends.compare.plot import _pyplot

            _pyplot()  # refuse a missing matplotlib before any work
        if output is not None:
            from archspec.safety.writing import check_places

            check_places([output])
        ir = compile_spec(spec, set_, symbolic=False)
        diagram = build_diagram(ir, params=params)
        if set_:
            # A diagram with overrides must not pass for the published model.
            diagram.subtitle += " · " + " ".join(f"--set {o}" for o in set_)
        data = render(diagram, chosen) if output is not None or not json_ else b""
        if output is not None:
            from archspec.safety.writing import Output, write_files

            written = write_files([Output(output, data, "the diagram")], force=force)[0]
            say(
                f"{'wrote' if written else 'unchanged:'} {shown(output)} ({chosen} diagram of "
                f"{diagram.name})"
            )
    if json_:
        from archspec.backends.draw.diagram import to_json

        result = to_json(diagram)
        result["format"] = chosen if output is not None else None
        result["output"] = str(output) if output is not None else None
        print_json(result)
    elif output is None:
        write_stdout(data.decode())
