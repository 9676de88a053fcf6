"""Start-up: a run of `archspec CMD` imports the module of CMD only, and `COMMAND_MODULES`
(which names that module for each command) agrees with what the modules register."""

from __future__ import annotations

import importlib

import pytest

from archspec.cli import COMMAND_MODULES, command_in
from tests.hostile import run_main, run_python


def _registered_names(app) -> list[str]:
    names = []
    for info in app.registered_commands:
        names.append(info.name or info.callback.__name__.replace("_", "-"))
    return names


def test_every_registered_command_is_mapped_to_its_module() -> None:
    from archspec.cli import app  # every command registered

    by_module = {}
    for info in app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        by_module[name] = info.callback.__module__.rsplit(".", 1)[-1]
    assert by_module == COMMAND_MODULES


def test_help_lists_the_commands_in_the_mapping_order() -> None:
    from archspec.cli import app

    assert _registered_names(app) == list(COMMAND_MODULES)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["count", "gpt2", "--json"], "count"),
        (["--version"], None),
        (["-h"], None),
        (["import-hf", "config.json"], "import-hf"),
        (["cuont", "gpt2"], "cuont"),
    ],
)
def test_the_command_of_an_argument_list(argv: list[str], command: str | None) -> None:
    assert command_in(argv) == command


def _modules_after(args: list[str]) -> set[str]:
    code = (
        f"sys.argv = ['archspec', *{args!r}]\n"
        "from archspec.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    return run_python(code)[1]


def test_count_imports_its_own_command_module_only() -> None:
    loaded = _modules_after(["count", "llama-2-70b", "--json"])
    command_modules = {f"archspec.cli.{m}" for m in COMMAND_MODULES.values()}
    assert loaded & command_modules == {"archspec.cli.count"}
    for heavy in ("torch", "sympy", "matplotlib", "rich.table"):
        assert heavy not in loaded, heavy


def test_an_unknown_command_still_gets_a_suggestion() -> None:
    result = run_main(["cuont", "gpt2"], text=True)
    assert result.returncode == 2
    assert "count" in result.stderr


def test_top_level_names_load_on_first_use() -> None:
    archspec = importlib.import_module("archspec")
    assert callable(archspec.load_spec) and callable(archspec.build_ir)
    assert issubclass(archspec.SpecError, Exception)
    with pytest.raises(AttributeError):
        archspec.no_such_name  # noqa: B018
