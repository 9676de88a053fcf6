"""What plan's training model gained for the published runs: the GEMM half-size that grows with
a part's FLOPs per byte of memory, Llama 3.1 405B's pipeline split as Megatron-Core makes it,
the TPU slices of the catalogue and the memory a device keeps from the tensors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan import published
from archspec.plan.efficiency import Efficiency
from archspec.plan.hardware import get_system
from archspec.plan.roofline import Roofline

runner = CliRunner()


def test_the_half_size_grows_with_the_flops_per_byte_of_the_part() -> None:
    eff = Efficiency(matmul_half=64.0)
    # The fitted half-size holds at an A100's balance: 312 TFLOP/s over 2,039 GB/s.
    a100 = Roofline.of(get_system("a100-80g").accelerator, "bf16", eff)
    assert a100.half == pytest.approx(64.0) and a100.linear_half == pytest.approx(64.0)
    # H100 SXM5: 989.4 TFLOP/s bf16, 1,978.9 fp8, over 3,350 GB/s (the datasheets).
    h100 = Roofline.of(get_system("h100-sxm").accelerator, "fp8", eff)
    balance = 312e12 / 2039e9
    assert h100.half == pytest.approx(64.0 * 989.4e12 / 3350e9 / balance)
    assert h100.linear_half == pytest.approx(64.0 * 1978.9e12 / 3350e9 / balance)
    # A smaller GEMM loses more of the plateau on the faster part.
    small, large = (4096, 2048, 2048), (4096, 8192, 8192)
    ratio = {r: r.eff.matmul(*small, r.half) / r.eff.matmul(*large, r.half) for r in (a100, h100)}
    assert ratio[h100] < ratio[a100] < 1


def test_a_part_with_another_parts_tensor_cores_takes_its_half_size() -> None:
    """An H200 is an H100 SXM's chip beside 4.8 TB/s of HBM3e (the datasheets): the GEMM
    kernels and tiles are the same, so is the half-size; the bandwidth binds through the
    roofline alone. Measured on one of each (benchmarks/RESULTS.md, "A second accelerator"),
    the H200's compiled llama-1b training step was 1.08x the H100's, where a half-size scaled
    with the H200's own bandwidth made plan predict 1.23x."""
    eff = Efficiency(matmul_half=64.0)
    h100 = Roofline.of(get_system("h100-sxm").accelerator, "bf16", eff)
    h200 = Roofline.of(get_system("h200").accelerator, "bf16", eff)
    assert h200.half == h100.half and h200.linear_half == h100.linear_half
    assert h200.bandwidth == pytest.approx(h100.bandwidth * 4800 / 3350)
    # The MI325X is the MI300X's CDNA 3 compute beside 6 TB/s of HBM3e against 5.3.
    mi300x = Roofline.of(get_system("mi300x").accelerator, "bf16", eff)
    mi325x = Roofline.of(get_system("mi325x").accelerator, "bf16", eff)
    assert mi325x.half == mi300x.half and mi325x.peak == mi300x.peak
    assert mi325x.bandwidth == pytest.approx(mi300x.bandwidth * 6000 / 5300)


def test_gaudi_3_and_the_mi325x_are_systems_with_their_sources_links() -> None:
    """`--gpu gaudi3` and `--gpu mi325x` name whole nodes: Gaudi 3's HLS-3 box with 525 GB/s
    of scale-up and 75 GB/s of scale-out each way per accelerator (Intel's network
    configuration guide), the MI325X platform with the MI300X platform's Infinity Fabric."""
    gaudi = get_system("gaudi3")
    assert (gaudi.gpus_per_node, gaudi.intra_node_gbs, gaudi.inter_node_gbs) == (8, 525, 75)
    assert gaudi.accelerator.key == "gaudi3"
    mi325x, mi300x = get_system("mi325x"), get_system("mi300x")
    assert mi325x.intra_node_gbs == mi300x.intra_node_gbs
    assert mi325x.accelerator.memory_gib == 256


def megatron_core_stages(layers: int, pp: int, vp: int) -> list[int]:
    """Transformer layers per pipeline rank under account_for_embedding_in_pipeline_split and
    account_for_loss_in_pipeline_split, as Megatron-Core's get_transformer_layer_offset deals
    them: the embedding and the loss count as a layer each, the layers + 2 go evenly over the
    pp × vp chunks in order (chunk c on rank c mod pp), the first chunk's first slot is the
    embedding, the last chunk's last slot the loss."""
    per_chunk = (layers + 2) // (pp * vp)
    assert per_chunk * pp * vp == layers + 2
    stages = [0] * pp
    for chunk in range(pp * vp):
        slots = per_chunk - (chunk == 0) - (chunk == pp * vp - 1)
        stages[chunk % pp] += slots
    return stages


def test_llama_405b_on_nemo_is_split_as_megatron_core_splits_it() -> None:
    run = next(r for r in published.dataset().runs if r.name.startswith("Llama 3.1 405B fp8"))
    assert run.not_expressible() is None
    assert list(run.stage_layers) == megatron_core_stages(126, run.pp, run.interleave)


@pytest.mark.parametrize(
    ("gpu", "ici_gbs", "chips"),
    # Google Cloud's TPU pages: bidirectional ICI per chip, halved (v5e 400, v5p 1200 GBps), or
    # the Pod's all-reduce bandwidth per chip (v4 1.1 PB/s over 4096, v6e 102.4 TB/s over 256).
    [("tpu-v4", 1.1e6 / 4096, 4096), ("tpu-v5e", 200, 256), ("tpu-v5p", 600, 4096),
     ("tpu-v6e", 102.4e3 / 256, 256)],
)  # fmt: skip
def test_tpu_slices_are_systems(gpu: str, ici_gbs: float, chips: int) -> None:
    system = get_system(gpu)
    assert system.intra_node_gbs == pytest.approx(ici_gbs, rel=2e-3)
    assert system.gpus_per_node == chips


def test_plan_times_a_layout_on_a_tpu_slice() -> None:
    result = runner.invoke(app, ["plan", "llama-2-7b", "--gpu", "tpu-v5p", "--gpus", "256",
                                 "--global-batch", "256", "--seq", "4096", "--tp", "1", "--pp",
                                 "1", "--batch", "1", "--zero", "1", "--recompute", "none",
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["system"] == "tpu-v5p" and 0 < report["mfu"] < 1
    # The tensors get the device less CUDA's context (1,343 MiB, transformers' "Model training
    # anatomy") and the allocator's 8% reserve: of v5p's 95 GiB, 86.1 GiB.
    assert report["memory"]["usable"] == round(95 * 2**30 * 0.92 - 1343 * 2**20)
