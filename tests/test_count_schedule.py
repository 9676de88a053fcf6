"""`archspec count --engine torch --gpus 2 --pp 2 --schedule S`: each pipeline rank's saved
tensors under every schedule torch.distributed.pipelining offers, against the bytes measured
on 2 gloo processes (`bench --nproc 2 --pp 2 --schedule S`, one sequence a micro-batch, 4
micro-batches: count's `--batch 1 --global-batch 4`), read from benchmarks/RESULTS.md's
table "Each pipeline rank's peak, six schedules" (tests/test_pipeline_schedules.py -m long
measures them again); the stages each rank holds as the run placed them. Then the refusals,
and that count imports torch only for a schedule whose order it reads from torch."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from tests.hostile import run_python
from tests.tiny import as_sets

RESULTS = Path(__file__).parent.parent / "benchmarks" / "RESULTS.md"
SIZES = ["n_layers=4", "d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16"]
SIZES += ["dropout.attention=0", "dropout.hidden=0"]
MODELS = {"gpt2": SIZES, "llama-2-7b": [*SIZES, "n_kv_heads=4"]}
LAYOUT = ["--engine", "torch", "--gpus", "2", "--pp", "2", "--seq", "8", "--batch", "1"]
LAYOUT += ["--global-batch", "4"]


def _measured() -> dict[tuple[str, str], list[tuple[list[int], int]]]:
    """{(spec, schedule): [(stages, saved tensor bytes) of rank 0, of rank 1]} from the two
    tables of the section (gpt2's, then llama-2-7b's)."""
    text = RESULTS.read_text()
    section = text.split("### Each pipeline rank's peak, six schedules")[1].split("\n### ")[0]
    tables = re.split(r"\n\n(?=The same on llama-2-7b)", section)
    row = re.compile(r"^\| `([\w-]+)` \| (\d) \| ([\d, ]+) \| ([\d,]+) \|", re.M)
    out: dict[tuple[str, str], list] = {}
    for spec, table in zip(MODELS, tables, strict=True):
        for schedule, _, stages, saved in row.findall(table):
            held = [int(s) for s in stages.split(",")]
            out.setdefault((spec, schedule), []).append((held, int(saved.replace(",", ""))))
    return out


MEASURED = _measured()


def _count(spec: str, *options: str):
    return CliRunner().invoke(app, ["count", spec, *as_sets(MODELS[spec]), *LAYOUT, *options])


def test_the_table_is_read():
    assert len(MEASURED) == 10  # six schedules on gpt2, four on llama-2-7b


@pytest.mark.parametrize("spec,schedule", sorted(MEASURED))
def test_each_ranks_saved_tensors_equal_the_measured(spec, schedule):
    result = _count(spec, "--schedule", schedule, "--json")
    assert result.exit_code == 0, result.output
    memory = json.loads(result.stdout)["memory"]
    ranks = [(r["stages"], r["activations"]) for r in memory["ranks"]]
    assert ranks == MEASURED[spec, schedule]
    for r in memory["ranks"]:  # every figure the rank's own, the peak above what it holds
        assert r["total"] == sum(r[k] for k in ("weights", "gradients", "optimizer", "activations"))
        assert r["peak"] > r["total"] - r["activations"]
    busiest = max(memory["ranks"], key=lambda r: r["total"])
    assert memory["total"] == busiest["total"] and memory["stages"] == busiest["stages"]


@pytest.mark.parametrize(
    "options,words",
    [
        (["--schedule", "zbv", "--pp", "1", "--gpus", "1"], ["--schedule zbv", "--pp 2"]),
        (["--schedule", "foo"], ["--schedule 'foo'", "zbv"]),
        (["--schedule", "looped-bfs", "--engine", "megatron"], ["--interleave V"]),
        (["--schedule", "interleaved-1f1b", "--global-batch", "5"],
         ["--schedule interleaved-1f1b over --global-batch 5", "multiple of the number of rounds"]),
        (["--schedule", "zbv", "--set", "n_layers=6"], ["--schedule zbv", "4 pipeline chunks",
                                                        "6 layers"]),
        (["--schedule", "zbv", "--dtype", "bf16"], ["--schedule zbv with --dtype bf16"]),
        (["--schedule", "zbv", "--symbolic"], ["--symbolic", "--schedule zbv"]),
        (["--interleave", "2"], ["--interleave 2", "--schedule interleaved-1f1b"]),
    ],
)  # fmt: skip
def test_refusals_name_the_values(options, words):
    result = _count("gpt2", *options)
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    for word in words:
        assert word in message


def test_torch_only_for_an_order_read_from_torch():
    sets = [f"--set={s}" for s in SIZES]
    code = (
        "from archspec.cli import main\n"
        f"sys.argv = ['archspec', 'count', 'gpt2', *{sets!r}, *{LAYOUT!r}, "
        "'--schedule', 'gpipe', '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
    )
    _, loaded = run_python(code)
    assert "torch" not in loaded
