"""Help that reads well (issue 29, point 7): `archspec --help` groups the commands, every
dtype option takes torch's names (`bfloat16`) as well as the short ones (`bf16`), and hints
suggest only what the options given leave to try."""

from __future__ import annotations

import json
import re

import pytest
import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from archspec.cli import app

runner = CliRunner()

PANELS = {
    "Inspect a spec": [
        "count", "print", "validate", "list", "diff", "compare", "draw", "report",
    ],
    "Build and run": ["build", "bench", "import-hf"],
    "Plan": ["plan"],
}  # fmt: skip


def test_help_groups_the_commands_in_panels() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    shown: dict[str, list[str]] = {}
    panel = None
    for line in result.stdout.splitlines():
        if m := re.match(r"╭─ (.+?) ─", line):
            panel = m[1]
            shown[panel] = []
        elif panel and (m := re.match(r"│ ([a-z-]+)\s{2,}\S", line)):
            shown[panel].append(m[1])
    del shown["Options"]
    assert shown == PANELS
    # One line a command: the full text is in the command's own --help.
    assert len(result.stdout.splitlines()) < 40


def test_a_commands_own_help_keeps_its_full_text() -> None:
    result = runner.invoke(app, ["count", "--help"], env={"COLUMNS": "100"})
    assert "A list of lengths" in result.stdout


def _dtype_options():
    command = typer.main.get_command(app)
    for name, sub in command.commands.items():
        for param in sub.params:
            if isinstance(param, TyperOption) and any("dtype" in o for o in param.opts):
                yield name, param, sub


def test_every_dtype_option_normalises_its_value() -> None:
    options = list(_dtype_options())
    found = {(name, param.opts[0]) for name, param, _ in options}
    expected = {("count", "--dtype"), ("count", "--grad-dtype"), ("compare", "--dtype"),
                ("plan", "--dtype"), ("plan", "--grad-dtype"), ("bench", "--dtype")}  # fmt: skip
    assert expected <= found
    for name, param, command in options:
        context = command.context_class(command)
        for long, short in (("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32")):
            assert param.process_value(context, long) == short, (name, param.opts)
        assert param.process_value(context, "int8") == "int8"


def _json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("args", "long", "short"),
    [
        (("count", "gpt2", "--seq", "128", "--dtype"), "bfloat16", "bf16"),
        (("count", "gpt2", "--seq", "128", "--grad-dtype"), "float32", "fp32"),
        (("compare", "gpt2", "bert-base", "--dtype"), "float16", "fp16"),
        (("plan", "gpt2", "--gpu", "a100-80g", "--gpus", "8", "--global-batch", "16",
          "--seq", "1024", "--dtype"), "float32", "fp32"),
    ],
)  # fmt: skip
def test_torch_dtype_names_give_the_same_figures(args, long: str, short: str) -> None:
    assert _json(*args, long) == _json(*args, short)


def test_a_long_dtype_name_is_not_refused() -> None:
    result = runner.invoke(app, ["count", "gpt2", "--seq", "128", "--dtype", "bfloat16"])
    assert result.exit_code == 0, result.output


# Bench's notes: a result as `run_bench` returns it, with a speedup within the noise.

RESULT = {
    "flops_per_step": 1e9, "tokens_per_step": 64, "memory_measured_by": "tracemalloc",
    "peak_memory_bytes": 100, "predicted_memory_bytes": 100, "mfu": None, "device": "cpu",
    "device_name": "cpu", "hf_attn_implementation": "sdpa", "hf_max_abs_diff": 1e-6,
    "speedup_within_noise": True, "speedup": 1.01, "steps": 10,
}  # fmt: skip


@pytest.mark.parametrize(("threads", "suggested"), [(1, False), (8, True), (None, False)])
def test_bench_suggests_one_thread_only_when_the_run_used_more(threads, suggested) -> None:
    from archspec.cli.bench import _notes

    note = _notes({**RESULT, "threads": threads}, hf=True)[-1]
    assert "within the noise" in note and "more --steps" in note
    assert ("--threads 1" in note) == suggested
