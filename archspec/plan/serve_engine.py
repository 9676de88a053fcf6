"""Serving engines: what a real inference engine adds to the roofline of its kernels.

A decode step on the roofline reads every weight and the KV cache at the memory bandwidth. A
real engine reaches a fraction of it (its kernels' achieved bandwidth: lower for quantized
weights, whose kernels dequantize as they read), and adds time the roofline does not see:

- per layer of every forward pass, kernel launches and synchronisation the host issues, which
  CUDA graphs (gpt-fast's `reduce-overhead`) remove but for each kernel's own start and drain
  on the device (a few microseconds a kernel);
- in an eager engine (Python issuing each kernel as it goes: transformers, GPTQ-for-LLaMa,
  TinyChat, ExLlama), the host's time to issue a layer's kernels. The device runs them as they
  arrive, so a pass takes the longer of the two: the device's time, or the host's when the
  host falls behind (GPTQ-for-LLaMa decodes LLaMA-7B, 13B and 33B at 0.64-0.72 ms a layer on
  an RTX 4090, whatever their weights' bytes: turboderp/exllama's README, Comparisons);
- per tensor-parallel all-reduce (two a layer), its latency, beyond the bytes over the link;
- per request (or static batch), a fixed overhead: scheduling, sampling, the first token's
  return.

Each engine's numbers are fitted on its own published figures (archspec/plan/
published_serving.yaml) by `python -m archspec.plan.serve_validation --write`, which stores them
in serve_engines.yaml with the figures they came from; docs/plan.md shows the fit and its
leave-one-out error. `ideal` is the plain roofline (80% of the bandwidth, no overheads): what
`predict_serving` assumes when no engine is named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import yaml

from archspec.errors import SpecError, did_you_mean
from archspec.plan.hardware import System, system_or_device

# Engines whose Python issues each kernel as it goes (no CUDA graph in their code): a pass
# takes at least its host's time to issue its layers (`host_layer_us`).
EAGER = {"transformers", "gptq-for-llama", "tinychat", "tinychat-2023", "exllama"}
# The host time a layer measured for eager decoding on one H100 machine, least and most: the
# generated code's (539 and 554 us, a 7B at batch 1 and a 1B at batch 8) and transformers' own
# generate (794 us), benchmarks/gpu-h100/serve_vs_plan.md. GPTQ-for-LLaMa's profile,
# transformers' generate with GPTQ's kernels, fits 675 us on an RTX 4090's host. A profile whose
# figures were bound by their GPU fits 0 (its host time cannot show), so a decode step of less
# than the least a layer may be the host's, not the device's.
EAGER_HOST_LAYER_S = (539e-6, 794e-6)
# What counts as usable memory is the engine's own setting: vLLM's gpu_memory_utilization and
# TensorRT-LLM's kv_cache_free_gpu_mem_fraction both default to 0.9; gpt-fast and transformers
# allocate as they go. Not fitted: stored per engine in serve_engines.yaml with its source.
PRECISION_CLASSES = {"bf16": "16-bit", "fp16": "16-bit", "fp32": "16-bit", "int8": "int8",
                     "int4": "int4", "fp8": "fp8"}  # fmt: skip


@dataclass(frozen=True)
class ServeEngine:
    key: str
    name: str
    memory_efficiency: dict[str, float]  # by precision class: achieved / peak HBM bandwidth
    layer_overhead_us: float = 0.0  # per layer of every forward pass, on the device
    # An eager engine's host time to issue one layer's kernels: a pass takes at least its
    # layers' issue time, which overlaps the device's work (0: the host never falls behind).
    host_layer_us: float = 0.0
    allreduce_us: float | None = None  # per tensor-parallel all-reduce (None: the system's
    # ring latency, 2(n-1) steps of its catalogue latency)
    request_overhead_ms: float = 0.0  # per request or static batch
    # The host's time for each sequence of the batch in every forward pass, added to the pass:
    # an engine that handles its sequences one by one in Python between passes (vLLM's
    # LLMEngine of 2024 schedules them, then processes each sequence group's output after every
    # step, detokenizing it: `_process_sequence_group_outputs`) waits that long each step.
    sequence_us: float = 0.0
    usable_memory: float = 0.9
    # Whether its scheduler admits a request only once the cache holds its whole length (prompt
    # and every new token): TensorRT-LLM's default capacity policy, GUARANTEED_NO_EVICT
    # (SchedulerConfig). A paging scheduler that may evict (vLLM) admits on the positions so
    # far, so a sequence holds its mean length (serve_batching.mean_cache_share).
    reserves_whole_sequence: bool = False
    # The most sequences it decodes together, whatever the cache holds (0: no limit beyond the
    # cache): trtllm-bench caps the batch it builds an engine for at 4,096
    # (NVIDIA/TensorRT-LLM tensorrt_llm/bench/build/tuning.py at 04cba88, finetune_setting:
    # `min(kv_cache_max_requests, 4096)`, "to avoid decoder buffer size becoming too large").
    max_batch: int = 0
    # By precision class: the engine's matmuls against the training-calibrated efficiency
    # (efficiency.py); 1 where its figures say nothing of compute (batch-1 decoding).
    compute_efficiency: dict[str, float] = field(default_factory=dict)
    # Whether quantized weights include the head's: gpt-fast's quantize.py swaps every
    # nn.Linear; AWQ and GPTQ quantize the blocks' linears and keep the head 16-bit.
    quantizes_head: bool = True
    # What its routed experts' linears reach of its bandwidth: experts gathered by index
    # (gpt-fast's w1[expert_indices] under einsum) are read apart from the dense kernels.
    expert_efficiency: float = 1.0
    # Over a grouped-query cache (GQA, MQA: several query heads per key/value head), the share
    # of its cache that each further query head of a group loads again from memory in a decode
    # step: 0, a kernel that loads a key/value head once for its group; up to 1, one that loads
    # it once per query head and finds none of it in the L2 cache. TensorRT-LLM's masked
    # multi-head attention kernel of v0.6.1 runs a thread block per (sequence, query head),
    # each loading its key/value head's cache (NVIDIA/TensorRT-LLM at 138f96d,
    # decoderMaskedMultiheadAttentionTemplate.h: "a threadblock for B x H pair", the keys at
    # `hi_kv`), so the cache read grows with the group: 8 query heads a key/value head for
    # Llama-2-70B, 29 for Falcon-180B. Its XQA kernel, from v0.8, shares the loads and
    # "provides 2.4x more Llama-70B throughput" at 128 → 2048 tokens (at 585c756,
    # docs/source/blogs/XQA-kernel.md).
    grouped_cache_reread: float = 0.0
    # Whether its 16-bit matmuls accumulate in fp16, which a GeForce part runs at twice its
    # FP32-accumulate tensor rate (Accelerator.fp16_accumulate_tflops): TinyChat 2.0's W4A16
    # GEMM ("For W4A16 GEMM, we introduce FP16 accumulation when applicable", its README at
    # mit-han-lab/llm-awq e4bdec2). PyTorch's matmuls accumulate in FP32 (cublasGemmEx with
    # CUDA_R_32F: pytorch/pytorch issue 123157).
    fp16_accumulation: bool = False
    # The input channels its weight-only quantized GEMV reads of a row in one pass, every pass
    # whole, so that a row of K channels takes the time of ceil(K / P) * P (0: a row costs its
    # own bytes). AWQ's 2023 GEMV, TinyChat's first release: a warp reads 1,024 channels a
    # pass (32 threads, 32 4-bit weights each; mit-han-lab/llm-awq 1480555, awq/kernels/csrc/
    # quantization/gemv_cuda.cu), and on an H100 a row of 4,544 channels took as long as one
    # of 5,120 (benchmarks/gpu-h100-kernels/awq_gemv.md).
    gemv_pass_channels: int = 0
    calibrated_on: list[str] = field(default_factory=list)  # the figures' sources
    note: str = ""

    def efficiency(self, precision: str) -> float:
        cls = PRECISION_CLASSES.get(precision, precision)
        if cls not in self.memory_efficiency:
            known = ", ".join(p for p, c in PRECISION_CLASSES.items()
                              if c in self.memory_efficiency)  # fmt: skip
            raise SpecError(
                f"the {self.key} engine has no published figures at {precision}",
                hint=f"its profile covers: {known}",
            )
        return self.memory_efficiency[cls]

    def gemv_padding(self, in_channels: float) -> float:
        """The bytes a quantized row costs over its own: 1 unless the GEMV reads whole passes
        (`gemv_pass_channels`) and the row ends inside one."""
        if not self.gemv_pass_channels or not in_channels:
            return 1.0
        passes = math.ceil(in_channels / self.gemv_pass_channels)
        return passes * self.gemv_pass_channels / in_channels

    def compute_scale(self, precision: str) -> float:
        return self.compute_efficiency.get(PRECISION_CLASSES.get(precision, precision), 1.0)


IDEAL = ServeEngine("ideal", "the roofline alone",
                    {"16-bit": 0.8, "int8": 0.8, "int4": 0.8, "fp8": 0.8},
                    note="80% of peak bandwidth, no overheads")  # fmt: skip


@cache
def load_engines() -> dict[str, ServeEngine]:
    """The calibrated engines (serve_engines.yaml) and `ideal`."""
    text = (resources.files("archspec") / "plan" / "serve_engines.yaml").read_text()
    engines = {"ideal": IDEAL}
    for key, entry in (yaml.safe_load(text) or {}).items():
        engines[key] = ServeEngine(key=key, **entry)
    return engines


def get_engine(name: str) -> ServeEngine:
    engines = load_engines()
    if name not in engines:
        raise SpecError(
            f"unknown serving engine '{name}'",
            hint=did_you_mean(name, engines) or f"known: {', '.join(engines)}",
        )
    return engines[name]


def serving_system(name: str, extra: list[Path] | None = None) -> System:
    """The system of that name; or, for an accelerator no system holds (an RTX 4090), that one
    device alone: serving on one needs no links (tensor parallelism over it is refused)."""
    return system_or_device(name, extra)
