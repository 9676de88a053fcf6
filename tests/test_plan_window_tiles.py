"""A fused attention over a sliding window costs the key tiles it visits (window_tiles.py):
checked against cuDNN's kernel measured through JAX on an H200 (benchmarks/gpu-h200-kernels/),
on a run the rule was not fitted to, and followed into plan's op costs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from archspec.backends.count.passes import KV_LEN, S_DEC, B, S
from archspec.cli.common import compile_spec
from archspec.plan.opcost import pass_costs
from archspec.plan.window_tiles import TILE, TILE_OVERHEAD, window_share

MEASURED = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu-h200-kernels"


def _tiles(seq: int, window: int | None) -> float:
    """Key tiles a causal kernel visits plus each query tile's fixed share, counted tile by
    tile (the rule's closed form is checked against this count below)."""
    visited = 0
    for i in range(seq // TILE):
        first = 0 if window is None else max(0, TILE * i - (window - 1)) // TILE
        visited += i - first + 1
    return visited + TILE_OVERHEAD * seq / TILE


@pytest.mark.parametrize("seq", [1024, 4096, 8192])
@pytest.mark.parametrize("window", [128, 256, 300, 1024, 2048, 4096, 16384])
def test_the_closed_form_counts_the_tiles(seq: int, window: int) -> None:
    share = float(window_share(sp.Integer(seq), window - 1))
    assert share == pytest.approx(_tiles(seq, window) / _tiles(seq, None), rel=1e-12)
    if window >= seq:
        assert share == 1.0


def test_held_out_batches_and_heads_follow_the_rule() -> None:
    """The rule's shape (tiles visited, TILE_OVERHEAD fitted on the sweep) with each head
    width's time a tile and JAX's per-call constant refitted on the sweep by least squares,
    predicts the later run over batches and heads at B·H = 128 and 256 (where the constant
    weighs least): windowed over causal 0.377 and 0.323 against 0.374 and 0.336 measured."""
    rows = json.loads((MEASURED / "attention_window_sweep.json").read_text())["sweep"]
    design = np.array([[1.0, *(64 * _tiles(r["seq"], r["window"]) * (r["head_dim"] == d)
                               for d in (64, 128))] for r in rows])  # fmt: skip
    fitted, *_ = np.linalg.lstsq(design, np.array([r["s"] for r in rows]))
    constant, per_tile = fitted[0], fitted[1]  # the constant, and width 64's time a tile
    assert np.abs(design @ fitted / [r["s"] for r in rows] - 1).max() < 0.092
    assert 0.3e-3 < constant < 0.7e-3  # JAX's dispatch and the host's clock, a call
    scaling = json.loads((MEASURED / "attention_window_scaling.json").read_text())["scaling"]
    seconds = {(r["batch"] * r["heads"], r["window"]): r["s"] for r in scaling}
    for heads in (128, 256):
        measured = seconds[(heads, 128)] / seconds[(heads, None)]
        windowed = constant + per_tile * heads * _tiles(4096, 128)
        causal = constant + per_tile * heads * _tiles(4096, None)
        assert windowed / causal == pytest.approx(measured, abs=0.015)
    # Far from the pairs a window keeps (6% at 128 of 4,096): the kernel's share is 4 times it.
    assert float(window_share(sp.Integer(4096), 127)) == pytest.approx(0.259, abs=0.001)


def _flash(name: str, seq: int) -> list[float]:
    ir = compile_spec(name, None)
    values = {**ir.env, B: 1, S: seq, S_DEC: seq, KV_LEN: seq}
    return [
        float(sp.sympify(c.flops).xreplace(values))
        for _, costs in pass_costs(ir, 2, "flash").layers
        for c in costs
        if c.label == "attention.flash"
    ]


def test_plan_costs_a_windowed_layer_by_its_tiles() -> None:
    """GPT-OSS 120B alternates 128-position windows with full layers: its windowed layers' fused
    attention costs the full layer's times the rule's share (the masks' own passes aside, which
    make the full layer's FLOPs 0.4% more); Mistral 7B's 4,096-position window over 4,096
    tokens is the causal mask."""
    windowed, full = _flash("gpt-oss-120b", 4096)
    share = float(window_share(sp.Integer(4096), 127))
    assert windowed / full == pytest.approx(share, rel=0.005)
    (mistral,) = set(_flash("mistral-7b", 4096))
    (llama,) = set(_flash("llama-2-7b", 4096))  # the same attention shape, no window
    assert mistral == pytest.approx(llama, rel=0.01)
