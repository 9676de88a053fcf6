"""Every published run of published.yaml, given to `archspec plan` as a user would give it
(its layout as options), is timed, and timed as the validation harness times it: the errors
docs/plan.md reports are the command's errors. What a source leaves open (Narayanan et al.'s
micro-batch and interleaving) is given as the harness found it fastest."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan import published
from archspec.plan.engines import ENGINES
from archspec.plan.hardware import get_system
from tests.one_of_each import one_of_each, options_set

runner = CliRunner()


def command(run: published.Run, micro_batch: int, interleave: int) -> list[str]:
    entry = published.dataset().models[run.model]
    sets = [*entry["set"], *run.sets, f"max_seq_len={run.seq}"]
    args = ["plan", entry["spec"], *[a for s in sets for a in ("--set", s)]]
    args += [
        "--gpu", run.system, "--gpus", str(run.gpus), "--global-batch", str(run.global_batch),
        "--seq", str(run.seq), "--dtype", run.dtype, "--grad-dtype", run.grad_dtype,
        "--attn", run.attn, "--engine", run.engine, "--tp", str(run.tp), "--pp", str(run.pp),
        "--cp", str(run.cp), "--ep", str(run.ep), "--zero", str(run.zero),
        "--batch", str(micro_batch), "--interleave", str(interleave),
    ]  # fmt: skip
    if run.recompute.startswith("selective:"):  # Megatron-Core's recompute_modules
        args += ["--recompute", "selective", "--recompute-modules", run.recompute.split(":")[1]]
    else:  # full:N is one setting
        args += ["--recompute", run.recompute]
    if run.sp:
        args.append("--sp")
    if run.async_tp:
        args.append("--async-tp")
    if run.fp8_all_gather:
        args.append("--fp8-all-gather")
    if run.checkpoint:
        args += ["--checkpoint", run.checkpoint]
    if run.dp_replicate > 1:
        args += ["--dp-replicate", str(run.dp_replicate)]
    if run.node_size:
        args += ["--node-size", str(run.node_size)]
    if run.stage_layers:
        args += ["--stage-layers", ",".join(map(str, run.stage_layers))]
    if run.ep_dispatch != "fused":
        args += ["--ep-dispatch", run.ep_dispatch]
    if run.etp is not None:
        args += ["--etp", str(run.etp)]
    if run.offload_layers:
        args += ["--offload-layers", str(run.offload_layers)]
    if run.mtp_layers:
        args += ["--mtp-layers", str(run.mtp_layers)]
    return [*args, "--json"]


# One run per source and set of options by default (tests/one_of_each.py); `-m long`: all.
RUNS = one_of_each(
    published.expressible(),
    lambda r: (r.source, options_set(r, {"assumed", "needs"})),
    ids=lambda r: r.name,
)


@pytest.mark.parametrize("run", RUNS)
def test_the_command_times_every_published_layout_as_the_harness_does(run) -> None:
    accelerator = get_system(run.system).accelerator.key
    seconds, layout = published.predict(run, ENGINES[run.engine].efficiency(accelerator))
    result = runner.invoke(app, command(run, layout.micro_batch, layout.interleave))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["step_time_s"] == pytest.approx(seconds, rel=1e-9)
    # A layout archspec's memory model says does not fit is timed and flagged, as the
    # harness's table flags it ("needs N GiB").
    assert report["fits"] == (report["memory"]["total"] <= report["memory"]["usable"])
