"""One op's time on one accelerator: the roofline with achievable peaks.

time = max(FLOPs / (peak × efficiency), bytes / (bandwidth × efficiency)): an op is bound by
whichever of the tensor cores and the memory it would keep busy longer (Williams, Waterman and
Patterson 2009). A matmul's efficiency depends on its shape after tensor parallelism has split
it (efficiency.py); elementwise work runs at the matmul plateau, which it never approaches
before its bytes bind.
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.plan.efficiency import Efficiency
from archspec.plan.hardware import Accelerator
from archspec.plan.opcost import OpCost

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

    @classmethod
    def of(cls, accel: Accelerator, dtype: str, eff: Efficiency) -> Roofline:
        # Weight-only int8/int4 compute in bf16 (count's memory model says the same); fp8
        # training computes in bf16 except the projections.
        compute = dtype if dtype in ("fp32", "bf16", "fp16") else "bf16"
        peak = accel.peak(compute)
        linear = accel.peak("fp8") * eff.fp8_matmul if dtype == "fp8" else peak
        return cls(peak, accel.bandwidth * eff.memory_peak, eff, linear)

    def matmul_time(self, flops: float, m: float, n: float, k: float, peak: float = 0.0) -> float:
        return flops / ((peak or self.peak) * self.eff.matmul(m, n, k))

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
            peak = self.peak if cost.attn_core else (self.linear_peak or self.peak)
            if cost.label == "attention.flash":
                peak *= self.eff.attention
            compute = self.matmul_time(flops / ways, m, n, k, peak)
        else:
            compute = flops / ways / (self.peak * self.eff.matmul_peak)
        return max(compute, moved / ways / self.bandwidth)
