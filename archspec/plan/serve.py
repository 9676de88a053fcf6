"""Serving: the prefill of a batch of prompts, then one token at a time against the KV cache.

The prefill is a forward over the prompts, every op on the roofline (compute-bound for long
prompts). A decode step runs the same layers for one position per sequence: each weight is read
once per step for the whole batch (a mixture of experts reads the experts its tokens touch) and
each sequence's keys and values once, so at small batches it is bound by memory bandwidth (the
op costs of the decode pass carry those bytes: a linear's weight, an attention's cache).
Tensor parallelism splits both, and adds two all-reduces per layer, which for a single position
cost mostly their latency. A decode step's time is linear in the cached positions, so the mean
over the generated tokens is the step at the middle one.

Weight-only quantization (int8, int4 in groups) stores and reads each linear's weight in fewer
bytes (int4 adds a 16-bit scale and zero point per group; the head too where the engine
quantizes it, `ServeEngine.quantizes_head`) and computes in bf16; fp8 stores the
weights in one byte and runs the matmuls at the fp8 peak (TensorRT-LLM's FP8: activations cast
to fp8 at each matmul, kept 16-bit between kernels). A quantized KV cache (fp8, int8) stores
and reads keys and values in one byte. The engine (serve_engine.py) says what fraction of the
bandwidth its kernels reach at that precision, how much of a grouped-query cache its decode
attention loads again for each further query head of a key/value head, and what it adds per
layer, per all-reduce and per request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import sympy as sp

from archspec.backends.count.layout import Parallelism
from archspec.backends.count.memory import COMPUTE_BYTES, memory_figures
from archspec.backends.count.passes import KV_LEN, S_DEC, B, S
from archspec.errors import SpecError, did_you_mean
from archspec.ir.nodes import IR
from archspec.plan.collectives import Link, all_reduce, group_link
from archspec.plan.efficiency import CALIBRATED, Efficiency
from archspec.plan.hardware import System
from archspec.plan.opcost import PassCosts, decode_costs, pass_costs
from archspec.plan.roofline import Roofline
from archspec.plan.serve_engine import IDEAL, ServeEngine

ONE_BYTE_WEIGHTS = ("int8", "int4", "fp8")
WEIGHT_ONLY = ("int8", "int4")  # stored small, dequantized to 16 bits by the engine's kernels
GROUP_BYTES = 4  # a 16-bit scale and a 16-bit zero point per int4 group (GPTQ, AWQ, gpt-fast)
KV_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


@dataclass(frozen=True)
class Precision:
    """How a served model stores its weights and KV cache."""

    dtype: str = "bf16"  # the weights' (and, at fp8, the matmuls' inputs')
    group: int | None = None  # int4: weights per scale and zero point
    kv: str | None = None  # the KV cache's; None: the 16-bit activations'

    def __post_init__(self) -> None:
        if self.dtype == "int4" and self.group is None:
            raise SpecError("int4 weights need a group size (--group: 32, 64, 128, ...)")
        if self.dtype != "int4" and self.group is not None:
            raise SpecError(f"--group {self.group} is for int4 weights; --dtype is {self.dtype}")
        if self.kv is not None and self.kv not in KV_BYTES:
            raise SpecError(f"--kv-dtype takes {', '.join(KV_BYTES)} (got '{self.kv}')",
                            hint=did_you_mean(self.kv, KV_BYTES))  # fmt: skip

    @property
    def compute(self) -> str:
        """The matmuls' dtype: weight-only formats dequantize to bf16."""
        return self.dtype if self.dtype in ("fp32", "bf16", "fp16", "fp8") else "bf16"

    @property
    def weight_bytes(self) -> float:
        if self.dtype == "int4":
            assert self.group is not None
            return 0.5 + GROUP_BYTES / self.group
        return 1.0 if self.dtype in ONE_BYTE_WEIGHTS else float(COMPUTE_BYTES[self.dtype])

    @property
    def kv_bytes(self) -> float:
        return KV_BYTES[self.kv] if self.kv else float(COMPUTE_BYTES[self.dtype])


@dataclass(frozen=True)
class ServePrediction:
    prefill_s: float  # time to first token: the prefill, plus the engine's per-request overhead
    decode_token_s: float  # one decode step (a token for every sequence), mean over generation
    batch: int  # sequences each replica decodes together
    new_tokens: int
    replicas: int  # tensor-parallel groups, each serving its own batch
    tp: int
    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float
    decode_layers: int = 0  # the layers a decode step runs

    @property
    def generate_s(self) -> float:
        """One whole request (or static batch): the prefill gives the first token, then
        new_tokens - 1 decode steps."""
        return self.prefill_s + (self.new_tokens - 1) * self.decode_token_s

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second in steady decoding, all replicas."""
        return self.replicas * self.batch / self.decode_token_s

    @property
    def batch_tokens_per_s(self) -> float:
        """A static batch's throughput, all replicas: its new tokens over generate_s, the
        prefill included (TensorRT-LLM's gptSessionBenchmark's tokens/s; gpt-fast's at batch 1)."""
        return self.replicas * self.batch * self.new_tokens / self.generate_s

    @property
    def batch_tokens_per_s_per_gpu(self) -> float:
        return self.batch_tokens_per_s / (self.replicas * self.tp)

    @property
    def fits(self) -> bool:
        return self.weights_bytes + self.kv_cache_bytes <= self.capacity_bytes


class OpParts(NamedTuple):
    """One op of a pass as numbers an engine turns into seconds."""

    n: int  # how many layers run it
    compute: float  # seconds at the matmul rate
    moved: float  # bytes one rank moves, its weights counted 16-bit
    weights: float  # its weight elements (one rank's)
    kv: float  # its key and value elements
    # The key and value elements a decode step's attention over a grouped-query cache loads
    # again if each query head loads its key/value head's cache (the group's other query
    # heads': (group - 1) × the cache).
    rereads: float
    part: str  # "head", "expert" (a routed expert's linear) or ""
    in_channels: float = 0.0  # a linear's input channels on one rank (0: not a linear)


@dataclass(frozen=True)
class PassParts:
    """One pass as numbers an engine turns into seconds: its ops, its layers and all-reduces."""

    ops: tuple[OpParts, ...]
    layers: int
    allreduces: int
    allreduce_bytes_s: float  # the all-reduces' bytes over the link, all of them
    allreduce_ring_s: float  # their ring latency from the catalogue (the ideal engine's)

    def seconds(self, bandwidth: float, precision: Precision, compute_bytes: int,
                engine: ServeEngine, fp16_accumulate: float = 1.0, weights_read: bool = True
                ) -> float:  # fmt: skip
        """The ops counted `compute_bytes` per element; `precision` stores weights and the
        cache in its own. `fp16_accumulate`: how much faster than timed the matmuls run, where
        the engine accumulates them in fp16 on a part that runs that faster (serve_parts).
        `weights_read=False`: the pass's work inside a forward that another pass's tokens
        already run (ServeParts.mixed_step_s): its ops read no weights, and its all-reduces,
        layers and host time are that forward's, so only their bytes are added."""
        w = precision.weight_bytes - compute_bytes
        c = precision.kv_bytes - compute_bytes
        speed = engine.compute_scale(precision.dtype) * fp16_accumulate
        memory = 0.0
        reread = engine.grouped_cache_reread * precision.kv_bytes
        for op in self.ops:
            quantized = not (op.part == "head" and not engine.quantizes_head)
            stored = w if quantized else 0.0
            reached = bandwidth * (engine.expert_efficiency if op.part == "expert" else 1.0)
            read = op.moved + stored * op.weights + c * op.kv + reread * op.rereads
            if not weights_read:
                read -= (compute_bytes + stored) * op.weights
            if weights_read and quantized and precision.dtype in WEIGHT_ONLY:  # unused channels
                padding = engine.gemv_padding(op.in_channels) - 1
                read += padding * precision.weight_bytes * op.weights
            memory += op.n * max(op.compute / speed, read / reached)
        if not weights_read:  # inside a forward that reads the weights anyway
            return memory + self.allreduce_bytes_s
        if engine.allreduce_us is None:
            latency = self.allreduce_ring_s
        else:
            latency = self.allreduces * engine.allreduce_us * 1e-6
        overhead = self.layers * engine.layer_overhead_us * 1e-6
        device = memory + self.allreduce_bytes_s + latency + overhead
        # An eager engine's host issues the kernels as the device runs them: the slower wins.
        return max(device, self.layers * engine.host_layer_us * 1e-6)


@dataclass(frozen=True)
class ServeParts:
    """A serving run as numbers, before an engine is chosen (validation fits engines on them)."""

    prefill: PassParts
    decode: PassParts  # the mean decode step
    bandwidth: float  # peak, bytes/s
    compute_bytes: int
    weights_bytes: float  # memory, per device
    kv_cache_bytes: float
    memory_bytes: float  # the device's
    tp: int = 1
    # The part's fp16-accumulate tensor peak over the one its matmuls were timed at, where the
    # engine accumulates its 16-bit matmuls in fp16 (1 where not, or the part lists one rate).
    fp16_accumulate: float = 1.0
    batch: int = 1  # sequences a pass runs (one tensor-parallel group's)

    def seconds(self, engine: ServeEngine, precision: Precision) -> tuple[float, float]:
        """(prefill with the request overhead, one mean decode step); each with the host's
        time for the batch's sequences, where the engine spends some (`sequence_us`)."""
        bandwidth = self.bandwidth * engine.efficiency(precision.dtype)
        prefill = self.prefill.seconds(bandwidth, precision, self.compute_bytes, engine,
                                       self.fp16_accumulate)  # fmt: skip
        decode = self.decode.seconds(bandwidth, precision, self.compute_bytes, engine,
                                     self.fp16_accumulate)  # fmt: skip
        host = self.batch * engine.sequence_us * 1e-6
        return prefill + host + engine.request_overhead_ms * 1e-3, decode + host

    def mixed_step_s(self, engine: ServeEngine, precision: Precision, new_tokens: int) -> float:
        """One step of continuous batching at steady state: the batch's decode step, with the
        prompts of the batch / new_tokens requests that join each step on average run in the
        same forward (in-flight batching: TensorRT-LLM's executor, vLLM's chunked prefill),
        which reads the weights once for both; each joining request adds the engine's
        per-request time. The prefill here is the batch's prompts, so a step carries 1 /
        new_tokens of it."""
        decode = self.seconds(engine, precision)[1]
        return decode + self.batch / new_tokens * self.joining_prompt_s(engine, precision)

    def joining_prompt_s(self, engine: ServeEngine, precision: Precision) -> float:
        """What one request joining a step adds to it: its prompt's work beyond the weights'
        read (the prefill here is the batch's prompts) and the engine's per-request time."""
        bandwidth = self.bandwidth * engine.efficiency(precision.dtype)
        prompts = self.prefill.seconds(bandwidth, precision, self.compute_bytes, engine,
                                       self.fp16_accumulate, weights_read=False)  # fmt: skip
        return prompts / self.batch + engine.request_overhead_ms * 1e-3


def _pass_parts(costs: PassCosts, values, tp: int, peak: float, eff: Efficiency,
                allreduce: tuple[float, float, int], after_values=None, decoding: bool = False
                ) -> PassParts:  # fmt: skip
    """`after_values`: the lengths the ops after the blocks (final norm, head) run at, when
    not `values`'. `decoding`: a decode step, whose attention over a grouped cache (more query
    heads than key/value heads) counts the cache its group's other query heads may load
    again (a prefill's attention is compute-bound)."""
    compute = Roofline(peak, math.inf, eff)  # compute time only
    moved = Roofline(math.inf, 1.0, eff)  # bytes one rank moves, as "seconds" at 1 byte/s
    ops = []
    # A run's time times its layers, each op at its lengths.
    runs = [(1, costs.before, values), *((n, c, values) for n, c in costs.layers),
            (1, costs.after, after_values or values)]  # fmt: skip
    for n, cost, values in ((n, cost, v) for n, each, v in runs for cost in each):
        if cost.label == "loss":
            continue  # serving computes no loss
        shape = tuple(float(sp.sympify(x).xreplace(values)) for x in cost.shape or ())
        item = (cost, float(sp.sympify(cost.flops).xreplace(values)),
                float(sp.sympify(cost.bytes).xreplace(values)), shape)  # fmt: skip
        ways = tp if cost.tp != "whole" else 1
        weights = float(sp.sympify(cost.weights).xreplace(values)) / ways
        kv = float(sp.sympify(cost.kv).xreplace(values)) / ways
        group = float(sp.sympify(cost.kv_group).xreplace(values))
        rereads = (group - 1) * kv if decoding else 0.0
        part = "head" if cost.label == "head.linear" else "expert" if cost.expert else ""
        # A row-parallel linear's rank holds its share of the input channels.
        in_channels = shape[2] / (ways if cost.tp == "row" else 1) if weights and shape else 0.0
        ops.append(OpParts(n, compute.op_time(item, tp), moved.op_time(item, tp), weights, kv,
                           rereads, part, in_channels))  # fmt: skip
    layers = sum(n for n, _ in costs.layers)
    bytes_s, ring_s, calls = allreduce
    return PassParts(tuple(ops), layers, calls * layers, bytes_s * layers, ring_s * layers)


def check_counts(tp: int, batch: int, prompt: int, new_tokens: int) -> None:
    for name, value in (("tp", tp), ("batch", batch), ("prompt", prompt),
                        ("new-tokens", new_tokens)):  # fmt: skip
        if value < 1:
            raise SpecError(f"--{name} must be at least 1")


def serve_parts(ir: IR, system: System, batch: int, prompt: int, new_tokens: int, tp: int = 1,
                precision: Precision = Precision(), eff: Efficiency = CALIBRATED,
                kv_cache: bool = True, fp16_accumulation: bool = False) -> ServeParts:  # fmt: skip
    """`kv_cache=False`: a generate loop that never hands the model its cache, so every step
    is a forward over the whole sequence so far, every position's logits included (what
    transformers' generate did with Falcon's Hub code, modelling_RW.py, whose
    `prepare_inputs_for_generation` takes the cache as `past`: huggingface/transformers#24701).
    `fp16_accumulation`: the engine accumulates its 16-bit matmuls in fp16
    (ServeEngine.fp16_accumulation), at the part's rate for that (fp16_accumulate_rate)."""
    check_counts(tp, batch, prompt, new_tokens)
    if tp > system.gpus_per_node:
        raise SpecError(
            f"--tp {tp} spans more than one node of {system.gpus_per_node} accelerators",
            hint="serving keeps a tensor-parallel group inside a node",
        )
    c = COMPUTE_BYTES[precision.dtype]
    peak = system.accelerator.peak(precision.compute)
    link = group_link(system, tp, 1, eff.network_peak)
    bare = Link(link.bandwidth, 0.0)
    d = ir.value(ir.root.d_model)

    def allreduces(size: float) -> tuple[float, float, int]:
        """Two all-reduces a layer: (their bytes' seconds, their ring latency, calls)."""
        if tp == 1:
            return 0.0, 0.0, 0
        data = all_reduce(size, tp, bare)
        return 2 * data, 2 * (all_reduce(size, tp, link) - data), 2

    # An encoder-decoder reads the prompt with its encoder; its decoder starts from one start
    # token and caches only the positions it generates (the encoder's are cross-attention's S).
    fed = 1 if ir.root.layout == "encoder-decoder" else prompt
    prefill_values = {B: batch, S: prompt, S_DEC: fed, KV_LEN: fed}
    # The prefill's logits are the last position's: the first token needs no others (the
    # generated `generate`, TensorRT-LLM's default gather_context_logits=False, vLLM).
    last = {**prefill_values, S: 1} if ir.root.layout == "decoder" else None
    prefill = _pass_parts(pass_costs(ir, c, "flash"), prefill_values, tp, peak, eff,
                          allreduces(batch * prompt * d * c), last)  # fmt: skip
    dec = decode_costs(ir, c)
    if dec is None:
        raise SpecError(f"{ir.name} is encoder-only: it generates no tokens")
    middle = fed + (new_tokens + 1) // 2
    if kv_cache:
        decode_values = {B: batch, S: prompt, S_DEC: fed, KV_LEN: middle}
        decode = _pass_parts(
            dec, decode_values, tp, peak, eff, allreduces(batch * d * c), decoding=True
        )
    elif ir.root.layout == "decoder":
        recompute = {B: batch, S: middle, S_DEC: middle, KV_LEN: middle}
        decode = _pass_parts(pass_costs(ir, c, "flash"), recompute, tp, peak, eff,
                             allreduces(batch * middle * d * c))  # fmt: skip
    else:
        raise SpecError(f"--no-kv-cache: {ir.name} is an encoder-decoder; decoding without a "
                        "KV cache is modelled for decoder-only models")  # fmt: skip
    stored = precision.dtype if precision.dtype in ("fp32", "bf16", "fp16") else "bf16"
    figures = memory_figures(ir, stored, parallel=Parallelism(gpus=tp, tp=tp))
    full = {**ir.env, B: batch, S: prompt, S_DEC: fed, KV_LEN: fed + new_tokens}
    weights = float(figures.weights.xreplace(full))
    # Without the cache nothing is kept between steps: each forward's keys and values are
    # dropped with its activations, which the memory here does not count.
    kv = float(figures.kv_cache.xreplace(full)) * precision.kv_bytes / c if kv_cache else 0.0
    if stored != precision.dtype:  # count's 16-bit weights, in the stored format's bytes
        weights *= precision.weight_bytes / COMPUTE_BYTES[stored]
    fp16_accumulate = fp16_accumulate_rate(system, precision) if fp16_accumulation else 1.0
    return ServeParts(prefill, decode, system.accelerator.bandwidth, c, weights, kv,
                      system.accelerator.memory_bytes, tp, fp16_accumulate, batch)  # fmt: skip


def fp16_accumulate_rate(system: System, precision: Precision) -> float:
    """How much faster the part runs 16-bit matmuls (fp16, or weight-only formats dequantized
    to 16 bits) accumulating in fp16 than at the peak they are timed at: 2 on an RTX 4090
    (systems.yaml), 1 where the part lists one rate or the matmuls are not 16-bit."""
    acc16 = system.accelerator.fp16_accumulate_tflops
    if not acc16 or precision.compute not in ("bf16", "fp16"):
        return 1.0
    return acc16 * 1e12 / system.accelerator.peak(precision.compute)


def predict_serving(
    ir: IR,
    system: System,
    batch: int,
    prompt: int,
    new_tokens: int,
    tp: int = 1,
    gpus: int | None = None,
    dtype: str = "bf16",
    eff: Efficiency = CALIBRATED,
    engine: ServeEngine = IDEAL,
    group: int | None = None,
    kv_dtype: str | None = None,
    kv_cache: bool = True,
    prompt_cached: bool = False,
) -> ServePrediction:
    check_counts(tp, batch, prompt, new_tokens)
    gpus = gpus or tp
    if gpus % tp:
        raise SpecError(f"--gpus {gpus} is not a multiple of --tp {tp}")
    precision = Precision(dtype, group, kv_dtype)
    engine.efficiency(dtype)  # one clear message for a precision the engine has no figures at
    parts = serve_parts(ir, system, batch, prompt, new_tokens, tp, precision, eff, kv_cache,
                        engine.fp16_accumulation)  # fmt: skip
    return serving_prediction(parts, engine, precision, batch, new_tokens, gpus // tp,
                              prompt_cached)  # fmt: skip


def serving_prediction(parts: ServeParts, engine: ServeEngine, precision: Precision, batch: int,
                       new_tokens: int, replicas: int = 1, prompt_cached: bool = False
                       ) -> ServePrediction:  # fmt: skip
    """The run's times with that engine: what `plan --mode serve` reports, and what the
    validation (serve_validation.py) compares with each published figure. `prompt_cached`:
    the prompts' keys and values are already in the engine's prefix cache (vLLM's V1 engine
    keeps them, and a benchmark that repeats one batch finds them), so the engine computes
    only each prompt's last position: a pass of one position a sequence, as a decode step,
    beside the request's own overhead."""
    prefill, decode = parts.seconds(engine, precision)
    if prompt_cached:
        prefill = decode + engine.request_overhead_ms * 1e-3
    return ServePrediction(prefill, decode, batch, new_tokens, replicas, parts.tp,
                           parts.weights_bytes, parts.kv_cache_bytes,
                           parts.memory_bytes * engine.usable_memory,
                           parts.decode.layers)  # fmt: skip
