"""`archspec bench`: time the generated model in this process, against the analysis's FLOPs and
memory, and optionally against the transformers implementation of the same architecture."""

from __future__ import annotations

from typing import Any

from archspec.backends.compare.numbers import three_digits
from archspec.cli.application import app
from archspec.cli.common import (
    asked_title,
    human,
    print_json,
    resolve_spec,
    say,
    stderr,
    stdout,
    user_errors,
    with_overrides,
)
from archspec.cli.options import (
    BenchBatch,
    BenchCompile,
    BenchCp,
    BenchDevice,
    BenchDpReplicate,
    BenchDtype,
    BenchEp,
    BenchForce,
    BenchHfFirst,
    BenchLossParallel,
    BenchMixedPrecision,
    BenchMode,
    BenchNewTokens,
    BenchNproc,
    BenchPeakTflops,
    BenchPp,
    BenchSchedule,
    BenchSeed,
    BenchSeq,
    BenchSequenceParallel,
    BenchSteps,
    BenchThreads,
    BenchTp,
    BenchVsHf,
    BenchWarmup,
    BenchZero,
    DebugOpt,
    JsonOpt,
    SetOpt,
    SpecArg,
    StageLayers,
)  # fmt: skip
from archspec.cli.tables import print_table
from archspec.errors import SpecError


@app.command()
def bench(
    spec: SpecArg, device: BenchDevice = None, dtype: BenchDtype = None, batch: BenchBatch = 1,
    seq: BenchSeq = None, mode: BenchMode = "train", compile_: BenchCompile = False,
    steps: BenchSteps = 10, warmup: BenchWarmup = 3, new_tokens: BenchNewTokens = 32,
    threads: BenchThreads = None, seed: BenchSeed = 0, vs_hf: BenchVsHf = False,
    hf_first: BenchHfFirst = False, peak_tflops: BenchPeakTflops = None,
    nproc: BenchNproc = None, tp: BenchTp = 1, zero: BenchZero = 0, pp: BenchPp = 1,
    stage_layers: StageLayers = None, schedule: BenchSchedule = "1f1b", cp: BenchCp = 1,
    ep: BenchEp = 1, mixed_precision: BenchMixedPrecision = False,
    loss_parallel: BenchLossParallel = False, force: BenchForce = False,
    sequence_parallel: BenchSequenceParallel = False, dp_replicate: BenchDpReplicate = 1,
    set_: SetOpt = None, json_: JsonOpt = False, debug: DebugOpt = False,
) -> None:  # fmt: skip
    """Time the spec's generated PyTorch model in this process: median, min and max step
    time, tokens/s, achieved FLOP/s from the analytic FLOPs, MFU against the GPU's peak dense
    throughput for the dtype (not on CPU), and the peak memory measured beside the memory
    the analysis predicts. Weights are random (seeded); timing does not depend on them.

    Examples:

        archspec bench gpt2 --mode forward --device cpu --seq 128

        archspec bench llama-2-7b --set n_layers=4 --mode train --dtype bf16 --compile

        archspec bench gpt2-xl --seq 2048 --batch 4 --compile --json

        archspec bench mixtral-8x7b --set n_layers=2 --mode generate --new-tokens 64

        archspec bench gpt2 --device cpu --threads 1 --seq 64 --vs-hf
    """
    from archspec.bench.runner import Settings, run_bench
    from archspec.hf.export_config import hf_config_dict
    from archspec.ir.build import build_ir

    if nproc is not None:
        # fp32 training, as each rank runs it; the single-process bench's guards run first.
        settings = Settings(device=device, dtype="fp32", batch=batch, seq=seq, steps=steps,
                            warmup=warmup, seed=seed, threads=threads, force=force)  # fmt: skip
        pipeline = {"pp": pp, "stage_layers": stage_layers, "schedule": schedule}
        options = {"mixed_precision": mixed_precision, "loss_parallel": loss_parallel,
                   "sequence_parallel": sequence_parallel}  # fmt: skip
        _bench_distributed(spec, set_, nproc, (tp, cp, ep, dp_replicate), zero, pipeline,
                           settings, json_, debug, options)  # fmt: skip
        return
    given = locals()  # the multi-process options, refused below without --nproc
    settings = Settings(
        device=device, dtype=dtype, batch=batch, seq=seq, mode=mode, compile=compile_,
        steps=steps, warmup=warmup, new_tokens=new_tokens, vs_hf=vs_hf, seed=seed,
        peak_tflops=peak_tflops, threads=threads, force=force, hf_first=hf_first,
    )  # fmt: skip
    with user_errors(debug, json_):
        _refuse_without_nproc(given)
        resolved = resolve_spec(spec, set_)
        ir = with_overrides(build_ir(resolved), set_)
        # The transformers side is built from the spec's exported config.json, which refuses
        # an inexpressible spec before any work.
        hf_config = hf_config_dict(resolved) if vs_hf else None
        with _progress() as progress:
            result = run_bench(ir, settings, progress, hf_config)
    print_json(result) if json_ else _render(result)


# The options of a run over several processes: bench's parameter -> (flag, default).
MULTI_PROCESS = {"tp": ("--tp", 1), "pp": ("--pp", 1), "zero": ("--zero", 0), "cp": ("--cp", 1),
                 "ep": ("--ep", 1), "dp_replicate": ("--dp-replicate", 1),
                 "schedule": ("--schedule", "1f1b"), "stage_layers": ("--stage-layers", None),
                 "sequence_parallel": ("--sp", False), "loss_parallel": ("--loss-parallel", False),
                 "mixed_precision": ("--mixed-precision", False)}  # fmt: skip


def _refuse_without_nproc(values: dict[str, Any]) -> None:
    """The options of a run over several processes (MULTI_PROCESS) among bench's parameters
    `values`, given without --nproc: one process has no ranks to lay out, so each would change
    nothing. Refused, as bench refuses any option that needs another (--hf-first without
    --vs-hf)."""
    options = {flag: (values[name], default) for name, (flag, default) in MULTI_PROCESS.items()}
    given = [
        name if isinstance(value, bool) else f"{name} {value}"
        for name, (value, default) in options.items()
        if value != default
    ]
    if not given:
        return
    verb = "needs" if len(given) == 1 else "need"
    hint = "add --nproc N for a run over N processes under torchrun"
    if options["--dp-replicate"][0] != options["--dp-replicate"][1]:
        hint += "; --dp-replicate also needs --zero 3"
    raise SpecError(f"{', '.join(given)} {verb} --nproc: a single-process bench lays out no ranks",
                    hint=hint)  # fmt: skip


class _progress:
    """A rich progress bar on stderr, one task per phase (warm-up, timing); nothing when
    stderr is not a terminal (a log file gets no bar)."""

    def __enter__(self):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        console = stderr()
        self._bar = None
        self._tasks: dict[str, Any] = {}
        if console.is_terminal:
            self._bar = Progress(
                "{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._bar.__enter__()
        return self

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self._bar is None:
            # No bar in a log: one line as each phase starts, so a long run is not silent.
            if phase not in self._tasks:
                self._tasks[phase] = None
                say(f"{phase}: {total} step" + ("s" if total != 1 else "") + "…")
            return
        if phase not in self._tasks:
            self._tasks[phase] = self._bar.add_task(phase, total=total)
        self._bar.update(self._tasks[phase], completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def _seconds(t: float) -> str:
    if t >= 1:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.2f} ms"
    return f"{t * 1e6:.1f} µs"


def _rate(x: float) -> str:
    for unit, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if x >= size:
            return f"{three_digits(x, size)} {unit}FLOP/s"
    return f"{x:.3g} FLOP/s"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{three_digits(n, size)} {unit}"
    return f"{n} B"


def _render(r: dict[str, Any]) -> None:
    from rich.table import Table

    hf = "speedup" in r
    shape = f"B={r['batch']}, S={r['seq']}"
    if r["new_tokens"] is not None:
        shape += f", {r['new_tokens']} new tokens"
    where = r["device_name"]
    if r["threads"] is not None:
        where += f", {r['threads']} thread" + ("s" if r["threads"] > 1 else "")
    compiled = "torch.compile" if r["compile"] else "eager"
    table = Table(
        title=f"{asked_title(r['name'], r['overrides'])}: {r['mode']}, {shape}, {r['dtype']}, "
        f"{compiled} ({where})",
        caption=f"{r['steps']} timed steps after {r['warmup']} warm-up; torch {r['torch']}"
        + (f", transformers {r['transformers']}" if hf else ""),
        title_justify="left",
    )
    table.add_column("")
    table.add_column("archspec", justify="right")
    if hf:
        table.add_column(f"transformers ({r['hf_class']})", justify="right")

    def row(label: str, key: str, fmt) -> None:
        cells = [fmt(r[key])]
        if hf:
            cells.append(fmt(r[f"hf_{key}"]))
        table.add_row(label, *cells)

    def mfu(x: float | None) -> str:
        return f"{x:.1%}" if x is not None else "-"

    row("step time, median", "step_time_s", _seconds)
    row("step time, min", "step_time_min_s", _seconds)
    row("step time, max", "step_time_max_s", _seconds)
    row("tokens/s", "tokens_per_s", lambda x: f"{x:,.1f}" if x < 1000 else f"{x:,.0f}")
    row("achieved FLOP/s", "flops_per_s", _rate)
    row("MFU", "mfu", mfu)
    row("peak memory", "peak_memory_bytes", _bytes)
    predicted = r["predicted_memory_bytes"]
    cells = [_bytes(predicted)] + ([""] if hf else [])
    table.add_row("predicted memory (analysis)", *cells)
    if hf:
        table.add_section()
        low, high = r["speedup_range"]
        table.add_row("[bold]speedup[/bold]", f"[bold]{r['speedup']:.2f}×[/bold]", "1.00×")
        table.add_row("speedup, slowest to fastest step", f"{low:.2f}× – {high:.2f}×", "")
    print_table(table)
    for note in _notes(r, hf):
        stderr().print(f"[dim]{note}[/dim]")


def _notes(r: dict[str, Any], hf: bool) -> list[str]:
    """What the table leaves out: the FLOPs and memory it measured against, and why a figure
    is missing or within the noise."""
    notes = [
        f"FLOPs per step {human(r['flops_per_step'])} (analysis, convention executed); "
        f"{r['tokens_per_step']:,} tokens per step",
        f"peak memory measured by {r['memory_measured_by']}: "
        f"{r['peak_memory_bytes'] / r['predicted_memory_bytes']:.1%} of the prediction",
    ]
    if r["mfu"] is None:
        why = "on CPU" if r["device"] == "cpu" else f"for {r['device_name']} (--peak-tflops)"
        notes.append(f"no MFU: no peak dense throughput {why}")
    if hf:
        notes.append(
            f"transformers attention: {r['hf_attn_implementation']}; largest logit difference "
            f"with the same weights: {r['hf_max_abs_diff']:.2g}"
        )
    if hf and r["speedup_within_noise"]:
        # One CPU thread steadies the timings; suggested only where the run used more.
        threads = " (or --threads 1)" if (r["threads"] or 1) > 1 else ""
        notes.append(
            f"the {r['speedup']:.2f}× speedup is within the noise: the two sides' step times "
            f"overlap over {r['steps']} steps; more --steps{threads} may tell them apart"
        )
    return notes


def _distributed_title(r: dict) -> str:
    """The table's title: the model, the processes and the layout they train in."""
    more = "".join(f", {k}={r[k]}" for k in ("dp_replicate", "cp", "ep") if r[k] > 1)
    layout = f"tp={r['tp']}, dp={r['dp']}{more}, zero={r['zero']}"
    if "pp" in r:
        layers = ",".join(map(str, r["stage_layers"]))
        layout = f"pp={r['pp']} ({r['schedule']}, stages of {layers} layers)"
        if r["nproc"] > r["pp"]:  # each stage laid out over tp and dp_shard
            layout += f", tp={r['tp']}, dp={r['dp']}, zero={r['zero']}"
    return (
        f"{asked_title(r['name'], r['overrides'])}: train on {r['nproc']} {r['device']} "
        f"processes, {layout}, B={r['batch']} per replica, S={r['seq']}, "
        f"{'bf16 compute (FSDP2)' if r['mixed_precision'] else 'fp32'}"
        f"{', loss parallel' if r['loss_parallel'] else ''}"
        f"{', sequence parallel' if r['sequence_parallel'] else ''}"
    )


def _distributed_note(r: dict) -> str:
    """What the predicted columns are."""
    attn = (r["predicted_bytes"] or r["ranks"][0].get("predicted_bytes") or {}).get("attn")
    routing = ""
    if r["ep"] > 1 and "expert_load" in r["ranks"][0]:
        balanced = "; ".join(
            f"rank {rank['rank']}: {rank['expert_rows_received']:,} rows "
            f"(load {rank['expert_load']:.3f}), balanced routing's saved tensors "
            f"{_bytes(rank['predicted_saved_tensor_bytes_balanced'])}, peak "
            f"{_bytes(rank['predicted_peak_bytes_balanced'])}"
            for rank in r["ranks"]
        )
        routing = (
            " Under --ep the predicted saved tensors and peak are for the routing the "
            "measured step took: the rows each rank's experts received over its mixture "
            f"layers, against {r['ranks'][0]['expert_rows_balanced']:,} under balanced "
            f"routing ({balanced})."
        )
    beside = ""
    if "pp" in r and r["nproc"] > r["pp"]:
        beside = (
            " A pipeline beside tp or dp_shard: count lays a pipeline out alone, so each "
            "rank's parameters and peak are not predicted; under dp_shard alone each data "
            "rank's saved tensors are its stages' as the pipeline alone keeps them."
        )
    return (
        f"predicted: count --engine torch ({attn or 'flash'} attention), each rank's "
        "parameters, the activations autograd "
        "keeps (saved tensors, measured with saved_tensors_hooks) and the peak of a whole "
        "step (archspec.backends.count.rank_peak: weights and AdamW moments, plus the "
        "largest of its moments, with FSDP2's gathered parameters, the gradients flowing "
        f"back and AdamW's temporaries).{routing}{beside}"
    )


def _bench_distributed(
    spec, set_, nproc, dims, zero, pipeline, settings, json_, debug, options
) -> None:
    """`--nproc`: torchrun on this machine; a row per rank beside the per-device prediction.
    dims: (tp, cp, ep, dp_replicate); options: parallelize's mixed_precision, loss_parallel
    and sequence_parallel."""
    tp, cp, ep, dp_replicate = dims
    from rich.table import Table

    from archspec.bench.distributed import run_distributed
    from archspec.ir.build import build_ir

    with user_errors(debug, json_):
        ir = with_overrides(build_ir(resolve_spec(spec, set_)), set_)
        r = run_distributed(
            ir, nproc, tp, zero, settings, pipeline, cp=cp, ep=ep, dp_replicate=dp_replicate,
            **options,
        )  # fmt: skip
    if json_:
        print_json(r)
        return
    table = Table(
        title=_distributed_title(r),
        caption=f"last step's loss alone on one process: {r['reference_losses'][-1]:.6f}",
        title_justify="left",
    )
    # Measured beside predicted: parameters, activations (saved tensors), the peak.
    for column in ("rank", "step time", "tokens/s", "loss", "params", "predicted",
                   "saved tensors", "predicted", "peak memory", "predicted"):  # fmt: skip
        table.add_column(column, justify="right")
    for rank in r["ranks"]:
        # A pipeline predicts each rank's stages; the other layouts one figure for all.
        pred = rank.get("predicted_bytes") or r["predicted_bytes"] or {}
        loss = f"{rank['losses'][-1]:.6f}" if rank["losses"] else "-"
        table.add_row(
            str(rank["rank"]), _seconds(rank["step_time_s"]), f"{rank['tokens_per_s']:,.0f}",
            loss, _bytes(rank["param_bytes"]),
            _bytes(rank.get("predicted_param_bytes", pred.get("weights"))),
            _bytes(rank["saved_tensor_bytes"]),
            _bytes(rank.get("predicted_saved_tensor_bytes", pred.get("activations"))),
            _bytes(rank["peak_memory_bytes"]), _bytes(rank.get("predicted_peak_bytes")),
        )  # fmt: skip
    print_table(table)
    stdout().print(_distributed_note(r))
