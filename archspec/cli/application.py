"""The Typer application that every command module registers itself on."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    name="archspec",
    help="Transformer architectures as short YAML specs: exact parameter counts, module trees "
    "and PyTorch code from one IR.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from archspec import __version__
        from archspec.cli.streams import write_stdout

        write_stdout(f"archspec {__version__}\n")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print archspec's version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    from archspec.safety.reading import forget_inputs

    forget_inputs()  # each run's output guard knows that run's inputs (safety/writing.py)
