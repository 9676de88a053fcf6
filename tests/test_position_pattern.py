"""Positions per layer in the spec language (`position_pattern`, `local_position`): cycled like
a window pattern, one run per letter of the two patterns' common cycle at any depth, and every
mistake refused with the file, the YAML path and a did-you-mean.

(That the built models rotate as transformers' Gemma 3, Cohere 2 and SmolLM3 do is checked in
tests/test_hf_zoo_rope_layers.py; the generated file's checks, a few seconds of torch each, are
long tests, and tests/test_properties.py draws position patterns among its specs.)"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from archspec.backends.count.params import parameter_count
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.hostile import cli, refused

# A small decoder whose windows (LG) and positions (PPPN) repeat together every 4 layers.
BASE = """\
name: mixed
source: tests/test_position_pattern.py
extends: _smollm3
d_model: 32
n_layers: {n_layers}
n_heads: 2
n_kv_heads: 1
d_ff: 64
vocab_size: 64
max_seq_len: 32
attention: {{sliding_window: 4, window_pattern: LG}}
{extra}
"""


def _spec(tmp_path: Path, extra: str = "", n_layers: int = 12) -> Path:
    path = tmp_path / "mixed.yaml"
    path.write_text(BASE.format(n_layers=n_layers, extra=extra))
    return path


def test_runs_follow_the_common_cycle_at_any_depth(tmp_path: Path) -> None:
    """One run per layer of the windows' and positions' common cycle (4), each run's layers
    windowed and rotated as the two patterns say layer by layer."""
    for n_layers in (12, 1_000_001):
        spec = load_spec(str(_spec(tmp_path, n_layers=n_layers)))
        ir = build_ir(spec, symbolic=False)
        runs = ir.root.stacks[0].blocks.runs
        assert len(runs) == 4 and {run.stride for run in runs} == {4}
        for run in runs:
            attn = run.node.attn
            for layer in (run.start, run.start + 4 * (run.count - 1)):
                assert (attn.window is not None) == spec.windowed(layer)
                assert attn.rotary == (spec.position_pattern[layer % 4] == "P")
        assert sum(run.count for run in runs) == n_layers
    per_layer = (parameter_count(build_ir(spec, symbolic=False).root) - 64 * 32 - 32) // n_layers
    assert per_layer * n_layers + 64 * 32 + 32 == parameter_count(ir.root)


LOCAL_YARN = "{theta: 500.0, scaling: {type: yarn, factor: 4.0, original_max_seq_len: 8}}"
MAIN_LLAMA3 = (
    "{kind: rope, theta: 10000.0, scaling: {type: llama3, factor: 8.0, original_max_seq_len: 8}}"
)


@pytest.mark.long
def test_build_count_and_print_agree_and_the_local_tables_are_the_rotation_s_own(
    tmp_path: Path,
) -> None:
    """Two scaled rotations (llama3 on P layers, YaRN on L layers): the generated file is
    ruff-clean, prints and counts as `print` and `count` say, and its local tables are what
    the same rotation builds as a stack's only one."""
    extra = f"position_pattern: PLPN\nposition: {MAIN_LLAMA3}\nlocal_position: {LOCAL_YARN}"
    path = _spec(tmp_path, extra, n_layers=6)
    out = tmp_path / "mixed.py"
    assert cli("build", str(path), "-o", str(out)).exit_code == 0
    rules = ["--select", "E,F,W,I,UP,B", "--target-version", "py310", "--line-length", "88"]
    for command in (["check", "--isolated", *rules], ["format", "--isolated", "--check"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command, str(out)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
    from archspec.backends.torchgen import load_generated

    module = load_generated(out.read_text())
    model = module.Model(module.Config())
    printed = cli("print", str(path))
    assert printed.exit_code == 0 and repr(model) in printed.stdout
    counted = cli("count", str(path), "--json")
    assert counted.exit_code == 0
    assert f'"total": {sum(p.numel() for p in model.parameters())}' in counted.stdout
    alone = tmp_path / "alone.yaml"
    alone.write_text(_spec(tmp_path, f"position: {LOCAL_YARN}", n_layers=6).read_text())
    assert cli("build", str(alone), "-o", str(tmp_path / "alone.py")).exit_code == 0
    single = load_generated((tmp_path / "alone.py").read_text())
    reference = single.Model(single.Config()).decoder
    for table in ("cos", "sin"):
        ours = getattr(model.decoder, f"local_rope_{table}")
        assert torch.equal(ours, getattr(reference, f"rope_{table}"))
        assert not torch.equal(getattr(model.decoder, f"rope_{table}"), ours)


@pytest.mark.parametrize(
    "extra, words",
    [
        ("position_pattern: PLPN", ["position_pattern", "local_position"]),
        ("local_position: {theta: 5.0}", ["local_position", "no L"]),
        ("position_pattern: PXN", ["position_pattern", "P (position)"]),
        ("position_pattern: PL\nlocal_position: {thta: 5.0}", ["local_position.thta", "theta"]),
        ("position_pattern: PL\nlocal_position: {kind: none}", ["N in position_pattern"]),
        ("position_pattern: PL\nlocal_position: {interleaved: true}", ["interleaved"]),
        ("position_pattern: PL\nlocal_position: {scaling: dynamic, factor: 2.0}", ["dynamic"]),
        ("position_pattern: NN", ["on no layer"]),
        ("position_pattern: PN\nposition: {kind: learned}", ["position.kind", "rope"]),
    ],
    ids=[
        "no-local",
        "unused-local",
        "letter",
        "typo",
        "none",
        "interleaved",
        "dynamic",
        "no-P",
        "learned",
    ],  # fmt: skip
)
def test_mistakes_are_refused_naming_the_field(tmp_path: Path, extra: str, words) -> None:
    path = _spec(tmp_path, extra)
    err = refused(cli("count", str(path)), *words)
    assert str(path.name) in err


def test_a_cycle_beyond_64_layers_is_refused(tmp_path: Path) -> None:
    window, positions = "L" * 8 + "G", "P" * 10 + "N"
    assert math.lcm(len(window), len(positions)) > 64
    extra = f"position_pattern: {positions}"
    path = (
        _spec(tmp_path, extra)
        .read_text()
        .replace("window_pattern: LG", f"window_pattern: {window}")
    )
    (tmp_path / "long.yaml").write_text(path)
    refused(cli("count", str(tmp_path / "long.yaml")), "every 99 layers", "at most 64")


@pytest.mark.long
def test_the_local_angles_are_kept_once_as_the_activation_counter_says(tmp_path: Path) -> None:
    """Training a stack whose L layers rotate by a second table keeps that table once more
    than the same stack with one rotation: what saved_tensors_hooks sees on the generated
    models, and what the activation counter says."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from archspec.backends.count.activations import activation_bytes
    from archspec.backends.count.flops import B, S
    from tests.test_memory import saved_bytes
    from tests.tiny import built_model

    ids = torch.randint(0, 64, (2, 24))

    def kept(extra: str) -> tuple[int, int]:
        ir = build_ir(load_spec(str(_spec(tmp_path, extra, n_layers=4))))

        def loss(logits):
            return torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())

        with sdpa_kernel(SDPBackend.MATH):
            measured = saved_bytes(built_model(ir), (ids,), loss)
        predicted = activation_bytes(ir, 4, "eager", device="cpu")
        return int(predicted.xreplace({**ir.env, B: 2, S: 24})), measured

    one = kept("")
    two = kept(f"position_pattern: PLPN\nlocal_position: {LOCAL_YARN}")
    table = 24 * 2 * 16 * 4  # positions x (cos, sin) x head_dim x fp32
    assert two[0] - one[0] == two[1] - one[1] == table
    assert two[0] == pytest.approx(two[1], rel=0.01)
