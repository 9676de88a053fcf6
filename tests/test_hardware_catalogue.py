"""One hardware catalogue (plan/systems.yaml): `archspec plan` and `archspec bench` read the
same peaks, and the figures are the ones their cited sources print."""

from __future__ import annotations

import re

from archspec.bench import devices
from archspec.plan.hardware import get_system, load_accelerators


def test_every_bench_device_name_is_a_catalogue_entry_with_its_source() -> None:
    accelerators = load_accelerators()
    for _, key in devices.DEVICE_NAMES:
        entry = accelerators[key]
        assert entry.source and entry.memory_gib > 0 and entry.memory_bandwidth_gbs > 0, key


def test_plan_and_bench_read_the_same_peak() -> None:
    h100 = get_system("h100-sxm").accelerator
    for dtype in ("bf16", "fp16", "fp32"):
        assert devices.peak_flops("NVIDIA H100 80GB HBM3", dtype) == h100.peak(dtype)
    assert devices.peak_flops("NVIDIA H100 80GB HBM3", "fp32", tf32=True) == h100.peak("tf32")


def test_hopper_peaks_are_the_whitepapers_dense_figures() -> None:
    # NVIDIA H100 Tensor Core GPU Architecture whitepaper, Table 3, H100 SXM5: BF16/FP16
    # 989.4 dense (1,978.9 sparse), TF32 494.7, FP32 66.9; the source string cites them.
    h100 = load_accelerators()["h100-sxm"]
    assert h100.peak_tflops == {
        "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "int8": 1978.9
    }  # fmt: skip
    for figure in ("989.4", "494.7", "66.9", "1,978.9"):
        assert re.search(rf"\b{re.escape(figure)}\b", h100.source), figure
