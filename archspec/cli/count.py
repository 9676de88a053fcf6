"""`archspec count`, `archspec list` and `archspec validate`: the parameter counter's commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from archspec.backends.compare.numbers import three_digits
from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.cli.application import app
from archspec.cli.common import (
    DebugOpt,
    JsonOpt,
    SetOpt,
    SpecArg,
    compile_spec,
    human,
    print_json,
    say,
    stderr,
    stdout,
    user_errors,
    write_stdout,
)
from archspec.errors import SpecError
from archspec.safety.limits import MAX_SIZE
from archspec.safety.text import markup_safe

# FLOPs and memory: any of these options adds them to `archspec count`. They default to None
# so that the command can tell "not given" (parameters only) from a value.
_FLOPS = "FLOPs and memory"
BatchOpt = Annotated[
    int | None,
    typer.Option("--batch", "-b", help="Sequences per optimizer step over all replicas "
                 "(default 1); with --global-batch, the micro-batch one device runs at a time.",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
GlobalBatchOpt = Annotated[
    int | None,
    typer.Option("--global-batch", help="Sequences per optimizer step; the micro-batches per "
                 "step are G / (batch × data-parallel replicas).", metavar="G",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
SpOpt = Annotated[
    bool | None,
    typer.Option("--sp/--no-sp", help="Sequence parallelism: split what tensor parallelism "
                 "leaves whole along the sequence (off by default, as in Megatron-LM).",
                 rich_help_panel=_FLOPS, show_default=False),
]  # fmt: skip
EngineOpt = Annotated[
    str | None,
    typer.Option("--engine", help="Whose layout: megatron (the default: Megatron-LM, the "
                 "vocabulary padded to 128·tp) or torch (the generated parallelize on DTensor "
                 "and FSDP2: no padding, k and v whole on each rank beyond n_kv_heads ranks, SP "
                 "only inside the blocks).",
                 metavar="megatron|torch", rich_help_panel=_FLOPS),
]  # fmt: skip
InterleaveOpt = Annotated[
    int | None,
    typer.Option("--interleave", help="Virtual pipeline stages per device (interleaved 1F1B).",
                 metavar="V", rich_help_panel=_FLOPS),
]  # fmt: skip
GradDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--grad-dtype",
        help="The dtype gradients are kept and reduced in: fp32, "
        "bf16, fp16 (default: the compute dtype; Megatron-LM keeps fp32).",
        metavar="DTYPE",
        rich_help_panel=_FLOPS,
    ),
]
SeqOpt = Annotated[
    str | None,
    typer.Option(
        "--seq",
        "-s",
        help="Positions per sequence (default: max_seq_len); a comma-separated list "
        "(512,1024,2048) sweeps them in one table.",
        metavar="S[,S...]",
        rich_help_panel=_FLOPS,
    ),
]
DecSeqOpt = Annotated[
    int | None,
    typer.Option("--dec-seq", help="Decoder positions, encoder-decoders (default: --seq).",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
KvLenOpt = Annotated[
    int | None,
    typer.Option("--kv-len", help="Positions in the KV cache for one decode step, the new one "
                 "included (default: the sequence length).", rich_help_panel=_FLOPS),
]  # fmt: skip
ConventionOpt = Annotated[
    str | None,
    typer.Option("--convention", help="What a FLOP count counts: executed (default), causal, "
                 "kaplan, chinchilla, palm, megatron.", metavar="NAME", rich_help_panel=_FLOPS),
]  # fmt: skip
DtypeOpt = Annotated[
    str | None,
    typer.Option("--dtype", help="Weight dtype: fp32 (default), bf16, fp16 (mixed precision), "
                 "fp8 (torchao.float8 training), int8, int4 (weight-only).", metavar="DTYPE",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
OptimizerOpt = Annotated[
    str | None,
    typer.Option("--optimizer", help="adamw (default), adamw8bit or sgd (with momentum).",
                 metavar="NAME", rich_help_panel=_FLOPS),
]  # fmt: skip
RecomputeOpt = Annotated[
    str | None,
    typer.Option("--recompute", help="Activation recomputation: none (default), selective, full.",
                 metavar="POLICY", rich_help_panel=_FLOPS),
]  # fmt: skip
AttnOpt = Annotated[
    str | None,
    typer.Option("--attn", help="Attention kernel: flash (default: the fused SDPA kernel the "
                 "generated code runs; keeps no B·h·S² probabilities) or eager (the math path).",
                 metavar="KERNEL", rich_help_panel=_FLOPS),
]  # fmt: skip
GpusOpt = Annotated[
    int | None, typer.Option("--gpus", help="Devices (default 1).", rich_help_panel=_FLOPS)
]
TpOpt = Annotated[
    int | None, typer.Option("--tp", help="Tensor-parallel degree.", rich_help_panel=_FLOPS)
]
PpOpt = Annotated[
    int | None, typer.Option("--pp", help="Pipeline-parallel degree.", rich_help_panel=_FLOPS)
]
ZeroOpt = Annotated[
    int | None,
    typer.Option("--zero", help="ZeRO stage over data-parallel replicas: 0-3.",
                 rich_help_panel=_FLOPS),
]  # fmt: skip


@app.command()
def count(
    spec: SpecArg,
    set_: SetOpt = None,
    symbolic: Annotated[
        bool,
        typer.Option("--symbolic", help="Also show the total and group subtotals as formulas."),
    ] = False,
    names: Annotated[
        str,
        typer.Option(
            "--names",
            help="`hf`: also show each module's name in the spec's transformers class.",
            metavar="ours|hf",
        ),
    ] = "ours",
    batch: BatchOpt = None,
    seq: SeqOpt = None,
    dec_seq: DecSeqOpt = None,
    kv_len: KvLenOpt = None,
    convention: ConventionOpt = None,
    dtype: DtypeOpt = None,
    optimizer: OptimizerOpt = None,
    recompute: RecomputeOpt = None,
    attn: AttnOpt = None,
    gpus: GpusOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    zero: ZeroOpt = None,
    sp_: SpOpt = None,
    engine: EngineOpt = None,
    interleave: InterleaveOpt = None,
    global_batch: GlobalBatchOpt = None,
    grad_dtype: GradDtypeOpt = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="`module`: also the forward FLOPs of each module (the matmuls of each Linear, "
            "the attention core in its attention module), as profilers list them.",
            metavar="module",
            rich_help_panel=_FLOPS,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Draw FLOPs per token and memory against S to this .png or .svg file (the "
            "--seq list, else doublings up to max_seq_len; needs `pip install "
            "'archspec[plot]'`).",
            metavar="FILE",
            rich_help_panel=_FLOPS,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace the --plot FILE even if it holds another chart."),
    ] = False,
    json_: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
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
    from archspec.backends.count.report import param_report

    with user_errors(debug, json_):
        if names not in ("ours", "hf"):
            raise SpecError(f"--names takes ours or hf, not {names!r}")
        if by not in (None, "module", "component"):
            raise SpecError(f"--by takes module (or component, the default), not {by!r}")
        from archspec.cli import sweep

        lengths = sweep.parse_lengths(seq)
        workload = _workload(
            batch, lengths[0] if lengths else None, dec_seq, kv_len, convention, dtype,
            optimizer, recompute, attn, gpus, tp, pp, zero, sp_, interleave, global_batch,
            grad_dtype, engine,
        )  # fmt: skip
        if by == "module" and workload is None:
            from archspec.backends.count.flops_report import Workload

            workload = Workload()  # at the spec's max_seq_len, as --seq would default
        # Plain parameter counts need no formulas: an integer IR spares the sympy import.
        formulas = symbolic or workload is not None or plot is not None or names == "hf"
        ir = compile_spec(spec, set_, symbolic=formulas)
        report = param_report(ir, symbolic=symbolic)
        report["overrides"] = list(set_ or [])  # what was asked, beside what it resolved to
        if names == "hf":
            from archspec.hf.names import hf_module_names

            hf_names = hf_module_names(ir)
            for row in report["params"]["rows"]:
                row["hf_name"] = hf_names[row["name"]]
        _beyond_context(ir, lengths)
        if lengths is not None and len(lengths) > 1:
            sweep.add_sweep(report, ir, workload, lengths)
        elif workload is not None:
            _add_workload(report, ir, workload, symbolic)
        if by == "module":
            from archspec.backends.count.by_module import module_flops
            from archspec.backends.count.conventions import get_convention

            conv = get_convention(workload.convention)
            report["flops_by_module"] = module_flops(ir, conv, workload.values(ir))
        if plot is not None:
            from archspec.backends.count.flops_report import Workload

            sweep.chart_sweep(report, ir, workload or Workload(), plot, force)
    if json_:
        print_json(report)
        return
    _render_params(report)
    if "sweep" in report:
        sweep.render_sweep(report)
    elif workload is not None:
        _render_workload(report)
    if "flops_by_module" in report:
        _render_by_module(report)


def _render_by_module(report: dict[str, Any]) -> None:
    from archspec.cli.tables import Column, print_table

    w = report["workload"]
    rows = [
        [r["module"], r["shape"], str(r["copies"]) if r["copies"] != 1 else "",
         f"{r['flops']:,}", _flops(r["flops"]), f"{r['share']:.1%}"]
        for r in report["flops_by_module"]
    ]  # fmt: skip
    total = sum(r["flops"] for r in report["flops_by_module"])
    rows.append(["[bold]forward total[/bold]", "", "", f"{total:,}", _flops(total), "100.0%"])
    print_table(
        f"forward FLOPs by module at B={w['batch']}, S={w['seq']} ({w['convention']}; a "
        "repeated module's row counts all its copies)",
        [Column("module", "left", label=True), Column("shape", "left"), Column("×"),
         Column("FLOPs"), Column(""), Column("share")],
        rows,
        sections=[len(rows) - 1],
    )  # fmt: skip


def _beyond_context(ir, lengths: list[int] | None) -> None:
    """Say when S exceeds a learned position table: the formulas still give figures, but the
    model (and `archspec bench`) cannot run that length."""
    longest = ir.value(ir.root.max_seq_len)
    tables = [s for s in ir.root.stacks if s.position.entry.table == "absolute"]
    beyond = [n for n in lengths or () if n > longest]
    if tables and beyond:
        say(
            f"note: S = {max(beyond):,} is beyond {ir.name}'s {longest:,} learned positions: "
            "the figures are what the formulas give, but the model cannot run that length"
        )


def _render_params(report: dict[str, Any]) -> None:
    from rich.table import Table

    params = report["params"]
    total = params["total"]
    table = Table(
        title=f"{report['name']}: {total:,} parameters ({human(total)})",
        caption=f"source: {markup_safe(report['source'])}",
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
    out = stdout()
    out.print(table)
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
        out.print(formulas)


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
    from archspec.cli.tables import Column, print_table

    columns = [Column("name", "left", label=True), Column("family", "left", label=True),
               Column("layout", "left", label=True),
               Column("transformers class", "left", label=True), Column("parameters")]  # fmt: skip
    rows = [
        [e["name"], e["family"], e["layout"], e["hf_class"] or "-", f"{e['params']:,}"]
        for e in entries
    ]
    print_table("built-in specs", columns, rows, keys=1)


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
    from archspec.cli.common import resolve_spec
    from archspec.ir.build import build_ir

    with user_errors(debug, json_):
        parsed = resolve_spec(spec, set_)
        ir = build_ir(parsed, symbolic=False)
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
        print_json({"name": ir.name, "valid": True, "params": total})
    else:
        stderr().print(
            f"[green]ok[/green]: {markup_safe(spec)} is a valid spec ({markup_safe(ir.name)}, "
            f"{total:,} parameters)"
        )


# FLOPs and memory (`archspec count --seq ...`).


def _workload(
    batch, seq, dec_seq, kv_len, convention, dtype, optimizer, recompute, attn, gpus, tp, pp,
    zero, sp, interleave, global_batch, grad_dtype, engine=None,
):  # fmt: skip
    """The workload the options describe, or None when none of them was given."""
    given = {
        "batch": batch, "seq": seq, "dec_seq": dec_seq, "kv_len": kv_len,
        "convention": convention, "dtype": dtype, "optimizer": optimizer,
        "recompute": recompute, "attn": attn, "global_batch": global_batch,
        "grad_dtype": grad_dtype,
    }  # fmt: skip
    parallel = {
        "gpus": gpus, "tp": tp, "pp": pp, "zero": zero, "sp": sp, "interleave": interleave,
        "engine": engine,
    }  # fmt: skip
    if all(v is None for v in (*given.values(), *parallel.values())):
        return None
    for option, value in (*given.items(), *parallel.items()):
        if isinstance(value, int) and abs(value) > MAX_SIZE:
            name = option.replace("_", "-")
            raise SpecError(f"--{name} must be at most {MAX_SIZE:,}, got {value:,}")
    from archspec.backends.count.flops_report import Workload
    from archspec.backends.count.memory import Parallelism

    par = Parallelism(**{k: v for k, v in parallel.items() if v is not None})
    return Workload(**{k: v for k, v in given.items() if v is not None}, parallel=par)


def _add_workload(report: dict[str, Any], ir, workload, symbolic: bool) -> None:
    from archspec.backends.count.flops_report import flops_report

    extra = flops_report(ir, workload, symbolic=symbolic)
    if "symbolic" in extra:
        report.setdefault("symbolic", {}).update(extra.pop("symbolic"))
    report.update(extra)


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
    from rich.columns import Columns
    from rich.table import Table

    from archspec.backends.count.flops import COMPONENTS

    w, flops, memory = report["workload"], report["flops"], report["memory"]
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

    devices = f"{w['gpus']} device" + ("s" if w["gpus"] > 1 else "")
    if w["gpus"] > 1:
        devices += f": tp={w['tp']} pp={w['pp']} dp={w['dp']} ZeRO-{w['zero']}"
        if w["sp"]:
            devices += ", SP"
        if w.get("engine") == "torch":
            devices += ", PyTorch's layout"
        if w["interleave"] > 1:
            devices += f", {w['interleave']} chunks/device"
        if w["pp"] > 1:
            devices += f"; stage {memory['stage']} of {w['pp']}, the most loaded"
    if w["micro_batches"] > 1 or w["gpus"] > 1:
        devices += f"; micro-batch {w['micro_batch']} × {w['micro_batches']}"
    mem = Table(title=f"memory per device ({devices})", title_justify="left")
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
    mem.add_section()
    if w["kv_len"] is not None:
        cache = f"KV cache ({w['kv_len']} pos.)"
        mem.add_row(cache, f"{memory['kv_cache']:,}", _bytes(memory["kv_cache"]))
    total = memory["inference_total"]
    mem.add_row("[bold]inference total[/bold]", f"{total:,}", _bytes(total))

    out = stdout()
    out.print(Columns([table, mem]))
    if "training_assumes" in memory:
        say(f"note: the {w['dtype']} training total assumes {memory['training_assumes']}")
    if "flops" in report.get("symbolic", {}):
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
        out.print(formulas)


def _replayed(w: dict[str, Any], conv: str) -> str:
    """What the backward pass recomputes, in a few words."""
    if w["recompute"] == "full":
        return "blocks"
    if w["attn"] == "flash" and conv in ("executed", "causal"):
        return "flash QKᵀ"
    return "attention core"
