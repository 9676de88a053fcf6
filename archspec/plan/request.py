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
    system = get_system(gpu, system_files)
    if mode not in ("train", "serve"):
        raise SpecError(f"--mode takes train or serve (got '{mode}')")
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


def speculation(draft: str | None, k: int, accept: float | None, set_: list[str] | None) -> Any:
    """The speculative decoding `--draft`, `--speculate` and `--accept` ask for, or None."""
    if draft is None:
        if accept is not None:
            raise SpecError("--accept is for speculative decoding: give --draft SPEC too")
        return None
    if accept is None:
        raise SpecError(
            "--draft needs --accept: the probability each drafted token is accepted",
            hint="it depends on the two models and the text; measure it, or try 0.6-0.8",
        )
    from archspec.cli.common import compile_spec
    from archspec.plan.serve_speculative import Speculation

    return Speculation(compile_spec(draft, None), k, accept)


def _continuous(
    ir: IR, system: System, gpus: int, tp: int, batch: int | None, prompt: int,
    new_tokens: int, dtype: str, engine: Any, group: int | None, kv_dtype: str | None,
    speculation: Any, rate: float | None, concurrency: int | None, plot: Path | None,
    force: bool,
) -> tuple[dict[str, Any] | None, int]:  # fmt: skip
    """Continuous batching at `--rate` or `--concurrency` (and its `--plot`): the point, and the
    batch the rest of the report is for."""
    from archspec.plan.serve import Precision
    from archspec.plan.serve_batching import Server

    if rate is not None and concurrency is not None:
        raise SpecError("give --rate or --concurrency, not both")
    if batch != 1:
        raise SpecError("--batch is found by continuous batching: leave it out with --rate, "
                        "--concurrency or --plot")  # fmt: skip
    if speculation is not None:
        raise SpecError("speculative decoding (--draft) with continuous batching is not "
                        "modelled")  # fmt: skip
    if plot is not None:
        from archspec.backends.compare.plot import check_path

        check_path(plot)  # before any work
    server = Server(ir, system, prompt, new_tokens, tp, gpus, Precision(dtype, group, kv_dtype),
                    engine)  # fmt: skip
    point = None
    if rate is not None:
        point = server.at_rate(rate)
    elif concurrency is not None:
        point = server.at_concurrency(concurrency)
    if plot is not None:
        from archspec.cli.common import say
        from archspec.plan.serve_plot import plot_serving

        title = (f"{ir.name} on {system.key} × {gpus} (tp {tp}), {prompt} → {new_tokens} "
                 f"tokens, {dtype}, engine {engine.key}")  # fmt: skip
        plot_serving(title, [p.as_dict() for p in server.sweep()], plot, force)
        say(f"wrote {plot}")
    if point is None:
        return None, 1
    mode = {"rate": rate} if rate is not None else {"concurrency": concurrency}
    return {**mode, **point.as_dict()}, point.batch


def serving_report(
    ir: IR, system: System, gpus: int, tp: int | None, batch: int | None, prompt: int,
    new_tokens: int, dtype: str, engine: str | None = None, group: int | None = None,
    kv_dtype: str | None = None, speculation: Any = None, rate: float | None = None,
    concurrency: int | None = None, plot: Path | None = None, force: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Prefill and per-token decode for `--mode serve` (tp and batch default to 1)."""
    from archspec.plan.report import serve_report
    from archspec.plan.serve import check_counts, predict_serving
    from archspec.plan.serve_engine import get_engine

    # Left out, each is 1; given, each is checked (0 is not "left out").
    tp = 1 if tp is None else tp
    batch = 1 if batch is None else batch
    check_counts(tp, batch, prompt, new_tokens)
    if gpus % tp:
        raise SpecError(f"--gpus {gpus} is not a multiple of --tp {tp}")
    if group is not None and group < 1:
        raise SpecError("--group must be at least 1")
    profile = get_engine(engine or "ideal")
    batching = None
    if rate is not None or concurrency is not None or plot is not None:
        batching, batch = _continuous(ir, system, gpus, tp, batch, prompt, new_tokens, dtype,
                                      profile, group, kv_dtype, speculation, rate, concurrency,
                                      plot, force)  # fmt: skip
    p = predict_serving(ir, system, batch, prompt, new_tokens, tp, gpus, dtype,
                        engine=profile, group=group, kv_dtype=kv_dtype)  # fmt: skip
    draft = None
    if speculation is not None:
        from archspec.plan.serve import Precision
        from archspec.plan.serve_speculative import with_speculation

        p = with_speculation(p, ir, speculation, system, batch, prompt, new_tokens, tp, gpus,
                             Precision(dtype, group, kv_dtype), profile)  # fmt: skip
        draft = {"model": speculation.draft.name, "speculate": speculation.k,
                 "accept": speculation.accept,
                 "tokens_per_round": speculation.tokens_per_round}  # fmt: skip
    settings = {"gpus": gpus, "tp": tp, "batch": batch, "prompt": prompt,
                "new_tokens": new_tokens, "dtype": dtype, "group": group,
                "kv_dtype": kv_dtype, "engine": profile.key, "draft": draft,
                "batching": batching}  # fmt: skip
    return serve_report(ir, system, p, settings)
