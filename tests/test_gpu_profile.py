"""benchmarks/gpu_profile.py: its parts run on CPU at tiny sizes, it sorts kernels and spans
as a profile shows them, and its H100 profile (benchmarks/gpu-h100/profile) holds the figures
plan and serve take from elsewhere: the AdamW step plan costs, the host time serve warns of."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from archspec.cli.common import resolve_spec, with_overrides
from archspec.ir.build import build_ir
from archspec.plan.hardware import get_system
from archspec.plan.serve_engine import EAGER_HOST_LAYER_S
from archspec.plan.step import Layout, StepModel, Training

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_profile  # noqa: E402
from run_standard import LLAMA_1B  # noqa: E402

PROFILE = ROOT / "benchmarks" / "gpu-h100" / "profile"


def _event(name: str, start: float, end: float) -> SimpleNamespace:
    return SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end))


def test_kernels_are_sorted_by_kind() -> None:
    kinds = {
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NTT": "matmul",
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16": "attention",
        "void at::native::multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>>": (
            "optimizer"
        ),
        "triton_poi_fused__to_copy_12": "triton",
        "void at::native::cunn_SoftMaxForward<4, float>": "other",
    }
    assert {name: gpu_profile.kind_of(name) for name in kinds} == kinds


def test_busy_time_is_the_union_of_the_kernels() -> None:
    kernels = [_event("a", 0, 10), _event("b", 5, 20), _event("c", 30, 40)]
    assert gpu_profile._busy_seconds(kernels) == pytest.approx(30e-6)


def test_an_annotation_span_is_not_a_kernel(monkeypatch) -> None:
    # The GPU-side span of "Optimizer.step#AdamW.step" holds the kernels under it.
    from torch.autograd import DeviceType

    span = _event("Optimizer.step#AdamW.step", 0, 100)
    inner = [_event("multi_tensor_apply_kernel", 0, 40), _event("triton_poi_0", 50, 90)]
    for e in [span, *inner]:
        e.device_type = DeviceType.CUDA
    prof = SimpleNamespace(events=lambda: [span, *inner])
    assert gpu_profile._kernels(prof) == inner


@pytest.mark.long  # about a minute: three processes on CPU
@pytest.mark.parametrize("part", ["dispatch", "decode", "train"])
def test_dry_run(part: str, tmp_path: Path) -> None:
    script = ROOT / "benchmarks" / "gpu_profile.py"
    done = subprocess.run([sys.executable, str(script), part, "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / f"{part}.json").read_text())["part"] == part


def _profile(part: str) -> dict:
    return json.loads((PROFILE / f"{part}.json").read_text())


def test_plan_costs_the_adamw_step_that_was_measured() -> None:
    """plan's optimizer time (bytes moved at the fitted memory efficiency) for the profiled
    llama-1b step on one H100, against the fused AdamW kernels the profile timed: nothing of
    plan's was fitted to this run."""
    measured = _profile("train")
    ir = with_overrides(build_ir(resolve_spec("llama-2-7b", LLAMA_1B)), LLAMA_1B)
    run = Training(gpus=1, global_batch=measured["batch"], seq=measured["seq"], grad_dtype="fp32")
    step = StepModel(ir, get_system("h100-sxm"), run).step(
        Layout(tp=1, pp=1, micro_batch=measured["batch"])
    )
    assert step.breakdown["optimizer"] == pytest.approx(
        measured["kernel_s_by_kind"]["optimizer"], rel=0.10
    )


def test_the_host_time_serve_warns_of_is_the_profiled_one() -> None:
    """The eager engines' host time a layer (serve_engine.EAGER_HOST_LAYER_S, from gpu_check's
    generations) against the profile's eager decode steps, each layer's kernels a small part."""
    for model in ("llama-7b", "llama-1b"):
        layer = _profile("decode")[model]["per_layer"]
        assert layer["step_s"] == pytest.approx(EAGER_HOST_LAYER_S[0], rel=0.15), model
        assert layer["gpu_kernel_s"] < layer["step_s"] / 2, model
