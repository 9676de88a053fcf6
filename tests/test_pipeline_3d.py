"""Pipelines beside FSDP2 and tensor parallelism: the generated `pipeline` over a mesh with "pp"
outermost and "dp_shard" or "tp", each stage laid out by the generated `parallelize`, on 4 gloo
processes, against the single-process model (loss and every gradient of one step, tied and
untied heads); `archspec bench --nproc 4 --pp 2 --zero 3` and `--tp 2` against the model alone
(`reference_losses`), and all three on 8 processes. What bench refuses is refused before any
process starts."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.backends.torchgen import generate_source
from archspec.cli import app
from tests.pipeline_3d_worker import run_3d
from tests.tiny import as_sets, tiny_sizes

NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0"]
TINY = tiny_sizes(n_layers=4)
MODELS = {"gpt2": "gpt2", "llama": "llama-2-7b"}  # a head tied to the embedding; untied
MESHES = {"dp_shard": {"pp": 2, "dp_shard": 2}, "tp": {"pp": 2, "tp": 2}}
CASES = [(model, mesh) for mesh in MESHES for model in MODELS]
IDS = [f"{model}-pp-{mesh}" for model, mesh in CASES]
BENCH = ["--device", "cpu", "--nproc", "4", "--pp", "2", "--batch", "4", "--seq", "8"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pipeline_3d")
    for key, spec in MODELS.items():
        ir = build_ir(load_spec(spec, [*TINY, *NO_DROPOUT]))
        (folder / f"{key}.py").write_text(generate_source(ir))
    cases = [
        (name, str(folder / f"{m}.py"), MESHES[mesh])
        for name, (m, mesh) in zip(IDS, CASES, strict=True)
    ]
    return run_3d(4, cases, folder)


@pytest.mark.long
@pytest.mark.parametrize("name", IDS)
def test_loss_and_gradients_equal_the_single_process_model(runs, name):
    """Each rank's stage gradients, gathered whole, are the model's over every data rank's rows;
    the ranks of the last stage give its loss (under dp_shard: their mean)."""
    losses = [r[name]["loss"] for r in runs if r[name]["loss"] is not None]
    assert len(losses) == 2  # the last stage's two ranks (dp_shard or tp)
    assert sum(losses) / 2 == pytest.approx(runs[0][name]["ref_loss"], abs=1e-5)
    for r in runs:
        assert r[name]["grad_diff"] < 1e-5


def _bench(*options: str) -> dict:
    args = ["bench", "gpt2", *as_sets([*TINY, *NO_DROPOUT]), *BENCH, *options]
    result = CliRunner().invoke(app, [*args, "--steps", "1", "--warmup", "1", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.long
def test_bench_pipeline_beside_fsdp2():
    """Each data rank trains the pipeline on its own rows: the mean of the last stage's losses
    is the model's over all of them; each rank's saved tensors are its stage's as the pipeline
    alone keeps them; the stages' FSDP2 shards add up to the model (a tied head's copy
    besides); the peak is not predicted."""
    r = _bench("--zero", "3")
    assert r["mesh"] == {"pp": 2, "dp_shard": 2, "ep": 1, "cp": 1, "tp": 1}
    last = [rank["losses"] for rank in r["ranks"] if rank["losses"]]
    assert [rank["stages"] for rank in r["ranks"]] == [[0], [0], [1], [1]]
    mean = [sum(step) / 2 for step in zip(*last, strict=True)]
    assert mean == pytest.approx(r["reference_losses"], abs=1e-4)
    for rank in r["ranks"]:
        assert rank["saved_tensor_bytes"] == rank["predicted_saved_tensor_bytes"]
        assert "predicted_peak_bytes" not in rank
    ir = build_ir(load_spec("gpt2", [*TINY, *NO_DROPOUT]))
    copy = ir.value(ir.root.vocab_size) * ir.value(ir.root.d_model)
    total = ir.value(parameter_count(ir.root))
    assert sum(rank["param_bytes"] for rank in r["ranks"]) == 4 * (total + copy)


@pytest.mark.long
def test_bench_pipeline_beside_tensor_parallelism():
    """Both tp ranks of the last stage give the model's loss; nothing per rank is predicted."""
    r = _bench("--tp", "2")
    assert r["mesh"] == {"pp": 2, "dp_shard": 1, "ep": 1, "cp": 1, "tp": 2}
    for rank in r["ranks"][2:]:
        assert rank["losses"] == pytest.approx(r["reference_losses"], abs=1e-4)
    for rank in r["ranks"]:
        assert not {"predicted_peak_bytes", "predicted_saved_tensor_bytes"} & set(rank)


@pytest.mark.long
def test_bench_pipeline_beside_fsdp2_and_tensor_parallelism():
    """All three on 8 processes: each data rank's tp pair of the last stage gives its rows'
    loss, and the mean over the data ranks is the model's over all of them."""
    args = ["bench", "gpt2", *as_sets([*TINY, *NO_DROPOUT]), *BENCH, "--tp", "2", "--zero", "3"]
    args[args.index("--nproc") + 1] = "8"
    result = CliRunner().invoke(app, [*args, "--steps", "1", "--warmup", "1", "--json"])
    assert result.exit_code == 0, result.output
    r = json.loads(result.stdout)
    assert r["mesh"] == {"pp": 2, "dp_shard": 2, "ep": 1, "cp": 1, "tp": 2}
    last = [rank["losses"] for rank in r["ranks"][4:]]  # (dp 0: tp 0, 1), (dp 1: tp 0, 1)
    assert last[0] == last[1] and last[2] == last[3]
    mean = [(a + b) / 2 for a, b in zip(last[0], last[2], strict=True)]
    assert mean == pytest.approx(r["reference_losses"], abs=1e-4)


@pytest.mark.parametrize(
    "options,message",
    [
        (["--tp", "3"], "--pp 2 × --tp 3 = 6 ranks does not divide --nproc 4: the mesh has more"),
        ([], "--nproc 4 with --tp 1 leaves 2 data-parallel replicas"),
        (["--cp", "2"], "--pp 2 with --cp 2: the generated pipeline lays its stages out over"),
        (["--zero", "3", "--schedule", "zbv"], "--schedule zbv with --zero 3 over 2 data-parallel"),
        (["--tp", "2", "--sp"], "--sp with --pp"),
    ],
)
def test_refusals(options, message):
    """Exit 2 and one message naming the values, before torchrun starts."""
    result = CliRunner().invoke(app, ["bench", "gpt2", *as_sets(TINY), *BENCH, *options])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
