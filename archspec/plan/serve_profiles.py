"""What each serving engine's profile is given rather than fitted: its name, the memory it fills,
how its scheduler holds the cache, its batch cap, whether its checkpoints keep the head 16-bit,
how its kernels read and accumulate, and which overheads its figures can tell apart. Each
setting names its source; serve_validation.py fits the rest on the published figures."""

from __future__ import annotations

# Engines whose per-layer overhead is not fitted: TensorRT-LLM's figures are mostly compute-
# bound prefills and large batches, where a per-layer term would stand in for the matmuls'
# efficiency. gpt-fast decodes in CUDA graphs, so its per-layer term is what each kernel still
# costs on the device (start and drain).
NO_LAYER_OVERHEAD = {"tensorrt-llm", "tensorrt-llm-1.0"}
# The eager engines' layers (serve_engine.EAGER) cost either the device (added) or the host
# (overlapped: a pass takes the longer of the two, serve_engine.py), whichever fits
# (_with_overheads). Only where the figures span models of different depths: a time a layer,
# on either side, cannot be told from the bandwidth in figures of one depth (TinyChat's three
# are all 32 layers deep), which then absorbs it.
ENGINE_NAMES = {
    "gpt-fast": "compiled PyTorch, static KV cache, CUDA graphs (gpt-fast)",
    "tensorrt-llm": "TensorRT-LLM (static batches, fused kernels)",
    "transformers": "Hugging Face transformers generate, eager",
    "gptq-for-llama": "GPTQ-for-LLaMa's 4-bit CUDA kernels in transformers, eager",
    "tinychat": "TinyChat (AWQ W4A16 kernels, from 2024: gemv_forward_cuda_new)",
    "tinychat-2023": "TinyChat's first release (AWQ's 2023 W4A16 GEMV kernel)",
    "exllama": "ExLlama (GPTQ 4-bit kernels, its own Llama)",
    "vllm-rocm": "vLLM of 2024 on ROCm (MI300X): static batches through its offline LLM.generate",
    "tensorrt-llm-1.0": "TensorRT-LLM 1.0's PyTorch backend: in-flight batching (trtllm-bench)",
    "vllm-rocm-0.10": "vLLM 0.10 on ROCm (MI300X): the V1 engine, AMD's AITER kernels",
}
# One profile over every engine's figures: for an engine the dataset does not hold.
TYPICAL = "typical"
# The fraction of the device an engine fills with weights and cache. TensorRT-LLM's published
# runs used GptSession, which sizes the cache to the batch: its largest (Llama-2-7B, batch 60
# over 2,176 positions, FP16 on A100-80GB) holds 95.5% of the device, so 0.96. Its newer
# executor takes 90% of what the weights leave (KvCacheConfig.free_gpu_memory_fraction,
# docs/source/examples/kvcacheconfig.md). The others state none: 0.9 assumed.
USABLE = {
    "gpt-fast": (0.9, "assumed: gpt-fast allocates its static cache up front, no fraction"),
    "tensorrt-llm": (0.96, "its largest published run holds 95.5% of the device (GptSession "
                     "sizes the cache to the batch)"),
    "transformers": (0.9, "assumed: transformers allocates as it goes"),
    "gptq-for-llama": (0.9, "assumed: transformers allocates as it goes"),
    "tinychat": (0.9, "assumed: TinyChat pre-allocates its cache and states no fraction"),
    "tinychat-2023": (0.9, "assumed: TinyChat pre-allocates its cache and states no fraction"),
    "exllama": (0.9, "assumed: the README advises about 20 GB of a 24 GB GPU for the model"),
    "vllm-rocm": (0.9, "vLLM's gpu_memory_utilization default (EngineArgs)"),
    "vllm-rocm-0.10": (0.9, "the benchmark commands' --gpu-memory-utilization 0.9"),
    "tensorrt-llm-1.0": (0.9, "its cache takes 0.95 of the memory free after loading "
                         "(perf-overview.md: 'in many cases'; 0.90 or lower otherwise), about "
                         "0.9 of the device less the weights once its runtime's buffers are out"),
    TYPICAL: (0.9, "assumed, as most engines"),
}  # fmt: skip
# Engines whose quantized checkpoints keep the head 16-bit (every other quantizes it: gpt-fast's
# quantize.py swaps every nn.Linear, the output's included): AWQ quantizes the linears of
# get_blocks(model) only (mit-han-lab/llm-awq awq/quantize/quantizer.py,
# real_quantize_model_weight); ExLlama loads lm_head.weight of a GPTQ checkpoint into a plain
# nn.Linear (turboderp/exllama model.py), as GPTQ-for-LLaMa quantizes the decoder layers' only;
# TensorRT-LLM's fp8 quantizes each layer's linears and leaves lm_head 16-bit
# (tensorrt_llm/models/quantized/quant.py at 14af1d9, `_default_fp8_quantize`, "used by benchmark
# script": the layers, then "# TODO: add lm_head"; its weight-only groupwise path excludes
# 'lm_head' by default). vLLM's one source does not name its fp8 checkpoint: the head is taken
# 16-bit, as fp8 checkpoints commonly keep it (published_serving.yaml; 0.5% of its bytes).
# Engines whose 16-bit matmuls accumulate in fp16 (ServeEngine.fp16_accumulation): TinyChat's
# W4A16 GEMM from TinyChat 2.0 (its README at e4bdec2), the release whose first tokens the
# dataset holds.
FP16_ACCUMULATION = {"tinychat"}
# Engines whose quantized GEMV reads a row in whole passes of that many input channels
# (ServeEngine.gemv_pass_channels gives the source and the measurement). TinyChat's later GEMV
# (gemv_forward_cuda_new) was not measured; it keeps 0.
GEMV_PASS_CHANNELS = {"tinychat-2023": 1024}
HEAD_16BIT = {"tinychat", "tinychat-2023", "exllama", "transformers", "gptq-for-llama",
              "tensorrt-llm", "vllm-rocm", "tensorrt-llm-1.0", "vllm-rocm-0.10"}  # fmt: skip
# Engines whose scheduler admits a request only once the cache holds its whole length
# (ServeEngine.reserves_whole_sequence): TensorRT-LLM's batch manager, whose capacity policy
# defaults to GUARANTEED_NO_EVICT (SchedulerConfig). The 2023 profile's figures are static
# batches, which this does not change; it sizes the batch `--concurrency` and `--rate` give it.
RESERVES_WHOLE_SEQUENCE = {"tensorrt-llm", "tensorrt-llm-1.0"}
# The batch an engine's figures were capped at (ServeEngine.max_batch): trtllm-bench's 4,096.
MAX_BATCH = {"tensorrt-llm-1.0": 4096}
# Engines whose host handles each sequence of the batch between passes (ServeEngine.sequence_us):
# vLLM's LLMEngine of 2024 processes every sequence group's output in Python each step. Fitted
# only where the figures span batch sizes; the others' hosts do no per-sequence work a step
# (gpt-fast and the eager engines decode batch 1; TensorRT-LLM's gptSessionBenchmark is C++).
# vLLM's V1 engine of 2025 still schedules each request and processes its output every step
# (vllm/v1/core/sched/scheduler.py, update_from_output), so its profile has one too.
PER_SEQUENCE = {"vllm-rocm", "vllm-rocm-0.10"}


def engine_settings(key: str) -> dict:
    """What a profile is given rather than fitted: its usable memory, how its scheduler holds
    the cache, its batch cap."""
    return dict(usable_memory=USABLE[key][0], max_batch=MAX_BATCH.get(key, 0),
                reserves_whole_sequence=key in RESERVES_WHOLE_SEQUENCE)  # fmt: skip
