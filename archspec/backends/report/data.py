"""The figures of an HTML report, gathered from the count backend exactly as `count --json`
reports them.

Every number on the page comes from here, and each carries the `archspec count` command that
prints it, so a reader (or the browser test) can check any figure against the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from archspec.backends.compare.sweep import chart_lengths, seq_sweep
from archspec.backends.count.flops_report import Workload, flops_report
from archspec.backends.count.memory import Parallelism
from archspec.backends.count.report import param_report
from archspec.errors import SpecError
from archspec.ir.nodes import IR
from archspec.safety.text import shell_join


@dataclass(frozen=True)
class DeviceLayout:
    label: str
    options: tuple[str, ...]  # as `archspec count` takes them
    batch: int
    parallel: Parallelism


# A few layouts people ask about first: one device, data parallelism with sharded optimizer
# states, tensor parallelism inside an 8-GPU node. One that a model cannot take (heads not
# divisible) is left out with the reason.
LAYOUTS = (
    DeviceLayout("1 device", (), 1, Parallelism()),
    DeviceLayout("8 devices, data parallel, ZeRO-3", ("--gpus", "8", "--zero", "3", "--batch", "8"),
                 8, Parallelism(gpus=8, zero=3)),
    DeviceLayout("8 devices, tensor parallel 4 × data parallel 2",
                 ("--gpus", "8", "--tp", "4", "--batch", "2"), 2, Parallelism(gpus=8, tp=4)),
)  # fmt: skip


def _command(name: str, overrides: list[str], *options: str) -> str:
    """The `archspec count` command behind a figure, quoted as the shell reads it back (a spec
    path of `$(...)` or spaces is one word, not a command to run)."""
    sets = [word for o in overrides for word in ("--set", o)]
    return shell_join(["archspec", "count", name, *sets, *options, "--json"])


def _seq_options(seq: int) -> tuple[str, ...]:
    return ("--seq", str(seq))


def spec_figures(ir: IR, ref: str, overrides: list[str], seq: int) -> dict[str, Any]:
    """One spec's figures: parameters, FLOPs and memory against S, memory per layout at `seq`."""
    report = param_report(ir)
    longest = ir.value(ir.root.max_seq_len)
    lengths = [s for s in chart_lengths(longest) if s <= longest]
    if longest not in lengths:
        lengths.append(longest)
    sweep = []
    for entry in seq_sweep(ir, Workload(), lengths):
        s = entry["workload"]["seq"]
        sweep.append({
            "seq": s,
            "forward_per_token": entry["flops"]["forward_per_token"],
            "forward": entry["flops"]["forward"],
            "train_step": entry["flops"]["train_step"],
            "memory_total": entry["memory"]["total"],
            "memory_inference": entry["memory"]["inference_total"],
            "command": _command(ref, overrides, *_seq_options(s)),
        })  # fmt: skip
    at_seq = flops_report(ir, Workload(seq=seq))["flops"]
    layouts = []
    for layout in LAYOUTS:
        workload = replace(Workload(seq=seq), batch=layout.batch, parallel=layout.parallel)
        command = _command(ref, overrides, *_seq_options(seq), *layout.options)
        try:
            memory = flops_report(ir, workload)["memory"]
        except SpecError as exc:
            layouts.append({"label": layout.label, "command": command, "refused": str(exc)})
            continue
        keys = ("weights", "gradients", "optimizer", "activations", "total", "inference_total")
        layouts.append({"label": layout.label, "command": command, **{k: memory[k] for k in keys}})
    return {
        "name": report["name"],
        "ref": ref,
        "overrides": list(overrides),
        "family": report["family"],
        "layout": report["layout"],
        "source": report["source"],
        "max_seq_len": longest,
        "params": report["params"],
        "params_command": _command(ref, overrides),
        "sweep": sweep,
        "seq": seq,
        "at_seq": {
            "forward_per_token": at_seq["forward_per_token"],
            "train_step": at_seq["train_step"],
            "command": _command(ref, overrides, *_seq_options(seq)),
        },
        "layouts": layouts,
    }


def common_seq(irs: list[IR]) -> int:
    """The one S every spec is compared at: the shortest context window among them (each
    model is defined there), so the FLOPs per token of two rows are like for like."""
    return min(ir.value(ir.root.max_seq_len) for ir in irs)
