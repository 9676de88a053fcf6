"""Which accelerator of the hardware catalogue a torch device is, for MFU (model FLOPs
utilisation).

MFU is achieved FLOP/s over the device's peak for the dtype the matmuls run in. The peaks are
the catalogue's (archspec/plan/systems.yaml, each with its source): dense tensor-core figures,
`fp32` the plain FP32 rate and `tf32` the tensor-core rate PyTorch uses for fp32 matmuls when
`torch.set_float32_matmul_precision("high")` (or `allow_tf32`) is set; a dtype the entry does
not list is one the device lacks. This module only matches device names to entries.

This module is plain data: it does not import torch.
"""

from __future__ import annotations

import re

from archspec.plan.hardware import Accelerator, load_accelerators

# Most specific first: "GH200" before "H200", "H100 PCIe" before "H100", "L40S" before "L40"
# before "L4", "A100" before "A10". Patterns match torch.cuda.get_device_name(), e.g.
# "NVIDIA H100 80GB HBM3" (SXM5), "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "NVIDIA L4".
DEVICE_NAMES: list[tuple[str, str]] = [
    (r"GH200", "h100-sxm"),  # Grace Hopper: the same Hopper GPU as H100 SXM
    (r"H200 NVL", "h200-nvl"),
    (r"H200", "h200"),
    (r"H100 NVL", "h100-nvl"),
    (r"H100 PCIe", "h100-pcie"),
    (r"H100", "h100-sxm"),
    (r"B200", "b200"),
    (r"A100", "a100-80g"),  # every A100 has the same tensor cores
    (r"A10\b", "a10"),
    (r"L40S", "l40s"),
    (r"L40\b", "l40"),
    (r"L4\b", "l4"),
    (r"V100", "v100"),
    (r"T4\b", "t4"),
    (r"RTX 4090", "rtx-4090"),
    (r"RTX 3090", "rtx-3090"),
    (r"MI300X", "mi300x"),
]


def find_accelerator(device_name: str) -> Accelerator | None:
    """The catalogue entry for a device name from torch.cuda.get_device_name(), or None."""
    for pattern, key in DEVICE_NAMES:
        if re.search(pattern, device_name, re.IGNORECASE):
            return load_accelerators()[key]
    return None


def peak_flops(device_name: str, dtype: str, tf32: bool = False) -> float | None:
    """Peak dense FLOP/s of the device for matmuls in `dtype` (bf16, fp16, fp32); None for an
    unknown device or a dtype it lacks. `tf32`: fp32 matmuls run on the TF32 tensor cores."""
    accelerator = find_accelerator(device_name)
    if accelerator is None:
        return None
    peaks = accelerator.peak_tflops
    if dtype == "fp32" and tf32 and "tf32" in peaks:
        dtype = "tf32"
    return peaks[dtype] * 1e12 if dtype in peaks else None
