"""Which format a diagram is drawn in (`-o FILE`'s name and `--format` must agree), and the
diagram rendered in it as the bytes of a file."""

from __future__ import annotations

from pathlib import Path

from archspec.errors import SpecError, did_you_mean
from archspec.safety.text import visible

FORMATS = {".svg": "svg", ".png": "png", ".mmd": "mmd", ".mermaid": "mmd"}


def output_format(output: Path | None, fmt: str | None) -> str:
    """The format `--format` asks for, else the one the file's name says; Mermaid by default.
    A name ending in another format's suffix (x.svg with --format mmd) is refused: the file
    would not hold what its name says."""
    if fmt is not None and fmt not in FORMATS.values():
        raise SpecError(f"--format takes svg, png or mmd, not {fmt!r}",
                        hint=did_you_mean(fmt, ("svg", "png", "mmd")))  # fmt: skip
    if output is None:
        chosen = fmt or "mmd"
        if chosen == "png":
            raise SpecError("a PNG is not text: give a file for it", hint="-o diagram.png")
        return chosen
    by_name = FORMATS.get(output.suffix.lower())
    if fmt is not None and by_name is not None and fmt != by_name:
        raise SpecError(f"--format {fmt} does not match the file name '{visible(output)}'")
    if fmt is not None:
        return fmt
    if by_name is None:
        raise SpecError(
            f"cannot tell what to draw into '{visible(output)}': the name must end in .svg, .png "
            "or .mmd, or --format must say",
            hint="for example -o model.svg, or --format svg",
        )
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
