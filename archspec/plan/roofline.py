"""One op's time on one accelerator: the roofline with achievable peaks.

time = max(FLOPs / (peak × efficiency), bytes / (bandwidth × efficiency)): an op is bound by
whichever of the tensor cores and the memory it would keep busy longer (Williams, Waterman and
Patterson 2009). A matmul's efficiency depends on its shape after tensor parallelism has split
it (efficiency.py); elementwise work runs at the matmul plateau, which it never approaches
before its bytes bind.
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.plan.attention_kernels import CUDNN_SINK_ROW_S, cudnn_attention_flops
from archspec.plan.efficiency import Efficiency
from archspec.plan.hardware import Accelerator, load_accelerators, tensor_core_twin
from archspec.plan.opcost import OpCost

# FLOPs per byte of memory of an A100's bf16 peak (312 TFLOP/s over 2,039 GB/s, systems.yaml):
# the balance at which the fitted GEMM half-size holds as it is.
A100_BALANCE = 312e12 / 2039e9

# An op cost with the micro-batch and lengths put in: (cost, FLOPs, bytes, (M, N, K) or ()).
Numbers = tuple[OpCost, float, float, tuple[float, ...]]


@dataclass(frozen=True)
class Roofline:
    peak: float  # FLOP/s, dense, in the compute dtype
    bandwidth: float  # bytes/s, as achieved
    eff: Efficiency
    # The projections' matmuls: the compute dtype's peak, or fp8's when training in fp8. FP8
    # training (Transformer Engine, torchao.float8) casts the inputs of the linear layers to
    # fp8; the attention core, norms and elementwise ops stay bf16 (NeMo's and torchtitan's
    # defaults), so only the projections run at the fp8 peak.
    linear_peak: float = 0.0
    # The GEMM half-size (efficiency.py) at the peak the projections and the attention core
    # run at, or 0 for the fitted one as it is. See `of`.
    linear_half: float = 0.0
    half: float = 0.0
    # The attention core runs cuDNN's fused kernel at its measured throughput, not the GEMM
    # rule (attention_kernels.py: Transformer Engine's choice on Hopper).
    cudnn_attention: bool = False
    # Seconds a fused attention with sinks adds per query row and head, forward and backward:
    # cuDNN's measured cost (attention_kernels.CUDNN_SINK_ROW_S) where the run's attention is
    # cuDNN's; 0 where the kernel takes sinks among its tiles (FlashAttention-3's s_aux).
    sink_row_s: float = 0.0

    @classmethod
    def of(cls, accel: Accelerator, dtype: str, eff: Efficiency,
           cudnn_attention: bool = False, cudnn_sinks: bool = False) -> Roofline:  # fmt: skip
        # Weight-only int8/int4 compute in bf16 (count's memory model says the same); fp8
        # training computes in bf16 except the projections.
        compute = dtype if dtype in ("fp32", "bf16", "fp16") else "bf16"
        peak = accel.peak(compute)
        linear = accel.peak("fp8") if dtype == "fp8" else peak
        # More HBM than the chip was built with does not make its GEMMs more efficient: a part
        # with another's tensor cores and clocks (an H200 beside an H100 SXM) runs the same
        # kernels at the same tiles, so its balance counts the twin's bandwidth where its own
        # is higher (measured: benchmarks/RESULTS.md, "A second accelerator"). Less HBM (the
        # H100 96GB's 2.4 TB/s, the A100 40GB's) still costs, as on any part.
        twin = tensor_core_twin(accel.key)
        chip = load_accelerators().get(twin, accel) if twin != accel.key else accel
        gemm_bandwidth = min(accel.bandwidth, chip.bandwidth)
        return cls(peak, accel.bandwidth * eff.memory_peak, eff,
                   linear * (eff.fp8_matmul if dtype == "fp8" else 1.0),
                   half_size(eff, linear, gemm_bandwidth),
                   half_size(eff, peak, gemm_bandwidth), cudnn_attention,
                   CUDNN_SINK_ROW_S if cudnn_sinks else 0.0)  # fmt: skip

    def matmul_time(self, flops: float, m: float, n: float, k: float, peak: float = 0.0,
                    half: float = 0.0) -> float:  # fmt: skip
        eff = self.eff.matmul(m, n, k, half or self.half or self.eff.matmul_half)
        return flops / ((peak or self.peak) * eff)

    def op_time(self, item: Numbers, tp: int = 1, sp: bool = False) -> float:
        """Forward seconds of one op on one tensor-parallel rank (`sp`: sequence parallelism
        splits the ops tensor parallelism leaves whole)."""
        cost, flops, moved, shape = item
        ways = tp if (cost.tp != "whole" or sp) else 1
        if cost.kind == "matmul" and shape:
            m, n, k = shape
            if cost.tp == "column":
                n /= tp
            elif cost.tp == "row":
                k /= tp
            if cost.attn_core or not cost.in_fp8:
                peak, half = self.peak, self.half
            else:
                peak, half = self.linear_peak or self.peak, self.linear_half or self.half
            if cost.label == "attention.flash" and self.cudnn_attention:
                compute = flops / ways / cudnn_attention_flops(n, k)  # keys, head width
            else:
                if cost.label == "attention.flash":
                    peak *= self.eff.attention
                compute = self.matmul_time(flops / ways, m, n, k, peak, half)
            if self.sink_row_s and cost.sink_rows:
                # Measured forward and backward; op_time is the forward the step multiplies
                # by 1 + backward.
                compute += float(cost.sink_rows) / ways * self.sink_row_s / (1 + cost.backward)
        else:
            compute = flops / ways / (self.peak * self.eff.matmul_peak)
        return max(compute, moved / ways / self.bandwidth)


def half_size(eff: Efficiency, peak: float, bandwidth: float) -> float:
    """The GEMM dimension at which a matmul runs at half its plateau on a part with this
    datasheet peak and memory bandwidth: the fitted one, which holds at an A100's bf16 balance,
    times how many more FLOPs per byte of memory the part's peak asks for. A GEMM tile must do
    that many more FLOPs per byte it loads to keep the tensor cores busy, so a faster part needs
    bigger tiles, which small dimensions fill less well (NVIDIA's Matrix Multiplication
    Background guide: a GEMM is math-limited once its arithmetic intensity exceeds the part's
    ops:byte ratio)."""
    return eff.matmul_half * (peak / bandwidth) / A100_BALANCE
