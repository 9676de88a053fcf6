"""Peak dense throughput of common accelerators, for MFU (model FLOPs utilisation).

MFU is achieved FLOP/s over the device's peak for the dtype the matmuls run in. The figures
are NVIDIA's and AMD's datasheet numbers for the tensor cores, in TFLOP/s, *dense*: datasheets
print the 2:4 structured-sparsity figure (marked *) first, and that is twice the dense one,
which is what a transformer's matmuls can reach. `fp32` is the plain FP32 (non-tensor-core)
rate, `tf32` the tensor-core rate PyTorch uses for fp32 matmuls when
`torch.set_float32_matmul_precision("high")` (or `allow_tf32`) is set. fp16 and bf16 run at
the same rate on every GPU listed that has bf16; `None` means the dtype is not supported.

This module is plain data: it does not import torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    """Dense TFLOP/s per dtype, and where the numbers come from."""

    label: str
    bf16: float | None
    fp16: float
    tf32: float | None
    fp32: float
    source: str


# Most specific first: "GH200" before "H200", "H100 PCIe" before "H100", "L40S" before "L40"
# before "L4", "A100" before "A10". Patterns match torch.cuda.get_device_name(), e.g.
# "NVIDIA H100 80GB HBM3" (SXM5), "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA L4".
_H100_SXM = Peak(
    "H100 SXM", 989.4, 989.4, 494.7, 66.9,
    "NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 1,979*, TF32 989*, FP32 67 TFLOPS",
)  # fmt: skip
_H100_NVL = Peak(
    "H100 NVL", 835.5, 835.5, 417.5, 60.0,
    "NVIDIA H100 datasheet (NVL, per GPU): BF16 1,671*, TF32 835*, FP32 60 TFLOPS",
)  # fmt: skip
PEAKS: list[tuple[str, Peak]] = [
    (r"GH200", _H100_SXM),  # Grace Hopper: the same Hopper GPU as H100 SXM
    (r"H200 NVL", Peak(
        "H200 NVL", 835.5, 835.5, 417.5, 60.0,
        "NVIDIA H200 datasheet (NVL): BF16 1,671*, TF32 835*, FP32 60 TFLOPS",
    )),
    (r"H200", Peak(
        "H200 SXM", 989.4, 989.4, 494.7, 66.9,
        "NVIDIA H200 datasheet (SXM): BF16 1,979*, TF32 989*, FP32 67 TFLOPS",
    )),
    (r"H100 NVL", _H100_NVL),
    (r"H100 PCIe", Peak(
        "H100 PCIe", 756.0, 756.0, 378.0, 51.2,
        "NVIDIA H100 datasheet (PCIe): BF16 1,513*, TF32 756*, FP32 51 TFLOPS",
    )),
    (r"H100", _H100_SXM),
    (r"B200", Peak(
        "B200", 2250.0, 2250.0, 1125.0, 75.0,
        "NVIDIA HGX B200 datasheet, 8 GPUs: FP16/BF16 36 PF*, TF32 18 PF*, FP32 600 TF; / 8",
    )),
    (r"A100", Peak(
        "A100", 312.0, 312.0, 156.0, 19.5,
        "NVIDIA A100 datasheet (40/80 GB, SXM and PCIe): BF16 312, TF32 156, FP32 19.5 TFLOPS",
    )),
    (r"A10\b", Peak(
        "A10", 125.0, 125.0, 62.5, 31.2,
        "NVIDIA A10 datasheet: BF16 125 (250*), TF32 62.5 (125*), FP32 31.2 TFLOPS",
    )),
    (r"L40S", Peak(
        "L40S", 362.05, 362.05, 183.0, 91.6,
        "NVIDIA L40S datasheet: BF16 362.05 (733*), TF32 183 (366*), FP32 91.6 TFLOPS",
    )),
    (r"L40\b", Peak(
        "L40", 181.0, 181.0, 90.5, 90.5,
        "NVIDIA L40 datasheet: BF16 181 (362*), TF32 90.5 (181*), FP32 90.5 TFLOPS",
    )),
    (r"L4\b", Peak(
        "L4", 121.0, 121.0, 60.0, 30.3,
        "NVIDIA L4 datasheet: BF16 242*, TF32 120*, FP32 30.3 TFLOPS",
    )),
    (r"V100", Peak(
        "V100", None, 125.0, None, 15.7,
        "NVIDIA V100 datasheet (SXM2): FP16 tensor 125, FP32 15.7 TFLOPS; no bf16",
    )),
    (r"T4\b", Peak(
        "T4", None, 65.0, None, 8.1,
        "NVIDIA T4 datasheet: FP16 mixed precision 65, FP32 8.1 TFLOPS; no bf16",
    )),
    (r"RTX 4090", Peak(
        "RTX 4090", 165.2, 165.2, 82.6, 82.6,
        "NVIDIA Ada whitepaper: FP16/BF16 tensor with FP32 accumulate 165.2 (330.4*), TF32 82.6",
    )),
    (r"RTX 3090", Peak(
        "RTX 3090", 35.6, 35.6, 35.6, 35.6,
        "NVIDIA GA102 whitepaper: FP16/BF16 tensor with FP32 accumulate 35.6 (71*), TF32 35.6",
    )),
    (r"MI300X", Peak(
        "MI300X", 1307.4, 1307.4, 653.7, 163.4,
        "AMD Instinct MI300X datasheet: BF16 1,307.4 (2,614.9*), TF32 653.7, FP32 matrix 163.4",
    )),
]  # fmt: skip


def find_peak(device_name: str) -> Peak | None:
    """The table entry for a device name from torch.cuda.get_device_name(), or None."""
    for pattern, peak in PEAKS:
        if re.search(pattern, device_name, re.IGNORECASE):
            return peak
    return None


def peak_flops(device_name: str, dtype: str, tf32: bool = False) -> float | None:
    """Peak dense FLOP/s of the device for matmuls in `dtype` (bf16, fp16, fp32); None for an
    unknown device or a dtype it lacks. `tf32`: fp32 matmuls run on the TF32 tensor cores."""
    peak = find_peak(device_name)
    if peak is None:
        return None
    if dtype == "fp32":
        tflops = peak.tf32 if tf32 and peak.tf32 is not None else peak.fp32
    else:
        tflops = getattr(peak, dtype)
    return tflops * 1e12 if tflops is not None else None
