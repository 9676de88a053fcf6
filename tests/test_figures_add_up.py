"""Figures that add up and charts that start at zero (issue 29, point 6).

The parameter figures a `draw --params` diagram shows, read back from its SVG text, sum to
`archspec count`'s total; the charts of `compare --plot` and `count --seq ... --plot` start
their y-axes at zero and keep their legends off the lines.
"""

from __future__ import annotations

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
