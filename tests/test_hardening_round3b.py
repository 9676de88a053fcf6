"""Issue #30 (hardening, round 3), the rest: outputs onto a run's inputs, `--system` files,
zero and out-of-range values that gave wrong results, and the guards `bench --nproc` skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from tests.hostile import cli, refused

PARENT = "extends: gpt2\nn_layers: 2\n"


# --- One output guard that knows every input of the run --------------------------------------


def _family(tmp_path: Path, parent_name: str) -> Path:
    """child.yaml extends parent.yaml, whose file is `parent_name` (a link to it when the name
    does not end in .yaml: a diagram's or a chart's name); the parent's real file."""
    real = tmp_path / parent_name
    real.write_text(PARENT)
    if parent_name != "parent.yaml":
        (tmp_path / "parent.yaml").symlink_to(real)
    (tmp_path / "child.yaml").write_text(
        f"extends: {tmp_path / 'parent.yaml'}\nd_model: 64\nn_heads: 2\n"
    )
    return real


@pytest.mark.parametrize(
    ("parent_name", "command"),
    [
        ("parent.yaml", ["build", "{child}", "-o", "{out}"]),
        ("parent.svg", ["draw", "{child}", "-o", "{out}"]),
        ("parent.html", ["report", "{child}", "-o", "{out}"]),
        ("parent.png", ["compare", "{child}", "gpt2", "--plot", "{out}"]),
        ("parent.png", ["count", "{child}", "--seq", "8,16", "--plot", "{out}"]),
    ],
)
def test_no_output_replaces_an_extends_parent(tmp_path, parent_name, command) -> None:
    real = _family(tmp_path, parent_name)
    child = str(tmp_path / "child.yaml")
    args = [a.format(child=child, out=real) for a in command]
    refused(cli(*args, "--force"), "input of this command", str(real))
    assert real.read_text() == PARENT


def test_no_output_replaces_the_config_json_it_imports(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, '
                      '"vocab_size": 16, "n_positions": 8}')  # fmt: skip
    before = config.read_text()
    refused(cli("build", str(tmp_path), "-o", str(config), "--force"), "input of this command")
    assert config.read_text() == before


def test_a_new_run_forgets_the_last_runs_inputs(tmp_path) -> None:
    # In one process (a notebook, the tests), the next command may write what the last read.
    spec = tmp_path / "a.yaml"
    spec.write_text(PARENT)
    assert cli("count", str(spec)).exit_code == 0
    other = tmp_path / "b.yaml"
    other.write_text(PARENT)
    result = cli("build", str(other), "-o", str(spec), "--force")
    assert result.exit_code == 0, result.output


# --- `--system` files: the one YAML reader, every number checked where it enters -------------

ACCELERATOR = {"name": "My Accelerator", "peak_tflops": "{bf16: 100, fp32: 10}",
               "memory_gib": "80", "memory_bandwidth_gbs": "2000", "source": "a test"}  # fmt: skip
SYSTEM = {"accelerator": "myacc", "name": "my system", "gpus_per_node": "8",
          "intra_node_gbs": "300", "inter_node_gbs": "25", "intra_node_latency_us": "1",
          "inter_node_latency_us": "5", "source": "a test"}  # fmt: skip


def _system_file(tmp_path: Path, accelerator=None, system=None) -> Path:
    """A `--system` file of one accelerator (myacc) and one system (mysys), fields replaced."""
    lines = ["accelerators:", "  myacc:"]
    lines += [f"    {k}: {v}" for k, v in {**ACCELERATOR, **(accelerator or {})}.items()]
    lines += ["systems:", "  mysys:"]
    lines += [f"    {k}: {v}" for k, v in {**SYSTEM, **(system or {})}.items()]
    path = tmp_path / "system.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _plan_on(path: Path, *args: str):
    return cli("plan", "gpt2", "--gpu", "mysys", "--system", str(path), "--gpus", "8",
               "--global-batch", "8", "--seq", "128", *args)  # fmt: skip


def test_a_good_system_file_plans() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        result = _plan_on(_system_file(Path(folder)), "--json")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("accelerator", "system", "words"),
    [
        ({"peak_tflops": "{bf16: -100}"}, None, ["peak_tflops.bf16", "above zero"]),
        ({"peak_tflops": "{bf16: .inf}"}, None, ["peak_tflops.bf16", "finite"]),
        ({"peak_tflops": "{bf16: .nan}"}, None, ["peak_tflops.bf16", "finite"]),
        ({"peak_tflops": "{bf16: 1.0e+400}"}, None, ["peak_tflops.bf16", "finite"]),
        ({"peak_tflops": "[100]"}, None, ["peak_tflops", "mapping"]),
        ({"memory_gib": "0"}, None, ["memory_gib", "above zero"]),
        ({"memory_gib": "'80'"}, None, ["memory_gib", "expected a number"]),
        ({"memory_bandwidth_gbs": "[1, 2]"}, None, ["memory_bandwidth_gbs", "a list"]),
        ({"name": "[a, b]"}, None, ["name", "expected text"]),
        ({"memory_gbi": "80"}, None, ["memory_gbi", "did you mean 'memory_gib'"]),
        (None, {"accelerator": "myac"}, ["systems.mysys.accelerator", "did you mean 'myacc'"]),
        (None, {"inter_node_gbs": "-25"}, ["inter_node_gbs", "above zero"]),
        (None, {"intra_node_gbs": "true"}, ["intra_node_gbs", "true/false"]),
        (None, {"gpus_per_node": "1000000000"}, ["gpus_per_node", "over the limit"]),
        (None, {"gpus_per_node": "0"}, ["gpus_per_node", "above zero"]),
        (None, {"gpus_per_node": "8.5"}, ["gpus_per_node", "whole number"]),
        (None, {"intra_node_latency_us": ".nan"}, ["intra_node_latency_us", "finite"]),
        (None, {"intra_node_latency_us": "null"}, ["intra_node_latency_us", "null"]),
        # Tiny but positive: a step of 1e300 seconds, a division into infinity, or memory of
        # which nothing is usable.
        ({"memory_bandwidth_gbs": "1.0e-200"}, None, ["memory_bandwidth_gbs", "under the least"]),
        ({"peak_tflops": "{bf16: 1.0e-300}"}, None, ["peak_tflops.bf16", "under the least"]),
        ({"memory_gib": "1"}, None, ["memory_gib", "under the least of 2"]),
        (None, {"inter_node_gbs": "1.0e-300"}, ["inter_node_gbs", "under the least"]),
        ({"kind": "tpuu"}, None, ["accelerators.myacc.kind", "one of gpu, tpu", "'tpu'"]),
        ({"kind": "[tpu]"}, None, ["kind", "one of gpu, tpu", "a list"]),
        ({"fp16_accumulate_tflops": "-1"}, None, ["fp16_accumulate_tflops", "above zero"]),
        ({"fp16_accumulate_tflops": ".inf"}, None, ["fp16_accumulate_tflops", "finite"]),
        ({"fp16_accumulate_tflops": "200"}, None, ["fp16_accumulate_tflops", "lists no fp16"]),
        (
            {"peak_tflops": "{fp16: 100}", "fp16_accumulate_tflops": "50"},
            None,
            ["fp16_accumulate_tflops (50)", "exceeds its fp16 peak"],
        ),
    ],
)
def test_every_field_of_a_system_file_is_checked(tmp_path, accelerator, system, words) -> None:
    path = _system_file(tmp_path, accelerator, system)
    err = refused(_plan_on(path), *words)
    assert f"{path.name}:" in err  # the file and line of the value


def test_a_system_file_is_read_by_the_spec_reader(tmp_path) -> None:
    bomb = tmp_path / "bomb.yaml"
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb.write_text("\n".join(lines) + "\n")
    refused(_plan_on(bomb), "YAML nodes")
    deep = tmp_path / "deep.yaml"
    deep.write_text("accelerators: " + "[" * 200 + "]" * 200 + "\n")
    refused(_plan_on(deep), "nested more than")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"accelerators: {}\n# caf\xe9\n")
    refused(_plan_on(latin), "not UTF-8")
    big = tmp_path / "big.yaml"
    with big.open("wb") as file:
        file.truncate(50_000_000)  # sparse: read only up to the limit
    refused(_plan_on(big), "over the limit")
    refused(_plan_on(tmp_path / "missing.yaml"), "missing.yaml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    err = refused(_plan_on(empty), "the file is empty; a hardware catalogue is a YAML mapping")
    assert "a spec is" not in err  # it is no spec


def test_a_huge_node_neither_hangs_nor_is_refused_below_the_limit(tmp_path) -> None:
    import time

    path = _system_file(tmp_path, system={"gpus_per_node": "4096"})
    start = time.monotonic()
    result = cli("plan", "gpt2", "--gpu", "mysys", "--system", str(path), "--gpus", "1000000",
                 "--global-batch", "1000000", "--seq", "128", "--json")  # fmt: skip
    assert result.exit_code in (0, 2), result.output
    assert time.monotonic() - start < 10


def test_names_from_a_system_file_reach_the_terminal_escaped(tmp_path) -> None:
    path = _system_file(
        tmp_path,
        {"name": '"\\e[31mred [bold]loud[/bold]"'},
        {"name": '"\\e]8;;http://x\\e\\\\link"'},
    )
    wide = CliRunner(env={"COLUMNS": "400"})  # each name on one line of its cell
    listed = wide.invoke(app, ["plan", "--list-systems", "--system", str(path)])
    for result in (_plan_on(path), listed):
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output
        assert "[bold]loud[/bold]" in result.stdout.replace("\n", "")


def test_diff_shows_a_spec_source_as_written(tmp_path) -> None:
    spec = tmp_path / "marked.yaml"
    spec.write_text('extends: gpt2\nsource: "[bold]mine[/bold] [link=http://x]here[/link]"\n')
    result = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["diff", "gpt2", str(spec)])
    assert result.exit_code == 0, result.output
    assert "[bold]mine[/bold] [link=http://x]here[/link]" in result.stdout


# --- Zero and out-of-range values that gave wrong results with exit 0 --------------------------


@pytest.mark.parametrize("field", ["attention.softcap", "head.softcap"])
@pytest.mark.parametrize("value", ["0", "-30"])
def test_a_softcap_is_positive_or_left_out(tmp_path, field, value) -> None:
    # transformers caps whenever the cap is not None: a cap of 0 divides by zero (NaN).
    out = tmp_path / "model.py"
    refused(cli("build", "gemma-2-2b", "--set", f"{field}={value}", "-o", str(out)),
            field, "positive")  # fmt: skip
    assert not out.exists()


@pytest.mark.parametrize("kind", ["linear", "dynamic", "yarn", "longrope"])
def test_a_rope_scaling_factor_of_zero_is_refused(kind) -> None:
    sets = ["--set", f"position.scaling.type={kind}", "--set", "position.scaling.factor=0"]
    refused(cli("count", "llama-2-7b", *sets), "position.scaling.factor", "positive")


def test_a_configs_rope_scaling_factor_of_zero_is_refused(tmp_path) -> None:
    (tmp_path / "config.json").write_text(
        '{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, '
        '"intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 1, '
        '"vocab_size": 100, "max_position_embeddings": 128, '
        '"rope_scaling": {"rope_type": "linear", "factor": 0.0}}'
    )
    refused(cli("count", str(tmp_path / "config.json")), "positive", "0.0")


LLAMA_CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
                "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 1,
                "vocab_size": 100, "max_position_embeddings": 128}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"num_attention_heads": 0}, ["num_attention_heads", "positive integer", "got 0"]),
        ({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 64, "n_head": 0,
          "n_layer": 1, "vocab_size": 100, "n_positions": 128}, ["n_head", "positive integer"]),
        ({"rope_theta": "abc"}, ["rope_theta", "positive number", "'abc'"]),
        ({"rope_theta": [1]}, ["rope_theta", "positive number"]),
        ({"rope_theta": True}, ["rope_theta", "positive number", "True"]),
        ({"rope_scaling": 5}, ["rope_scaling", "mapping", "got 5"]),
        ({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 64,
          "d_ff": 128, "d_kv": 16, "num_heads": 4, "num_layers": 1, "vocab_size": 100,
          "feed_forward_proj": 5}, ["feed_forward_proj", "expected text"]),
    ],
)  # fmt: skip
def test_a_configs_wrong_types_and_zero_heads_are_refused(tmp_path, config, words) -> None:
    """Each once divided by zero or called a string method on a number (a traceback)."""
    import json

    base = {} if "architectures" in config else LLAMA_CONFIG
    (tmp_path / "config.json").write_text(json.dumps({**base, **config}))
    refused(cli("import-hf", str(tmp_path / "config.json")), *words)


def test_plan_top_shows_that_many_or_is_refused() -> None:
    args = ["plan", "gpt2", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "64"]
    refused(cli(*args, "--top", "-1"), "--top must be at least 1")
    refused(cli(*args, "--top", "0"), "--top must be at least 1")
    import json

    result = cli(*args, "--top", "3", "--json")
    assert result.exit_code == 0 and len(json.loads(result.stdout)["ranked"]) == 3


@pytest.mark.parametrize("option", ["--batch", "--tp"])
def test_plan_serve_refuses_zero_not_turns_it_into_one(option) -> None:
    args = ["plan", "gpt2", "--gpu", "h100-sxm", "--mode", "serve", option, "0"]
    refused(cli(*args), f"{option} must be at least 1")


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        (["--zero", "3"], "ZeRO shards over the data-parallel and context-parallel ranks"),
        (["--sp"], "needs tensor parallelism"),
    ],  # fmt: skip
)
def test_no_layout_runs_says_why(given, reason) -> None:
    args = ["plan", "gpt2", "--gpu", "h100-sxm", "--gpus", "1", "--global-batch", "8", *given]
    err = refused(cli(*args), "no layout runs: ", reason)
    assert "no layout runs: \n" not in err


# --- `bench --nproc`: the single-process bench's guards, before any launch ----------------------

BENCH_TINY = ["--set", "n_layers=1", "--set", "d_model=8", "--set", "n_heads=2",
              "--set", "d_ff=16", "--set", "vocab_size=16", "--set", "max_seq_len=8"]  # fmt: skip


@pytest.fixture
def no_launch(monkeypatch):
    """torchrun must not start: a refusal comes first."""
    import archspec.bench.distributed as distributed

    def launched(*args, **kwargs):
        raise AssertionError(f"torchrun was launched: {args}")

    monkeypatch.setattr(distributed.subprocess, "run", launched)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["llama-2-70b", "--nproc", "2", "--zero", "3", "--device", "cpu"], ["needs about"]),
        (["gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--batch", "100000000"],
         ["needs about"]),
        (["gpt2", *BENCH_TINY, "--nproc", "100000", "--zero", "3"], ["at most 128"]),
        (["gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--threads", "100000000000"],
         ["--threads must be between"]),
        (["gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--steps", "100000000"],
         ["--steps must be at most"]),
        (["gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--steps", "0"],
         ["--steps must be at least 1"]),
        (["gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--seq", "0"],
         ["--seq must be at least 1"]),
        (["gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--seq", "9"],
         ["longer than the 8 positions"]),
    ],
)  # fmt: skip
def test_bench_nproc_runs_the_guards_before_the_launch(no_launch, args, words) -> None:
    refused(cli("bench", *args), *words)


def test_the_single_process_bench_refuses_the_same_run() -> None:
    # The refusal bench --nproc now shares (about 1,028 GiB on one process).
    refused(cli("bench", "llama-2-70b", "--device", "cpu"), "needs about")


def test_a_failed_rank_says_its_own_error(monkeypatch) -> None:
    import subprocess

    import archspec.bench.distributed as distributed

    def failing(command, **kwargs):
        # What torchrun leaves when rank 1 fails: the rank's record, and ChildFailedError.
        Path(command[-1]).with_name("rank1.error").write_text("RuntimeError: gloo ran dry")
        stderr = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        return subprocess.CompletedProcess(command, 1, "", stderr)

    monkeypatch.setattr(distributed.subprocess, "run", failing)
    refused(cli("bench", "gpt2", *BENCH_TINY, "--nproc", "2", "--tp", "2", "--steps", "1"),
            "rank 1: RuntimeError: gloo ran dry")  # fmt: skip


def test_a_rank_records_its_error_where_the_launcher_finds_it(tmp_path) -> None:
    # A rank started without torchrun's rendezvous fails in init_process_group.
    import os
    import subprocess
    import sys

    settings = tmp_path / "settings.json"
    settings.write_text('{"device": "cpu", "seed": 0}')
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # fmt: skip
    env.pop("MASTER_ADDR", None)
    done = subprocess.run(
        [sys.executable, "-m", "archspec.bench.distributed_rank", "model.py", str(settings)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    error = (tmp_path / "rank1.error").read_text()
    assert "MASTER_ADDR" in error or "Error" in error.split(":")[0], error


def test_a_rank_killed_by_a_signal_is_named(tmp_path) -> None:
    # No Python exception to record: the launcher's message comes from torchrun's own summary
    # of a real run whose rank 1 aborts.
    import subprocess
    import sys

    from archspec.bench.distributed import _why

    script = tmp_path / "abort.py"
    script.write_text(
        "import os, signal\n"
        "if os.environ['RANK'] == '1':\n"
        "    os.kill(os.getpid(), signal.SIGABRT)\n"
    )
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    done = subprocess.run([*launch, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    why = _why(str(tmp_path), done.stderr)
    assert why.startswith("rank 1 exited with code -6"), why
    assert "SIGABRT" in why, why


def test_top_groups_beyond_the_groups_is_refused_with_one_group() -> None:
    refused(cli("validate", "mixtral-8x7b", "--set", "moe.top_groups=99"), "moe.top_groups",
            "at least top_groups (99)")  # fmt: skip


def test_count_names_the_global_batch_it_refuses() -> None:
    refused(cli("count", "llama-2-7b", "--global-batch", "0", "--seq", "128"),
            "--global-batch must be at least 1 (got 0)")  # fmt: skip


def test_an_empty_spec_is_named_as_empty() -> None:
    refused(cli("count", ""), "the spec is empty")  # it said '.: the file is a directory'


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "llama-2-7b", "--gpu", "h100-sxm", "--global-batch", "64", "--gpus",
         "99999999999999999999"],
        ["plan", "llama-2-7b", "--gpu", "h100-sxm", "--global-batch", "64", "--seq",
         "999999999999999999"],
        ["plan", "llama-2-7b", "--mode", "serve", "--gpu", "h100-sxm", "--prompt", "10000000000"],
        ["compare", "llama-2-7b", "gpt2", "--seq", "99999999999999999999"],
    ],
)  # fmt: skip
def test_sizes_beyond_the_limit_are_refused_everywhere(args: list[str]) -> None:
    """plan took --gpus 10^20 (a step of 10^15 seconds at 0.0% MFU), compare any --seq."""
    refused(cli(*args), "must be at most 1,000,000,000")


def test_a_tpu_plans_with_maxtexts_stack_unless_told(tmp_path) -> None:
    """With no --engine, a TPU (systems.yaml's `kind: tpu`) is timed as MaxText runs on it and
    a GPU as Megatron-LM runs on it; a --system file's accelerator says its own kind."""
    import json

    def engine(*args: str) -> str:
        result = cli("plan", "gpt2", "--gpus", "8", "--global-batch", "8", "--seq", "128",
                     "--json", *args)  # fmt: skip
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["engine"]

    assert engine("--gpu", "tpu-v5e") == "maxtext"
    assert engine("--gpu", "h100-sxm") == "megatron"
    assert engine("--gpu", "tpu-v5e", "--engine", "megatron") == "megatron"
    tpu = _system_file(tmp_path, {"kind": "tpu"})
    assert engine("--gpu", "mysys", "--system", str(tpu)) == "maxtext"
    assert engine("--gpu", "mysys", "--system", str(_system_file(tmp_path))) == "megatron"
