"""Figures that add up and charts that start at zero (issue 29, point 6).

The parameter figures a `draw --params` diagram shows, read back from its SVG text, sum to
`archspec count`'s total; the charts of `compare --plot` and `count --seq ... --plot` start
their y-axes at zero and keep their legends off the lines.
"""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from archspec.backends.draw.build import build_diagram
from archspec.backends.draw.diagram import Group
from archspec.backends.draw.layout import layout
from archspec.backends.draw.shapes import PALETTE
from archspec.backends.draw.svg import render as svg
from archspec.cli import app
from archspec.cli.common import compile_spec

runner = CliRunner()

# A shared embedding (T5, BART, the original Transformer), a relative-bias table (T5), a
# block shared by all layers with a factorised embedding (ALBERT), shared experts (Qwen2-MoE,
# DeepSeek), a norm per parallel branch (Falcon-40B), and the plain cases.
SPECS = [
    "t5-small",
    "bart-base",
    "transformer-base",
    "albert-base-v2",
    "qwen1.5-moe-a2.7b",
    "deepseek-v2-lite",
    "falcon-40b",
    "llama-2-7b",
    "mixtral-8x7b",
    "bert-base",
]


def count_total(spec: str) -> int:
    result = runner.invoke(app, ["count", spec, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["params"]["total"]


def figure(text: str) -> int:
    return int(text.replace(",", ""))


def shown_figures(text: str) -> int:
    """The model's parameters as a reader adds them up from an SVG diagram: each box outside
    a block once, each block's figure times its "× N" (or its shared copies). Checks on the
    way that a block's boxes (those inside its frame) add up to the block's figure."""
    root = ET.fromstring(text.split("\n", 1)[1])
    frames = [  # the blocks' frames, in the order their figures follow
        tuple(float(e.get(k)) for k in ("x", "y", "width", "height"))
        for e in root.iter()
        if e.tag.endswith("rect") and e.get("fill") == PALETTE["group"][0]
    ]
    inside = [0] * len(frames)
    total, repeat, blocks = 0, None, []
    for e in root.iter():
        if not e.tag.endswith("text") or not e.text:
            continue
        line, x, y = e.text, float(e.get("x")), float(e.get("y"))
        if m := re.fullmatch(r"× (\d+)", line):
            repeat = int(m[1])
        elif m := re.fullmatch(r"([\d,]+) parameters", line):  # a box (the subtitle has "·")
            frame = [
                i for i, (fx, fy, w, h) in enumerate(frames) if fx < x < fx + w and fy < y < fy + h
            ]
            if frame:
                inside[frame[0]] += figure(m[1])
            else:
                total += figure(m[1])
        elif m := re.fullmatch(r"([\d,]+) each", line):
            blocks.append(figure(m[1]))
            total += figure(m[1]) * repeat
        elif m := re.fullmatch(r"([\d,]+) × (\d+), shared by the layers", line):
            blocks.append(figure(m[1]))
            total += figure(m[1]) * int(m[2])
    assert inside == blocks
    return total


@pytest.mark.parametrize("spec", SPECS)
def test_the_figures_a_diagram_shows_sum_to_count(spec: str) -> None:
    diagram = build_diagram(compile_spec(spec, [], symbolic=False), params=True)
    assert shown_figures(svg(layout(diagram))) == count_total(spec)


@pytest.mark.parametrize("spec", SPECS)
def test_a_blocks_boxes_sum_to_the_block(spec: str) -> None:
    diagram = build_diagram(compile_spec(spec, [], symbolic=False), params=True)
    for column in diagram.columns:
        for group in (item for item in column.items if isinstance(item, Group)):
            inner = sum(box.params for box in group.boxes())
            assert inner == group.params, group.title


def test_a_shared_embedding_is_counted_once() -> None:
    diagram = build_diagram(compile_spec("t5-small", [], symbolic=False), params=True)
    encoder, decoder = (column.items[0] for column in diagram.columns)
    assert encoder.params == 32_128 * 512 and decoder.params == 0


# The charts: matplotlib figures, checked in display coordinates after a draw.

CHART_SPECS = ["bert-base", "gpt2", "t5-base", "llama-2-7b", "llama-2-70b", "mixtral-8x7b"]


def sweep_chart():
    from archspec.backends.compare.plot import sweep_figure
    from archspec.backends.compare.sweep import seq_sweep
    from archspec.backends.count.flops_report import Workload

    ir = compile_spec("llama-2-7b", [])
    return sweep_figure(
        "llama-2-7b", seq_sweep(ir, Workload(dtype="bf16"), [512, 1024, 2048, 4096])
    )


def compare_chart():
    from archspec.backends.compare.plot import compare_figure
    from archspec.backends.compare.sweep import forward_curves
    from archspec.backends.compare.table import compare_report
    from archspec.backends.count.flops_report import Workload

    irs = [compile_spec(spec, []) for spec in CHART_SPECS]
    report = compare_report(irs, Workload(seq=2048, dtype="bf16"))
    return compare_figure(report, forward_curves(irs, 2048), 2048)


@pytest.fixture(params=["sweep", "compare"])
def chart(request):
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    fig = sweep_chart() if request.param == "sweep" else compare_chart()
    fig.canvas.draw()
    yield fig
    plt.close(fig)


def value_axes(fig):
    """Each panel's value axis: y for the line charts, x for the horizontal bars."""
    for axes in fig.axes:
        if axes.lines and not axes.patches:
            yield axes, "y", axes.get_ylim(), axes.get_yscale(), axes.get_ylabel()
        else:
            yield axes, "x", axes.get_xlim(), axes.get_xscale(), axes.get_xlabel()


def test_a_charts_value_axis_starts_at_zero_or_says_it_is_logarithmic(chart) -> None:
    for axes, which, (low, _), scale, label in value_axes(chart):
        if scale == "log":
            assert "log scale" in label or "log scale" in axes.get_title(), (which, label)
        else:
            assert low == 0, (axes.get_title(), which, low)


def drawn_points(line, steps: int = 50):
    """Points along a drawn line in display coordinates: its data points and the segments
    between them (straight on the canvas, whatever the axes' scales)."""
    import numpy as np

    points = line.get_transform().transform(line.get_xydata())
    if line.get_linestyle() in ("None", ""):
        return list(points)
    t = np.linspace(0, 1, steps)[:, None]
    return [p for a, b in itertools.pairwise(points) for p in a + t * (b - a)] or list(points)


def test_no_legend_covers_a_line(chart) -> None:
    renderer = chart.canvas.get_renderer()
    legends = [*chart.legends, *(a.get_legend() for a in chart.axes if a.get_legend())]
    assert legends
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for axes in chart.axes:
            for line in axes.lines:
                covered = [p for p in drawn_points(line) if box.contains(*p)]
                assert not covered, (line.get_label(), covered)


# The report's SVG charts.


def report_chart(series):
    from archspec.backends.compare.plot import binary
    from archspec.backends.report.chart import line_chart

    return ET.fromstring(line_chart("Memory", series, binary, unit=1024))


def test_a_report_charts_linear_axis_starts_at_zero() -> None:
    # Inference memory at 25-27 GiB and training at 40-60 GiB: once the inference line sat
    # on an axis starting at 25 GiB.
    gib = 2**30
    svg_root = report_chart(
        [
            ("training", [(512, 40 * gib), (1024, 48 * gib), (2048, 60 * gib)], False),
            ("inference", [(512, 25 * gib), (1024, 26 * gib), (2048, 27 * gib)], True),
        ]
    )
    ticks = [
        e for e in svg_root.iter() if e.get("class") == "tick" and e.get("text-anchor") == "end"
    ]
    lowest = max(ticks, key=lambda e: float(e.get("y")))
    assert lowest.text == "0 B"
    title = next(e for e in svg_root.iter() if e.get("class") == "chart-title")
    assert "log scale" not in title.text


def test_a_report_charts_legend_is_below_every_point() -> None:
    series = [
        (f"spec {i}", [(512, 10.0 * (i + 1)), (4096, 1000.0 * (i + 1))], i % 2 == 1)
        for i in range(4)
    ]
    svg_root = report_chart(series)
    title = next(e for e in svg_root.iter() if e.get("class") == "chart-title")
    assert title.text.endswith("(log scale)")
    points = [float(e.get("cy")) for e in svg_root.iter() if e.tag.endswith("circle")]
    legend = [float(e.get("y")) for e in svg_root.iter() if e.get("class") == "legend"]
    assert len(legend) == 4 and min(legend) > max(points)
    height = float(svg_root.get("viewBox").split()[3])
    assert max(legend) < height
