"""Every command's options, declared once: Annotated aliases a command's signature names.

An option two commands share with the same meaning is one alias here (`SpecArg`, `SetOpt`,
`JsonOpt`, ...). Where commands give an option of the same name a different meaning, default
or help (`--dtype` is the weight dtype in `count`, the compute dtype in `plan`, the run's dtype
in `bench`), each has its own alias, named for the command, so that `--help` says exactly
what the option does there. Validation of the values lives with the layer that uses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# Shared by the commands.

SpecArg = Annotated[
    str,
    typer.Argument(
        help="A built-in spec name (see `archspec list`), a path to a .yaml spec or a "
        "config.json, or a Hub id (org/name) whose config.json is in the local Hugging Face "
        "cache."
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a spec field, e.g. `--set n_layers=48` (repeatable).",
        metavar="KEY=VALUE",
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print JSON for machines instead of a table.")
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the full traceback on errors.")]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Replace FILE even if it holds different content.")
]


def _opt(*names: str, help: str, panel: str | None = None, **kw):
    return typer.Option(*names, help=help, rich_help_panel=panel, **kw)


# torch's names of the dtypes, accepted wherever a dtype option is and turned here, in one
# place, into the short names every layer below uses (`bfloat16` is `bf16`).
DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def dtype_name(value: str | None) -> str | None:
    """A dtype option's value in the short form: `bfloat16` → `bf16`; others unchanged."""
    return DTYPE_NAMES.get(value.lower(), value) if value is not None else None


# `archspec count`.

# FLOPs and memory: any of these options adds them to `archspec count`. They default to None
# so that the command can tell "not given" (parameters only) from a value.
_FLOPS = "FLOPs and memory"
CountBatch = Annotated[
    int | None,
    typer.Option("--batch", "-b", help="Sequences per optimizer step over all replicas "
                 "(default 1); with --global-batch, the micro-batch one device runs at a time.",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
CountGlobalBatch = Annotated[
    int | None,
    typer.Option("--global-batch", help="Sequences per optimizer step; the micro-batches per "
                 "step are G / (batch × data-parallel replicas).", metavar="G",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
CountSp = Annotated[
    bool | None,
    typer.Option("--sp/--no-sp", help="Sequence parallelism: split what tensor parallelism "
                 "leaves whole along the sequence (off by default, as in Megatron-LM).",
                 rich_help_panel=_FLOPS, show_default=False),
]  # fmt: skip
CountEngine = Annotated[
    str | None,
    typer.Option("--engine", help="Whose layout: megatron (the default: Megatron-LM, the "
                 "vocabulary padded to 128·tp) or torch (the generated parallelize on DTensor "
                 "and FSDP2: no padding, k and v whole on each rank beyond n_kv_heads ranks, SP "
                 "only inside the blocks).",
                 metavar="megatron|torch", rich_help_panel=_FLOPS),
]  # fmt: skip
CountMixedPrecision = Annotated[
    bool,
    typer.Option("--mixed-precision", help="With --engine torch and --zero 3: FSDP2's mixed "
                 "precision as torchtitan sets it (parallelize's mp_policy=\"bf16\"): bf16 "
                 "compute and activations, fp32 sharded parameters, gradients and reduction.",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
CountLossParallel = Annotated[
    bool,
    typer.Option("--loss-parallel", help="With --engine torch and --tp: the logits stay split "
                 "over the vocabulary into the loss (parallelize's loss_parallel), so its "
                 "log-probabilities are split too.", rich_help_panel=_FLOPS),
]  # fmt: skip
CountInterleave = Annotated[
    int | None,
    typer.Option("--interleave", help="Virtual pipeline stages per device (interleaved 1F1B).",
                 metavar="V", rich_help_panel=_FLOPS),
]  # fmt: skip
CountStageLayers = Annotated[
    str | None,
    typer.Option("--stage-layers", help="Layers of each pipeline stage, e.g. 5,6,6,5 (default: "
                 "as many each).", metavar="N,N,...", rich_help_panel=_FLOPS),
]  # fmt: skip
CountSchedule = Annotated[
    str | None,
    typer.Option("--schedule", help="With --engine torch --pp: the generated pipeline()'s "
                 "schedule, 1f1b (default), gpipe, or two stages a rank: interleaved-1f1b, "
                 "looped-bfs, interleaved-zb, zbv; figures per rank.", rich_help_panel=_FLOPS),
]  # fmt: skip
CountGradDtype = Annotated[
    str | None,
    typer.Option(
        "--grad-dtype",
        help="The dtype gradients are kept and reduced in: fp32, "
        "bf16, fp16 (default: the compute dtype; Megatron-LM keeps fp32).",
        metavar="DTYPE",
        rich_help_panel=_FLOPS,
        callback=dtype_name,
    ),
]
CountSeq = Annotated[
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
CountDecSeq = Annotated[
    int | None,
    typer.Option("--dec-seq", help="Decoder positions, encoder-decoders (default: --seq).",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
CountKvLen = Annotated[
    int | None,
    typer.Option("--kv-len", help="Positions in the KV cache for one decode step, the new one "
                 "included (default: the sequence length).", rich_help_panel=_FLOPS),
]  # fmt: skip
CountConvention = Annotated[
    str | None,
    typer.Option("--convention", help="What a FLOP count counts: executed (default), causal, "
                 "kaplan, chinchilla, palm, megatron.", metavar="NAME", rich_help_panel=_FLOPS),
]  # fmt: skip
CountDtype = Annotated[
    str | None,
    typer.Option("--dtype", help="Weight dtype: fp32 (default), bf16, fp16 (mixed precision), "
                 "fp8 (torchao.float8 training), int8, int4 (weight-only).", metavar="DTYPE",
                 rich_help_panel=_FLOPS, callback=dtype_name),
]  # fmt: skip
CountOptimizer = Annotated[
    str | None,
    typer.Option("--optimizer", help="adamw (default), adamw8bit or sgd (with momentum).",
                 metavar="NAME", rich_help_panel=_FLOPS),
]  # fmt: skip
CountRecompute = Annotated[
    str | None,
    typer.Option("--recompute", help="Activation recomputation: none (default), selective, full.",
                 metavar="POLICY", rich_help_panel=_FLOPS),
]  # fmt: skip
CountAttn = Annotated[
    str | None,
    typer.Option("--attn", help="Attention kernel: flash (default: the fused SDPA kernel the "
                 "generated code runs; keeps no B·h·S² probabilities) or eager (the math path).",
                 metavar="KERNEL", rich_help_panel=_FLOPS),
]  # fmt: skip
CountGpus = Annotated[
    int | None, typer.Option("--gpus", help="Devices (default 1).", rich_help_panel=_FLOPS)
]
CountTp = Annotated[
    int | None, typer.Option("--tp", help="Tensor-parallel degree.", rich_help_panel=_FLOPS)
]
CountPp = Annotated[
    int | None, typer.Option("--pp", help="Pipeline-parallel degree.", rich_help_panel=_FLOPS)
]
CountCp = Annotated[
    int | None,
    typer.Option("--cp", help="Context-parallel degree: ranks sharing each sequence (2·cp "
                 "chunks balancing the causal mask).", rich_help_panel=_FLOPS),
]  # fmt: skip
CountEp = Annotated[
    int | None,
    typer.Option("--ep", help="Expert-parallel degree: data-parallel ranks sharing each "
                 "mixture's routed experts.", rich_help_panel=_FLOPS),
]  # fmt: skip
CountDpReplicate = Annotated[
    int | None,
    typer.Option("--dp-replicate", help="Hybrid sharding (HSDP): replicas of the ZeRO shard "
                 "group, which then shards over one replica's data-parallel ranks.",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
CountZero = Annotated[
    int | None,
    typer.Option("--zero", help="ZeRO stage over data-parallel replicas: 0-3.",
                 rich_help_panel=_FLOPS),
]  # fmt: skip
CountSymbolic = Annotated[
    bool, typer.Option("--symbolic", help="Also show the total and group subtotals as formulas.")
]
CountNames = Annotated[
    str,
    typer.Option(
        "--names",
        help="`hf`: also show each module's name in the spec's transformers class.",
        metavar="ours|hf",
    ),
]
CountBy = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="`module`: also the forward FLOPs of each module (the matmuls of each Linear, "
        "the attention core in its attention module), as profilers list them.",
        metavar="module",
        rich_help_panel=_FLOPS,
    ),
]
CountPlot = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="Draw FLOPs per token and memory against S to this .png or .svg file (the "
        "--seq list, else doublings up to max_seq_len; needs `pip install "
        "'archspec[plot]'`).",
        metavar="FILE",
        rich_help_panel=_FLOPS,
    ),
]
PlotForce = Annotated[
    bool,
    typer.Option("--force", help="Replace the --plot FILE even if it holds another chart."),
]


# `archspec bench`.

_RUN = "Run"
_MEASURE = "Measurement"
BenchDevice = Annotated[
    str | None,
    _opt("--device", help="cuda or cpu (default: cuda when there is one).", metavar="cuda|cpu",
         panel=_RUN),
]  # fmt: skip
BenchDtype = Annotated[
    str | None,
    _opt("--dtype", help="bf16, fp16 or fp32 (default: bf16 on cuda, fp32 on cpu). Training "
         "keeps fp32 weights under autocast; forward and generate cast the weights.",
         metavar="bf16|fp16|fp32", panel=_RUN, callback=dtype_name),
]  # fmt: skip
BenchBatch = Annotated[int, _opt("--batch", "-b", help="Sequences per step.", panel=_RUN)]
BenchSeq = Annotated[
    int | None,
    _opt("--seq", "-s", help="Positions per sequence; the prompt in generate mode (default: "
         "512, or less for a model built for less).", panel=_RUN),
]  # fmt: skip
BenchMode = Annotated[
    str,
    _opt("--mode", help="forward (inference), train (forward, backward, AdamW step) or "
         "generate (greedy, with a KV cache).", metavar="forward|train|generate", panel=_RUN),
]  # fmt: skip
BenchCompile = Annotated[bool, _opt("--compile", help="torch.compile the model(s).", panel=_RUN)]
BenchSteps = Annotated[int, _opt("--steps", help="Timed steps.", panel=_RUN)]
BenchWarmup = Annotated[int, _opt("--warmup", help="Untimed steps first.", panel=_RUN)]
BenchNewTokens = Annotated[
    int, _opt("--new-tokens", help="Tokens generated per step in generate mode.", panel=_RUN)
]
BenchThreads = Annotated[
    int | None, _opt("--threads", help="CPU threads for torch (default: torch's).", panel=_RUN)
]
BenchSeed = Annotated[int, _opt("--seed", help="Seed for the weights and tokens.", panel=_RUN)]
BenchVsHf = Annotated[
    bool,
    _opt("--vs-hf", help="Also run the spec's transformers class (same weights, dtype, "
         "shapes, SDPA attention and compile setting), alternating steps, and report the "
         "speedup.", panel=_MEASURE),
]  # fmt: skip
BenchHfFirst = Annotated[
    bool,
    _opt("--hf-first", help="With --vs-hf on CPU: build transformers' model before ours. The "
         "model built second ran 1-1.5% faster on average on our test machine; runs that "
         "alternate the order cancel it (benchmarks/paired_ratio.py pools them).",
         panel=_MEASURE),
]  # fmt: skip
BenchPeakTflops = Annotated[
    float | None,
    _opt("--peak-tflops", help="The device's peak dense TFLOP/s for the dtype, for MFU on a "
         "device missing from the built-in table.", panel=_MEASURE),
]  # fmt: skip
BenchNproc = Annotated[
    int | None,
    _opt("--nproc", help="Train across N processes on this machine with torchrun (gloo on "
         "CPU, NCCL on GPUs), the model laid out by its generated parallelize().", panel=_RUN),
]  # fmt: skip
BenchTp = Annotated[int, _opt("--tp", help="Tensor-parallel ranks (with --nproc).", panel=_RUN)]
BenchPp = Annotated[
    int, _opt("--pp", help="Pipeline stages, one a process (with --nproc, the generated "
              "pipeline()).", panel=_RUN)
]  # fmt: skip
StageLayers = Annotated[
    str | None,
    _opt("--stage-layers", help="Layers of each pipeline stage, e.g. 5,6,6,5 (default: as many "
         "each).", metavar="N,N,...", panel=_RUN),
]  # fmt: skip
BenchSchedule = Annotated[
    str, _opt("--schedule", help="Pipeline schedule: 1f1b, gpipe, interleaved-1f1b, looped-bfs, "
              "interleaved-zb or zbv (with --pp).", panel=_RUN)
]  # fmt: skip
BenchCp = Annotated[
    int, _opt("--cp", help="Context-parallel ranks: the sequence split (with --nproc).", panel=_RUN)
]
BenchMixedPrecision = Annotated[
    bool, _opt("--mixed-precision", help="FSDP2's mixed precision as torchtitan sets it (with "
               "--nproc and data-parallel ranks: parallelize's mp_policy=\"bf16\"): bf16 "
               "compute, fp32 sharded parameters and gradient reduction.", panel=_RUN)
]  # fmt: skip
BenchLossParallel = Annotated[
    bool, _opt("--loss-parallel", help="The logits split over the vocabulary into the loss "
               "(with --nproc and --tp: parallelize's loss_parallel, the loss under torch's "
               "loss_parallel()).", panel=_RUN)
]  # fmt: skip
BenchSequenceParallel = Annotated[
    bool, _opt("--sp", help="Sequence parallelism (with --nproc and --tp: parallelize's "
               "sequence_parallel): the norms and residual stream between the blocks split "
               "over the sequence.", panel=_RUN)
]  # fmt: skip
BenchEp = Annotated[
    int, _opt("--ep", help="Expert-parallel ranks: the experts split (with --nproc).", panel=_RUN)
]
BenchZero = Annotated[
    int, _opt("--zero", help="3: FSDP2 over the data-parallel ranks (with --nproc).", panel=_RUN)
]
BenchDpReplicate = Annotated[
    int, _opt("--dp-replicate", help="Hybrid sharding (HSDP, with --nproc and --zero 3): R "
              "replicas of FSDP2's shard group, which shards over one replica's data ranks.",
              metavar="R", panel=_RUN)
]  # fmt: skip
BenchForce = Annotated[
    bool,
    _opt("--force", help="Run even when the predicted memory exceeds what the device has (it "
         "may swap or be killed).", panel=_RUN),
]  # fmt: skip


# `archspec plan`.

_LAYOUT = "Layout (give any to time one layout; none to search)"
_SERVE = "Serving (--mode serve)"
PlanSpecArg = Annotated[
    str | None,
    typer.Argument(
        help="A built-in spec name (see `archspec list`) or a path to a .yaml spec.",
        show_default=False,
    ),
]
PlanGpu = Annotated[
    str | None, _opt("--gpu", help="The system to plan on (see --list-systems).", metavar="NAME")
]
PlanSystemFiles = Annotated[
    list[Path] | None,
    _opt("--system", help="A YAML file of extra accelerators and systems, in the format of "
         "the built-in catalogue (repeatable).", metavar="FILE"),
]  # fmt: skip
PlanListSystems = Annotated[
    bool, _opt("--list-systems", help="List the systems and their sources, then exit.")
]
PlanMode = Annotated[str, _opt("--mode", help="train or serve.", metavar="MODE")]
PlanGpus = Annotated[int, _opt("--gpus", help="Accelerators in all.")]
PlanNodeSize = Annotated[
    int | None,
    _opt("--node-size", help="Accelerators that share the fast interconnect, if fewer than the "
         "system's node (a TPU slice of fewer chips: slices join over the data-center "
         "network).", metavar="N"),
]  # fmt: skip
PlanGlobalBatch = Annotated[
    int | None, _opt("--global-batch", help="Sequences per optimizer step.", metavar="G")
]
PlanSeq = Annotated[
    int | None, _opt("--seq", "-s", help="Positions per sequence (default: max_seq_len).")
]
PlanTp = Annotated[int | None, _opt("--tp", help="Tensor-parallel degree.", panel=_LAYOUT)]
PlanPp = Annotated[int | None, _opt("--pp", help="Pipeline stages.", panel=_LAYOUT)]
PlanInterleave = Annotated[
    int | None, _opt("--interleave", help="Virtual stages per device.", metavar="V", panel=_LAYOUT)
]
PlanSp = Annotated[
    bool | None,
    _opt("--sp/--no-sp", help="Sequence parallelism.", panel=_LAYOUT, show_default=False),
]
PlanAsyncTp = Annotated[
    bool,
    _opt("--async-tp", help="With --engine fsdp: torchtitan's async tensor parallelism (under "
         "torch.compile), the --sp collectives overlapped with the matmuls.", panel=_LAYOUT),
]  # fmt: skip
PlanFp8AllGather = Annotated[
    bool,
    _opt("--fp8-all-gather", help="With --engine fsdp, --dtype fp8 and --zero 2 or 3: "
         "torchtitan's FSDP float8 all-gather (enable_fsdp_float8_all_gather), the blocks' "
         "linear weights gathered in one byte.", panel=_LAYOUT),
]  # fmt: skip
PlanCheckpoint = Annotated[
    str | None,
    _opt("--checkpoint", help="The activation checkpoint --recompute full runs: reentrant "
         "(Megatron, DeepSpeed, NeMo, Composer: each block replayed whole), non-reentrant "
         "(torch's use_reentrant=False, torchtitan: the replay stops after the last tensor the "
         "backward needs) or pruned (JAX's jax.checkpoint, MaxText: only what the backward "
         "reads is replayed). Default: the engine's.", panel=_LAYOUT),
]  # fmt: skip
PlanEpDispatch = Annotated[
    str | None,
    _opt("--ep-dispatch", help="How --ep dispatches tokens: fused (DeepEP, HybridEP: NeMo's "
         "flex dispatcher; a token sent once to each rank and node holding any of its "
         "experts) or alltoall (Megatron-Core's all-to-all dispatcher: one row per routed "
         "expert). Default: fused.", panel=_LAYOUT),
]  # fmt: skip
PlanEtp = Annotated[
    int | None,
    _opt("--etp", help="With --ep: the ranks each expert is split over (Megatron-Core's "
         "expert_tensor_parallel_size). Default: the --tp, the experts split as the dense "
         "layers are and the ep groups drawn from the data-parallel ranks; 1: each rank holds "
         "its experts whole and ep folds over tp × cp × dp (needs --sp beside --tp).",
         panel=_LAYOUT),
]  # fmt: skip
PlanMoeImbalance = Annotated[
    float | None,
    _opt("--moe-imbalance", help="The busiest expert-parallel rank's routed rows over the "
         "mean (at least 1), for a learned router's uneven routing. Default: what uniform "
         "random routing gives, as benchmarks force it (a few percent).", panel=_LAYOUT),
]  # fmt: skip
PlanBatch = Annotated[
    int | None,
    _opt("--batch", "-b", help="Training: the micro-batch one device runs at a time. Serving: "
         "sequences decoded together.", panel=_LAYOUT),
]  # fmt: skip
PlanRecompute = Annotated[
    str | None,
    _opt(
        "--recompute",
        help="none, selective, full, full:N (the first N layers of each pipeline chunk "
        "whole: Megatron-Core's recompute_method block), or op (torchtitan's per-op "
        "checkpointing: keeps every other matmul's output and the attention kernel's).",
        metavar="POLICY",
        panel=_LAYOUT,
    ),
]
PlanRecomputeModules = Annotated[
    str | None,
    _opt(
        "--recompute-modules",
        help="With --recompute selective: Megatron-Core's recompute_modules, comma-separated: "
        "core_attn (the default), layernorm, moe_act, mla_up_proj, mlp (all but core_attn "
        "with --engine nemo).",
        metavar="LIST",
        panel=_LAYOUT,
    ),
]
PlanZero = Annotated[int | None, _opt("--zero", help="ZeRO stage 0-3.", panel=_LAYOUT)]
PlanDtype = Annotated[
    str,
    _opt(
        "--dtype",
        help="Compute dtype: bf16, fp16, fp32; fp8 (training: the projections in fp8, "
        "the rest bf16; serving: weights and matmuls); serving also int8, int4 "
        "(weight-only).",
        metavar="DTYPE",
        callback=dtype_name,
    ),
]
PlanGradDtype = Annotated[
    str | None,
    _opt("--grad-dtype", help="Gradient dtype (default: --dtype; Megatron-LM keeps fp32).",
         metavar="DTYPE", callback=dtype_name),
]  # fmt: skip
PlanAttn = Annotated[
    str,
    _opt("--attn", help="flash (fused kernel) or eager (materialised scores).", metavar="KERNEL"),
]
PlanAttnKernel = Annotated[
    str | None,
    _opt("--attn-kernel", help="The fused attention kernel (with --attn flash): fa2 (the GEMM "
         "rule, FlashAttention-2's kernel within 25% on an H100) or cudnn (cuDNN's, Transformer "
         "Engine's choice on Hopper, at its throughput measured on an H100; H100-class parts "
         "only). Default: fa2.", metavar="KERNEL"),
]  # fmt: skip
PlanTop = Annotated[int, _opt("--top", help="Layouts to show from a search.")]
PlanCp = Annotated[
    int | None,
    _opt("--cp", help="Context-parallel degree: ranks sharing each sequence.", panel=_LAYOUT),
]
PlanDpReplicate = Annotated[
    int | None,
    _opt("--dp-replicate", help="Hybrid sharding (HSDP): replicas of the ZeRO shard group, "
         "which then shards over the data-parallel ranks of one replica.", metavar="R",
         panel=_LAYOUT),
]  # fmt: skip
PlanOffloadLayers = Annotated[
    int | None,
    _opt("--offload-layers", help="Activation offloading (Megatron-Core's "
         "cpu_offloading_num_layers): the first N layers' saved activations go to the host's "
         "memory and back; --engine nemo, one stage, no recomputation, a system with "
         "host_link_gbs.",
         metavar="N", panel=_LAYOUT),
]  # fmt: skip
PlanMtpLayers = Annotated[
    int | None,
    _opt("--mtp-layers", help="Multi-token prediction (Megatron-Core's mtp_num_layers, "
         "DeepSeek-V3's): N depths on the last stage, each the decoder's last layer again, a "
         "2·d → d projection and the head and loss again.",
         metavar="N", panel=_LAYOUT),
]  # fmt: skip
PlanEp = Annotated[
    int | None,
    _opt(
        "--ep",
        help="Expert-parallel degree: data-parallel ranks sharing each layer's experts.",
        panel=_LAYOUT,
    ),
]
PlanStageLayers = Annotated[
    str | None,
    _opt("--stage-layers", help="Layers on each pipeline stage, e.g. 5,6,6,5 (uneven stages).",
         metavar="N,N,...", panel=_LAYOUT),
]  # fmt: skip
PlanEngine = Annotated[
    str | None,
    _opt("--engine", help="The stack whose fitted profile times the step. Training: megatron "
         "(default on GPUs), deepspeed, nemo, fsdp or maxtext (default on TPUs): what it "
         "overlaps and its efficiency. "
         "Serving: gpt-fast, tensorrt-llm, transformers, gptq-for-llama, tinychat, "
         "tinychat-2023, exllama, vllm-rocm, vllm-rocm-0.10, tensorrt-llm-1.0 or typical "
         "(default ideal: the "
         "roofline alone).",
         metavar="NAME"),
]  # fmt: skip
PlanTokens = Annotated[
    str | None,
    _opt("--tokens", help="Tokens to train on (e.g. 15T, 300B): training days and "
         "accelerator-hours.", metavar="N"),
]  # fmt: skip
PlanPrice = Annotated[
    float | None,
    _opt("--price", help="Price per accelerator-hour, for the cost of --tokens.", metavar="P"),
]
PlanMfu = Annotated[
    float | None,
    _opt("--mfu", help="What-if: the step time this MFU (0-1) would give, for the layout "
         "found.", metavar="X"),
]  # fmt: skip
PlanEfficiency = Annotated[
    float | None,
    _opt("--efficiency", help="What-if: the fraction (0-1) of peak a large matmul reaches, in "
         "place of the stack's fitted one.", metavar="X"),
]  # fmt: skip
PlanPrompt = Annotated[int, _opt("--prompt", help="Prompt positions.", panel=_SERVE)]
PlanNewTokens = Annotated[
    int, _opt("--new-tokens", help="Tokens generated per sequence.", panel=_SERVE)
]
PlanKvDtype = Annotated[
    str | None,
    _opt("--kv-dtype", help="Serving: the KV cache's dtype (bf16, fp16, fp8, int8; default: "
         "16-bit).", metavar="DTYPE", panel=_SERVE, callback=dtype_name),
]  # fmt: skip
PlanNoKvCache = Annotated[
    bool,
    _opt("--no-kv-cache", help="Serving: decode without a KV cache, every step a forward over "
         "the whole sequence so far with every position's logits (a generate loop that never "
         "hands the model its cache, as transformers' generate with Falcon's Hub code: "
         "huggingface/transformers#24701).", panel=_SERVE),
]  # fmt: skip
PlanPromptCached = Annotated[
    bool,
    _opt("--prompt-cached", help="Serving: each prompt's keys and values are already in the "
         "engine's prefix cache (the same prompt ran before, as in a benchmark that repeats one "
         "batch), so the first token costs one decode step, not a prefill.", panel=_SERVE),
]  # fmt: skip
PlanDraft = Annotated[
    str | None,
    _opt("--draft", help="Serving: a draft model (a spec) for speculative decoding.",
         metavar="SPEC", panel=_SERVE),
]  # fmt: skip
PlanSpeculate = Annotated[
    int, _opt("--speculate", help="Serving with --draft: tokens drafted a round.", metavar="K",
              panel=_SERVE),
]  # fmt: skip
PlanAccept = Annotated[
    float | None,
    _opt("--accept", help="Serving with --draft: the probability each drafted token is "
         "accepted (needed: it depends on the models and the text).", metavar="A",
         panel=_SERVE),
]  # fmt: skip
PlanRate = Annotated[
    float | None,
    _opt("--rate", help="Serving: requests a second, continuously batched (the batch that keeps "
         "up is found).", metavar="R", panel=_SERVE),
]  # fmt: skip
PlanConcurrency = Annotated[
    int | None,
    _opt("--concurrency", help="Serving: clients each with one request at a time, "
         "continuously batched.", metavar="C", panel=_SERVE),
]  # fmt: skip
PlanServePlot = Annotated[
    Path | None,
    _opt("--plot", help="Serving: draw time per token and to first token against throughput "
         "over the batches the cache holds (.png or .svg).", metavar="FILE", panel=_SERVE),
]  # fmt: skip
PlanGroup = Annotated[
    int | None,
    _opt("--group", help="Serving at --dtype int4: weights per quantization group.",
         metavar="G", panel=_SERVE),
]  # fmt: skip


# `archspec compare`.

_COSTS = "FLOPs and memory"
CompareSpecsArg = Annotated[
    list[str],
    typer.Argument(
        help="Built-in spec names (see `archspec list`) or paths to .yaml specs, one column each.",
        show_default=False,
    ),
]
ComparePlot = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="Also draw the charts to this .png or .svg file (needs `pip install "
        "'archspec[plot]'`).",
        metavar="FILE",
    ),
]
CompareSeq = Annotated[
    int | None,
    _opt("--seq", "-s", help="Sequence length S for the FLOPs, the same for every spec "
         "(default: the shortest max_seq_len among them, so that each model is defined "
         "there).", panel=_COSTS),
]  # fmt: skip
CompareBatch = Annotated[
    int,
    _opt("--batch", "-b", help="Sequences per step (the per-token figures do not depend on "
         "it; the `memory` totals of --json do).", panel=_COSTS),
]  # fmt: skip
CompareDtype = Annotated[
    str,
    _opt("--dtype", help="Weight dtype: fp32, bf16, fp16, int8, int4 (weight-only; the KV "
         "cache stays bf16).", metavar="DTYPE", panel=_COSTS, callback=dtype_name),
]  # fmt: skip
DiffFromArg = Annotated[
    str, typer.Argument(help="The spec to start from: a built-in name or a path.")
]
DiffToArg = Annotated[str, typer.Argument(help="The spec to compare it with.")]
CompareMarkdown = Annotated[bool, _opt("--markdown", help="Print the table as GitHub markdown.")]


# `archspec build`.

BuildOutput = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="Write the code to this file (atomically) instead of printing it.",
        metavar="FILE",
        dir_okay=False,
    ),
]
BuildHfWeights = Annotated[
    Path | None,
    typer.Option(
        "--hf-weights",
        help="A transformers checkpoint folder (or file): convert its weights to the "
        "generated names and write them next to FILE, as FILE's stem + .safetensors.",
        metavar="DIR",
    ),
]
BuildHfIgnore = Annotated[
    list[str] | None,
    typer.Option(
        "--hf-ignore",
        help="Drop checkpoint tensors matching this glob on purpose (repeatable).",
        metavar="PATTERN",
    ),
]


# `archspec draw`.

DrawOutput = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="Write the diagram to FILE: .svg, .png (needs matplotlib) or .mmd (Mermaid).",
        metavar="FILE",
    ),
]
DrawFormat = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="svg, png or mmd (default: from FILE's name; Mermaid on stdout without -o).",
        metavar="FORMAT",
    ),
]
DrawParams = Annotated[
    bool, typer.Option("--params", help="Label every box with its parameter count.")
]


# `archspec import-hf`.

ImportConfigArg = Annotated[
    Path,
    typer.Argument(
        help="A transformers config.json (or the folder holding it), or a Hub id (org/name) "
        "whose config.json is in the local Hugging Face cache."
    ),
]
ImportOutput = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="Write the spec to this file (atomically) instead of to stdout.",
        metavar="FILE",
        dir_okay=False,
    ),
]
ImportArchitecture = Annotated[
    str | None,
    typer.Option(
        "--architecture",
        help="Use this transformers class instead of the config's `architectures[0]`, "
        "e.g. `BertModel` for a BertForMaskedLM checkpoint.",
    ),
]
ImportTextConfig = Annotated[
    bool,
    typer.Option(
        "--text-config",
        help="Import the config's `text_config`, the language model of a vision-language "
        "model (Qwen2.5-VL, LLaVA, Gemma 3), instead of the whole model.",
    ),
]
ImportDequantized = Annotated[
    bool,
    typer.Option(
        "--dequantized",
        help="Import a quantized checkpoint's config (fp8, MXFP4, AWQ, GPTQ: its "
        "`quantization_config`) as the model under the quantization, with the same "
        "parameters, instead of refusing it; --dtype then gives the bytes a parameter takes.",
    ),
]
ImportJson = Annotated[
    bool, typer.Option("--json", help="Print the spec's fields as JSON instead of YAML.")
]


# `archspec print`.

PrintParams = Annotated[
    bool,
    typer.Option(
        "--params",
        help="End each module's line with its parameter count. Inside a folded "
        "`(0-11): 12 x Block` entry counts are per copy; the entry's own line shows the "
        "total and `(12 x per copy)`.",
    ),
]
PrintDepth = Annotated[
    int | None,
    typer.Option(
        "--depth",
        min=0,
        help="Show modules down to this depth (the model is depth 0); deeper children are "
        "elided as `Name(...)`.",
    ),
]
PrintTree = Annotated[
    bool, typer.Option("--tree", help="Draw the modules as a tree instead of torch's repr.")
]


# `archspec report`.

ReportSpecsArg = Annotated[
    list[str],
    typer.Argument(
        help="Built-in spec names or .yaml files; several are also compared side by side.",
        metavar="SPEC...",
    ),
]
ReportOutput = Annotated[
    Path | None,
    typer.Option(
        "-o", "--output", help="Write the HTML to FILE (default: stdout).", metavar="FILE"
    ),
]
