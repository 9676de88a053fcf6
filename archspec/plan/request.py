"""What `archspec plan` is asked: its options checked (one clear message each, before any
work), turned into a training run or a given layout, and the answer assembled as a report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archspec.backends.count.conventions import NO_RECOMPUTE, RECOMPUTE
from archspec.errors import SpecError
from archspec.ir.nodes import IR
from archspec.plan.hardware import System, get_system
from archspec.plan.search import USABLE_MEMORY, SearchResult
from archspec.plan.step import Training

# A given layout's options left out take these values (a search tries them all instead).
LAYOUT_DEFAULTS = {"tp": 1, "pp": 1, "interleave": 1, "sp": False, "micro_batch": 1,
                   "recompute": NO_RECOMPUTE, "zero": 0}  # fmt: skip


def checked_system(
    spec: str | None, gpu: str | None, system_files: list[Path] | None, mode: str, attn: str,
    dtype: str, gpus: int,
) -> System:  # fmt: skip
    """The system to plan on, once the options that need no spec are checked."""
    if spec is None:
        raise SpecError("give a spec (see `archspec list`), or --list-systems")
    if gpu is None:
        raise SpecError("--gpu names the system to plan on", hint="see --list-systems")
    if mode not in ("train", "serve"):
        raise SpecError(f"--mode takes train or serve (got '{mode}')")
    if mode == "serve":  # one device of any accelerator serves: no system needed
        from archspec.plan.serve_engine import serving_system

        system = serving_system(gpu, system_files)
    else:
        system = get_system(gpu, system_files)
    if attn not in ("flash", "eager"):
        raise SpecError(f"--attn takes flash or eager (got '{attn}')")
    served = ("int8", "int4", "fp8") if mode == "serve" else ()
    if dtype not in ("bf16", "fp16", "fp32", *served):
        also = ", or int8, int4, fp8 when serving" if mode == "train" else ", int8, int4, fp8"
        raise SpecError(f"--dtype takes bf16, fp16, fp32{also} (got '{dtype}')")
    if gpus < 1:
        raise SpecError("--gpus must be at least 1")
    return system


def training_run(
    ir: IR, gpus: int, global_batch: int | None, seq: int | None, dtype: str,
    grad_dtype: str | None, attn: str, top: int = 1,
) -> Training:  # fmt: skip
    """The training run the options describe: the sequence length defaults to the context."""
    from archspec.backends.count.memory import GRAD_BYTES

    if top < 1:
        raise SpecError(f"--top must be at least 1 (got {top}): the layouts a search shows")

    if global_batch is None:
        raise SpecError("--global-batch (sequences per optimizer step) is needed to train")
    if global_batch < 1:
        raise SpecError("--global-batch must be at least 1")
    grad_dtype = grad_dtype or dtype
    if grad_dtype not in GRAD_BYTES:
        raise SpecError(f"--grad-dtype takes {', '.join(GRAD_BYTES)} (got '{grad_dtype}')")
    seq = seq if seq is not None else ir.value(ir.root.max_seq_len)
    if seq < 1:
        raise SpecError("--seq must be at least 1")
    return Training(gpus, global_batch, seq, dtype, grad_dtype, attn)


def given_layout(
    ir: IR, system: System, run: Training, given: dict[str, Any]
) -> dict[str, list] | None:
    """The one layout the layout options give, as the search's `only`; None when no layout
    option was given (search them all)."""
    if all(v is None for v in given.values()):
        return None
    only = {k: [v if v is not None else LAYOUT_DEFAULTS[k]] for k, v in given.items()}
    check_given_layout(ir, system, run, only)
    return only


def check_given_layout(ir: IR, system: System, run: Training, only: dict[str, list]) -> None:
    """One clear message for a layout that cannot be: what the search would skip quietly."""
    from archspec.backends.count.layout import Parallelism, check_layout

    tp, pp = only["tp"][0], only["pp"][0]
    if only["recompute"][0] not in RECOMPUTE:
        raise SpecError(f"--recompute takes one of: {', '.join(RECOMPUTE)}")
    if only["micro_batch"][0] < 1:
        raise SpecError("--batch must be at least 1")
    par = Parallelism(run.gpus, tp, pp, only["zero"][0], only["sp"][0], only["interleave"][0])
    if tp > system.gpus_per_node:
        raise SpecError(
            f"--tp {tp} spans more than one node of {system.gpus_per_node} accelerators",
            hint="Megatron-LM keeps a tensor-parallel group inside a node",
        )
    check_layout(ir, par)
    per_step = only["micro_batch"][0] * par.dp
    if run.global_batch % per_step:
        raise SpecError(
            f"--global-batch {run.global_batch} is not a whole number of micro-batches of "
            f"--batch {only['micro_batch'][0]} × {par.dp} data-parallel replicas"
        )
    m = run.global_batch // per_step
    if par.interleave > 1 and m % pp:
        raise SpecError(
            f"the interleaved schedule needs the {m} micro-batches per step to be a multiple "
            f"of --pp {pp}"
        )
    if par.zero >= 2 and pp > 1:
        raise SpecError(
            f"--zero {par.zero} does not combine with pipeline parallelism (--pp)",
            hint="Megatron-LM's distributed optimizer and DeepSpeed's pipelines shard only the "
            "optimizer states: --zero 1",
        )


def training_report(
    ir: IR, system: System, run: Training, result: SearchResult, top: int, searching: bool
) -> dict[str, Any]:
    """The search's (or the given layout's) report; a clear message when nothing fits."""
    from archspec.plan.report import search_report

    if not result.ranked:
        usable = system.accelerator.memory_bytes * USABLE_MEMORY
        need = result.least_unfit
        if need is None:  # a given layout is checked before; a search always has some
            raise SpecError("no layout runs: " + "; ".join(result.dropped))
        what = "the layout needs" if not searching else "no layout fits: the leanest needs"
        raise SpecError(
            f"{what} {need / 2**30:.1f} GiB per device; {system.key} has "
            f"{usable / 2**30:.1f} GiB usable",
            hint="more GPUs, a smaller micro-batch, recomputation or ZeRO shrink what a device "
            "holds",
        )
    report = search_report(ir, system, run, result, top)
    report["searched"] = searching
    return report
