"""Activation offloading (`plan --offload-layers N`, Megatron-Core's cpu_offloading_num_layers
over Transformer Engine's CPU offloading): at most the other layers' activations on the device
at any time, the copies hidden behind each pass's compute where the host link is fast enough,
and the layouts Megatron-Core refuses refused, naming the option."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.layout import Parallelism
from archspec.cli import app
from archspec.plan.fit import MemoryModel
from archspec.plan.hardware import get_system
from archspec.plan.step import Layout, StepModel, Training

TRAIN = ["plan", "llama-2-7b", "--gpu", "gb200", "--gpus", "8", "--global-batch", "16",
         "--seq", "4096", "--batch", "2", "--zero", "3", "--engine", "nemo"]  # fmt: skip


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _plan(*extra: str) -> dict:
    result = invoke(*TRAIN, *extra, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_offloading_keeps_the_other_layers_activations_on_the_device() -> None:
    """llama-2-7b's 32 layers are alike: offloading 12 leaves 20 layers' sets on the device;
    what sits outside the blocks (embedding, final norm, loss) stays."""
    ir = build_ir(load_spec("llama-2-7b"))
    memory = MemoryModel(ir, 4096, "bf16", "bf16", "flash", kernels="transformer_engine")
    each = memory.layer_activations(1, False, 2)
    assert len(each) == 32 and len(set(each)) == 1
    par = Parallelism(8, 1, 1, 3, False, 1, 1)
    kept = memory.busiest(par, 2, "none").activations
    offloaded = memory.busiest(par, 2, "none", offload=12).activations
    assert kept - offloaded == 12 * each[0]
    report = _plan("--offload-layers", "12")
    assert report["layout"]["offload_layers"] == 12
    assert report["memory"]["activations"] < _plan()["memory"]["activations"]


def test_the_copies_hide_behind_the_compute_or_the_step_waits() -> None:
    """On a GB200's NVLink-C2C (450 GB/s each way) the copies of 16 of the 7B's layers at
    8,192 tokens a micro-batch hide behind each pass; over a link a thousand times slower the
    step waits for what neither pass hides, once each way."""
    ir = build_ir(load_spec("llama-2-7b"))
    run = Training(8, 16, 4096, "bf16", "bf16", "flash", "nemo")
    layout = Layout(micro_batch=2, zero=3, offload_layers=16)
    fast = StepModel(ir, get_system("gb200-nvl72"), run)
    assert fast.step(layout).breakdown["offload"] == 0.0
    from dataclasses import replace

    slow_system = replace(get_system("gb200-nvl72"), host_link_gbs=0.45)
    slow = StepModel(ir, slow_system, run)
    time = slow.step(layout)
    moved = sum(slow._memory_model().layer_activations(1, False, 2)[:16]) / 0.45e9
    compute = time.breakdown["compute"] / time.micro_batches
    assert moved > compute  # each pass waits
    waited = time.breakdown["offload"] / time.micro_batches
    assert abs(waited - (2 * moved - compute)) < 1e-9 * moved


def test_layouts_megatron_core_refuses_are_refused() -> None:
    for extra, words in (
        (["--offload-layers", "32"], "1 to 31 of the model's 32 layers"),
        (["--offload-layers", "-1"], "1 to 31"),
        (["--offload-layers", "8", "--recompute", "full"], "recomputation"),
        (["--offload-layers", "8", "--engine", "fsdp"], "needs --engine nemo"),
    ):
        result = invoke(*TRAIN, *extra)
        assert result.exit_code == 2, result.output
        assert words in result.output
    pipelined = [a if a != "3" else "1" for a in TRAIN]  # ZeRO-1 beside the pipeline
    result = invoke(*pipelined, "--pp", "2", "--offload-layers", "8")
    assert result.exit_code == 2 and "without pipeline stages" in result.output


def test_a_system_without_a_host_link_figure_is_refused_and_a_file_can_give_one(
    tmp_path: Path,
) -> None:
    h100 = [a if a != "gb200" else "h100-sxm" for a in TRAIN]
    result = invoke(*h100, "--offload-layers", "8")
    assert result.exit_code == 2 and "host_link_gbs" in result.output
    system = tmp_path / "pcie.yaml"
    system.write_text(
        "systems:\n  h100-pcie-host:\n    accelerator: h100-sxm\n    name: H100 over PCIe\n"
        "    gpus_per_node: 8\n    intra_node_gbs: 450\n    inter_node_gbs: 50\n"
        "    intra_node_latency_us: 1\n    inter_node_latency_us: 5\n    host_link_gbs: 64\n"
        "    source: a test\n"
    )
    given = [a if a != "gb200" else "h100-pcie-host" for a in TRAIN]
    result = invoke(*given, "--system", str(system), "--offload-layers", "8", "--json")
    assert result.exit_code == 0, result.output
    system.write_text(system.read_text().replace("host_link_gbs: 64", "host_link_gbs: -64"))
    result = invoke(*given, "--system", str(system), "--offload-layers", "8")
    assert result.exit_code == 2 and "host_link_gbs" in result.output


def test_the_published_gb200_fsdp_run_fits_with_its_offloaded_layers() -> None:
    """NeMo 25.11's Llama 3 70B on 64 GB200s (Megatron FSDP, micro-batch 2 of 8,192 tokens)
    offloads 40 of its 80 layers' activations (the preset published.yaml cites); counted as
    Transformer Engine's layers keep them, it fits the GB200, and without the offload it
    would not."""
    from dataclasses import replace

    from archspec.plan.published import candidates, dataset

    (run,) = [r for r in dataset().runs if r.name.endswith("64 GB200 (NeMo 25.11, FSDP)")]
    assert run.offload_layers == 40
    assert candidates(run).fits
    assert not candidates(replace(run, offload_layers=0)).fits


def test_one_set_on_the_device_leaves_nothing_to_overlap() -> None:
    """Offloading all layers but one leaves one set on the device: each layer waits for the
    last one's copy (Transformer Engine: "compute and transfers cannot overlap"), so each
    pass waits for every copy, however fast the compute."""
    ir = build_ir(load_spec("llama-2-7b"))
    run = Training(8, 16, 4096, "bf16", "bf16", "flash", "nemo")
    model = StepModel(ir, get_system("gb200-nvl72"), run)
    time = model.step(Layout(micro_batch=2, zero=3, offload_layers=31))
    copies = sum(model._memory_model().layer_activations(1, False, 2)[:31]) / 450e9
    waited = time.breakdown["offload"] / time.micro_batches
    assert abs(waited - 2 * copies) < 1e-9 * copies
    # Half offloaded, the window (15 other layers beside each copy) hides them.
    assert model.step(Layout(micro_batch=2, zero=3, offload_layers=16)).breakdown["offload"] == 0
