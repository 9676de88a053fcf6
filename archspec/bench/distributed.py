"""`archspec bench --nproc N`: the generated model trained across N processes on this machine.

The launcher is the installed torch's torchrun (`python -m torch.distributed.run --standalone`):
gloo on CPU processes, NCCL on GPUs. Each rank (`distributed_rank.py`) runs the model under its
own `parallelize` (tensor parallelism over `tp` ranks, FSDP2 over the rest when `zero` is 3)
and reports its step times, peak memory and parameter bytes; they are shown beside archspec's
per-device prediction for the same layout."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from archspec.bench.mesh_layout import check_model_layout, data_ranks, mesh_dims
from archspec.errors import SpecError
from archspec.ir.nodes import IR

# Processes on one machine: more than any node's GPUs (8, or 72 in a rack-scale NVLink domain),
# and each process imports torch and holds the whole model until it is sharded.
MAX_NPROC = 128


def check_layout(
    nproc: int, tp: int, zero: int, device: str, gpus: int, cp: int = 1, ep: int = 1, pp: int = 1,
    dp_replicate: int = 1,
) -> dict[str, int]:  # fmt: skip
    """One clear message per impossible request; the mesh (`mesh_layout.mesh_dims`)."""
    if not 2 <= nproc <= MAX_NPROC:
        raise SpecError(f"--nproc takes 2 or more processes, at most {MAX_NPROC} (got {nproc:,})")
    if zero not in (0, 3):
        raise SpecError("--zero with --nproc takes 0 (replicated) or 3 (FSDP2)")
    if dp_replicate != 1 and zero != 3:
        raise SpecError(
            f"--dp-replicate {dp_replicate} replicates FSDP2's shard groups: it needs --zero 3",
            hint="with --zero 0 every data rank holds the whole weights already",
        )
    dims = mesh_dims(nproc, tp=tp, cp=cp, ep=ep, pp=pp, dp_replicate=dp_replicate)
    if dims["dp_shard"] > 1 and zero != 3:
        raise SpecError(
            f"--nproc {nproc} with --tp {tp} leaves {dims['dp_shard']} data-parallel replicas",
            hint="the generated parallelize shards them with FSDP2: add --zero 3",
        )
    if device == "cuda" and nproc > gpus:
        raise SpecError(f"--nproc {nproc} exceeds the {gpus} GPUs of this machine")
    return dims


def check_options_of_parallelize(
    ir: IR, dims: dict[str, int], mixed_precision: bool, loss_parallel: bool,
    sequence_parallel: bool = False,
) -> None:  # fmt: skip
    """--mixed-precision is FSDP2's (data ranks to shard over), --loss-parallel needs the
    logits split over --tp and an LM head, --sp the sequence split over --tp; none is the
    generated pipeline()'s."""
    options = [name for name, on in (("mixed-precision", mixed_precision),
                                     ("loss-parallel", loss_parallel),
                                     ("sp", sequence_parallel)) if on]  # fmt: skip
    if options and dims["pp"] > 1:
        raise SpecError(
            f"--{options[0]} with --pp: the generated pipeline() lays its stages out with "
            "parallelize's defaults"
        )
    if mixed_precision and dims["dp_shard"] * dims["ep"] == 1:
        raise SpecError(
            "--mixed-precision is FSDP2's: it needs data-parallel ranks (--nproc above "
            "--tp × --cp, with --zero 3, or --ep)"
        )
    if loss_parallel and (dims["tp"] == 1 or ir.root.lm_head is None):
        raise SpecError("--loss-parallel splits an LM head's logits over --tp 2 or more")
    if sequence_parallel and dims["tp"] == 1:
        raise SpecError("--sp splits the sequence between the blocks over --tp 2 or more")


def check_heads(ir: IR, tp: int) -> None:
    """The generated parallelize gives each rank whole heads, and whole key/value heads or,
    beyond n_kv_heads ranks, a copy of the one its query heads read (as Megatron-LM does)."""
    from archspec.ir.nodes import Attention
    from archspec.ir.visit import walk

    for placed in walk(ir.root):
        if isinstance(placed.node, Attention):
            heads, kv = ir.value(placed.node.n_heads), ir.value(placed.node.n_kv_heads)
            if heads % tp:
                raise SpecError(f"--tp {tp} does not divide the {heads} heads")
            if kv % tp and tp % kv:
                raise SpecError(
                    f"--tp {tp} does not divide the {kv} kv heads, nor is it a multiple of them"
                )
    if (
        any(
            isinstance(p.node, Attention) and p.node.mask.bias and not p.node.mask.learned_bias
            for p in walk(ir.root)
        )
        and tp > 1
    ):
        raise SpecError("tensor parallelism does not split ALiBi's per-head slopes: use --tp 1")


def attention_that_runs(ir: IR, device: str) -> str:
    """What SDPA runs in training: a fused kernel on a GPU; on the CPU the math path when
    attention drops out or its additive mask needs a gradient (T5) or is shared across the
    batch (ALiBi), which the CPU's fused kernel refuses, else the fused kernel."""
    from archspec.ir.nodes import Attention
    from archspec.ir.visit import walk

    if device == "cuda":
        return "flash"
    for placed in walk(ir.root):
        node = placed.node
        if isinstance(node, Attention) and (node.dropout or node.mask.bias):
            return "eager"
    return "flash"


def predicted(
    ir: IR, nproc: int, tp: int, zero: int, batch: int, seq: int, device: str = "cpu",
    mixed_precision: bool = False, loss_parallel: bool = False, sequence_parallel: bool = False,
    dp_replicate: int = 1,
) -> dict[str, int]:  # fmt: skip
    """archspec's per-device figures for the generated `parallelize`'s layout (count's torch
    engine), in bytes: fp32 training with AdamW (bf16 compute under FSDP2's
    `mixed_precision`), the attention SDPA runs on `device`."""
    from archspec.backends.count.activations import activation_bytes
    from archspec.backends.count.flops import KV_LEN, S_DEC, B, S
    from archspec.backends.count.flops_report import whole_bytes
    from archspec.backends.count.memory import Parallelism, memory_figures

    attn = attention_that_runs(ir, device)
    par = Parallelism(
        gpus=nproc, tp=tp, zero=zero, engine="torch", mixed_precision=mixed_precision,
        loss_parallel=loss_parallel, sp=sequence_parallel, dp_replicate=dp_replicate,
    )  # fmt: skip
    m = memory_figures(ir, attn=attn, parallel=par).stages[0]
    env = {**ir.env, B: batch, S: seq, S_DEC: seq, KV_LEN: seq}
    # The activations on this device: PyTorch's math attention keeps its dropout mask in fp32
    # on the CPU (one byte on a GPU), which count's figures, made for GPUs, do not say.
    compute = 2 if mixed_precision else 4
    kept = activation_bytes(
        ir, compute, attn, tp=tp, sequence_parallel=sequence_parallel, device=device,
        engine="torch", loss_parallel=loss_parallel,
    )  # fmt: skip
    figures = {
        "weights": whole_bytes(m.weights, env),
        "gradients": whole_bytes(m.gradients, env),
        "optimizer": whole_bytes(m.optimizer_states, env),
        "activations": whole_bytes(kept, env),
    }
    return {**figures, "total": sum(figures.values()), "attn": attn}  # type: ignore[dict-item]


def _rank_predictions(
    ir: IR, dims: dict[str, int], ranks: list[dict[str, Any]], batch: int, seq: int, device: str,
    sequence_parallel: bool = False, mixed_precision: bool = False,
) -> None:  # fmt: skip
    """Each rank's predicted parameters (under cp or ep), saved tensors and peak of a step
    (`count.rank_peak`), where count lays the mesh out. Under ep, for the routing the
    measured step took (the rows each rank's experts received, `expert_rows_received`), and
    for balanced routing under `..._balanced` keys."""
    from archspec.backends.count.rank_peak import rank_peaks
    from archspec.backends.count.torch_layout_mesh import covered, mesh_local_params

    fsdp_beside_tp = dims["dp_shard"] > 1 and dims["tp"] > 1
    if not covered(dims) and not fsdp_beside_tp:
        return
    attn = attention_that_runs(ir, device)
    try:
        peaks = rank_peaks(
            ir, dims, batch, seq, device, attn, sequence_parallel,
            mixed_precision=mixed_precision,
        )  # fmt: skip
    except SpecError:  # a model count does not lay out this way: the run stands, unpredicted
        return
    if dims["ep"] > 1:
        balanced = peaks
        loads = _expert_loads(ir, ranks, batch, seq)
        peaks = rank_peaks(ir, dims, batch, seq, device, attn, sequence_parallel, loads)
        for r, peak in zip(ranks, balanced, strict=True):
            r["predicted_saved_tensor_bytes_balanced"] = peak.activations
            r["predicted_peak_bytes_balanced"] = peak.peak
    for r, peak in zip(ranks, peaks, strict=True):
        if dims["cp"] > 1 or dims["ep"] > 1:
            r["predicted_param_bytes"] = 4 * mesh_local_params(ir, dims, r["rank"])
            r["predicted_saved_tensor_bytes"] = peak.activations
        r["predicted_peak_bytes"] = peak.peak
        r["predicted_peak_moment"] = peak.moment


def _expert_loads(ir: IR, ranks: list[dict[str, Any]], batch: int, seq: int) -> list:
    """Each rank's `ExpertLoad` (`rank_activations`): the rows its experts received in the
    measured step, per mixture layer, against balanced routing's; the step's ratio and the
    balanced rows also recorded in the rank's figures."""
    from archspec.backends.count.rank_activations import balanced_routed_rows, expert_load

    balanced = balanced_routed_rows(ir, batch * seq)
    loads = []
    for r in ranks:
        load = expert_load(ir, batch * seq, r["expert_rows_by_layer"])
        r["expert_rows_balanced"] = balanced
        r["expert_load"] = float(load.step)
        loads.append(load)
    return loads


def _why(folder: str, stderr: str) -> str:
    """Why a run failed: the first failing rank's own error (distributed_rank.py records it;
    the others usually fail only because it left the collectives), else torchrun's last
    error line."""
    failed = sorted(Path(folder).glob("rank*.error"), key=lambda p: p.stat().st_mtime_ns)
    if failed:
        rank = failed[0].name.removeprefix("rank").removesuffix(".error")
        return f"rank {rank}: {failed[0].read_text(errors='replace').strip()}"
    cause = _root_cause(stderr)
    if cause:
        return cause
    errors = [line for line in stderr.splitlines() if "Error" in line]
    return errors[-1] if errors else stderr.strip()[-500:]


def _root_cause(stderr: str) -> str | None:
    """A rank that died without a Python exception (a signal, a native abort in gloo): the
    "Root Cause" block of torchrun's summary names its rank, exit code and signal."""
    block = stderr.partition("Root Cause")[2]
    fields = dict(re.findall(r"^\s*(rank|exitcode|traceback)\s*:\s*(.+?)\s*$", block, re.M))
    if "rank" not in fields or "exitcode" not in fields:
        return None
    rank, code = fields["rank"].split()[0], fields["exitcode"].split()[0]
    how = fields.get("traceback", "")
    detail = "" if how in ("", "<N/A>") or how.startswith("To enable traceback") else f": {how}"
    # A C++ exception that ended the process (gloo's, say) is printed as "what(): ...".
    native = [line.strip() for line in stderr.splitlines() if "what():" in line]
    return f"rank {rank} exited with code {code}{detail}" + (f" ({native[-1]})" if native else "")


def run_distributed(
    ir: IR, nproc: int, tp: int, zero: int, s: Any, pipeline: dict[str, Any] | None = None,
    cp: int = 1, ep: int = 1, mixed_precision: bool = False, loss_parallel: bool = False,
    sequence_parallel: bool = False, dp_replicate: int = 1,
) -> dict[str, Any]:  # fmt: skip
    """`bench --nproc`: fp32 training under torchrun on this machine (on the CPU unless
    `s.device` says cuda), with the bench's Settings `s` (`s.seq` positions, default 512 or the
    model's context if shorter). Every guard of the single-process bench runs first.
    `pipeline`: {"pp", "stage_layers", "schedule"} as the command gave them, for `--pp`.
    `mixed_precision`, `sequence_parallel`, `loss_parallel`: parallelize's options
    (mp_policy="bf16"). `dp_replicate`: HSDP's replicas of the dp_shard groups."""
    import torch

    from archspec.backends.torchgen import generate_source, load_generated
    from archspec.bench.guards import (
        check_fits,
        check_options,
        check_settings,
        device_of,
        least_bytes,
    )
    from archspec.bench.pipeline import check_pipeline, stage_predictions
    from archspec.bench.training_data import reference_losses

    check_options(s)
    on = device_of(s.device or "cpu")
    device = on.type
    _, seq = check_settings(ir, s, on)
    batch = s.batch
    gpus = torch.cuda.device_count()
    pp = pipeline["pp"] if pipeline is not None else 1
    dims = check_layout(nproc, tp, zero, device, gpus, cp, ep, pp, dp_replicate)
    check_options_of_parallelize(ir, dims, mixed_precision, loss_parallel, sequence_parallel)
    stage_layers = schedule = None
    stages: list = []
    if pp > 1:
        stage_layers, schedule = check_pipeline(ir, dims, **pipeline)
        if pp == nproc:  # count lays out a pipeline alone, not beside tp or dp_shard
            stages = stage_predictions(ir, pp, stage_layers, schedule, batch, seq, device)
    check_heads(ir, tp)
    check_model_layout(ir, dims, seq)
    # Refuses what cannot be split. count lays out neither a pipeline's mesh as one figure
    # (each stage is predicted on its own) nor cp or ep's activations yet.
    laid_out = pp == 1 and cp == 1 and ep == 1
    prediction = None
    if laid_out:
        prediction = predicted(
            ir, nproc, tp, zero, batch, seq, device, mixed_precision, loss_parallel,
            sequence_parallel, dp_replicate,
        )  # fmt: skip
    if not s.force and prediction is not None:
        # Per device, with what any step holds besides; CPU processes share the machine's RAM.
        vocab, width = ir.value(ir.root.vocab_size), ir.value(ir.root.d_model)
        each = prediction["total"] + least_bytes(vocab, width, batch, seq, 4)
        check_fits(ir.name, each * (nproc if device == "cpu" else 1), on, batch)
    settings = {
        "device": device, "tp": tp, "mesh": dims, "batch": batch, "seq": seq, "steps": s.steps,
        "warmup": s.warmup, "seed": s.seed, "vocab": ir.value(ir.root.vocab_size),
        "encoder_decoder": ir.root.layout == "encoder-decoder", "threads": s.threads,
        "pp": pp, "stage_layers": stage_layers, "schedule": schedule,
        "mixed_precision": mixed_precision, "loss_parallel": loss_parallel,
        "sequence_parallel": sequence_parallel,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder, "model.py")
        source.write_text(generate_source(ir))
        settings_path = Path(folder, "settings.json")
        settings_path.write_text(json.dumps(settings))
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={nproc}", "-m", "archspec.bench.distributed_rank",
            str(source), str(settings_path),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            why = _why(folder, done.stderr)
            raise SpecError(f"torchrun failed (exit {done.returncode}): {why}")
        ranks = [json.loads(Path(folder, f"rank{r}.json").read_text()) for r in range(nproc)]
        # The model alone on this process, over the same steps and sequences: every data rank's
        # (dp_replicate × dp_shard × ep) batch side by side.
        steps = s.warmup + 1 + s.steps
        module = load_generated(source.read_text(), folder)
        reference = reference_losses(module, settings, data_ranks(dims), steps)
    for r, predicted_bytes in zip(ranks, stages, strict=False):
        r["predicted_bytes"] = predicted_bytes  # a pipeline rank's own stage
        if "peak" in predicted_bytes:
            r["predicted_peak_bytes"] = predicted_bytes["peak"]
    if pp > 1 and pp < nproc and tp == 1:
        # Under dp_shard alone each data rank runs the pipeline on its own rows: its stages'
        # saved tensors are the pipeline's alone (FSDP2's gathered weights are not saved
        # tensors). Its parameters (FSDP2's shards of each stage) and peak: not predicted.
        alone = stage_predictions(ir, pp, stage_layers, schedule, batch, seq, device)
        for r in ranks:
            r["predicted_saved_tensor_bytes"] = alone[r["stages"][0]]["activations"]
    if pp == 1:
        if not loss_parallel:  # not in rank_peak's moments
            _rank_predictions(
                ir, dims, ranks, batch, seq, device, sequence_parallel, mixed_precision
            )
    for r in ranks:
        r["step_time_s"] = statistics.median(r["step_times_s"])
        r["tokens_per_s"] = batch * seq / r["step_time_s"]
    return {
        "name": ir.name, "overrides": list(ir.identity.overrides), "nproc": nproc, "tp": tp,
        "dp": dims["dp_shard"], "dp_replicate": dp_replicate, "cp": cp, "ep": ep, "mesh": dims,
        "zero": zero,
        "device": device, "batch": batch, "seq": seq,
        "mixed_precision": mixed_precision, "loss_parallel": loss_parallel,
        "sequence_parallel": sequence_parallel, "predicted_bytes": prediction, "ranks": ranks,
        "reference_losses": reference,
        **({"pp": pp, "stage_layers": stage_layers, "schedule": schedule} if pp > 1 else {}),
    }  # fmt: skip
