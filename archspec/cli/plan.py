"""`archspec plan`: a training step's time, MFU and best layout on named hardware; or serving's
prefill and per-token latency."""

from __future__ import annotations

from typing import Any

from archspec.cli.application import app
from archspec.cli.common import (
    asked_title,
    beyond_context,
    compile_spec,
    human,
    print_json,
    say,
    stderr,
    stdout,
    user_errors,
)
from archspec.cli.options import (
    DebugOpt,
    ForceOpt,
    JsonOpt,
    PlanAccept,
    PlanAsyncTp,
    PlanAttn,
    PlanAttnKernel,
    PlanBatch,
    PlanCheckpoint,
    PlanConcurrency,
    PlanCp,
    PlanDpReplicate,
    PlanDraft,
    PlanDtype,
    PlanEfficiency,
    PlanEngine,
    PlanEp,
    PlanEpDispatch,
    PlanEtp,
    PlanFp8AllGather,
    PlanGlobalBatch,
    PlanGpu,
    PlanGpus,
    PlanGradDtype,
    PlanGroup,
    PlanInterleave,
    PlanKvDtype,
    PlanListSystems,
    PlanMfu,
    PlanMode,
    PlanMoeImbalance,
    PlanMtpLayers,
    PlanNewTokens,
    PlanNodeSize,
    PlanNoKvCache,
    PlanOffloadLayers,
    PlanPp,
    PlanPrice,
    PlanPrompt,
    PlanPromptCached,
    PlanRate,
    PlanRecompute,
    PlanRecomputeModules,
    PlanSeq,
    PlanServePlot,
    PlanSp,
    PlanSpecArg,
    PlanSpeculate,
    PlanStageLayers,
    PlanSystemFiles,
    PlanTokens,
    PlanTop,
    PlanTp,
    PlanZero,
    SetOpt,
)  # fmt: skip
from archspec.cli.tables import print_table
from archspec.safety.text import markup_safe


@app.command()
def plan(
    spec: PlanSpecArg = None, set_: SetOpt = None, gpu: PlanGpu = None,
    system_files: PlanSystemFiles = None, list_systems: PlanListSystems = False,
    mode: PlanMode = "train", gpus: PlanGpus = 1, global_batch: PlanGlobalBatch = None,
    seq: PlanSeq = None, tp: PlanTp = None, pp: PlanPp = None,
    interleave: PlanInterleave = None, sp_: PlanSp = None, batch: PlanBatch = None,
    recompute: PlanRecompute = None, zero: PlanZero = None, dtype: PlanDtype = "bf16",
    grad_dtype: PlanGradDtype = None, attn: PlanAttn = "flash", top: PlanTop = 5,
    prompt: PlanPrompt = 512, new_tokens: PlanNewTokens = 128, engine: PlanEngine = None,
    group: PlanGroup = None, kv_dtype: PlanKvDtype = None, no_kv_cache: PlanNoKvCache = False,
    prompt_cached: PlanPromptCached = False, draft: PlanDraft = None, etp: PlanEtp = None,
    moe_imbalance: PlanMoeImbalance = None, speculate: PlanSpeculate = 4, cp: PlanCp = None,
    accept: PlanAccept = None, rate: PlanRate = None, concurrency: PlanConcurrency = None,
    plot: PlanServePlot = None, ep: PlanEp = None, dp_replicate: PlanDpReplicate = None,
    node_size: PlanNodeSize = None, stage_layers: PlanStageLayers = None, tokens: PlanTokens = None,
    offload_layers: PlanOffloadLayers = None, mtp_layers: PlanMtpLayers = None, mfu: PlanMfu = None,
    recompute_modules: PlanRecomputeModules = None, async_tp: PlanAsyncTp = False,
    ep_dispatch: PlanEpDispatch = None, fp8_all_gather: PlanFp8AllGather = False,
    checkpoint: PlanCheckpoint = None, attn_kernel: PlanAttnKernel = None,
    price: PlanPrice = None, efficiency: PlanEfficiency = None,
    force: ForceOpt = False, json_: JsonOpt = False, debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Predict a training step (time, tokens/s, MFU, memory per device, where the time goes) on
    a named cluster, searching the layouts that fit when none is given; or, with `--mode serve`,
    prefill and per-token latency. No GPU is needed (docs/plan.md has the model's validation).

    Examples:

        archspec plan --list-systems

        archspec plan gpt3-175b --gpu a100-80g --gpus 64 --global-batch 64 --seq 2048

        archspec plan gpt3-175b --gpu a100-80g --gpus 64 --global-batch 64 --seq 2048 --tp 8 --pp 8 --sp --recompute selective --dtype fp16 --grad-dtype fp32 --attn eager

        archspec plan llama-2-7b --gpu h100-sxm --gpus 8 --global-batch 256 --seq 4096 --json

        archspec plan llama-3-8b --gpu h100-sxm --gpus 64 --global-batch 512 --seq 8192 --dtype fp8 --engine nemo --tokens 15T --price 2.5

        archspec plan bloom-176b --gpu a100-80g --gpus 384 --global-batch 2048 --seq 2048 --tp 4 --pp 12 --stage-layers 5,6,6,6,6,6,6,6,6,6,6,5 --batch 2 --recompute full --zero 1 --engine deepspeed

        archspec plan llama-2-70b --mode serve --gpu h100-sxm --gpus 8 --tp 8 --batch 16 --prompt 2048 --new-tokens 256

        archspec plan llama-2-7b --mode serve --gpu a100-80g --engine gpt-fast --dtype int4 --group 32
    """  # noqa: E501
    from types import SimpleNamespace

    from archspec.plan import request
    from archspec.plan.hardware import with_node_size

    o = SimpleNamespace(**locals())  # every option, by name, for the mode's function below
    with user_errors(debug, json_):
        _check_sizes(o)
        if list_systems:
            return _list_systems(system_files, json_)
        system = request.checked_system(spec, gpu, system_files, mode, attn, dtype, gpus)
        system = with_node_size(system, node_size, gpus)
        ir = compile_spec(spec, set_)
        report = (_serve if mode == "serve" else _train)(ir, system, o)
    render = print_json if json_ else _render_serve if mode == "serve" else _render_train
    render(report)


def _check_sizes(o) -> None:
    """Every whole-number option within archspec's size limit, before any work."""
    from archspec.safety.limits import check_sizes

    check_sizes({"--gpus": o.gpus, "--global-batch": o.global_batch, "--seq": o.seq,
                 "--tp": o.tp, "--pp": o.pp, "--interleave": o.interleave, "--batch": o.batch,
                 "--zero": o.zero, "--top": o.top, "--prompt": o.prompt,
                 "--new-tokens": o.new_tokens, "--group": o.group, "--speculate": o.speculate,
                 "--concurrency": o.concurrency, "--cp": o.cp, "--ep": o.ep,
                 "--dp-replicate": o.dp_replicate, "--node-size": o.node_size,
                 "--offload-layers": o.offload_layers, "--mtp-layers": o.mtp_layers})  # fmt: skip


def _serve(ir, system, o) -> dict[str, Any]:
    """`--mode serve`: prefill, decode and the request's time; training options are ignored."""
    from archspec.plan import request, serve_request

    # An encoder-decoder's decoder holds the new tokens; a decoder the prompt and them.
    beyond_context(ir, [o.prompt, o.new_tokens] if ir.root.layout == "encoder-decoder"
                   else [o.prompt + o.new_tokens])  # fmt: skip
    speculation = serve_request.speculation(o.draft, o.speculate, o.accept)
    report = serve_request.serving_report(ir, system, o.gpus, o.tp, o.batch, o.prompt,
                                          o.new_tokens, o.dtype, o.engine, o.group, o.kv_dtype,
                                          speculation, o.rate, o.concurrency, o.plot,
                                          o.force, not o.no_kv_cache,
                                          o.prompt_cached)  # fmt: skip
    if o.node_size is not None:
        report["node_size"] = o.node_size
    if "warning" in report:
        stderr().print(f"warning: {markup_safe(report['warning'])}")
    ignored = request.other_mode_options(
        {"--global-batch": o.global_batch, "--seq": o.seq, "--pp": o.pp,
         "--interleave": o.interleave, "--sp": o.sp_, "--recompute": o.recompute,
         "--recompute-modules": o.recompute_modules, "--zero": o.zero, "--grad-dtype": o.grad_dtype,
         "--cp": o.cp, "--ep": o.ep, "--dp-replicate": o.dp_replicate,
         "--stage-layers": o.stage_layers, "--offload-layers": o.offload_layers,
         "--mtp-layers": o.mtp_layers, "--async-tp": o.async_tp or None,
         "--fp8-all-gather": o.fp8_all_gather or None,
         "--checkpoint": o.checkpoint, "--ep-dispatch": o.ep_dispatch,
         "--moe-imbalance": o.moe_imbalance, "--etp": o.etp, "--tokens": o.tokens,
         "--attn-kernel": o.attn_kernel, "--price": o.price, "--mfu": o.mfu,
         "--efficiency": o.efficiency})  # fmt: skip
    if ignored:
        report["ignored"] = ignored
        stderr().print(f"ignored with --mode serve: {', '.join(ignored)} (training only)")
    return report


def _train(ir, system, o) -> dict[str, Any]:
    """A training step: the layout given, or the fastest the search finds."""
    from archspec.plan import request

    what_if = request.checked_what_if(o.tokens, o.price, o.mfu, o.efficiency)
    run = request.training_run(ir, o.gpus, o.global_batch, o.seq, o.dtype, o.grad_dtype, o.attn,
                               o.top, o.engine, o.async_tp, o.fp8_all_gather,
                               o.checkpoint, o.ep_dispatch, o.moe_imbalance, o.attn_kernel,
                               system.accelerator.key, o.mtp_layers or 0,
                               system.accelerator.kind)  # fmt: skip
    beyond_context(ir, [run.seq])
    given = {"tp": o.tp, "pp": o.pp, "interleave": o.interleave, "sp": o.sp_,
             "micro_batch": o.batch, "zero": o.zero, "cp": o.cp,
             "recompute": request.recompute_setting(o.recompute, o.recompute_modules, run),
             "ep": o.ep, "dp_replicate": o.dp_replicate, "etp": o.etp,
             "stage_layers": o.stage_layers, "offload_layers": o.offload_layers}  # fmt: skip
    only = request.given_layout(ir, system, run, given)
    eff = request.efficiency_override(system, run, o.efficiency)
    result = _run_search(ir, system, run, only, quiet=o.json_, eff=eff)
    report = request.training_report(ir, system, run, result, o.top, only is None, what_if)
    if o.node_size is not None:
        report["node_size"] = o.node_size
    if "warning" in report:
        stderr().print(f"warning: {markup_safe(report['warning'])}")
    ignored = request.other_mode_options(
        {"--group": o.group, "--kv-dtype": o.kv_dtype, "--no-kv-cache": o.no_kv_cache or None,
         "--prompt-cached": o.prompt_cached or None,
         "--draft": o.draft, "--accept": o.accept, "--rate": o.rate,
         "--concurrency": o.concurrency, "--plot": o.plot})  # fmt: skip
    if ignored:
        report["ignored"] = ignored
        stderr().print(f"ignored without --mode serve: {', '.join(ignored)} (serving only)")
    if note := request.inert_checkpoint(o.checkpoint, o.recompute):
        report["ignored"] = [*report.get("ignored", []), "--checkpoint"]
        stderr().print(note)
    expert = {"--ep-dispatch": o.ep_dispatch, "--moe-imbalance": o.moe_imbalance,
              "--etp": o.etp}  # fmt: skip
    if inert := request.inert_expert_options(expert, report.get("layout", {})):
        report["ignored"] = [*report.get("ignored", []), *inert]
        stderr().print(f"ignored without expert parallelism (--ep above 1): {', '.join(inert)}")
    return report


def _run_search(ir, system, run, only, quiet, eff=None):
    from archspec.plan.search import layout_space, search

    total = sum(1 for _ in layout_space(ir, system, run, only))
    given = only is not None  # a given layout is timed even where it does not fit
    console = stderr()
    if total < 2000 or quiet:
        return search(ir, system, run, eff=eff, only=only, keep_unfit=given)
    if not console.is_terminal:  # a log gets one line, not a bar (rich's ends in a blank line)
        say(f"searching {total:,} layouts…")
        return search(ir, system, run, eff=eff, only=only, keep_unfit=given)
    from rich.progress import Progress

    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("searching layouts", total=total)
        return search(ir, system, run, eff=eff, only=only, keep_unfit=given,
                      progress=lambda done, _: bar.update(task, completed=done))  # fmt: skip


# Rendering.


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _layout_text(lay: dict[str, Any]) -> str:
    text = f"tp {lay['tp']} · pp {lay['pp']} · dp {lay['dp']}"
    if lay.get("cp", 1) > 1:
        text += f" · cp {lay['cp']}"
    if lay.get("ep", 1) > 1:
        if lay.get("etp", lay["tp"]) != lay["tp"]:
            text += f" · etp {lay['etp']}"  # the experts split over fewer ranks than tp
        # The busiest rank's routed rows over the mean, which each MoE layer waits for.
        text += f" · ep {lay['ep']} (busiest rank {lay.get('expert_load', 1.0):.3f}× the mean rows)"
    if lay.get("dp_replicate", 1) > 1:
        text += f" · dp replicated {lay['dp_replicate']}×"
    if lay.get("stage_layers"):
        text += f" · stages {','.join(map(str, lay['stage_layers']))}"
    if lay["interleave"] > 1:
        text += f" · interleave {lay['interleave']}"
    text += f" · micro-batch {lay['micro_batch']} × {lay['micro_batches']}"
    if lay["sp"]:
        text += " · sp"
    text += f" · recompute {lay['recompute']}"
    if lay["zero"]:
        text += f" · ZeRO-{lay['zero']}"
    if lay.get("offload_layers"):
        text += f" · {lay['offload_layers']} layers offloaded"
    return text


def _summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The step's figures, and the what-if and the whole run when asked for."""
    mem = r["memory"]
    rows = [
        ("layout", _layout_text(r["layout"])),
        ("step time", _seconds(r["step_time_s"])),
        ("tokens/s", f"{human(r['tokens_per_s'])}"),
        ("MFU", f"{r['mfu']:.1%}"),
        ("hardware FLOPs utilisation", f"{r['hfu']:.1%}"),
        ("memory per device", f"{_gib(mem['total'])} of {_gib(mem['usable'])} usable"),
    ]
    if "what_if" in r:
        rows.append(("what-if", f"MFU set to {r['what_if']['mfu']:.1%} (predicted "
                                f"{r['what_if']['predicted_mfu']:.1%})"))  # fmt: skip
    if "track_record" in r:
        from archspec.plan.track_record import summary

        rows.append(("published runs like it", markup_safe(summary(r["track_record"]))))
    if "training" in r:
        t = r["training"]
        text = (f"{human(t['tokens'])} tokens: {t['steps']:,} steps, {t['days']:.1f} days, "
                f"{human(t['accelerator_hours'])} accelerator-hours")  # fmt: skip
        if "cost" in t:
            text += f", cost {human(t['cost'])}"
        rows.append(("training run", text))
    return rows


def _render_train(r: dict[str, Any]) -> None:
    from rich.table import Table

    model = asked_title(r["model"], r["overrides"])
    # The system's names may come from a --system file: shown as written, never as markup.
    nodes = f", nodes of {r['node_size']}" if "node_size" in r else ""
    depths = r.get("mtp_layers", 0)
    mtp = f", {depths} multi-token prediction depth{'s' if depths > 1 else ''}" if depths else ""
    title = (f"{model} on {r['gpus']} × {markup_safe(r['system'])} "
             f"({markup_safe(r['accelerator'])}{nodes}): "
             f"{r['global_batch']} × {r['seq']} tokens per step, {r['dtype']}{mtp}")  # fmt: skip
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    mem = r["memory"]
    for name, value in _summary_rows(r):
        table.add_row(name, value)
    print_table(table)
    parts = Table(title="where the step goes", title_justify="left")
    parts.add_column("part")
    parts.add_column("time", justify="right")
    parts.add_column("share", justify="right")
    for name, t in r["breakdown"].items():
        if name in ("offload", "host") and not t:
            continue  # parts only some layouts have (offloading, a host-bound dispatch)
        parts.add_row(name.replace("_", " "), _seconds(t), f"{t / r['step_time_s']:.1%}")
    memory = Table(title=f"memory per device (stage {mem['stage']}, the most loaded)",
                   title_justify="left")  # fmt: skip
    memory.add_column("part")
    memory.add_column("bytes", justify="right")
    for name in ("weights", "gradients", "optimizer", "activations", "total"):
        memory.add_row(name, _gib(mem[name]))
    if "rank_peaks" in mem:  # --engine fsdp: count's peak of a whole step, on its rank
        top = max(mem["rank_peaks"], key=lambda p: p["peak"])
        memory.add_row(f"peak of a step (rank {top['rank']}, {top['moment']})", _gib(top["peak"]))
    print_table(parts)
    print_table(memory)
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
        print_table(ranked)
        s = r["search"]
        dropped = ", ".join(f"{n} {why}" for why, n in s["dropped"].items())
        stderr().print(f"searched {s['considered']} layouts: {s['fit']} fit"
                       + (f"; left out: {dropped}" if dropped else ""))  # fmt: skip


def _render_serve(r: dict[str, Any]) -> None:
    from rich.table import Table

    model = asked_title(r["model"], r["overrides"])
    nodes = f", nodes of {r['node_size']}" if "node_size" in r else ""
    title = (f"{model} serving on {r['gpus']} × {markup_safe(r['system'])} (tp {r['tp']}"
             f"{nodes}): "
             f"batch {r['batch']}, {r['prompt']}-token prompts, "
             f"{r['new_tokens']} new tokens, {r['dtype']}"
             + (f" (KV cache {r['kv_dtype']})" if r["kv_dtype"] else "")
             + ("" if r["kv_cache"] else " (no KV cache)")
             + (", prompts found in the prefix cache" if r["prompt_cached"] else "")
             + (f", drafted by {r['draft']['model']} (k {r['draft']['speculate']}, "
                f"accept {r['draft']['accept']:g})" if r["draft"] else "")
             + f", engine {r['engine']}")  # fmt: skip
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    mem = r["memory"]
    fits = "[green]fits[/green]" if r["fits"] else "[red]does not fit[/red]"
    b = r["batching"]
    timing = [
        ("time to first token", _seconds(r["prefill_s"])),
        ("per-token decode", _seconds(r["decode_token_s"])),
        ("whole request", _seconds(r["generate_s"])),
        ("generated tokens/s", human(r["tokens_per_s"])),
        ("whole batch tokens/s", f"{human(r['batch_tokens_per_s'])} "
                                 f"({human(r['batch_tokens_per_s_per_gpu'])} per GPU)"),
    ]  # fmt: skip
    if b is not None:
        timing = [
            ("continuous batching", f"{b['batch']} sequences decoding (at most "
                                    f"{b['max_batch']})"),
            ("time to first token", _seconds(b["ttft_s"])),
            ("time per output token", _seconds(b["tpot_s"])),
            ("output tokens/s", human(b["tokens_per_s"])),
            ("requests/s", f"{b['requests_per_s']:.3g}"),
        ]  # fmt: skip
    for name, value in [
        *timing,
        ("weights per device", _gib(mem["weights"])),
        (
            "KV cache per device" + (f" ({b['cache_held']})" if b is not None else ""),
            _gib(mem["kv_cache"]),
        ),
        ("memory", f"{_gib(mem['total'])} of {_gib(mem['usable'])} usable: {fits}"),
    ]:
        table.add_row(name, value)
    if "track_record" in r:
        from archspec.plan.track_record import summary

        table.add_row("published figures like it",
                      markup_safe(summary(r["track_record"], serving=True)))  # fmt: skip
    print_table(table)


def _list_systems(system_files, json_: bool) -> None:
    from archspec.plan.hardware import catalogue_rows, load_catalogue, lone_devices

    # The systems, then the accelerators no system holds: each plans as one device alone.
    rows = catalogue_rows({**load_catalogue(system_files), **lone_devices(system_files)})
    if json_:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title="systems (bandwidths per accelerator, one direction; 1 per node and no "
                        "links: an accelerator no system holds, planned as one device alone)",
                  title_justify="left")  # fmt: skip
    for col in ("name", "accelerator", "bf16 TFLOP/s", "memory", "HBM GB/s", "per node",
                "node link GB/s", "network GB/s"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("name", "accelerator") else "right")
    for r in rows:
        table.add_row(
            markup_safe(r["name"]), markup_safe(r["accelerator"]),
            f"{r['peak_tflops']['bf16']:g}" if 'bf16' in r['peak_tflops'] else "—",
            f"{r['memory_gib']:g} GiB", f"{r['memory_bandwidth_gbs']:g}",
            str(r["gpus_per_node"]), f"{r['intra_node_gbs']:g}", f"{r['inter_node_gbs']:g}",
        )  # fmt: skip
    print_table(table)
    stdout().print("sources: `archspec plan --list-systems --json`, or archspec/plan/systems.yaml")
