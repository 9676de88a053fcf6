"""`archspec draw`: the paper-style block diagram of a spec (SVG, PNG or Mermaid)."""

from __future__ import annotations

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
from archspec.cli.options import DrawFormat, DrawOutput, DrawParams


@app.command()
def draw(
    spec: SpecArg, set_: SetOpt = None, output: DrawOutput = None, fmt: DrawFormat = None,
    params: DrawParams = False, force: ForceOpt = False, json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:  # fmt: skip
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
    from archspec.backends.draw.formats import output_format, render

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
        result["overrides"] = list(ir.identity.overrides)
        result["format"] = chosen if output is not None else None
        result["output"] = str(output) if output is not None else None
        print_json(result)
    elif output is None:
        write_stdout(data.decode())
