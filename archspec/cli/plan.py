"""`archspec plan`: a training step's time, MFU and best layout on named hardware; or serving's
prefill and per-token latency."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    JsonOpt,
    SetOpt,
    compile_spec,
    human,
    print_json,
    stderr,
    stdout,
    user_errors,
)
from archspec.errors import SpecError

_LAYOUT = "Layout (give any to time one layout; none to search)"
_SERVE = "Serving (--mode serve)"


def _opt(*names: str, help: str, panel: str | None = None, **kw):
    return typer.Option(*names, help=help, rich_help_panel=panel, **kw)


@app.command()
def plan(
    spec: Annotated[
        str | None,
        typer.Argument(
            help="A built-in spec name (see `archspec list`) or a path to a .yaml spec.",
            show_default=False,
        ),
    ] = None,  # fmt: skip
    set_: SetOpt = None,
    gpu: Annotated[
        str | None,
        _opt("--gpu", help="The system to plan on (see --list-systems).", metavar="NAME"),
    ] = None,  # fmt: skip
    system_files: Annotated[
        list[Path] | None,
        _opt(
            "--system",
            help="A YAML file of extra accelerators and systems, in the format of "
            "the built-in catalogue (repeatable).",
            metavar="FILE",
        ),
    ] = None,  # fmt: skip
    list_systems: Annotated[
        bool, _opt("--list-systems", help="List the systems and their sources, then exit.")
    ] = False,
    mode: Annotated[str, _opt("--mode", help="train or serve.", metavar="MODE")] = "train",
    gpus: Annotated[int, _opt("--gpus", help="Accelerators in all.")] = 1,
    global_batch: Annotated[
        int | None, _opt("--global-batch", help="Sequences per optimizer step.", metavar="G")
    ] = None,
    seq: Annotated[
        int | None, _opt("--seq", "-s", help="Positions per sequence (default: max_seq_len).")
    ] = None,  # fmt: skip
    tp: Annotated[int | None, _opt("--tp", help="Tensor-parallel degree.", panel=_LAYOUT)] = None,
    pp: Annotated[int | None, _opt("--pp", help="Pipeline stages.", panel=_LAYOUT)] = None,
    interleave: Annotated[
        int | None,
        _opt("--interleave", help="Virtual stages per device.", metavar="V", panel=_LAYOUT),
    ] = None,  # fmt: skip
    sp_: Annotated[
        bool | None,
        _opt("--sp/--no-sp", help="Sequence parallelism.", panel=_LAYOUT, show_default=False),
    ] = None,  # fmt: skip
    batch: Annotated[
        int | None,
        _opt(
            "--batch",
            "-b",
            help="Training: the micro-batch one device runs at a "
            "time. Serving: sequences decoded together.",
            panel=_LAYOUT,
        ),
    ] = None,  # fmt: skip
    recompute: Annotated[
        str | None,
        _opt("--recompute", help="none, selective or full.", metavar="POLICY", panel=_LAYOUT),
    ] = None,  # fmt: skip
    zero: Annotated[int | None, _opt("--zero", help="ZeRO stage 0-3.", panel=_LAYOUT)] = None,
    dtype: Annotated[
        str, _opt("--dtype", help="Compute dtype: bf16, fp16, fp32.", metavar="DTYPE")
    ] = "bf16",  # fmt: skip
    grad_dtype: Annotated[
        str | None,
        _opt(
            "--grad-dtype",
            help="Gradient dtype (default: --dtype; Megatron-LM keeps fp32).",
            metavar="DTYPE",
        ),
    ] = None,  # fmt: skip
    attn: Annotated[
        str,
        _opt(
            "--attn", help="flash (fused kernel) or eager (materialised scores).", metavar="KERNEL"
        ),
    ] = "flash",  # fmt: skip
    top: Annotated[int, _opt("--top", help="Layouts to show from a search.")] = 5,
    prompt: Annotated[int, _opt("--prompt", help="Prompt positions.", panel=_SERVE)] = 512,
    new_tokens: Annotated[
        int, _opt("--new-tokens", help="Tokens generated per sequence.", panel=_SERVE)
    ] = 128,  # fmt: skip
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Predict a training step (time, tokens/s, MFU, memory per device and where the time goes)
    on a named cluster, searching the layouts that fit when none is given; or, with `--mode
    serve`, prefill and per-token latency. No GPU is needed: the time model puts every op of
    the spec on the accelerator's roofline (docs/plan.md has its validation).

    Examples:

        archspec plan --list-systems

        archspec plan gpt3-175b --gpu a100-80g --gpus 64 --global-batch 64 --seq 2048

        archspec plan gpt3-175b --gpu a100-80g --gpus 64 --global-batch 64 --seq 2048 --tp 8 --pp 8 --sp --recompute selective --dtype fp16 --grad-dtype fp32 --attn eager

        archspec plan llama-2-7b --gpu h100-sxm --gpus 8 --global-batch 256 --seq 4096 --json

        archspec plan llama-2-70b --mode serve --gpu h100-sxm --gpus 8 --tp 8 --batch 16 --prompt 2048 --new-tokens 256
    """  # noqa: E501
    with user_errors(debug, json_):
        from archspec.plan.hardware import get_system, load_catalogue

        if list_systems:
            _list_systems(load_catalogue(system_files), json_)
            return
        if spec is None:
            raise SpecError("give a spec (see `archspec list`), or --list-systems")
        if gpu is None:
            raise SpecError("--gpu names the system to plan on", hint="see --list-systems")
        system = get_system(gpu, system_files)
        if mode not in ("train", "serve"):
            raise SpecError(f"--mode takes train or serve (got '{mode}')")
        if attn not in ("flash", "eager"):
            raise SpecError(f"--attn takes flash or eager (got '{attn}')")
        if dtype not in ("bf16", "fp16", "fp32"):
            raise SpecError(f"--dtype takes bf16, fp16 or fp32 (got '{dtype}')")
        if gpus < 1:
            raise SpecError("--gpus must be at least 1")
        ir = compile_spec(spec, set_)
        if mode == "serve":
            report = _serve(ir, system, gpus, tp, batch, prompt, new_tokens, dtype)
        else:
            given = {"tp": tp, "pp": pp, "interleave": interleave, "sp": sp_,
                     "micro_batch": batch, "recompute": recompute, "zero": zero}  # fmt: skip
            report = _train(ir, system, gpus, global_batch, seq, given, dtype, grad_dtype, attn,
                            top, json_)  # fmt: skip
    if json_:
        print_json(report)
    elif mode == "serve":
        _render_serve(report)
    else:
        _render_train(report)


def _train(ir, system, gpus, global_batch, seq, given, dtype, grad_dtype, attn, top, quiet):
    from archspec.backends.count.memory import GRAD_BYTES
    from archspec.plan.report import search_report
    from archspec.plan.search import USABLE_MEMORY
    from archspec.plan.step import Training

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
    run = Training(gpus, global_batch, seq, dtype, grad_dtype, attn)
    searching = all(v is None for v in given.values())
    if searching:
        only = None
    else:
        defaults = {"tp": 1, "pp": 1, "interleave": 1, "sp": False, "micro_batch": 1,
                    "recompute": NO_RECOMPUTE, "zero": 0}  # fmt: skip
        only = {k: [v if v is not None else defaults[k]] for k, v in given.items()}
        _check_given(ir, system, run, only)
    result = _run_search(ir, system, run, only, quiet)
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


def _check_given(ir, system, run, only) -> None:
    """One clear message for a layout that cannot be: what the search would skip quietly."""
    from archspec.backends.count.conventions import RECOMPUTE
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


def _run_search(ir, system, run, only, quiet):
    from archspec.plan.search import layout_space, search

    total = sum(1 for _ in layout_space(ir, system, run, only))
    if total < 2000 or quiet:
        return search(ir, system, run, only=only)
    from rich.progress import Progress

    with Progress(console=stderr(), transient=True) as bar:
        task = bar.add_task("searching layouts", total=total)
        return search(ir, system, run, only=only,
                      progress=lambda done, _: bar.update(task, completed=done))  # fmt: skip


def _serve(ir, system, gpus, tp, batch, prompt, new_tokens, dtype):
    from archspec.plan.report import serve_report
    from archspec.plan.serve import predict_serving

    tp = tp or 1
    batch = batch or 1
    p = predict_serving(ir, system, batch, prompt, new_tokens, tp, gpus, dtype)
    settings = {"gpus": gpus, "tp": tp, "batch": batch, "prompt": prompt,
                "new_tokens": new_tokens, "dtype": dtype}  # fmt: skip
    return serve_report(ir, system, p, settings)


# Rendering.


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _layout_text(lay: dict[str, Any]) -> str:
    text = f"tp {lay['tp']} · pp {lay['pp']} · dp {lay['dp']}"
    if lay["interleave"] > 1:
        text += f" · interleave {lay['interleave']}"
    text += f" · micro-batch {lay['micro_batch']} × {lay['micro_batches']}"
    if lay["sp"]:
        text += " · sp"
    text += f" · recompute {lay['recompute']}"
    if lay["zero"]:
        text += f" · ZeRO-{lay['zero']}"
    return text


def _render_train(r: dict[str, Any]) -> None:
    from rich.table import Table

    out = stdout()
    title = (f"{r['model']} on {r['gpus']} × {r['system']} ({r['accelerator']}): "
             f"{r['global_batch']} × {r['seq']} tokens per step, {r['dtype']}")  # fmt: skip
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    mem = r["memory"]
    rows = [
        ("layout", _layout_text(r["layout"])),
        ("step time", _seconds(r["step_time_s"])),
        ("tokens/s", f"{human(r['tokens_per_s'])}"),
        ("MFU", f"{r['mfu']:.1%}"),
        ("hardware FLOPs utilisation", f"{r['hfu']:.1%}"),
        ("memory per device", f"{_gib(mem['total'])} of {_gib(mem['usable'])} usable"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
    parts = Table(title="where the step goes", title_justify="left")
    parts.add_column("part")
    parts.add_column("time", justify="right")
    parts.add_column("share", justify="right")
    for name, t in r["breakdown"].items():
        parts.add_row(name.replace("_", " "), _seconds(t), f"{t / r['step_time_s']:.1%}")
    memory = Table(title=f"memory per device (stage {mem['stage']}, the most loaded)",
                   title_justify="left")  # fmt: skip
    memory.add_column("part")
    memory.add_column("bytes", justify="right")
    for name in ("weights", "gradients", "optimizer", "activations", "total"):
        memory.add_row(name, _gib(mem[name]))
    out.print(parts)
    out.print(memory)
    if r["searched"]:
        ranked = Table(title=f"fastest of {r['search']['fit']} layouts that fit",
                       title_justify="left")  # fmt: skip
        for col in ("tp", "pp", "dp", "V", "mb", "sp", "recompute", "ZeRO"):
            ranked.add_column(col, justify="right")
        for col in ("step", "tokens/s", "MFU", "memory"):
            ranked.add_column(col, justify="right")
        for c in r["ranked"]:
            lay = c["layout"]
            ranked.add_row(
                str(lay["tp"]), str(lay["pp"]), str(lay["dp"]), str(lay["interleave"]),
                str(lay["micro_batch"]), "✓" if lay["sp"] else "", lay["recompute"],
                str(lay["zero"]), _seconds(c["step_time_s"]), human(c["tokens_per_s"]),
                f"{c['mfu']:.1%}", _gib(c["memory"]["total"]),
            )  # fmt: skip
        out.print(ranked)
        s = r["search"]
        dropped = ", ".join(f"{n} {why}" for why, n in s["dropped"].items())
        stderr().print(f"searched {s['considered']} layouts: {s['fit']} fit"
                       + (f"; left out: {dropped}" if dropped else ""))  # fmt: skip


def _render_serve(r: dict[str, Any]) -> None:
    from rich.table import Table

    title = (f"{r['model']} serving on {r['gpus']} × {r['system']} (tp {r['tp']}): "
             f"batch {r['batch']}, {r['prompt']}-token prompts, "
             f"{r['new_tokens']} new tokens")  # fmt: skip
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    mem = r["memory"]
    fits = "[green]fits[/green]" if r["fits"] else "[red]does not fit[/red]"
    for name, value in (
        ("prefill", _seconds(r["prefill_s"])),
        ("per-token decode", _seconds(r["decode_token_s"])),
        ("generated tokens/s", human(r["tokens_per_s"])),
        ("weights per device", _gib(mem["weights"])),
        ("KV cache per device", _gib(mem["kv_cache"])),
        ("memory", f"{_gib(mem['total'])} of {_gib(mem['usable'])} usable: {fits}"),
    ):
        table.add_row(name, value)
    stdout().print(table)


def _list_systems(catalogue, json_: bool) -> None:
    rows = []
    for key, s in catalogue.items():
        a = s.accelerator
        rows.append({
            "name": key,
            "accelerator": a.name,
            "peak_tflops": a.peak_tflops,
            "memory_gib": a.memory_gib,
            "memory_bandwidth_gbs": a.memory_bandwidth_gbs,
            "gpus_per_node": s.gpus_per_node,
            "intra_node_gbs": s.intra_node_gbs,
            "inter_node_gbs": s.inter_node_gbs,
            "accelerator_source": a.source,
            "system_source": s.source,
        })  # fmt: skip
    if json_:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title="systems (bandwidths per accelerator, one direction)",
                  title_justify="left")  # fmt: skip
    for col in ("name", "accelerator", "bf16 TFLOP/s", "memory", "HBM GB/s", "per node",
                "node link GB/s", "network GB/s"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("name", "accelerator") else "right")
    for r in rows:
        table.add_row(
            r["name"], r["accelerator"], f"{r['peak_tflops'].get('bf16', 0):g}",
            f"{r['memory_gib']:g} GiB", f"{r['memory_bandwidth_gbs']:g}",
            str(r["gpus_per_node"]), f"{r['intra_node_gbs']:g}", f"{r['inter_node_gbs']:g}",
        )  # fmt: skip
    stdout().print(table)
    stdout().print("sources: `archspec plan --list-systems --json`, or archspec/plan/systems.yaml")
