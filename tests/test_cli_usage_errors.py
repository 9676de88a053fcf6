"""The command line's own mistakes (a value of the wrong type, an option a command does not
have): shown as Typer shows them, exit code 2, and under --json also the JSON error object
every other mistake gives on stdout, through `archspec`'s entry point (`cli.main`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "archspec", *args], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize("args,message", [
    (["plan", "llama-2-7b", "--gpu", "h200", "--price", "abc"], "'abc' is not a valid float"),
    (["count", "llama-2-7b", "--node-size", "8"], "No such option: --node-size"),
])  # fmt: skip
def test_a_usage_mistake_under_json_is_a_json_error(args, message) -> None:
    done = run(*args, "--json")
    assert done.returncode == 2
    assert message in json.loads(done.stdout)["error"]["message"]
    assert message in done.stderr and "Traceback" not in done.stderr
    plain = run(*args)
    assert plain.returncode == 2 and plain.stdout == "" and message in plain.stderr


def test_help_and_a_command_still_exit_0() -> None:
    assert run("plan", "--help").returncode == 0
    done = run("count", "gpt2", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["name"] == "gpt2"
