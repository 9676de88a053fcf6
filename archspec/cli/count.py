"""`archspec count`, `archspec list` and `archspec validate`: the parameter counter's commands."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from archspec.backends.compare.numbers import three_digits
from archspec.backends.count import request
from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.cli import sweep
from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    JsonOpt,
    SetOpt,
    SpecArg,
    asked_title,
    beyond_context,
    compile_spec,
    human,
    print_json,
    say,
    stderr,
    user_errors,
    write_stdout,
)
from archspec.cli.options import (
    CountAttn,
    CountBatch,
    CountBy,
    CountConvention,
    CountCp,
    CountDecSeq,
    CountDpReplicate,
    CountDtype,
    CountEngine,
    CountEp,
    CountGlobalBatch,
    CountGpus,
    CountGradDtype,
    CountInterleave,
    CountKvLen,
    CountLossParallel,
    CountMixedPrecision,
    CountNames,
    CountOptimizer,
    CountPlot,
    CountPp,
    CountRecompute,
    CountSchedule,
    CountSeq,
    CountSp,
    CountStageLayers,
    CountSymbolic,
    CountTp,
    CountZero,
    PlotForce,
)  # fmt: skip
from archspec.cli.tables import Column, make_table, print_table, print_tables
from archspec.safety.text import markup_safe


@app.command()
def count(
    spec: SpecArg, set_: SetOpt = None, symbolic: CountSymbolic = False, names: CountNames = "ours",
    batch: CountBatch = None, seq: CountSeq = None, dec_seq: CountDecSeq = None,
    kv_len: CountKvLen = None, convention: CountConvention = None, dtype: CountDtype = None,
    optimizer: CountOptimizer = None, recompute: CountRecompute = None, attn: CountAttn = None,
    gpus: CountGpus = None, tp: CountTp = None, pp: CountPp = None, cp: CountCp = None,
    ep: CountEp = None, zero: CountZero = None, dp_replicate: CountDpReplicate = None,
    sp_: CountSp = None, engine: CountEngine = None, interleave: CountInterleave = None,
    mixed_precision: CountMixedPrecision = False, loss_parallel: CountLossParallel = False,
    stage_layers: CountStageLayers = None, schedule: CountSchedule = None, plot: CountPlot = None,
    global_batch: CountGlobalBatch = None, grad_dtype: CountGradDtype = None, by: CountBy = None,
    force: PlotForce = False, json_: JsonOpt = False, debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Count a spec's parameters exactly, row by row; with `--seq` or `--batch` (or any
    option below them), also its FLOPs and memory. A list of lengths (`--seq 512,1024`)
    gives one row per length, and `--json` a `sweep` list of `{workload, flops, memory}`.

    Examples:

        archspec count bert-base

        archspec count llama-2-7b --symbolic

        archspec count gpt2 --set n_layers=48 --json

        archspec count my-model.yaml

        archspec count bert-base --names hf

        archspec count llama-2-7b --seq 4096 --dtype bf16

        archspec count llama-2-70b --seq 4096 --batch 8 --gpus 64 --tp 8 --zero 1

        archspec count gpt3-175b --seq 2048 --global-batch 64 --gpus 64 --tp 8 --pp 8 --sp

        archspec count t5-base --seq 512 --dec-seq 128 --symbolic

        archspec count llama-2-7b --seq 512,1024,2048,4096 --plot llama.png
    """
    with user_errors(debug, json_):
        request.check_options(names, by)
        lengths = sweep.parse_lengths(seq)
        workload = request.requested_workload(
            by, engine, batch=batch, seq=lengths[0] if lengths else None, dec_seq=dec_seq,
            kv_len=kv_len, convention=convention, dtype=dtype, optimizer=optimizer,
            recompute=recompute, attn=attn, global_batch=global_batch, grad_dtype=grad_dtype,
            gpus=gpus, tp=tp, pp=pp, cp=cp, ep=ep, zero=zero, dp_replicate=dp_replicate,
            sp=sp_, interleave=interleave,
            stage_layers=stage_layers, mixed_precision=mixed_precision,
            loss_parallel=loss_parallel, schedule=schedule,
        )  # fmt: skip
        # Plain parameter counts need no formulas: an integer IR spares the sympy import.
        formulas = symbolic or workload is not None or plot is not None or names == "hf"
        ir = compile_spec(spec, set_, symbolic=formulas)
        report = request.params_report(ir, symbolic, names)
        beyond_context(ir, lengths)
        request.add_costs(report, ir, workload, lengths, symbolic, by)
        if plot is not None:
            sweep.chart_sweep(report, ir, workload, plot, force)
    print_json(report) if json_ else _render(report)


def _render(report: dict[str, Any]) -> None:
    _render_params(report)
    if "sweep" in report:
        sweep.render_sweep(report)
    elif "workload" in report:
        _render_workload(report)
    if "flops_by_module" in report:
        _render_by_module(report)


def _render_by_module(report: dict[str, Any]) -> None:

    w = report["workload"]
    rows = [
        [r["module"], r["shape"], str(r["copies"]) if r["copies"] != 1 else "",
         f"{r['flops']:,}", _flops(r["flops"]), f"{r['share']:.1%}"]
        for r in report["flops_by_module"]
    ]  # fmt: skip
    total = sum(r["flops"] for r in report["flops_by_module"])
    rows.append(["[bold]forward total[/bold]", "", "", f"{total:,}", _flops(total), "100.0%"])
    table = make_table(
        f"forward FLOPs by module at B={w['batch']}, S={w['seq']} ({w['convention']}; a "
        "repeated module's row counts all its copies)",
        [Column("module", "left"), Column("shape", "left"), Column("×"),
         Column("FLOPs"), Column(""), Column("share")],
        rows,
        sections=[len(rows) - 1],
    )  # fmt: skip
    print_table(table)


def _render_params(report: dict[str, Any]) -> None:
    from rich.table import Table

    params = report["params"]
    total = params["total"]
    table = Table(
        title=f"{asked_title(report['name'], report['overrides'])}: {total:,} parameters "
        f"({human(total)})",
        caption=f"source: {markup_safe(report['source'])}" if report["source"] else None,
        title_justify="left",
    )
    table.add_column("module")
    hf_names = bool(params["rows"]) and "hf_name" in params["rows"][0]
    if hf_names:
        table.add_column(f"transformers ({report['hf_class']})")
    table.add_column("shape")
    table.add_column("×", justify="right")
    table.add_column("parameters", justify="right")
    table.add_column("share", justify="right")
    for row in params["rows"]:
        if row["tied_to"]:
            shape = f"[dim]tied to {row['tied_to']}[/dim]"
            if row["count"]:
                shape += f" + bias {row['shape'].split(' + ')[-1]}"
        else:
            shape = row["shape"]
        copies = f"{row['copies']}" if row["copies"] != 1 else ""
        hf = [row["hf_name"]] if hf_names else []
        table.add_row(
            row["name"], *hf, shape, copies, f"{row['count']:,}", f"{row['count'] / total:.1%}"
        )
    pad = [""] if hf_names else []
    table.add_section()
    for group, n in params["groups"].items():
        table.add_row(f"[italic]{group}[/italic]", *pad, "", "", f"{n:,}", f"{n / total:.1%}")
    table.add_section()
    table.add_row("[bold]total[/bold]", *pad, "", "", f"[bold]{total:,}[/bold]", "100.0%")
    if "active" in params:
        active = params["active"]
        share = f"{active / total:.1%}"
        table.add_row("active per token", *pad, "(top-k experts)", "", f"{active:,}", share)
    print_table(table)
    if "symbolic" in report:
        formulas = Table(title="formulas", title_justify="left", show_header=False)
        formulas.add_column("group")
        formulas.add_column("expression")
        for group, expr in report["symbolic"]["groups"].items():
            formulas.add_row(group, expr)
        formulas.add_section()
        formulas.add_row("[bold]total[/bold]", report["symbolic"]["total"])
        if "active" in report["symbolic"]:
            formulas.add_row("active", report["symbolic"]["active"])
        print_table(formulas)


@app.command("list")
def list_(json_: JsonOpt = False) -> None:
    """List the built-in specs with their family and parameter count.

    Examples:

        archspec list

        archspec list --json
    """
    from archspec.backends.count.params import parameter_count
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import builtin_names, load_spec

    entries = []
    for name in builtin_names():
        ir = build_ir(load_spec(name), symbolic=False)
        entries.append(
            {
                "name": name,
                "family": ir.identity.family,
                "layout": ir.root.layout,
                "hf_class": ir.identity.hf_class,
                "params": ir.value(parameter_count(ir.root)),
            }
        )
    # By family, then size: gpt2, gpt2-medium, gpt2-large, gpt2-xl (not alphabetically).
    entries.sort(key=lambda e: (e["family"], e["params"], e["name"]))
    if json_:
        print_json(entries)
        return

    columns = [Column("name", "left"), Column("family", "left"), Column("layout", "left"),
               Column("transformers class", "left"), Column("parameters")]  # fmt: skip
    rows = [
        [e["name"], e["family"], e["layout"], e["hf_class"] or "-", f"{e['params']:,}"]
        for e in entries
    ]
    print_table(make_table("built-in specs", columns, rows))


@app.command()
def validate(
    spec: SpecArg,
    set_: SetOpt = None,
    resolved: Annotated[
        bool,
        typer.Option(
            "--resolved",
            help="Print the spec fully resolved, every default filled in, as YAML (as JSON "
            "with --json).",
        ),
    ] = False,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Check a spec (a file, a built-in name or a config.json): YAML, `extends`, keys, types
    and shapes. Exit code 2 on a mistake. `--resolved` prints what the spec means, with every
    default the spec leaves out (attention bias, MLP bias, tied head, ...).

    Examples:

        archspec validate my-model.yaml

        archspec validate gpt2 --resolved

        archspec validate my-model.yaml --set n_heads=16 --json
    """
    from archspec.backends.count.params import parameter_count
    from archspec.cli.common import resolve_spec, with_overrides
    from archspec.ir.build import build_ir

    with user_errors(debug, json_):
        parsed = resolve_spec(spec, set_)
        ir = with_overrides(build_ir(parsed, symbolic=False), set_)
    total = ir.value(parameter_count(ir.root))
    if resolved:
        from dataclasses import asdict

        data = asdict(parsed)
        # The derived defaults too: what a left-out field means for this spec.
        data |= {"n_kv_heads": parsed.kv_heads, "head_dim": parsed.resolved_head_dim,
                 "final_norm": parsed.has_final_norm}  # fmt: skip
        data["norm"]["bias"] = parsed.norm.has_bias
        if json_:
            print_json(data)
        else:
            import yaml

            write_stdout(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        return
    if json_:
        print_json(
            {"name": ir.name, "overrides": list(ir.identity.overrides), "valid": True,
             "params": total}
        )  # fmt: skip
    else:
        stderr().print(
            f"[green]ok[/green]: {markup_safe(spec)} is a valid spec "
            f"({markup_safe(ir.identity.title)}, "
            f"{total:,} parameters)"
        )


def _flops(n: int) -> str:
    """human() with room for training runs: 1.44P rather than 1.44e+03T."""
    for unit, size in (("E", 1e18), ("P", 1e15)):
        if abs(n) >= size:
            return f"{three_digits(n, size)}{unit}"
    return human(n)


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{three_digits(n, size)} {unit}"
    return f"{n} B"


def _render_workload(report: dict[str, Any]) -> None:
    print_tables(_flops_table(report), _memory_table(report))
    w, memory = report["workload"], report["memory"]
    if "ranks" in memory:
        print_table(_ranks_table(w, memory["ranks"]))
    if "training_assumes" in memory:
        say(f"note: the {w['dtype']} training total assumes {memory['training_assumes']}")
    if "flops" in report.get("symbolic", {}):
        print_table(_formulas_table(report))


def _flops_table(report: dict[str, Any]):
    from rich.table import Table

    from archspec.backends.count.flops import COMPONENTS

    w, flops = report["workload"], report["flops"]
    conv = flops["convention"]
    lengths = f"B={w['batch']}, S={w['seq']}"
    if w["dec_seq"] is not None:
        lengths += f", S_dec={w['dec_seq']}"
    table = Table(title=f"FLOPs at {lengths}", title_justify="left")
    for column in ("", "matmul", "other", "total"):
        table.add_column(column, justify="left" if not column else "right")
    table.add_column("convention")
    for name, c in flops["components"].items():
        table.add_row(
            COMPONENTS[name], _flops(c["matmul"]), _flops(c["other"]), _flops(c["total"]), conv
        )
    table.add_section()

    def row(label: str, total: int, matmul: int | None = None) -> None:
        other = _flops(total - matmul) if matmul is not None else ""
        matmul_text = _flops(matmul) if matmul is not None else ""
        table.add_row(label, matmul_text, other, f"[bold]{_flops(total)}[/bold]", conv)

    row("forward (= prefill)", flops["forward"], flops["forward_matmul"])
    if flops["dropout"]:
        row("dropout (training)", flops["dropout"], 0)
    row("backward", flops["backward"], flops["backward_matmul"])
    if flops["recomputed"]:
        recomputed_matmul = (
            flops["train_step_matmul"] - flops["forward_matmul"] - flops["backward_matmul"]
        )
        row(f"recomputed ({_replayed(w, conv)})", flops["recomputed"], recomputed_matmul)
    row("train step", flops["train_step"], flops["train_step_matmul"])
    row("forward per token", flops["forward_per_token"])
    if flops["decode"] is not None:
        row(f"decode step, kv {w['kv_len']}", flops["decode"], flops["decode_matmul"])
    return table


def _memory_title(w: dict[str, Any], memory: dict[str, Any]) -> str:
    devices = f"{w['gpus']} device" + ("s" if w["gpus"] > 1 else "")
    if w["gpus"] > 1:
        devices += f": tp={w['tp']} pp={w['pp']}"
        devices += "".join(f" {k}={w[k]}" for k in ("cp", "ep") if w.get(k, 1) > 1)
        devices += f" dp={w['dp']} ZeRO-{w['zero']}"
        if w.get("dp_replicate", 1) > 1:  # HSDP: ZeRO within each of the replicas
            devices += f" over {w['dp_replicate']} replicas"
        if w["sp"]:
            devices += ", SP"
        if w.get("engine") == "torch":
            devices += ", PyTorch's layout"
            devices += ", bf16 compute (FSDP2)" if w.get("mixed_precision") else ""
            devices += ", loss parallel" if w.get("loss_parallel") else ""
        if w["interleave"] > 1:
            devices += f", {w['interleave']} chunks/device"
        if "ranks" in memory:  # --schedule: the figures are per rank
            stages = ", ".join(map(str, memory["stages"]))
            devices += f", {w['schedule']}; rank {memory['rank']} of {w['pp']} (stages "
            devices += f"{stages}), the most loaded"
        elif w["pp"] > 1:
            devices += f"; stage {memory['stage']} of {w['pp']}, the most loaded"
    if w["micro_batches"] > 1 or w["gpus"] > 1:
        devices += f"; micro-batch {w['micro_batch']} × {w['micro_batches']}"
    return f"memory per device ({devices})"


def _memory_table(report: dict[str, Any]):
    from rich.table import Table

    w, memory = report["workload"], report["memory"]
    mem = Table(title=_memory_title(w, memory), title_justify="left")
    mem.add_column("")
    mem.add_column("bytes", justify="right")
    mem.add_column("", justify="right")
    master = " + master" if w["dtype"] not in ("fp32", "fp8") else ""
    recompute = "no recompute" if w["recompute"] == NO_RECOMPUTE else f"{w['recompute']} recomp."
    rows = [
        (
            f"weights ({'bf16, fp8 matmuls' if w['dtype'] == 'fp8' else w['dtype']})",
            memory["weights"],
        ),
        (f"gradients ({w['grad_dtype']})", memory["gradients"]),
        (f"optimizer ({w['optimizer']}{master})", memory["optimizer"]),
        # Selective recomputation keeps the attention core's inputs, whichever its kernel.
        (
            f"activations ({recompute})"
            if w["recompute"] == "selective"
            else f"activations ({w['attn']}, {recompute})",
            memory["activations"],
        ),
    ]
    for label, n in rows:
        mem.add_row(label, f"{n:,}", _bytes(n))
    trained = "training total" + (" (see note)" if "training_assumes" in memory else "")
    mem.add_row(f"[bold]{trained}[/bold]", f"{memory['total']:,}", _bytes(memory["total"]))
    if "rank_peaks" in memory:  # --engine torch: the peak of a whole step, on its rank
        top = max(memory["rank_peaks"], key=lambda r: r["peak"])
        label = f"peak of a step (rank {top['rank']}, {top['moment']})"
        mem.add_row(label, f"{top['peak']:,}", _bytes(top["peak"]))
    mem.add_section()
    if w["kv_len"] is not None:
        cache = f"KV cache ({w['kv_len']} pos.)"
        mem.add_row(cache, f"{memory['kv_cache']:,}", _bytes(memory["kv_cache"]))
    total = memory["inference_total"]
    mem.add_row("[bold]inference total[/bold]", f"{total:,}", _bytes(total))
    return mem


def _ranks_table(w: dict[str, Any], ranks: list[dict[str, Any]]):
    """Each pipeline rank under --schedule: its stages' states, its saved tensors at their
    most, and the peak of its step."""
    columns = [Column("rank"), Column("stages", "left"), Column("weights"), Column("gradients"),
               Column("optimizer"), Column("saved tensors"), Column("peak"),
               Column("the peak's moment", "left")]  # fmt: skip
    rows = [
        [str(r["rank"]), ", ".join(map(str, r["stages"])), *(f"{r[k]:,}" for k in
         ("weights", "gradients", "optimizer", "activations", "peak")), r["peak_moment"]]
        for r in ranks
    ]  # fmt: skip
    title = f"bytes per rank under {w['schedule']} ({w['micro_batches']} micro-batches)"
    return make_table(title, columns, rows)


def _formulas_table(report: dict[str, Any]):
    from rich.table import Table

    from archspec.backends.count.flops import COMPONENTS

    conv = report["flops"]["convention"]
    formulas = Table(
        title=f"formulas (B, S, S_dec, kv_len; convention {conv})",
        title_justify="left",
        show_header=False,
    )
    formulas.add_column("figure")
    formulas.add_column("expression")
    for name, expr in report["symbolic"]["flops"].items():
        label = COMPONENTS[name.split(".", 1)[1]] if name.startswith("component.") else name
        formulas.add_row(f"FLOPs {label}", expr)
    formulas.add_section()
    for name, expr in report["symbolic"]["memory"].items():
        formulas.add_row(f"bytes {name}", expr)
    return formulas


def _replayed(w: dict[str, Any], conv: str) -> str:
    """What the backward pass recomputes, in a few words."""
    if w["recompute"] == "full":
        return "blocks"
    if w["attn"] == "flash" and conv in ("executed", "causal"):
        return "flash QKᵀ"
    return "attention core"
