"""The Typer application that every command module registers itself on."""

from __future__ import annotations

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
