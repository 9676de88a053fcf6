"""The `archspec` command line.

Commands are thin: they resolve a spec, compile it to the IR, ask a backend, and render the
result as a rich table for people or JSON (`--json`) for machines. Data goes to stdout,
messages to stderr. Every user mistake is a `SpecError`: one message, exit code 2, and no
traceback unless `--debug`.

Each command lives in its own module in this package and registers itself on the Typer
application (`application.py`). A run imports only the module of the command it runs:
`bench` and `build` pull in torch, `plan` the cluster model, `count` only the spec, the IR and
rich, and importing every module on every start would make `archspec count` several times
slower to start. To add a command, write its module and name it in `COMMANDS`.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

# `--help` groups the commands in panels, in this order.
INSPECT, BUILD_AND_RUN, PLAN = "Inspect a spec", "Build and run", "Plan"

# Command name -> the module of this package that registers it, its panel and its line in
# `--help` (the command's own --help has the full text), in the order `--help` lists them.
COMMANDS = {
    "count": ("count", INSPECT, "Parameters, exactly; FLOPs and memory with --seq or --batch."),
    "print": ("printing", INSPECT, "The generated model's module tree, as print(model) shows."),
    "validate": ("count", INSPECT, "Check a spec; --resolved shows every default it leaves out."),
    "list": ("count", INSPECT, "The built-in specs, with family and parameter count."),
    "diff": ("compare", INSPECT, "What differs between two specs: fields, modules, parameters."),
    "compare": ("compare", INSPECT, "Specs side by side: parameters, FLOPs, memory; --plot."),
    "draw": ("draw", INSPECT, "The block diagram, as papers draw it: SVG, PNG, Mermaid, JSON."),
    "report": ("report", INSPECT, "One offline HTML file: diagram, tables, module tree, charts."),
    "build": ("build", BUILD_AND_RUN, "One standalone PyTorch file for a spec (only torch)."),
    "bench": ("bench", BUILD_AND_RUN, "Time the generated model here: step time, MFU, memory."),
    "import-hf": ("hf", BUILD_AND_RUN, "A transformers config.json as a short spec."),
    "plan": ("plan", PLAN, "Predict a training step or serving on a cluster (no GPU needed)."),
}
COMMAND_MODULES = {name: module for name, (module, _, _) in COMMANDS.items()}


def register_commands(command: str | None = None) -> None:
    """Register `command` on the application, or every command when it is None or not one of
    ours (`--help`, `--version`, a misspelt name: Typer then lists them all or suggests one)."""
    if command in COMMAND_MODULES:
        modules = [COMMAND_MODULES[command]]
    else:
        modules = list(dict.fromkeys(COMMAND_MODULES.values()))
    for module in modules:
        importlib.import_module(f"archspec.cli.{module}")
    _arrange()


def _arrange() -> None:
    """Put the registered commands in `COMMANDS`' order, panels and lines."""
    from archspec.cli.application import app

    def name(info) -> str:
        return info.name or info.callback.__name__.replace("_", "-")

    order = list(COMMANDS)
    app.registered_commands.sort(key=lambda info: order.index(name(info)))
    for info in app.registered_commands:
        _, info.rich_help_panel, info.short_help = COMMANDS[name(info)]


def command_in(argv: list[str]) -> str | None:
    """The command an argument list runs: its first word that is not an option (the
    application's own options, `--version` and `--help`, take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def __getattr__(name: str) -> typer.Typer:
    # `from archspec.cli import app` (tests, embedding) gets the application with every command.
    if name == "app":
        register_commands()
        from archspec.cli.application import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Run the command line. A SpecError that escapes a command (stdout failing while a table
    is printed, after the command's own error handling) is still one message and exit code 2;
    stdout is flushed here, so that a failure at exit is reported too."""
    from archspec.cli.application import app
    from archspec.cli.streams import say, silence_stdout, stdout_failed
    from archspec.errors import SpecError

    register_commands(command_in(sys.argv[1:]))
    try:
        try:
            exit_code = _run(app)
        finally:
            if sys.stdout is not None:
                try:
                    sys.stdout.flush()
                except (OSError, ValueError) as exc:
                    raise stdout_failed(exc) from None
    except SpecError as exc:
        if "--debug" in sys.argv:
            raise
        say(str(exc))
        silence_stdout()
        sys.exit(2)
    if exit_code:
        sys.exit(exit_code)


def _run(app) -> int | None:
    """The application, with click's mistakes in the arguments (an unknown option, a value of
    the wrong type) shown as Typer shows them and, under --json, also as the JSON error
    object every other mistake gives on stdout. The exit code a command asked for, if any."""
    import typer

    # click's base error, wherever this typer keeps click (its own copy from 0.28 on).
    usage_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    try:
        code = app(standalone_mode=False)
    except usage_error as exc:
        if "--json" in sys.argv[1:]:
            from archspec.cli.common import json_error
            from archspec.errors import SpecError

            json_error(SpecError(exc.format_message()))
        from typer import rich_utils

        rich_utils.rich_format_error(exc)
        return exc.exit_code
    except typer.Abort:
        print("Aborted!", file=sys.stderr)
        return 1
    return code if isinstance(code, int) else None


if __name__ == "__main__":
    main()
