"""Issue 19, numbers and streams: options out of range, sizes beyond the analysis, a sweep
too long to finish, JSON that would not be JSON, and a stdout that cannot be written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from archspec.cli.common import human, print_json
from archspec.errors import SpecError
from archspec.safety.limits import MAX_LENGTHS
from tests.hostile import cli, refused, run_main

BIG = "1000000000"
HUGE_SPEC = [
    "--set", f"d_model={BIG}", "--set", "n_heads=1", "--set", f"n_layers={BIG}",
    "--set", f"vocab_size={BIG}", "--set", f"d_ff={BIG}", "--set", f"max_seq_len={BIG}",
]  # fmt: skip


@pytest.mark.parametrize("value", ["nan", "-5", "0", "inf"])
def test_peak_tflops_must_be_positive_and_finite(value: str) -> None:
    refused(cli("bench", "gpt2", "--device", "cpu", "--peak-tflops", value), "--peak-tflops")


def test_threads_beyond_any_machine_are_refused() -> None:
    refused(cli("bench", "gpt2", "--device", "cpu", "--threads", str(10**20)), "--threads")


@pytest.mark.parametrize(
    "args",
    [["--set", "n_layers=1000000"], ["--batch", "100000000"], ["--set", f"n_layers={10**12}"]],
)
def test_bench_refuses_runs_that_cannot_fit(args: list[str]) -> None:
    refused(cli("bench", "gpt2", "--device", "cpu", "--mode", "forward", *args), "error:")


def test_a_sweep_of_thousands_of_lengths_is_refused() -> None:
    lengths = ",".join(["8"] * 3000)
    refused(cli("count", "gpt2", "--seq", lengths), f"at most {MAX_LENGTHS} lengths")


@pytest.mark.parametrize("option", ["--batch", "--gpus", "--kv-len"])
def test_workload_options_beyond_the_analysis(option: str) -> None:
    refused(cli("count", "gpt2", option, str(10**12)), "at most 1,000,000,000")


def test_the_largest_allowed_model_still_renders() -> None:
    result = cli("count", "gpt2", *HUGE_SPEC, "--batch", BIG, "--seq", f"{BIG},1000")
    assert result.exit_code == 0, result.output
    result = cli("count", "gpt2", *HUGE_SPEC, "--batch", BIG, "--seq", BIG, "--json")
    assert result.exit_code == 0 and "NaN" not in result.stdout and "Infinity" not in result.stdout


def test_compare_and_diff_of_the_largest_models(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(
        "extends: gpt2\n"
        + "".join(f"{s.split('=')[0]}: {s.split('=')[1]}\n" for s in HUGE_SPEC[1::2])
    )
    assert cli("compare", "gpt2", str(big)).exit_code == 0
    assert cli("diff", "gpt2", str(big)).exit_code == 0


def test_number_formats_never_overflow() -> None:
    """Totals of 10^308 and more: every table, compare, diff and sweep formatter copes."""
    from archspec.backends.compare import plot, table

    assert human(10**400).endswith("T") and human(float("inf")) == "inf"
    assert human(1234567) == "1.23M"
    assert table.si(10**400, "FLOP").endswith("PFLOP") and table.binary_bytes(10**400)
    assert plot.si(10**400) and plot.binary(10**400)


def test_json_never_carries_nan() -> None:
    with pytest.raises(SpecError, match="cannot be written as JSON"):
        print_json({"mfu": float("nan")})


@pytest.mark.parametrize(
    "args", [["count", "gpt2", "--json"], ["count", "gpt2"], ["build", "gpt2"]]
)
def test_stdout_to_a_full_device(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        result = run_main(args, stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert result.returncode == 2, result.stderr
    assert b"cannot write to standard output" in result.stderr
    assert b"Traceback" not in result.stderr


def test_closed_stdout() -> None:
    result = run_main(
        ["count", "gpt2", "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=60,
        preexec_fn=lambda: os.close(1),  # the child starts with fd 1 closed
    )
    assert result.returncode == 2 and b"standard output" in result.stderr
    assert b"Traceback" not in result.stderr
