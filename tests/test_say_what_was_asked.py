"""Titles, JSON and diagrams say what was asked: the `--set` overrides (`gpt2 (n_layers=48)`), and
a config.json by its Hub id or its folder, never "imported" (issue #29, point 4)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from archspec.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def _run(*args: str) -> str:
    result = runner.invoke(app, list(args), env=WIDE)
    assert result.exit_code == 0, result.output
    return result.stdout


def _json(*args: str) -> dict:
    return json.loads(_run(*args, "--json"))


def test_count_title_and_json_name_the_overrides() -> None:
    # 48 GPT-2 blocks of 7,087,872 parameters and the embeddings: GPT-2 medium's depth at
    # GPT-2 small's width.
    assert _run("count", "gpt2", "--set", "n_layers=48").startswith(
        "gpt2 (n_layers=48): 379,603,200 parameters"
    )
    report = _json("count", "gpt2", "--set", "n_layers=48", "--set", "d_ff=2048")
    assert report["name"] == "gpt2" and report["overrides"] == ["n_layers=48", "d_ff=2048"]
    plain = _json("count", "gpt2")
    assert plain["overrides"] == [] and _run("count", "gpt2").startswith("gpt2: 124,439,808")
    sweep = _run("count", "gpt2", "--set", "n_layers=2", "--seq", "128,256")
    assert "gpt2 (n_layers=2) across sequence lengths" in sweep


def test_print_validate_draw_and_build_name_the_overrides() -> None:
    asked = ["--set", "n_layers=2"]
    assert _json("print", "gpt2", *asked)["overrides"] == ["n_layers=2"]
    assert _json("validate", "gpt2", *asked)["overrides"] == ["n_layers=2"]
    diagram = _json("draw", "gpt2", *asked)
    assert diagram["name"] == "gpt2 (n_layers=2)" and diagram["overrides"] == ["n_layers=2"]
    assert _json("draw", "gpt2")["name"] == "gpt2"
    source = _run("build", "gpt2", *asked)
    assert source.startswith('"""gpt2 (n_layers=2) in PyTorch:'), source[:200]
    assert _json("build", "gpt2", *asked)["overrides"] == ["n_layers=2"]


def test_draw_and_report_pages_name_the_overrides(tmp_path: Path) -> None:
    svg, page = tmp_path / "d.svg", tmp_path / "r.html"
    for command in (["draw", "-o", str(svg)], ["report", "-o", str(page)]):
        result = runner.invoke(app, [command[0], "gpt2", "--set", "n_layers=4", *command[1:]])
        assert result.exit_code == 0, result.output
        assert "gpt2 (n_layers=4)" in result.stderr  # "wrote ... (... of gpt2 (n_layers=4))"
    assert "<title>gpt2 (n_layers=4): decoder-only" in svg.read_text()
    html = page.read_text()
    assert "<title>archspec report: gpt2 (n_layers=4)</title>" in html
    assert "<h2>gpt2 (n_layers=4)<small>" in html
    assert _json("report", "gpt2", "--set", "n_layers=4")["specs"][0]["overrides"] == ["n_layers=4"]


def test_plan_names_the_overrides() -> None:
    asked = ["plan", "gpt2", "--gpu", "a100-80g", "--gpus", "1", "--global-batch", "8",
             "--seq", "512", "--tp", "1", "--pp", "1", "--set", "n_layers=4"]  # fmt: skip
    assert _json(*asked)["overrides"] == ["n_layers=4"]
    assert _run(*asked).startswith("gpt2 (n_layers=4) on 1 × a100-80g")
    serve = ["plan", "gpt2", "--mode", "serve", "--gpu", "a100-80g", "--batch", "1",
             "--prompt", "64", "--new-tokens", "8", "--set", "n_layers=4"]  # fmt: skip
    assert _run(*serve).startswith("gpt2 (n_layers=4) serving on")


def _llama_config(folder: Path, **extra) -> Path:
    from tests.hf_reference import FAMILY_CONFIGS

    folder.mkdir()
    config = folder / "config.json"
    config.write_text(json.dumps({"model_type": "llama", **FAMILY_CONFIGS["llama"], **extra}))
    return config


def test_a_config_is_named_after_its_folder_or_hub_id(tmp_path: Path) -> None:
    config = _llama_config(tmp_path / "my-llama")
    for reference in (config, config.parent):
        assert _json("count", str(reference))["name"] == "my-llama"
    assert _run("count", str(config.parent)).startswith("my-llama: ")
    asked = _json("count", str(config), "--set", "n_layers=1")
    assert (asked["name"], asked["overrides"]) == ("my-llama", ["n_layers=1"])
    assert _json("draw", str(config))["name"] == "my-llama"
    hub = _llama_config(tmp_path / "snapshot", _name_or_path="meta-llama/Llama-2-7b-hf")
    assert _json("count", str(hub))["name"] == "Llama-2-7b-hf"
    local = _llama_config(tmp_path / "local", _name_or_path="/home/me/models/x")
    assert _json("count", str(local))["name"] == "local"  # a local path names nothing useful
    named = tmp_path / "tiny llama.json"
    named.write_text(config.read_text())
    assert _json("count", str(named))["name"] == "tiny-llama"
    result = runner.invoke(app, ["count", str(config)])
    assert re.search(r"imported as a spec \(my-llama: \w+", result.stderr), result.stderr
    assert "imported" not in result.stdout


def test_an_override_is_shown_as_written_never_as_markup() -> None:
    title = _run("count", "gpt2", "--set", "source=[red]x[/red]").splitlines()[0]
    assert title.startswith("gpt2 (source=[red]x[/red]): 124,439,808 parameters")
