"""Training stacks: what each one overlaps with compute, and how close to peak its kernels run.

The same layout runs at different speeds in different stacks, mostly for two reasons: which
communication hides behind compute, and how well the stack's kernels and launches use the
device. A profile states the first from each stack's documentation and fits the second (one
matmul plateau per stack, `published.py`, cross-validated leaving one source out).

- megatron: Megatron-LM as Narayanan et al. 2021 and Korthikanti et al. 2022 ran it: the data-
  parallel all-reduce runs after the last backward, tensor-parallel collectives between the
  matmuls, nothing overlapped; the interleaved schedule, and pipeline sends of 1/tp of the
  activation gathered over NVLink (Narayanan et al. 2021, Section 4.1).
- deepspeed: Megatron-DeepSpeed (MT-NLG, BLOOM): Megatron's layers under DeepSpeed's pipeline
  engine, which has no interleaved schedule and sends each stage's whole activation; nothing
  overlapped. In bf16 its optimizer (BF16_Optimizer, its own ZeRO-1) all-reduces the fp32
  gradients whole and then all-gathers the updated bf16 weights.
- nemo: Megatron-Core as NeMo 24+ configures it: the distributed optimizer's gradient
  reduce-scatter overlaps the backward and its parameter all-gather the next forward
  (`overlap_grad_reduce`, `overlap_param_gather`), and with sequence parallelism the
  tensor-parallel all-gathers and reduce-scatters overlap the matmuls beside them
  (`tp_comm_overlap`, Transformer Engine's userbuffers). Its layers are Transformer Engine's,
  which keep fewer activations than PyTorch's (te_activations.py).
- fsdp: PyTorch FSDP (torchtitan's FSDP2, MosaicML Composer): each layer's parameter all-gather
  is prefetched during the previous layer's compute and its gradient reduce-scatter runs
  during the next layer's backward; tensor-parallel collectives are not overlapped. Under
  float8 with sequence parallelism the tensor-parallel all-gathers move one byte an element
  (torchtitan's Float8ColwiseParallel and PrepareFloat8ModuleInput, fp8_comm.py).

- maxtext: Google's MaxText on TPUs (JAX, XLA's SPMD partitioner): the weights and optimizer
  states sharded over the slice (`ici_fsdp_parallelism`, ZeRO-3), each layer's weight
  all-gather and gradient reduce-scatter made asynchronous by XLA and run beside the compute
  (its configs' LIBTPU_INIT_ARGS: `--xla_enable_async_all_gather`,
  `--xla_tpu_enable_async_collective_fusion`, `--xla_tpu_overlap_compute_collective_tc`);
  tensor parallelism shards the residual stream on its width ('activation_embed' over
  'tensor' in base.yml's logical_axis_rules), which costs what sequence parallelism does. Its
  remat is jax.checkpoint (flax's nn.remat), which replays only what the backward reads
  (replay.py's pruned checkpoint: in MaxText's parallel block, neither output projection).

Full recomputation replays each block whole in the stacks whose checkpoint is reentrant
(Megatron-LM, Megatron-Core and so NeMo, DeepSpeed), and up to torch's early stop in those that
run torch's non-reentrant checkpoint (torchtitan): replay.py cites each. A run on another stack
of the same profile says which it used (`Training.checkpoint`: MosaicML Composer's and
metaseq's FSDP runs are reentrant).

Overlapped communication costs what it exceeds the compute it hides behind, and a fraction of
what it hides: while a collective runs beside a kernel the two share the streaming
multiprocessors and the memory bandwidth (NCCL's kernels run on SMs of their own), so the
compute slows. The exposed part is max(0, communication − compute) + interference ×
min(communication, compute), the interference fitted on each stack's published runs (0 would
be a perfect overlap, 1 no overlap at all): NeMo's collectives beside its GEMMs (Transformer
Engine's userbuffers for tensor parallelism, the distributed optimizer's bucketed NCCL calls)
cost it less than FSDP's NCCL all-gathers and reduce-scatters cost torchtitan and Composer.

A MoE layer waits on the host (dispatch.py): its forward takes the longer of the device's time
and the host's, which grows with the experts a rank holds; the host's time for each is fitted
per stack on its MoE runs (`host_moe_expert`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archspec.backends.count.replay import NON_REENTRANT, PRUNED, REENTRANT
from archspec.errors import SpecError, did_you_mean
from archspec.plan.efficiency import CALIBRATED, MAX_PLATEAU, Efficiency
from archspec.plan.hardware import tensor_core_twin


@dataclass(frozen=True)
class Engine:
    name: str
    overlap_dp: bool  # gradient reduce-scatter / all-reduce hidden behind the backward
    overlap_zero3: bool  # ZeRO-3 / FSDP all-gathers and reduce-scatters behind compute
    overlap_tp: bool  # tensor-parallel collectives behind the matmuls (with --sp)
    description: str
    # The matmul plateau this stack's runs reach, fitted on its published runs
    # (published.py; docs/plan.md gives the fit and the cross-validated errors).
    matmul_peak: float = CALIBRATED.matmul_peak
    # The plateau fitted on this stack's runs on one accelerator, where it has such runs.
    on: tuple[tuple[str, float], ...] = ()
    interleave: bool = True  # the interleaved pipeline schedule exists
    scatter_gather: bool = True  # pipeline sends 1/tp of the activation, gathered after
    # The highest ZeRO stage the stack runs beside a pipeline: Megatron-LM's distributed
    # optimizer and DeepSpeed's pipeline engine shard the optimizer states only (1); FSDP
    # keeps each stage's gathered weights through its micro-batches, which is ZeRO-2
    # (torchtitan's `reshard_after_forward=not pp_enabled`, parallelize_llama.py at 9dec370;
    # Llama 3's "we do not reshard after forward computation", Section 3.3.2).
    pipeline_zero: int = 1
    # Under --dtype fp8 with sequence parallelism the blocks' tensor-parallel all-gathers
    # move float8 (torchtitan's Float8ColwiseParallel and PrepareFloat8ModuleInput, which it
    # applies whenever it trains in float8 with TP: fp8_comm.py).
    fp8_sp_gather: bool = False
    # In bf16 under ZeRO-1 the gradients are all-reduced whole, not reduce-scattered, before
    # the updated weights are gathered (DeepSpeed's BF16_Optimizer beside a pipeline: step.py's
    # StepModel.exchange cites it).
    bf16_zero_all_reduce: bool = False
    # The activation checkpoint full recomputation runs (replay.py): reentrant, or torch's
    # non-reentrant one, whose replay stops early.
    checkpoint: str = REENTRANT
    # What its overlapped communication still costs, as a share of the compute it hides
    # (efficiency.py, `exposed` below), fitted on its published runs (published.py); a stack
    # whose runs overlap nothing takes the share fitted on all runs as one.
    interference: float = 0.5
    # Whose layers keep the activations (fit.MemoryModel): the generated PyTorch code's, which
    # Megatron-LM of 2022 keeps as well (Korthikanti et al. 2022), or Transformer Engine's in
    # Megatron-Core (te_activations.py: fused norms and SwiGLU, fp8 inputs).
    kernels: str = "pytorch"
    # The host's seconds for a MoE layer's forward per expert a rank holds (dispatch.py),
    # fitted on this stack's MoE runs (published.py); 0 where it has none.
    host_moe_expert: float = 0.0

    def efficiency(self, accelerator: str | None = None) -> Efficiency:
        accelerator = tensor_core_twin(accelerator) if accelerator else accelerator
        peak = dict(self.on).get(accelerator) or transferred(self, accelerator)
        return replace(CALIBRATED, matmul_peak=peak, matmul_half=FITTED_HALF,
                       fp8_matmul=FITTED_FP8, attention=FITTED_ATTENTION,
                       overlap_interference=self.interference,
                       host_moe_expert=self.host_moe_expert)  # fmt: skip


# The half-size (at an A100's FLOPs per byte; roofline.half_size scales it to each part) and the
# fp8 factor fitted with the plateaus below on all of published.yaml; the attention factor is
# held at 1 (published.ATTENTION says why).
FITTED_HALF = 128.0
FITTED_FP8 = 1.0
FITTED_ATTENTION = 1.0

ENGINES = {
    "megatron": Engine("megatron", False, False, False,
                       "Megatron-LM (2021-22): no overlap", 0.82, (("a100-80g", 0.82),)),
    "deepspeed": Engine("deepspeed", False, False, False,
                        "Megatron-DeepSpeed: DeepSpeed's pipeline, no interleaving, no overlap",
                        0.62, (("a100-80g", 0.62),), interleave=False, scatter_gather=False,
                        bf16_zero_all_reduce=True),
    "nemo": Engine("nemo", True, True, True,
                   "NeMo / Megatron-Core: DP and TP communication overlapped", 0.74,
                   (("b200", 0.80), ("b300", 0.74), ("gb200", 0.70), ("gb300", 0.88),
                    ("h100-sxm", 0.74)), interference=0.25,
                   kernels="transformer_engine", host_moe_expert=0.00045),
    "fsdp": Engine("fsdp", True, True, False,
                   "PyTorch FSDP, torchtitan, Composer: sharded DP communication overlapped",
                   0.70, (("a100-80g", 0.76), ("h100-sxm", 0.68)), pipeline_zero=2,
                   fp8_sp_gather=True, checkpoint=NON_REENTRANT),
    # Fitted on two sources: the v5p table's sixteen runs, each layout on one slice and on two
    # (data parallelism over the data-center network between them), and the v5e table's 24,
    # one to 32 slices. The two-slice rows, whose exchange is slow enough to show, set the
    # overlap (on the v5p's one-slice rows alone the interference went to the top of the
    # grid, 1.0, with a plateau of 0.84: there the plateau and the overlap stood in for each
    # other). The v5e's plateau is 0.86, the v5p's 0.78: neither carries to the other.
    "maxtext": Engine("maxtext", True, True, True,
                      "MaxText (JAX/XLA on TPUs): FSDP and TP communication overlapped",
                      0.82, (("tpu-v5e", 0.86), ("tpu-v5p", 0.78)), checkpoint=PRUNED,
                      interference=0.5),
}  # fmt: skip
DEFAULT_ENGINE = "megatron"
# The stack a plan assumes when no --engine is given, by the accelerator's kind (systems.yaml):
# Megatron-LM and the PyTorch stacks run on GPUs, MaxText on TPUs.
DEFAULT_ENGINES = {"gpu": DEFAULT_ENGINE, "tpu": "maxtext"}


def transferred(engine: Engine, accelerator: str | None) -> float:
    """The plateau of an engine on an accelerator none of its published runs used: its
    plateau on one it was fitted on, times how another engine fitted on both gains or loses
    between them (published.py fits the same way); else the engine's own plateau."""
    for fitted_on, peak in engine.on:
        for other in ENGINES.values():
            there, here = dict(other.on).get(accelerator), dict(other.on).get(fitted_on)
            if other is not engine and there and here:
                return min(MAX_PLATEAU, round(peak * there / here, 2))
    return engine.matmul_peak


def get_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise SpecError(
            f"--engine takes {', '.join(ENGINES)} (got '{name}')",
            hint=did_you_mean(name, ENGINES)
            or "; ".join(f"{e.name}: {e.description}" for e in ENGINES.values()),
        )
    return ENGINES[name]


def with_async_tp(engine: Engine, async_tp: bool) -> Engine:
    """The engine with torchtitan's async tensor parallelism (`enable_async_tensor_parallel`):
    under torch.compile, inductor's micro-pipelined TP (`_micro_pipeline_tp`, over symmetric
    memory) splits each sequence-parallel all-gather and reduce-scatter and runs the pieces
    beside the matmul they feed or follow (parallelize_llama.py's apply_tp at torchtitan
    9dec370), so the tensor-parallel collectives overlap the matmuls as NeMo's do."""
    return replace(engine, overlap_tp=True) if async_tp else engine


def exposed(communication: float, compute: float, overlapped: bool, interference: float) -> float:
    """What `communication` adds to a step: all of it, or, overlapped with `compute`, what the
    compute cannot hide and `interference` of what it does (the two slow each other)."""
    if not overlapped:
        return communication
    hidden = min(communication, compute)
    return communication - hidden + interference * hidden
