"""`--attn-kernel cudnn`: the attention core at cuDNN's fused kernel's throughput as measured
on an H100 (benchmarks/gpu-h100-sweep/kernels-backends.json), the kernel Transformer Engine
prefers on Hopper, in place of the GEMM rule that FlashAttention-2's kernel follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archspec.plan.attention_kernels import (
    CUDNN_H100_TFLOPS,
    cudnn_attention_flops,
    measured_on,
)
from archspec.plan.engines import ENGINES
from archspec.plan.hardware import load_accelerators
from archspec.plan.opcost import OpCost
from archspec.plan.roofline import Roofline
from tests.hostile import cli, refused

MEASURED = (
    Path(__file__).resolve().parent.parent / "benchmarks/gpu-h100-sweep/kernels-backends.json"
)


def _cudnn_rows() -> list[dict]:
    result = json.loads(MEASURED.read_text())
    assert result["device"] == "NVIDIA H100 80GB HBM3"
    return [r for r in result["attention"] if r.get("backend") == "cudnn"]


def test_the_table_is_the_measurement() -> None:
    rows = _cudnn_rows()
    assert len(rows) == sum(len(by_seq) for by_seq in CUDNN_H100_TFLOPS.values())
    for r in rows:
        table = CUDNN_H100_TFLOPS[r["head_dim"]][r["seq"]]
        assert table == pytest.approx(r["forward_backward_tflops"], abs=0.05)


def test_an_h100s_attention_core_takes_the_measured_time() -> None:
    """The forward and backward of one measured call (batch × 32 heads of S × S causal at head
    width d) under a TE stack's roofline on the H100's catalogue entry: cuDNN's measured
    seconds, at every measured shape."""
    h100 = load_accelerators()["h100-sxm"]
    roofline = Roofline.of(h100, "bf16", ENGINES["nemo"].efficiency("h100-sxm"), True)
    for r in _cudnn_rows():
        s, d = r["seq"], r["head_dim"]
        flops = 4 * r["batch"] * r["heads"] * s * s * d / 2  # the causal half, forward
        cost = OpCost("attention.flash", "matmul", flops, 0, (s, s, d), "split",
                      attn_core=True, backward=2.5)  # fmt: skip
        forward = roofline.op_time((cost, flops, 0.0, (s, s, d)))
        assert (1 + cost.backward) * forward == pytest.approx(r["forward_backward_s"], rel=1e-3)


def test_between_and_beyond_the_measured_shapes() -> None:
    at = cudnn_attention_flops
    assert at(2048, 128) < at(3000, 128) < at(4096, 128)  # log2(S) between the points
    assert at(2048, 64) < at(2048, 96) < at(2048, 128)  # the head width between them
    assert at(65536, 128) == at(8192, 128)  # held at the longest measured
    assert at(128, 64) == at(512, 64)  # and at the shortest
    assert at(4096, 192) == at(4096, 128)  # a wider head at 128's


@pytest.mark.parametrize(
    ("accelerator", "measured"),
    [("h100-sxm", True), ("h200", True), ("h800", True),  # an H100's tensor cores
     ("b200", False), ("gb200", False), ("a100-80g", False)],
)  # fmt: skip
def test_where_the_measurement_holds(accelerator: str, measured: bool) -> None:
    assert measured_on(accelerator) is measured


LLAMA_8B = ["plan", "llama-3-8b", "--gpus", "8", "--global-batch", "128", "--seq", "8192",
            "--dtype", "fp8", "--engine", "nemo", "--zero", "3", "--batch", "1",
            "--json"]  # fmt: skip


def _plan(*args: str) -> dict:
    result = cli(*LLAMA_8B, *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_option_times_only_the_attention_core_anew() -> None:
    rule, cudnn = _plan("--gpu", "h100"), _plan("--gpu", "h100", "--attn-kernel", "cudnn")
    assert rule["attn_kernel"] == "fa2" and cudnn["attn_kernel"] == "cudnn"
    assert cudnn["step_time_s"] < rule["step_time_s"]
    # The attention core alone changes: everything but compute is the same, and so is memory.
    for part in ("dp_comm", "tp_comm", "optimizer"):
        assert cudnn["breakdown"][part] == pytest.approx(rule["breakdown"][part])
    assert cudnn["memory"] == rule["memory"]


def test_bad_kernels_are_refused_naming_the_values() -> None:
    refused(cli(*LLAMA_8B, "--gpu", "b200", "--attn-kernel", "cudnn"), "b200", "H100")
    refused(cli(*LLAMA_8B, "--gpu", "h100", "--attn-kernel", "cudn"), "fa2, cudnn",
            "did you mean 'cudnn'")  # fmt: skip
    refused(cli(*LLAMA_8B, "--gpu", "h100", "--attn", "eager", "--attn-kernel", "cudnn"),
            "--attn flash", "--attn eager")  # fmt: skip


def test_serving_reports_the_option_as_ignored() -> None:
    result = cli("plan", "llama-3-8b", "--mode", "serve", "--gpu", "h100", "--batch", "1",
                 "--attn-kernel", "cudnn", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--attn-kernel" in json.loads(result.stdout)["ignored"]
