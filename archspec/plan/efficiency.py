"""What fraction of a peak a kernel reaches: the time model's only fitted constants.

A matmul of shape (M, N, K) reaches `MATMUL_PEAK` of the tensor cores' dense peak when all three
dimensions are large, and less as any of them shrinks: each dimension d contributes the factor
d / (d + MATMUL_HALF). This is the shape of measured GEMM efficiency curves (a GEMM is
compute-bound once every dimension is well past the tile size, 128 to 256 on A100 and H100:
NVIDIA's "Matrix Multiplication Background" guide shows throughput saturating with each of M,
N and K the same way), with two numbers: the plateau and the dimension at which a GEMM runs at
half of it. Both are calibrated (validation.py, `calibrate`) on a third of the published runs
in docs/plan.md and checked on the rest. The half-size is stated at an A100's balance (FLOPs
per byte of memory); a part whose peak asks more FLOPs of each byte needs bigger tiles to keep
busy, and the roofline scales it so (roofline.half_size).

Bandwidth-bound kernels (norms, elementwise ops, softmax) reach `MEMORY_PEAK` of the memory
bandwidth, and collectives `NETWORK_PEAK` of the link bandwidth: fixed, not fitted. 0.8 of HBM
bandwidth is what streaming kernels reach on A100 and H100 (e.g. the STREAM-like copy
bandwidths in Jia et al. 2018's and Citadel's microbenchmarking reports: 80-90%); 0.8 of the
link is NCCL's bus bandwidth on DGX A100's NVLink (about 230-240 GB/s of 300 in nccl-tests'
all_reduce_perf) and on 200 Gb/s InfiniBand (about 20-23 GB/s of 25).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Efficiency:
    matmul_peak: float = 0.755  # calibrated (validation.calibrate)
    matmul_half: float = 32.0  # calibrated: a GEMM dimension of 32 halves the plateau
    memory_peak: float = 0.80
    network_peak: float = 0.80
    # What fraction of the fp8 peak an fp8 projection reaches relative to a bf16 one at the
    # same shape: fp8 GEMMs of training shapes fall further short of their doubled peak, and
    # the casts to fp8 (scaling, amax) cost memory traffic. Fitted on the fp8 runs of
    # published.yaml (published.py).
    fp8_matmul: float = 1.0
    # What fraction of the matmul plateau a fused (flash) attention kernel reaches beyond what
    # a GEMM of its shape would (its softmax and online rescaling run between the two matmuls
    # on the same tiles). Held at 1 by the fit on published.yaml (published.ATTENTION).
    attention: float = 1.0
    # What communication overlapped with compute still costs, as a fraction of the part the
    # compute hides: the collective's kernels take streaming multiprocessors and memory
    # bandwidth from the kernels beside them, so an overlapped step is slower than its compute
    # alone (0: a perfect overlap, 1: none). Fitted on published.yaml (published.py).
    overlap_interference: float = 0.0
    # The host's seconds for a MoE layer's forward, per expert the rank holds: the host waits
    # on the device inside every MoE layer, so that forward takes the longer of the host's
    # time and the device's (dispatch.py). Fitted on the published MoE runs (published.py).
    host_moe_expert: float = 0.0

    def matmul(self, m: float, n: float, k: float, half: float | None = None) -> float:
        half = self.matmul_half if half is None else half
        eff = self.matmul_peak
        for d in (m, n, k):
            eff *= d / (d + half)
        return eff


# The highest matmul plateau a fit may give (published.py's grid stops there): cuBLAS GEMMs
# of large shapes reach about 0.9 of the dense peak, never all of it.
MAX_PLATEAU = 0.90

# The constants `archspec plan` uses: the fit of validation.calibrate() on the calibration
# cases (docs/plan.md gives the fit and the held-out errors).
CALIBRATED = Efficiency()
