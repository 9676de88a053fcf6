"""The generated `pipeline(model, mesh, loss_fn, n_microbatches)` on 2 gloo processes: under
each schedule (1F1B, GPipe, interleaved 1F1B, interleaved zero bubble, ZBV zero bubble), with
even and uneven stages, a tied head (gpt2) and an untied one (llama), four micro-batches give
the single-process model's loss and gradients over two SGD steps, and each rank holds the
parameter bytes of its stages, as `bench --pp` predicts them, and under 1F1B and GPipe the
saved tensors of the micro-batches in flight at its peak.

All cases run in one spawn of two processes: starting torch is most of the cost (about 20 s
in all on 2 cores)."""

from __future__ import annotations

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.backends.torchgen import generate_source
from archspec.bench.pipeline import stage_predictions
from tests.pipeline_worker import run_pipelines
from tests.tiny import tiny_sizes

pytestmark = pytest.mark.slow

NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0"]
MODELS = {
    "gpt2": ("gpt2", tiny_sizes(n_layers=4)),
    "llama": ("llama-2-7b", tiny_sizes(n_layers=4)),
}
# (model, schedule, stage_layers)
CASES = [
    ("gpt2", "1F1B", None),
    ("gpt2", "GPipe", None),
    ("gpt2", "1F1B", [1, 3]),
    ("gpt2", "Interleaved1F1B", None),
    ("gpt2", "InterleavedZeroBubble", None),
    ("gpt2", "ZBVZeroBubble", None),  # the first and the last stage on rank 0
    ("llama", "1F1B", [3, 1]),
]
IDS = [f"{m}-{s}" + "".join(f"-{n}" for n in (ls or [])) for m, s, ls in CASES]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pipeline")
    irs, cases = {}, []
    for key, (spec, sizes) in MODELS.items():
        irs[key] = build_ir(load_spec(spec, [*sizes, *NO_DROPOUT]))
        (folder / f"pp_{key}.py").write_text(generate_source(irs[key]))
    for name, (key, schedule, layers) in zip(IDS, CASES, strict=True):
        cases.append((name, str(folder / f"pp_{key}.py"), schedule, layers))
    return irs, run_pipelines(2, cases, folder)


@pytest.mark.parametrize("name", IDS)
def test_same_losses_and_gradients(runs, name):
    _, ranks = runs
    holders = [r[name] for r in ranks if r[name]["losses"][0] is not None]
    assert len(holders) == 1  # the rank of the last stage
    assert holders[0]["losses"] == pytest.approx(holders[0]["ref_losses"], abs=1e-5)
    for r in ranks:
        assert r[name]["grad_diff"] < 1e-5


@pytest.mark.parametrize("case,name", list(zip(CASES, IDS, strict=True)), ids=IDS)
def test_each_rank_holds_its_stages(runs, case, name):
    """Every parameter of the model on exactly one rank, a tied head's copy besides."""
    irs, ranks = runs
    key, schedule, layers = case
    ir = irs[key]
    total = ir.value(parameter_count(ir.root))
    head = ir.root.lm_head
    copy = ir.value(ir.root.vocab_size) * ir.value(ir.root.d_model) if head.tied_to else 0
    assert sum(r[name]["param_bytes"] for r in ranks) == 4 * (total + copy)
    per_rank = 2 if schedule not in ("1F1B", "GPipe") else 1
    assert sorted(i for r in ranks for i in r[name]["stages"]) == list(range(2 * per_rank))
    # Rank by rank, what `bench --pp` predicts for its stages (count --engine torch).
    stages = 2 * per_rank
    counts = tuple(layers) if layers else (4 // stages,) * stages
    predicted = stage_predictions(ir, 2, counts, schedule, 4, 8, "cpu")
    assert [r[name]["param_bytes"] for r in ranks] == [p["weights"] for p in predicted]
    if schedule in ("1F1B", "GPipe"):  # the saved tensors in flight at each rank's peak
        assert [r[name]["saved_in_flight"] for r in ranks] == [p["activations"] for p in predicted]
