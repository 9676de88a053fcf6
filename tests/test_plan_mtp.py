"""Multi-token prediction in `plan` (`--mtp-layers`, mtp.py): each depth is one more layer of
the decoder's last run on the last stage, with a 2·d → d projection, norms and the head
again. Checked against count's own model with one more layer and against the terms
Megatron-LM's FLOP count adds per depth (megatron/training/training.py at d98e8a6,
`num_floating_point_operations`: "MTP eh proj" 2·h·h and one more logit h·V, each times 2
FLOPs a multiply-add and 3 for the forward and backward)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.backends.count.layout import Parallelism, stage_params
from archspec.cli import app
from archspec.cli.common import resolve_spec
from archspec.ir.build import build_ir
from archspec.plan.fit import MemoryModel
from archspec.plan.hardware import get_system
from archspec.plan.report import step_flops
from archspec.plan.step import Layout, StepModel, Training

MODEL = "deepseek-v2-lite"  # latent attention, MoE layers after a dense one, untied head
SEQ, BATCH = 4096, 64


def _ir(*sets: str):
    return build_ir(resolve_spec(MODEL, list(sets)))


def _run(mtp: int) -> Training:
    return Training(8, BATCH, SEQ, "bf16", "bf16", engine="nemo", mtp_layers=mtp)


def test_a_depth_adds_a_layer_its_projection_and_a_logit() -> None:
    """The model FLOPs one depth adds: those of one more MoE layer (count's model with 28
    layers against 27) plus Megatron-LM's eh_proj and logit terms. The three norms and the
    layer's elementwise backward (count takes it op by op, the depth as twice its forward)
    are what the tolerance leaves: 3.8e-5 of the whole."""
    ir = _ir()
    base, _ = step_flops(ir, _run(0), "none")
    with_depth, _ = step_flops(ir, _run(1), "none")
    d, vocab = ir.value(ir.root.d_model), ir.value(ir.root.vocab_size)
    deeper, _ = step_flops(_ir("n_layers=28"), _run(0), "none")
    tokens = BATCH * SEQ
    megatron = 3 * 2 * tokens * (2 * d * d + d * vocab)
    assert with_depth - base == pytest.approx(deeper - base + megatron, rel=1e-4)


def test_the_last_stage_holds_the_depth_and_a_copy_of_the_embedding() -> None:
    """Parameters on the last of two stages: one more layer (count's stage with one more
    layer), eh_proj's 2·d·d, three norms of d and, the head untied, the embedding table the
    depth looks its tokens up in (Megatron-Core builds it where `mtp_process`)."""
    ir, deeper = _ir(), _ir("n_layers=28")
    memory = MemoryModel(ir, SEQ, "bf16", "bf16", "flash", mtp_layers=1)
    (_, first), (_, last) = memory.params(1, 2, (14, 13))
    counted = [
        int(s.params.xreplace(ir.env))
        for s in stage_params(ir, Parallelism(gpus=2, pp=2, stage_layers=(14, 13)))
    ]
    more = [
        int(s.params.xreplace(deeper.env))
        for s in stage_params(deeper, Parallelism(gpus=2, pp=2, stage_layers=(14, 14)))
    ]
    d, vocab = ir.value(ir.root.d_model), ir.value(ir.root.vocab_size)
    assert first == counted[0]
    assert last == more[1] + 2 * d * d + 3 * d + vocab * d


def test_a_depth_costs_time_on_the_last_stage() -> None:
    ir = _ir()
    system = get_system("h100-sxm")
    layout = Layout(tp=1, pp=1, interleave=1, micro_batch=1, sp=False, recompute="none",
                    zero=1, ep=8)  # fmt: skip
    none = StepModel(ir, system, _run(0)).step(layout)
    one = StepModel(ir, system, _run(1)).step(layout)
    per_layer = none.breakdown["compute"] / 27
    assert one.breakdown["compute"] - none.breakdown["compute"] > per_layer


PLAN = ["plan", MODEL, "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "64", "--seq",
        "4096", "--engine", "nemo", "--ep", "8", "--zero", "1", "--json"]  # fmt: skip


def test_plan_takes_mtp_layers() -> None:
    runs = []
    for mtp in ("0", "1"):
        result = CliRunner().invoke(app, [*PLAN, "--mtp-layers", mtp])
        assert result.exit_code == 0, result.output
        runs.append(json.loads(result.stdout))
    assert runs[1]["step_time_s"] > runs[0]["step_time_s"]
    assert runs[1]["flops"]["model"] > runs[0]["flops"]["model"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*PLAN, "--mtp-layers", "-1"], "0 or more"),
        (
            ["plan", "bert-base", "--gpu", "h100-sxm", "--global-batch", "8", "--mtp-layers", "1"],
            "decoder-only",
        ),
    ],
)
def test_what_mtp_cannot_extend_is_refused(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert message in result.output
