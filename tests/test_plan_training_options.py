"""`archspec plan`'s training options beyond the layout search: fp8, engines, context
parallelism, uneven pipeline stages, --tokens/--price, the --mfu and --efficiency what-ifs and
the catalogue's common spellings."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec.backends.count.params import parameter_count
from archspec.cli import app
from archspec.cli.common import compile_spec
from archspec.plan.efficiency import CALIBRATED
from archspec.plan.fit import MemoryModel
from archspec.plan.hardware import get_system
from archspec.plan.roofline import Roofline
from archspec.plan.serve_engine import serving_system
from archspec.plan.step import Layout, StepModel, Training

runner = CliRunner()
BASE = ["plan", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "64",
        "--seq", "4096"]  # fmt: skip


def plan_json(*args: str) -> dict:
    result = runner.invoke(app, [*BASE, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_fp8_runs_the_projections_at_the_datasheet_fp8_peak() -> None:
    # H100 SXM5: 1,978.9 dense fp8 against 989.4 bf16 (NVIDIA's H100 whitepaper, Table 3).
    accel = get_system("h100-sxm").accelerator
    bf16 = Roofline.of(accel, "bf16", CALIBRATED)
    fp8 = Roofline.of(accel, "fp8", CALIBRATED)
    assert fp8.peak == bf16.peak == 989.4e12
    assert fp8.linear_peak == pytest.approx(1978.9e12 * CALIBRATED.fp8_matmul)


def test_fp8_is_faster_and_its_mfu_is_against_the_bf16_peak() -> None:
    bf16 = plan_json("--tp", "1", "--zero", "1")
    fp8 = plan_json("--tp", "1", "--zero", "1", "--dtype", "fp8")
    assert fp8["step_time_s"] < bf16["step_time_s"]
    assert fp8["grad_dtype"] == "bf16"
    # Same model FLOPs, same bf16 peak: MFU scales as the inverse of the step time.
    assert fp8["mfu"] / bf16["mfu"] == pytest.approx(bf16["step_time_s"] / fp8["step_time_s"])


def test_an_engine_that_overlaps_hides_data_parallel_communication() -> None:
    megatron = plan_json("--tp", "1", "--zero", "3", "--engine", "megatron")
    fsdp = plan_json("--tp", "1", "--zero", "3", "--engine", "fsdp")
    assert megatron["engine"] == "megatron" and fsdp["engine"] == "fsdp"
    assert fsdp["breakdown"]["dp_comm"] < megatron["breakdown"]["dp_comm"]


def test_context_parallelism_is_a_layout_of_its_own() -> None:
    report = plan_json("--tp", "2", "--cp", "2", "--zero", "1")
    assert report["layout"]["cp"] == 2 and report["layout"]["dp"] == 4
    plain = plan_json("--tp", "2", "--zero", "1")
    # Each rank holds the activations of half the sequence.
    assert report["memory"]["activations"] < 0.6 * plain["memory"]["activations"]


def test_uneven_stages_hold_what_count_gives_even_stages_of_the_same_sizes() -> None:
    ir = compile_spec("llama-2-7b", None)
    memory = MemoryModel(ir, 4096, "bf16", "fp32", "flash")
    even = memory.params(2, 4)
    assert memory.params(2, 4, (8, 8, 8, 8)) == even
    uneven = memory.params(2, 4, (7, 9, 9, 7))
    assert [last - first for (first, last), _ in uneven] == [7, 9, 9, 7]
    assert sum(p for _, p in uneven) == sum(p for _, p in even)
    # With tp 1 and one stage the parameters are count's.
    assert memory.params(1, 1)[0][1] == parameter_count(ir.root).xreplace(ir.env)


def test_the_slowest_uneven_stage_sets_the_pace() -> None:
    ir = compile_spec("llama-2-7b", None)
    model = StepModel(ir, get_system("h100-sxm"), Training(8, 64, 4096))
    even = model.step(Layout(tp=2, pp=4, micro_batch=1))
    uneven = model.step(Layout(tp=2, pp=4, micro_batch=1, stage_layers=(6, 10, 8, 8)))
    assert uneven.seconds > even.seconds


def test_tokens_and_price_give_days_hours_and_cost() -> None:
    report = plan_json("--tp", "1", "--zero", "1", "--tokens", "2T", "--price", "2")
    t = report["training"]
    steps = -(-2e12 // (64 * 4096))
    assert t["steps"] == steps
    assert t["days"] == pytest.approx(steps * report["step_time_s"] / 86400)
    assert t["accelerator_hours"] == pytest.approx(t["days"] * 24 * 16)
    assert t["cost"] == pytest.approx(2 * t["accelerator_hours"])


def test_what_ifs() -> None:
    base = plan_json("--tp", "1", "--zero", "1")
    at = plan_json("--tp", "1", "--zero", "1", "--mfu", "0.3")
    assert at["mfu"] == 0.3 and at["what_if"]["predicted_mfu"] == pytest.approx(base["mfu"])
    assert at["step_time_s"] == pytest.approx(base["step_time_s"] * base["mfu"] / 0.3)
    slower = plan_json("--tp", "1", "--zero", "1", "--efficiency", "0.3")
    assert slower["step_time_s"] > base["step_time_s"]


@pytest.mark.parametrize(
    "name", ["h100", "h100-80g", "H100-SXM5", "NVIDIA H100_SXM5", "H100SXM", "h100sxm5"]
)
def test_common_spellings_resolve(name: str) -> None:
    assert get_system(name).key == "h100-sxm"


@pytest.mark.parametrize(
    ("name", "key"),
    [("rtx4090", "rtx-4090"), ("NVIDIA GeForce RTX 4090", "rtx-4090"), ("TPUv5p", "tpu-v5p"),
     ("MI300X", "mi300x"), ("A10080G", "a100-80g"), ("DGX B300", "b300"),
     ("NVIDIA GB300", "gb300-nvl72"), ("GB300NVL72", "gb300-nvl72")],
)  # fmt: skip
def test_spellings_without_hyphens_resolve(name: str, key: str) -> None:
    """Systems and, for serving, an accelerator no system holds (the RTX 4090)."""
    assert serving_system(name).key == key


def test_blackwell_ultra_is_listed_with_the_figures_of_its_sources() -> None:
    """B300 and GB300 at the dense rates their sources list (B200's and GB200's: verda.com's
    per-GPU table), their own memory, and one 800 Gb/s ConnectX-8 a GPU beyond the node; no
    twin of the part before them (hardware.SAME_TENSOR_CORES), so each takes plateaus of its
    own."""
    from archspec.plan.hardware import tensor_core_twin

    b300, gb300 = get_system("b300"), get_system("gb300-nvl72")
    assert (
        b300.accelerator.peak_tflops["bf16"] == get_system("b200").accelerator.peak_tflops["bf16"]
    )
    assert gb300.accelerator.peak_tflops["fp8"] == 5000
    assert (b300.accelerator.memory_gib, gb300.accelerator.memory_gib) == (270, 279)
    assert (b300.gpus_per_node, gb300.gpus_per_node) == (8, 72)
    assert b300.inter_node_gbs == gb300.inter_node_gbs == 100
    assert tensor_core_twin("b300") == "b300" and tensor_core_twin("gb300") == "gb300"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pp", "4", "--stage-layers", "8,8"], "lists 2 stages, not the layout's 4"),
        (["--pp", "2", "--stage-layers", "16,17"], "adds up to 33 layers, not the model's 32"),
        (["--pp", "2", "--stage-layers", "a,b"], "give each stage's layers as whole numbers"),
        (["--cp", "3"], "--cp 3: the 4096 positions do not split into 6 equal chunks"),
        (["--cp", "32"], "--gpus 16 is not a multiple of --tp 1 × --pp 1 × --cp 32"),
        (["--mfu", "0"], "--mfu takes a fraction from 0.001 to 1"),
        (["--efficiency", "1e-300"], "--efficiency takes a fraction from 0.001 to 1"),
        (["--tokens", "-5T"], "--tokens takes a number of tokens, 1 or more"),
        (["--tokens", "0.000001"], "--tokens takes a number of tokens, 1 or more"),
        (["--tokens", "1e30"], "--tokens 1e30 is over the limit of 1e+18 tokens"),
        (["--tokens", "1T", "--price", "1e308"], "--price takes a price per accelerator-hour"),
        (["--tp", "0"], "--tp must be at least 1 (got 0)"),
        (["--pp", "0"], "--pp must be at least 1 (got 0)"),
        (["--price", "3"], "--price costs a whole run: give --tokens too"),
        (["--engine", "jax"], "--engine takes megatron, deepspeed, nemo, fsdp, maxtext"),
        (["--engine", "deepspeed", "--pp", "2", "--interleave", "2"],
         "--engine deepspeed has no interleaved pipeline schedule"),
        (["--pp", "2", "--interleave", "4", "--stage-layers", "2,30"],
         "stage 0 holds 2 layers, too few for --interleave 4 chunks"),
        (["--engine", "fsdp", "--pp", "2", "--zero", "3"],
         "--zero 3 does not combine with pipeline parallelism (--pp) under --engine fsdp"),
        (["--dtype", "MXFP8"], "MXFP8 (fp8 with a scale per 32 elements) is timed as --dtype fp8"),
        (["--dtype", "nvfp4"], "NVFP4 (four-bit floats with block scales) is not modelled"),
    ],
)  # fmt: skip
def test_refusals_name_the_values(args: list[str], message: str) -> None:
    result = runner.invoke(app, [*BASE, *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_fp8_on_an_accelerator_without_it_is_refused() -> None:
    result = runner.invoke(app, ["plan", "llama-2-7b", "--gpu", "a100-80g", "--gpus", "8",
                                 "--global-batch", "8", "--dtype", "fp8"])  # fmt: skip
    assert result.exit_code == 2
    assert "a100-80g has no fp8 throughput" in result.output


def test_zero_shards_over_the_context_parallel_ranks_too() -> None:
    # The cp ranks hold the same weights, and both stacks shard them there: Megatron-Core's
    # distributed optimizer over its dp × cp group, torchtitan's FSDP over the flattened
    # dp_shard_cp mesh even with one data-parallel rank (parallelize_llama.py and
    # parallel_dims.py at 9dec370, which ran "FSDP 1 × CP 8" at 256K tokens).
    lay = Layout(tp=2, pp=1, cp=2, zero=1)
    assert lay.dp(16) == 4 and lay.parallelism(16, 1).data_ranks == 8
    result = runner.invoke(app, ["plan", "llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8",
                                 "--global-batch", "1", "--seq", "65536", "--cp", "8",
                                 "--zero", "3", "--engine", "fsdp", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["layout"]["dp"] == 1 and report["layout"]["cp"] == 8
    # Llama 3 8B's 8,030,261,248 parameters (LlamaForCausalLM on the meta device), in bf16,
    # and AdamW's 12 bytes each, an eighth of them on each rank.
    params = 8_030_261_248
    assert report["memory"]["weights"] == pytest.approx(2 * params / 8, rel=1e-9)
    assert report["memory"]["optimizer"] == pytest.approx(12 * params / 8, rel=1e-9)


def test_zero_without_data_or_context_parallel_ranks_is_refused() -> None:
    result = runner.invoke(app, [*BASE[:4], "--gpus", "2", "--global-batch", "8", "--tp", "2",
                                 "--zero", "1"])  # fmt: skip
    assert result.exit_code == 2
    assert "it needs dp·cp > 1" in " ".join(result.output.split())


def test_expert_parallelism_deals_out_the_experts_and_adds_all_to_alls() -> None:
    ir = compile_spec("mixtral-8x7b", None)
    memory = MemoryModel(ir, 4096, "bf16", "fp32", "flash")
    # Mixtral 8x7B: 32 layers of 8 experts of three 4096 × 14336 projections (its config.json).
    experts = 32 * 8 * 3 * 4096 * 14336
    whole = memory.params(1, 1)[0][1]
    assert whole - memory.params(1, 1, None, 8)[0][1] == pytest.approx(experts * 7 / 8)
    model = StepModel(ir, get_system("h100-sxm"), Training(16, 32, 4096))
    one = model.step(Layout(zero=1))
    eight = model.step(Layout(zero=1, ep=8))
    # Without expert parallelism no all-to-all; with it, the routed tokens cross NVLink.
    assert one.breakdown["ep_comm"] == 0 < eight.breakdown["ep_comm"]
    # The experts' gradients are reduced over 2 ranks, not 16: less to reduce.
    assert eight.breakdown["dp_comm"] < one.breakdown["dp_comm"]
    report = json.loads(
        runner.invoke(
            app,
            [
                "plan",
                "mixtral-8x7b",
                "--gpu",
                "h100-sxm",
                "--gpus",
                "16",
                "--global-batch",
                "32",
                "--seq",
                "4096",
                "--zero",
                "1",
                "--ep",
                "8",
                "--recompute",
                "full",
                "--json",
            ],
        ).stdout
    )
    assert report["layout"]["ep"] == 8


@pytest.mark.parametrize(
    ("spec", "args", "message"),
    [
        ("mixtral-8x7b", ["--ep", "3"], "--ep 3 does not divide the 8 experts"),
        ("mixtral-8x7b", ["--ep", "8", "--tp", "4"], "--ep 8 does not divide the 4 data-parallel"),
        ("llama-2-7b", ["--ep", "2"], "llama-2-7b has no experts"),
    ],
)  # fmt: skip
def test_expert_parallelism_refusals(spec: str, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["plan", spec, "--gpu", "h100-sxm", "--gpus", "16",
                                 "--global-batch", "32", "--seq", "4096", *args])  # fmt: skip
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_plateaus_carry_over_between_accelerators_as_the_data_shows() -> None:
    from archspec.plan.efficiency import MAX_PLATEAU
    from archspec.plan.engines import ENGINES

    fsdp, megatron, nemo = ENGINES["fsdp"], ENGINES["megatron"], ENGINES["nemo"]
    # Megatron-LM has runs on A100 only: on H100 it loses what FSDP loses between the two.
    ratio = dict(fsdp.on)["h100-sxm"] / dict(fsdp.on)["a100-80g"]
    expected = round(dict(megatron.on)["a100-80g"] * ratio, 2)
    assert megatron.efficiency("h100-sxm").matmul_peak == expected
    # The H200 has the H100's tensor cores: the same plateau.
    assert megatron.efficiency("h200").matmul_peak == expected
    # Never above what a GEMM reaches.
    assert nemo.efficiency("a100-80g").matmul_peak <= MAX_PLATEAU


def test_training_options_are_reported_as_ignored_when_serving() -> None:
    result = runner.invoke(app, ["plan", "llama-2-7b", "--mode", "serve", "--gpu", "h100",
                                 "--tokens", "1T", "--cp", "2", "--json"])  # fmt: skip
    assert result.exit_code == 0
    assert json.loads(result.stdout)["ignored"] == ["--cp", "--tokens"]
    # The layout's training-only parts too: serving runs no pipeline and no global batch.
    serve = ["plan", "llama-2-7b", "--mode", "serve", "--gpu", "h100", "--json"]
    result = runner.invoke(app, [*serve, "--pp", "2", "--global-batch", "8", "--seq", "0"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["ignored"] == ["--global-batch", "--seq", "--pp"]


def test_serving_options_are_reported_as_ignored_when_training() -> None:
    result = runner.invoke(app, [*BASE, "--rate", "3", "--draft", "gpt2", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["ignored"] == ["--draft", "--rate"]


def test_fsdp_beside_a_pipeline_is_zero_2_and_uneven_stages_interleave() -> None:
    # torchtitan keeps a stage's gathered weights through its micro-batches beside a
    # pipeline (ZeRO-2), as Llama 3 405B ran: 7, 8 × 14, 7 layers of 16 stages, 8 chunks each.
    fsdp = plan_json("--engine", "fsdp", "--pp", "2", "--zero", "2")
    assert fsdp["layout"]["zero"] == 2 and fsdp["layout"]["pp"] == 2
    uneven = plan_json("--pp", "4", "--interleave", "8", "--stage-layers", "7,9,9,7")
    assert uneven["layout"]["stage_layers"] == [7, 9, 9, 7]
    assert uneven["layout"]["interleave"] == 8
    # A given micro-batch or interleaving need not be one the search tries.
    odd = plan_json("--pp", "2", "--interleave", "16", "--batch", "2")
    assert odd["layout"]["interleave"] == 16 and odd["layout"]["micro_batch"] == 2


def test_an_mfu_above_100_percent_says_why() -> None:
    """Model FLOPs count every query-key pair (PaLM's MFU), where a causal flash kernel does
    half: a small model at 163,840 tokens, attention most of its step, comes out above 100%,
    and the report says so, beside the memory warning, on stderr and in the JSON."""
    args = ["plan", "deepseek-v2-lite", "--gpu", "grand-teton-h100", "--gpus", "32",
            "--global-batch", "128", "--batch", "4", "--dtype", "fp32"]  # fmt: skip
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["mfu"] > 1 and report["hfu"] > 1
    assert "MFU and HFU above 100%" in report["warning"]
    assert "it would not fit" in report["warning"]
    ordinary = plan_json()
    assert ordinary["mfu"] < 1 and "warning" not in ordinary
    # A what-if MFU that the layout's recomputation puts above the peak, and fp8 against bf16.
    asked = plan_json("--mfu", "1", "--recompute", "full", "--tp", "1", "--pp", "1")
    assert asked["hfu"] > 1 and "--mfu 1 with this layout's recomputation" in asked["warning"]
    fp8 = runner.invoke(app, ["plan", "gpt3-175b", "--gpu", "mi325x", "--gpus", "64",
                              "--global-batch", "512", "--seq", "4096", "--dtype", "fp8",
                              "--json"])  # fmt: skip
    assert fp8.exit_code == 0, fp8.output
    report = json.loads(fp8.stdout)
    assert report["mfu"] > 1 and "count against the bf16 peak" in report["warning"]
