"""`archspec bench`: runs on CPU at tiny sizes, its JSON has every field, `--vs-hf` races the
transformers class with the same weights, and mistakes are one message with exit code 2.

The models here are a few thousand parameters, so every run takes well under a second; what
is tested is the plumbing (same work on both sides, fields, units), not the speed.
"""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from archspec.bench import devices, steps
from archspec.bench.analysis import predict
from archspec.bench.hf_config import hf_config_dict
from archspec.bench.memory import LiveTensors, resident_tensors
from archspec.cli import app
from archspec.cli.common import compile_spec
from archspec.errors import SpecError
from archspec.spec.resolve import builtin_names, load_spec
from tests.tiny import as_sets, tiny_sizes

runner = CliRunner()

# A vocabulary of 128 and each spec's own max_seq_len (the runs are 8 tokens long).
BENCH = {"vocab_size": 128, "max_seq_len": None}
TINY = {
    "gpt2": tiny_sizes(n_heads=2, **BENCH),
    "llama-2-7b": tiny_sizes("n_kv_heads=2", **BENCH),
    "mixtral-8x7b": tiny_sizes("n_kv_heads=2", "moe.n_experts=4", n_layers=1, d_ff=32, **BENCH),
    "t5-small": tiny_sizes("head_dim=16", n_heads=2, **BENCH),
    "bert-base": tiny_sizes(n_layers=1, n_heads=2, **BENCH),
    "bart-base": tiny_sizes(n_layers=1, n_heads=2, **BENCH),
}
FAST = ["--device", "cpu", "--threads", "1", "--steps", "2", "--warmup", "1", "--seq", "8"]
FIELDS = {
    "tokens_per_s", "flops_per_s", "step_time_s", "step_time_min_s", "step_time_max_s",
    "mfu", "peak_memory_bytes", "predicted_memory_bytes", "tokens_per_step", "flops_per_step",
    "device", "device_name", "torch", "dtype", "batch", "seq", "mode", "compile",
}  # fmt: skip
HF_FIELDS = {"hf_tokens_per_s", "speedup", "hf_step_time_s", "hf_peak_memory_bytes", "hf_mfu"}


def sets(name: str) -> list[str]:
    return as_sets(TINY[name])


def bench(name: str, *args: str) -> dict:
    result = runner.invoke(app, ["bench", name, *sets(name), *FAST, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("mode", steps.MODES)
def test_bench_json_has_every_field(mode: str) -> None:
    r = bench("llama-2-7b", "--mode", mode, "--new-tokens", "3")
    assert FIELDS <= set(r)
    assert r["mode"] == mode and r["device"] == "cpu" and r["dtype"] == "fp32"
    assert r["mfu"] is None  # no MFU on CPU
    assert 0 < r["step_time_min_s"] <= r["step_time_s"] <= r["step_time_max_s"]
    assert len(r["step_times_s"]) == 2
    assert r["tokens_per_s"] == pytest.approx(r["tokens_per_step"] / r["step_time_s"])
    assert r["flops_per_s"] == pytest.approx(r["flops_per_step"] / r["step_time_s"])
    assert r["tokens_per_step"] == (3 if mode == "generate" else 8)
    assert r["peak_memory_bytes"] > 0 and r["predicted_memory_bytes"] > 0
    # Weights dominate at this size, so the measurement is near the prediction.
    assert 0.5 < r["peak_memory_bytes"] / r["predicted_memory_bytes"] < 2


def test_bench_table_and_messages() -> None:
    result = runner.invoke(app, ["bench", "gpt2", *sets("gpt2"), *FAST, "--mode", "forward"])
    assert result.exit_code == 0, result.output
    for text in ("step time, median", "tokens/s", "achieved FLOP/s", "MFU", "peak memory"):
        assert text in result.stdout
    assert "no MFU" in result.stderr and "tokens per step" not in result.stdout


@pytest.mark.parametrize(
    "name, mode",
    [("gpt2", "train"), ("llama-2-7b", "generate"), ("mixtral-8x7b", "train"),
     ("t5-small", "generate"), ("bert-base", "forward")],
)  # fmt: skip
def test_vs_hf_on_cpu(name: str, mode: str) -> None:
    r = bench(name, "--mode", mode, "--new-tokens", "3", "--vs-hf")
    assert FIELDS | HF_FIELDS <= set(r)
    assert r["hf_attn_implementation"] == "sdpa"
    assert r["hf_max_abs_diff"] < 1e-4  # the same weights compute the same logits
    assert r["speedup"] == pytest.approx(r["tokens_per_s"] / r["hf_tokens_per_s"])
    assert r["hf_peak_memory_bytes"] > 0
    low, high = r["speedup_range"]
    assert low <= r["speedup"] <= high and isinstance(r["speedup_within_noise"], bool)


def test_vs_hf_builds_either_model_first(monkeypatch) -> None:
    """--hf-first builds transformers' model before ours (runs that alternate the order cancel
    the advantage of being built second); the weights are the same either way."""
    from archspec.bench import runner as bench_runner

    built: list[str] = []
    for name, side in (("_generated_model", "ours"), ("_build_hf", "hf")):
        original = getattr(bench_runner, name)

        def recording(*args, _original=original, _side=side):
            built.append(_side)
            return _original(*args)

        monkeypatch.setattr(bench_runner, name, recording)
    for flags, first in (([], "ours"), (["--hf-first"], "hf")):
        built.clear()
        r = bench("llama-2-7b", "--mode", "generate", "--new-tokens", "3", "--vs-hf", *flags)
        assert r["built_first"] == first and r["hf_max_abs_diff"] < 1e-4
        assert built[0] == first and sorted(built) == ["hf", "ours"]


def test_vs_hf_counts_transformers_model_against_memory(tmp_path, monkeypatch) -> None:
    """transformers' model lives beside ours: the guard counts it, buffers included (here
    GPTBigCode's 20,000² bool mask, 400 MB beside a model of 5 MB)."""
    import archspec.bench.guards as guards
    from archspec.bench.hf_side import resident_bytes

    spec = tmp_path / "bigcode.yaml"
    spec.write_text("extends: starcoder\nn_layers: 1\nd_model: 64\nn_heads: 2\nd_ff: 128\n"
                    "vocab_size: 128\nmax_seq_len: 20000\n")  # fmt: skip
    hf = resident_bytes(hf_config_dict(load_spec(str(spec))), "forward", "fp32")
    assert hf.buffers >= 20_000**2 and hf.largest_buffer.endswith("20000 × 20000 torch.bool")
    monkeypatch.setattr(guards, "available_bytes", lambda device: 100 * 2**20)
    args = ["bench", str(spec), *FAST, "--mode", "forward", "--steps", "1"]
    alone = runner.invoke(app, args)
    assert alone.exit_code == 0, alone.output  # ours fits in 100 MiB
    result = runner.invoke(app, [*args, "--vs-hf"])
    assert result.exit_code == 2, result.output
    assert "with transformers' model beside it" in result.stderr
    assert "20000 × 20000 torch.bool" in result.stderr and "Traceback" not in result.stderr


def test_vs_hf_bf16_on_cpu() -> None:
    r = bench("gpt2", "--mode", "train", "--dtype", "bf16", "--vs-hf")
    assert r["dtype"] == "bf16" and r["hf_max_abs_diff"] < 0.1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--mode", "fly"], "--mode takes one of"),
        (["--dtype", "fp8"], "--dtype takes one of"),
        (["--batch", "0"], "--batch must be at least 1"),
        (["--seq", "2000"], "longer than the 1024 positions"),
        (["--set", "norm.kind=rmsnorm", "--vs-hf"], "is not a GPT2LMHeadModel"),
        (["--device", "tpu"], "--device takes cpu or cuda"),
        (["--hf-first"], "--hf-first orders the two models of --vs-hf"),
        (["--seed", str(2**64)], "--seed must be between 0 and 2**64-1"),
        (["--seed", "-1"], "--seed must be between 0 and 2**64-1"),
    ],
)
def test_mistakes_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["bench", "gpt2", *sets("gpt2"), "--steps", "1", *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_forced_run_the_allocator_refuses_is_one_message() -> None:
    """--force skips the fit check; the allocator's failure to hold the weights (a 4e18-byte
    embedding here) still ends as one message with the size it asked for."""
    huge = ["--set", "n_layers=1", "--set", "d_model=1000000000", "--set", "n_heads=1",
            "--set", "vocab_size=1000000000"]  # fmt: skip
    args = ["bench", "gpt2", *huge, "--device", "cpu", "--mode", "forward", "--seq", "8"]
    result = runner.invoke(app, [*args, "--steps", "1", "--force"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert "could not allocate 4,000,000,000,000,000,000 bytes" in result.stderr
    assert "--force skipped the memory check" in result.stderr


def test_the_size_a_failed_allocation_asked_for() -> None:
    from archspec.bench.runner import _asked

    gpu = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
    assert _asked(gpu) == "2.00 GiB for one tensor"
    assert _asked("can't allocate memory") == "one of its tensors"


def test_refusals_name_the_reason() -> None:
    cases = [
        (["bert-base", *sets("bert-base"), "--mode", "generate"], "needs a decoder"),
        (["gpt3-175b", "--set", "n_layers=1", "--vs-hf"], "names no transformers class"),
    ]
    if not torch.cuda.is_available():
        cases.append((["gpt2", *sets("gpt2"), "--device", "cuda"], "no CUDA device"))
    for args, message in cases:
        result = runner.invoke(app, ["bench", *args, "--steps", "1"])
        assert result.exit_code == 2 and message in result.stderr, result.output


# --- the pieces -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in builtin_names() if load_spec(n).hf_class])
def test_hf_config_imports_back_to_the_same_spec(name: str) -> None:
    data = hf_config_dict(load_spec(name))  # raises if any architecture field differs
    assert data["architectures"] == [load_spec(name).hf_class]


def test_hf_config_refuses_what_the_class_cannot_express() -> None:
    with pytest.raises(SpecError, match="mlp"):
        hf_config_dict(load_spec("llama-2-7b", ["mlp.activation=relu", "mlp.gated=false"]))


def test_generate_tokens_equal_transformers() -> None:
    """Both sides of generate mode do the same work: the same tokens come out."""
    from archspec.bench import hf_side
    from archspec.bench.runner import _generated_model

    for name in ("llama-2-7b", "t5-small", "bart-base"):
        ir = compile_spec(name, TINY[name])
        cpu = torch.device("cpu")
        inputs, _ = steps.make_inputs(ir, "generate", 2, 6, cpu, seed=1)
        ours = steps.Side("ours", _generated_model(ir, cpu, None), inputs)
        model, _ = hf_side.build_hf_model(hf_config_dict(load_spec(name, TINY[name])), cpu)
        hf_side.copy_weights(ours.model, model, ir)
        model.eval()
        ours.model.eval()
        model.generation_config = config = hf_side.generation_config(ir, 5)
        with torch.inference_mode():
            theirs = model.generate(**inputs, generation_config=config)
            # Encoder-decoders start from the spec's start token, as transformers does.
            mine = ours.model.generate(inputs["input_ids"], 5)
        assert torch.equal(mine, theirs), name


def test_peak_table() -> None:
    def tflops(name: str, dtype: str = "bf16", tf32: bool = False) -> float | None:
        peak = devices.peak_flops(name, dtype, tf32)
        return peak / 1e12 if peak is not None else None

    assert tflops("NVIDIA H100 80GB HBM3") == 989.4  # SXM5, dense (1,979 is with sparsity)
    assert tflops("NVIDIA H100 PCIe") == 756.0
    assert tflops("NVIDIA H100 NVL") == 835.5
    assert tflops("NVIDIA GH200 480GB") == 989.4
    assert tflops("NVIDIA H200") == 989.4
    assert tflops("NVIDIA A100-SXM4-80GB") == tflops("NVIDIA A100 80GB PCIe") == 312.0
    assert tflops("NVIDIA A10") == 125.0
    assert tflops("NVIDIA L4") == 121.0 and tflops("NVIDIA L40S") == 362.05
    assert tflops("NVIDIA L40") == 181.0
    assert tflops("Tesla V100-SXM2-16GB") is None and tflops("Tesla V100-SXM2-16GB", "fp16")
    assert tflops("NVIDIA H100 80GB HBM3", "fp32") == 66.9
    assert tflops("NVIDIA H100 80GB HBM3", "fp32", tf32=True) == 494.7
    assert tflops("Some Future GPU") is None


def test_live_tensors_counts_what_a_step_holds() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(100, 200)  # 20,200 parameters: 80,800 bytes
    x = torch.randn(50, 100)  # 20,000 bytes
    with torch.inference_mode(), LiveTensors(resident_tensors(layer, x)) as tracker:
        y = layer(x)  # 50 × 200 floats: 40,000 bytes
        del y
        z = torch.relu(layer(x))  # a second output, then its relu beside it: 80,000
        del z
    assert tracker.baseline == 80_800 + 20_000
    assert tracker.peak == 80_800 + 20_000 + 80_000
    assert tracker.live == tracker.baseline


def test_generate_flops_leave_out_the_prompts_head() -> None:
    ir = compile_spec("gpt2", [])
    forward = predict(ir, "forward", 1, 128, "fp32", 1).flops
    generate = predict(ir, "generate", 1, 128, "fp32", 1).flops
    head = 2 * 768 * 50257  # one position's head matmul
    assert forward - generate == 127 * head


@pytest.mark.parametrize("name", ["llama-2-7b", "mixtral-8x7b", "t5-small"])
def test_generated_models_compile_without_graph_breaks(name: str) -> None:
    """One graph per model under the dynamo switches bench compiles with (the MoE's routing
    has data-dependent sizes; the others need no switch)."""
    from archspec.bench.runner import _generated_model

    ir = compile_spec(name, TINY[name])
    model = _generated_model(ir, torch.device("cpu"), None)
    inputs, _ = steps.make_inputs(ir, "forward", 2, 8, torch.device("cpu"), seed=0)
    with torch._dynamo.config.patch(
        capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True
    ):
        explained = torch._dynamo.explain(model)(**inputs)
    torch._dynamo.reset()
    assert explained.graph_count == 1 and explained.graph_break_count == 0, [
        str(b.reason) for b in explained.break_reasons
    ]
