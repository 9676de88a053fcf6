"""`archspec draw`: the diagram says what the IR says (columns, wiring, variants, labels,
parameters), and its SVG, PNG and Mermaid renderings are well formed and safe."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.backends.draw.build import build_diagram
from archspec.backends.draw.diagram import Add, Box, Group, Parallel
from archspec.backends.draw.layout import layout
from archspec.backends.draw.mermaid import render as mermaid
from archspec.backends.draw.svg import render as svg
from archspec.cli import app
from archspec.cli.common import compile_spec

runner = CliRunner()


def diagram(spec: str, *overrides: str, params: bool = False):
    return build_diagram(compile_spec(spec, list(overrides), symbolic=False), params=params)


def groups(d) -> list[Group]:
    return [item for column in d.columns for item in column.items if isinstance(item, Group)]


def test_encoder_decoder_side_by_side_with_cross_attention() -> None:
    d = diagram("t5-small")
    assert [c.title for c in d.columns] == ["Encoder", "Decoder"]
    encoder, decoder = groups(d)
    assert (encoder.repeat, decoder.repeat) == (6, 6)
    assert encoder.title.startswith("EncoderBlock") and decoder.title.startswith("DecoderBlock")
    cross = [b for b in decoder.items if isinstance(b, Box) and b.role == "cross-attention"]
    assert len(cross) == 1 and d.cross[0].targets == [cross[0].id]
    assert "relative bias (T5), 32 buckets" in encoder.items[1].detail


def test_llama_labels_say_kind_and_shape() -> None:
    d = diagram("llama-2-7b")
    by_role = {b.role: b for b in d.boxes()}
    assert by_role["attention"].detail == "32 heads × 128, RoPE θ=10000"
    assert (by_role["mlp"].title, by_role["mlp"].detail) == ("SwiGLU MLP", "4,096 → 11,008 → 4,096")
    assert by_role["norm"].title.startswith("RMSNorm")
    gqa = {b.role: b for b in diagram("llama-3-8b").boxes()}["attention"]
    assert "8 kv heads (GQA)" in gqa.detail and "θ=500000" in gqa.detail


def test_residual_wiring_follows_the_kind() -> None:
    pre = groups(diagram("gpt2"))[0]
    assert [type(i).__name__ for i in pre.items] == ["Box", "Box", "Add"] * 2
    assert pre.skips == [(0, 2), (3, 5)]  # the stream before each norm joins its ⊕
    post = groups(diagram("bert-base"))[0]
    assert [i.role if isinstance(i, Box) else "+" for i in post.items] == [
        "attention", "+", "norm", "mlp", "+", "norm",
    ]  # fmt: skip
    assert post.skips == [(0, 1), (3, 4)]
    parallel = groups(diagram("palm-8b"))[0]
    assert isinstance(parallel.items[1], Parallel) and isinstance(parallel.items[2], Add)
    assert [b.role for b in parallel.items[1].boxes] == ["attention", "mlp"]
    assert parallel.skips == [(0, 2)]


def test_moe_and_per_layer_variants() -> None:
    d = diagram("mixtral-8x7b", "moe.dense_layers=1")
    dense, moe = groups(d)
    assert (dense.repeat, dense.layers) == (1, "layer 0")
    assert (moe.repeat, moe.layers) == (31, "layers 1–31")
    roles = [i.role for i in moe.items if isinstance(i, Box)]
    assert roles == ["norm", "attention", "norm", "router", "experts"]
    experts = [i for i in moe.items if isinstance(i, Box) and i.role == "experts"][0]
    assert experts.copies == 8 and experts.title.startswith("8 experts: SwiGLU")


@pytest.mark.parametrize("spec", ["llama-2-7b", "mixtral-8x7b", "bert-base", "palm-8b"])
def test_box_parameters_add_up_to_count(spec: str) -> None:
    d = diagram(spec, params=True)
    total = 0
    for column in d.columns:
        for item in column.items:
            total += item.modules * item.params if isinstance(item, Group) else item.params
    assert total == d.params
    count = json.loads(runner.invoke(app, ["count", spec, "--json"]).stdout)
    assert d.params == count["params"]["total"]


def test_svg_is_well_formed_and_self_contained() -> None:
    text = svg(layout(diagram("t5-small", params=True)))
    root = ET.fromstring(text.split("\n", 1)[1])
    assert root.tag.endswith("svg")
    assert "<script" not in text and "href" not in text
    assert text.count("http") == 1  # the SVG namespace only: no fonts, images or links
    for label in ("Cross-attention", "× 6", "EncoderBlock", "16,449,536 parameters"):
        assert label in text


def test_hostile_text_is_escaped() -> None:
    # Spec names are restricted by the schema; the renderers still escape whatever they get.
    d = diagram("gpt2")
    hostile = '<script>alert(1)</script>\u202e&"]-->x'
    d.name = hostile
    next(iter(d.boxes())).title = hostile
    text = svg(layout(d))
    assert "<script>" not in text and "\u202e" not in text and "&lt;script&gt;" in text
    ET.fromstring(text.split("\n", 1)[1])
    graph = mermaid(d)
    assert "<script>" not in graph and '"]-->' not in graph and "\u202e" not in graph


def test_mermaid_has_subgraphs_skips_and_cross_edges() -> None:
    text = mermaid(diagram("t5-small"))
    assert text.startswith("flowchart BT\n")
    assert text.count("subgraph") == 4  # two stacks, a block variant in each
    assert "-.->" in text and "== cross-attention ==>" in text
    assert "× 6" in text


def test_cli_writes_each_format(tmp_path: Path) -> None:
    for name in ("t5.svg", "t5.mmd"):
        result = runner.invoke(app, ["draw", "t5-small", "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert "wrote" in result.stderr
    assert (tmp_path / "t5.svg").read_text().lstrip().startswith("<?xml")
    assert (tmp_path / "t5.mmd").read_text().startswith("flowchart")
    again = runner.invoke(app, ["draw", "t5-small", "-o", str(tmp_path / "t5.svg")])
    assert again.exit_code == 0 and "unchanged" in again.stderr


def test_an_explicit_format_is_drawn_whatever_the_files_suffix(tmp_path: Path) -> None:
    for name in ("x.out", "noext"):
        path = tmp_path / name
        result = runner.invoke(app, ["draw", "gpt2", "-o", str(path), "--format", "svg"])
        assert result.exit_code == 0, result.output
        assert path.read_text().lstrip().startswith("<?xml") and "(svg diagram" in result.stderr


def test_cli_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "llama.png"
    result = runner.invoke(app, ["draw", "llama-2-7b", "--params", "-o", str(path)])
    assert result.exit_code == 0, result.output
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    assert width >= 1000  # drawn at 2x: sharp on a slide


def test_cli_stdout_and_json() -> None:
    result = runner.invoke(app, ["draw", "gpt2"])
    assert result.exit_code == 0 and result.stdout.startswith("flowchart BT")
    data = json.loads(runner.invoke(app, ["draw", "gpt2", "--json", "--params"]).stdout)
    assert data["name"] == "gpt2" and data["params"] == 124_439_808
    assert data["columns"][0]["items"][2]["type"] == "group"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "diagram.txt"], "must end in .svg, .png or .mmd"),
        (["--format", "png"], "a PNG is not text"),
        (["--format", "gif"], "--format takes svg, png or mmd"),
        (["-o", "x.svg", "--format", "mmd"], "does not match"),
        (["-o", "/no/such/dir/x.svg"], "no such directory"),
    ],
)
def test_cli_mistakes_are_one_message(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["draw", "gpt2", *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
