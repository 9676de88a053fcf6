"""A cycled window pattern (Gemma 2's windowed and full layers in turn) costs the same at any
depth: one run per letter of the pattern, its layers a pattern's length apart, so `count`,
`build`, `draw`, `report` and `plan` of a million layers take what twelve take, and the
numbers are exact: parameters against transformers' Gemma2ForCausalLM on the meta device at an
odd depth, FLOPs against the layer-by-layer sum of what transformers' own mask keeps, pipeline
stages against counting their layers one by one.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import sympy as sp

from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import B, S, flop_figures
from archspec.backends.count.params import parameter_count
from archspec.ir.build import build_ir
from archspec.ir.nodes import within
from archspec.plan.layers import stage_runs
from archspec.spec.resolve import load_spec
from tests.hostile import cli, refused

MILLION = ["--set", "n_layers=1000000"]


def _timed(*args: str):
    start = time.perf_counter()
    result = cli(*args)
    seconds = time.perf_counter() - start
    assert result.exit_code == 0, (args, result.output, result.exception)
    assert seconds < 10, (args, seconds)
    return result


@pytest.mark.parametrize(
    "args",
    [
        ("count", "gemma-2-2b", "--by", "module"),
        ("count", "gemma-2-2b", "--names", "hf"),
        ("count", "gemma-2-2b", "--gpus", "64", "--pp", "8", "--tp", "8"),
        ("build", "gemma-2-2b", "-o", "{tmp}/g.py"),
        ("draw", "gemma-2-2b", "-o", "{tmp}/g.svg"),
        ("report", "gemma-2-2b", "-o", "{tmp}/g.html"),
        ("plan", "gemma-2-2b", "--gpu", "h100-sxm", "--mode", "serve"),
    ],
    ids=["count", "names", "pipeline", "build", "draw", "report", "plan"],
)
def test_a_million_alternating_layers_are_described_quickly(args, tmp_path: Path) -> None:
    _timed(*(a.format(tmp=tmp_path) for a in args), *MILLION)


def test_the_training_plan_of_a_million_alternating_layers_is_quick() -> None:
    result = cli("plan", "gemma-2-2b", "--gpu", "h100-sxm", "--global-batch", "8", *MILLION)
    refused(result, "no layout fits")


def test_the_generated_file_stays_short_and_builds_the_pattern(tmp_path: Path) -> None:
    """The file holds one loop over the layers, whatever their number; run at five layers, it
    builds windowed, full, windowed, full, windowed."""
    out, usual = tmp_path / "g.py", tmp_path / "usual.py"
    _timed("build", "gemma-2-2b", "-o", str(out), *MILLION)
    _timed("build", "gemma-2-2b", "-o", str(usual))
    # The same file as at the usual 26 layers, but for the longer numbers in it.
    assert abs(len(out.read_text()) - len(usual.read_text())) < 200
    from archspec.backends.torchgen import generate_source, load_generated

    sets = ["n_layers=5", "d_model=16", "n_heads=2", "n_kv_heads=1", "head_dim=8", "d_ff=32",
            "vocab_size=32", "max_seq_len=16", "attention.sliding_window=4"]  # fmt: skip
    module = load_generated(generate_source(build_ir(load_spec("gemma-2-2b", sets))))
    model = module.Model(module.Config())
    kinds = [type(block).__name__ for block in model.decoder.blocks]
    assert kinds == ["SlidingBlock", "FullBlock", "SlidingBlock", "FullBlock", "SlidingBlock"]


def test_print_refuses_to_list_a_million_alternating_blocks() -> None:
    refused(cli("print", "gemma-2-2b", *MILLION), "one by one", "1,000,000")


def test_parameters_equal_transformers_at_an_odd_depth() -> None:
    """Gemma2ForCausalLM with 101 layers (51 windowed, 50 full), on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tests.hf_reference import HF_CONFIGS

    model_cls, config_cls, fields = HF_CONFIGS["gemma-2-2b"]
    config = getattr(transformers, config_cls)(**{**fields, "num_hidden_layers": 101})
    with torch.device("meta"):
        model = getattr(transformers, model_cls)(config)
    theirs = sum(p.numel() for p in model.parameters())
    ir = build_ir(load_spec("gemma-2-2b", ["n_layers=101"]))
    assert ir.value(parameter_count(ir.root)) == theirs


@pytest.mark.parametrize("pattern", ["LG", "GLL", "LLLLLG"])
def test_flops_are_the_layer_by_layer_sum_at_a_million_layers(pattern: str) -> None:
    """Under `causal`, the attention scores of 1,000,003 layers equal the sum over each layer
    of the pairs its mask keeps (a window's, or the whole causal triangle)."""
    n, window, heads, head_dim = 1_000_003, 4, 2, 8
    sets = [f"n_layers={n}", "d_model=16", f"n_heads={heads}", "n_kv_heads=1", "d_ff=32",
            "vocab_size=32", "max_seq_len=64", f"attention.sliding_window={window}",
            f"attention.window_pattern={pattern}"]  # fmt: skip
    spec = load_spec("mistral-7b", sets)
    ir = build_ir(spec)
    scores = flop_figures(ir, CONVENTIONS["causal"]).components["attn_scores"][0]
    windowed = sum(1 for i in range(n) if spec.windowed(i))
    for s in (3, 11):
        window_pairs = sum(min(q + 1, window) for q in range(s))
        pairs = windowed * window_pairs + (n - windowed) * s * (s + 1) // 2
        expected = 2 * heads * head_dim * pairs
        assert sp.sympify(scores).xreplace({**ir.env, B: 1, S: s}) == expected


def test_pipeline_stages_deal_interleaved_runs_layer_by_layer() -> None:
    """How many of a strided run's layers fall in each stage, against listing them."""
    for start, count, stride in [(0, 13, 2), (1, 12, 2), (3, 7, 6), (5, 1, 6), (0, 10, 1)]:
        layers = range(start, start + count * stride, stride)
        for first in range(0, 30, 3):
            for last in range(first, 40, 7):
                assert within(layers, first, last) == sum(first <= i < last for i in layers)
    runs = [(13, "L"), (12, "G")]
    spans = [range(0, 25, 2), range(1, 25, 2)]
    assert stage_runs(runs, spans, 0, 5) == [(3, "L"), (2, "G")]
    assert stage_runs(runs, spans, 24, 25) == [(1, "L")]
