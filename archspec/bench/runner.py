"""`run_bench`: build the generated model in-process, warm it up, time it, measure its memory,
and optionally race it against the transformers implementation.

The order of a run:
1. generate, import and build the model on the device (seeded), put it in the mode's state,
   compile it if asked, and warm it up (the first steps pay for compilation, autotuning and
   the allocator growing its pools);
2. one untimed step for the peak memory, before anything else is on the device;
3. with `vs_hf`: build the transformers model, copy its weights into ours, check that both
   compute the same logits, warm it up and measure its memory the same way;
4. the timed steps. With `vs_hf` the two models alternate step by step (ABBA order), so a
   slow spell of the machine (another process, clock throttling) hits both alike.
"""

from __future__ import annotations

import contextlib
import platform
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from archspec.backends.count.report import has_moe
from archspec.bench import devices, memory, steps
from archspec.bench.analysis import predict
from archspec.bench.guards import (
    check_fits,
    check_options,
    check_settings,
    device_of,
    least_bytes,
)
from archspec.bench.timing import Times, synchronize, time_step
from archspec.errors import SpecError
from archspec.ir.nodes import IR

Progress = Callable[[str, int, int], None]  # (phase, steps done, steps in the phase)


@dataclass(frozen=True)
class Settings:
    device: str | None = None  # default: cuda when available, else cpu
    dtype: str | None = None  # default: bf16 on cuda, fp32 on cpu
    batch: int = 1
    seq: int | None = None  # default: 512, or less when the model is built for less
    mode: str = "train"
    compile: bool = False
    steps: int = 10
    warmup: int = 3
    new_tokens: int = 32  # generate mode
    vs_hf: bool = False
    seed: int = 0
    peak_tflops: float | None = None  # overrides the device table
    threads: int | None = None  # CPU threads for torch (default: torch's choice)
    force: bool = False  # run even when the predicted memory exceeds the device's
    hf_first: bool = False  # with vs_hf: build transformers' model before ours
    # torch.compile's mode (e.g. "reduce-overhead": CUDA graphs) and backend, for both sides.
    compile_mode: str | None = None
    compile_backend: str = "inductor"


def _fits_beside_hf(ir: IR, hf_data, s: Settings, device, dtype: str, needed: int) -> int:
    """Refuse a --vs-hf run whose two models the device cannot hold together; the memory
    both need. transformers' model is sized on the meta device (hf_side.resident_bytes): its
    buffers may be far larger than ours (GPTBigCode's max_position_embeddings² mask)."""
    from archspec.bench import hf_side

    hf = hf_side.resident_bytes(hf_data, s.mode, dtype)
    held = "parameters and AdamW moments" if s.mode == "train" else "parameters"
    largest = f", the largest {hf.largest_buffer}" if hf.largest_buffer else ""
    beside = (
        f" with transformers' model beside it (--vs-hf: {hf.params / 2**30:,.2f} GiB of "
        f"{held} and {hf.buffers / 2**30:,.2f} GiB of buffers{largest})"
    )
    needed += hf.params + hf.buffers
    check_fits(ir.name, needed, device, s.batch, beside)
    return needed


def _generated_model(ir: IR, device: torch.device, folder: str) -> torch.nn.Module:
    from archspec.backends.torchgen import generate_source, load_generated
    from archspec.backends.torchgen.features import UnsupportedIR

    try:
        source = generate_source(ir)
    except UnsupportedIR as exc:
        raise SpecError(f"cannot generate PyTorch code for '{ir.name}': {exc}") from exc
    module = load_generated(source, folder)
    with torch.device(device):
        return module.Model(module.Config())


@contextlib.contextmanager
def _allocating(what: str, device: torch.device, s: Settings, predicted: int) -> Iterator[None]:
    """Building a model whose weights the device cannot hold (the fit check was skipped with
    --force, or the prediction fell short) ends in one message, not the allocator's traceback:
    torch raises a RuntimeError on CPU and torch.cuda.OutOfMemoryError (one) on a GPU."""
    try:
        yield
    except RuntimeError as exc:
        text = str(exc)
        if not (isinstance(exc, torch.cuda.OutOfMemoryError) or "can't allocate memory" in text):
            raise
        forced = "; --force skipped the memory check" if s.force else ""
        raise SpecError(
            f"cannot build {what} on {device.type}: the allocator could not allocate "
            f"{_asked(text)}{forced}",
            hint=f"the run's predicted memory is about {predicted / 2**30:,.1f} GiB; use "
            "--set n_layers=N (or smaller sizes)",
        ) from None


def _asked(allocator_message: str) -> str:
    """The size the failed allocation asked for, as torch's message gives it: a count of
    bytes on CPU, a size with its unit on a GPU ("Tried to allocate 2.00 GiB")."""
    found = re.search(r"allocate (\d+) bytes", allocator_message)
    if found:
        n = int(found.group(1))
        return f"{n:,} bytes ({n / 2**30:,.1f} GiB) for one tensor"
    found = re.search(r"allocate (\d+(?:\.\d+)? [KMGTP]?i?B)", allocator_message)
    return f"{found.group(1)} for one tensor" if found else "one of its tensors"


def _measure_memory(
    side: steps.Side, step: Callable[[], None], device: torch.device, base: int
) -> int:
    """Peak bytes during one step: allocated on the GPU beyond `base` (what was there before
    this side existed), or on CPU the side's own tensors plus what the step creates."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    resident = memory.resident_tensors(side.model, side.optimizer, side.inputs, side.targets)
    with memory.LiveTensors(resident) as tracker:
        step()
    return tracker.peak


def _warm_up(step: Callable[[], None], n: int, label: str, progress: Progress | None) -> None:
    for i in range(n):
        step()
        if progress:
            progress(label, i + 1, n)


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return _cpu_name()


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _peak(s: Settings, device: torch.device, dtype: str) -> float | None:
    if s.peak_tflops is not None:
        return s.peak_tflops * 1e12
    if device.type != "cuda":
        return None  # no MFU on CPU: there is no one dense peak to measure against
    tf32 = torch.get_float32_matmul_precision() != "highest"
    return devices.peak_flops(_device_name(device), dtype, tf32=tf32)


def run_bench(
    ir: IR, s: Settings, progress: Progress | None = None, hf_config: dict | None = None
) -> dict[str, Any]:
    """Benchmark the generated model of `ir`; the result is plain data for `--json`."""
    check_options(s)
    threads = torch.get_num_threads()
    if s.threads is not None:
        # On a machine shared with other work, fewer threads than cores can be much faster:
        # OpenMP threads that wait for a descheduled sibling stall every parallel op.
        torch.set_num_threads(s.threads)
    try:
        # The generated MoE routes tokens with torch.where, whose output size depends on the
        # data; with the first two switches dynamo keeps it in the graph (sizes become
        # symbolic) instead of breaking the graph at every expert. Both models' modules share
        # one code object (nn.Module._call_impl), and generation recompiles it for a few
        # shapes, so the recompile limit is raised from 8 to keep everything compiled.
        # Both implementations run with the same switches.
        with torch._dynamo.config.patch(
            capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True, recompile_limit=64
        ):
            return _run(ir, s, progress, hf_config)
    finally:
        torch.set_num_threads(threads)


def _compile(
    model: torch.nn.Module, mode: str, compile_mode: str | None = None, backend: str = "inductor"
) -> None:
    """torch.compile in place. The generated `generate` calls the stacks and the head itself,
    not the model's forward, so in generate mode the stacks are what is compiled. Their
    shapes are fixed (the KV cache is read whole at every step), so they compile with
    dynamic=False: one graph for the prefill and one for every decode step (two for an
    encoder-decoder's decoder: its first step also projects the encoder output)."""
    options = {"mode": compile_mode, "backend": backend}
    if mode == "generate":
        for name in ("encoder", "decoder"):
            stack = getattr(model, name, None)
            if isinstance(stack, torch.nn.Module):
                stack.compile(dynamic=False, **options)
    else:
        model.compile(**options)


def _run(ir: IR, s: Settings, progress: Progress | None, hf_config: dict | None) -> dict[str, Any]:
    device = device_of(s.device)
    dtype, seq = check_settings(ir, s, device)
    pred = predict(ir, s.mode, s.batch, seq, dtype, s.new_tokens, device.type)
    hf_data = hf_config
    if s.vs_hf and hf_data is None:
        raise SpecError("--vs-hf needs the spec's transformers config (archspec.hf.hf_config_dict)")
    element = 4 if dtype == "fp32" else 2
    vocab, width = ir.value(ir.root.vocab_size), ir.value(ir.root.d_model)
    needed = pred.memory_bytes + least_bytes(vocab, width, s.batch, seq, element)
    if not s.force:
        check_fits(ir.name, needed, device, s.batch)  # before allocating
    if s.vs_hf and not s.force:
        needed = _fits_beside_hf(ir, hf_data, s, device, dtype, needed)
    hf_built = None
    if s.hf_first and device.type == "cuda":
        # On a GPU, transformers' memory is what was allocated after ours was built.
        raise SpecError("--hf-first is for CPU runs: on a GPU transformers' model is built "
                        "second, so that its memory is measured without ours")  # fmt: skip
    if s.hf_first:
        # Which model is built first matters on CPU: in benchmarks/same_model.py's runs the
        # first of two identical models took 1-1.5% longer, on average, than the second.
        # Runs that alternate the order cancel that.
        with _allocating("transformers' model", device, s, needed):
            hf_built = _build_hf(hf_data, s, device)
    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    inputs, targets = steps.make_inputs(ir, s.mode, s.batch, seq, device, s.seed)
    with tempfile.TemporaryDirectory(prefix="archspec-bench-") as folder:
        torch.manual_seed(s.seed)
        with _allocating(f"the generated model of '{ir.name}'", device, s, needed):
            model = _generated_model(ir, device, folder)
        ours = steps.Side("ours", model, inputs, targets)
        steps.prepare(ours, s.mode, device, dtype)
        if s.compile:
            _compile(ours.model, s.mode, s.compile_mode, s.compile_backend)
        ours_step = steps.make_step(ours, s.mode, device, dtype, vocab, s.new_tokens)
        _warm_up(ours_step, s.warmup, "warm-up", progress)
        ours_memory = _measure_memory(ours, ours_step, device, base)

        hf_step = hf_memory = None
        hf_info: dict[str, Any] = {}
        if s.vs_hf:
            if hf_built is None:
                with _allocating("transformers' model", device, s, needed):
                    hf_built = _build_hf(hf_data, s, device)
            hf_step, hf_memory, hf_info = _hf_side(
                ir, hf_built, s, device, dtype, ours, inputs, targets, progress
            )
        ours_times: list[float] = []
        hf_times: list[float] = []
        runs = [(ours_step, ours_times)]
        if hf_step is not None:
            runs.append((hf_step, hf_times))
        for i in range(s.steps):
            order = runs if i % 2 == 0 else runs[::-1]
            for step, times in order:
                times.append(time_step(step, device))
            if progress:
                progress("timing", i + 1, s.steps)
        synchronize(device)

    peak = _peak(s, device, dtype)
    result: dict[str, Any] = {
        "name": ir.name,
        "overrides": list(ir.identity.overrides),
        "mode": s.mode,
        "device": str(device),
        "device_name": _device_name(device),
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "torch": torch.__version__,
        "dtype": dtype,
        "batch": s.batch,
        "seq": seq,
        "new_tokens": s.new_tokens if s.mode == "generate" else None,
        "compile": s.compile,
        "warmup": s.warmup,
        "steps": s.steps,
        "tokens_per_step": pred.tokens,
        "flops_per_step": pred.flops,
        "peak_flops_per_s": peak,
        **_figures("", Times(tuple(ours_times)), pred.tokens, pred.flops, peak),
        "peak_memory_bytes": ours_memory,
        "predicted_memory_bytes": pred.memory_bytes,
        "memory_measured_by": (
            "torch.cuda.max_memory_allocated" if device.type == "cuda" else "tensor tracker"
        ),
    }
    if s.vs_hf:
        assert hf_data is not None
        hf_figures = _figures("hf_", Times(tuple(hf_times)), pred.tokens, pred.flops, peak)
        result |= {
            "hf_class": hf_data["architectures"][0],
            "built_first": "hf" if s.hf_first else "ours",
            **hf_info,
            **hf_figures,
            "hf_peak_memory_bytes": hf_memory,
            # > 1: the generated model is faster.
            "speedup": result["tokens_per_s"] / hf_figures["hf_tokens_per_s"],
            **speedup_spread(ours_times, hf_times),
        }
    return result


def speedup_spread(ours: Sequence[float], hf: Sequence[float]) -> dict[str, Any]:
    """The speedup's range over the steps (slowest against fastest, both ways) and whether
    the difference is within the noise: it is when the two sides' step times overlap (one
    of transformers' steps as fast as one of ours, one of ours as slow as one of theirs)."""
    low, high = min(hf) / max(ours), max(hf) / min(ours)
    overlap = min(ours) <= max(hf) and min(hf) <= max(ours)
    return {"speedup_range": [low, high], "speedup_within_noise": overlap}


def _figures(prefix: str, t: Times, tokens: int, flops: int, peak: float | None) -> dict:
    flops_per_s = flops / t.median
    return {
        f"{prefix}step_time_s": t.median,
        f"{prefix}step_time_min_s": t.min,
        f"{prefix}step_time_max_s": t.max,
        f"{prefix}step_times_s": list(t.steps),
        f"{prefix}tokens_per_s": tokens / t.median,
        f"{prefix}flops_per_s": flops_per_s,
        f"{prefix}mfu": flops_per_s / peak if peak else None,
    }


def _build_hf(hf_data, s, device) -> tuple[torch.nn.Module, str, int]:
    """The transformers model (seeded), its attention implementation, and the device memory
    allocated before it was built (its memory is measured from there)."""
    from archspec.bench import hf_side

    base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
    torch.manual_seed(s.seed)
    model, attn = hf_side.build_hf_model(hf_data, device)
    return model, attn, base


def _hf_side(ir, hf_built, s, device, dtype, ours, inputs, targets, progress):
    """Check, prepare and warm up the transformers side; measure its memory."""
    import transformers

    from archspec.bench import hf_side

    model, attn, base = hf_built
    hf = steps.Side("hf", model, inputs, targets)
    if hf_side.takes_use_cache(model):
        hf.no_cache = {"use_cache": False}
    if s.mode == "generate":
        hf.generation = model.generation_config = hf_side.generation_config(ir, s.new_tokens)
    hf_side.copy_weights(ours.model, model, ir)
    steps.prepare(hf, s.mode, device, dtype)
    diff = _agreement(ours, hf, inputs, device, dtype)
    if s.compile:
        model.compile(mode=s.compile_mode, backend=s.compile_backend)
    step = steps.make_step(hf, s.mode, device, dtype, ir.value(ir.root.vocab_size), s.new_tokens)
    _warm_up(step, s.warmup, "warm-up transformers", progress)
    peak = _measure_memory(hf, step, device, base)
    info = {
        "transformers": transformers.__version__,
        "hf_attn_implementation": attn,
        # MoE classes: transformers' expert kernel (grouped_mm by default, eager loop else).
        "hf_experts_implementation": (
            getattr(model.config, "_experts_implementation", None) if has_moe(ir) else None
        ),
        "hf_max_abs_diff": diff,
    }
    return step, peak, info


def _agreement(ours, hf, inputs, device, dtype) -> float:
    """The largest difference between the two models' outputs on a slice of the inputs: both
    have the same weights, so it is rounding (about 1e-5 in fp32, 1e-2 in bf16)."""
    piece = {k: v[:1, :16] for k, v in inputs.items()}
    autocast = torch.autocast(device.type, dtype=steps.DTYPES[dtype], enabled=dtype != "fp32")
    # Eager, so that a compiled stack is not compiled again for this one shape (set_stance
    # is torch 2.6 and later; before it, the check compiles once more).
    set_stance = getattr(torch.compiler, "set_stance", None)
    stance = set_stance("force_eager") if set_stance else contextlib.nullcontext()
    # In evaluation mode: dropout (which both sides run in training, each with its own random
    # draws) would make the same function look different.
    modes = [(m, m.training) for m in (ours.model, hf.model)]
    for model, _ in modes:
        model.eval()
    try:
        with torch.inference_mode(), autocast, stance:
            a = steps.output_of(ours)(piece).float()
            b = steps.output_of(hf)(piece).float()
    finally:
        for model, training in modes:
            model.train(training)
    return (a - b).abs().max().item()
