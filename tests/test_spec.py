"""The spec language: extends and merging, validation messages, exit codes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec import SpecError, build_ir, load_spec
from archspec.backends.count.params import parameter_count
from archspec.cli import app
from archspec.spec.resolve import deep_merge
from tests.hostile import run_main, run_python

runner = CliRunner()


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def total(spec) -> int:
    ir = build_ir(spec)
    return ir.value(parameter_count(ir.root))


def test_deep_merge_maps_merge_and_scalars_and_lists_replace() -> None:
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 1}
    merged = deep_merge(base, {"a": {"y": [3]}, "b": {"z": 2}})
    assert merged == {"a": {"x": 1, "y": [3]}, "b": {"z": 2}}
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 1}  # inputs untouched


def test_extends_builtin_and_override(tmp_path: Path) -> None:
    path = write(
        tmp_path / "deep-llama.yaml",
        """
        extends: llama-2-7b
        source: a what-if
        n_layers: 48
        norm: {eps: 1.0e-6}
        """,
    )
    spec = load_spec(path)
    assert spec.name == "deep-llama"
    assert spec.n_layers == 48 and spec.d_model == 4096
    assert spec.norm.kind == "rmsnorm" and spec.norm.eps == 1e-6  # deep-merged
    assert total(spec) == total(load_spec("llama-2-7b", ["n_layers=48"]))


def test_extends_relative_path_and_abstract_base(tmp_path: Path) -> None:
    write(
        tmp_path / "_family.yaml",
        """
        abstract: true
        extends: _llama
        source: family
        n_heads: 8
        d_ff: 512
        vocab_size: 1000
        max_seq_len: 128
        """,
    )
    (tmp_path / "sub").mkdir()
    child = write(
        tmp_path / "sub" / "tiny.yaml",
        """
        extends: ../_family.yaml
        d_model: 256
        n_layers: 2
        """,
    )
    spec = load_spec(child)
    assert (spec.family, spec.n_heads, spec.d_model, spec.abstract) == ("llama", 8, 256, False)
    with pytest.raises(SpecError, match="abstract"):
        load_spec(tmp_path / "_family.yaml")


def test_cycle_is_reported_with_the_chain(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "extends: b.yaml\n")
    write(tmp_path / "b.yaml", "extends: c.yaml\n")
    write(tmp_path / "c.yaml", "extends: a.yaml\n")
    with pytest.raises(SpecError, match=r"cycle: a.yaml -> b.yaml -> c.yaml -> a.yaml"):
        load_spec(tmp_path / "a.yaml")


def test_missing_parent(tmp_path: Path) -> None:
    path = write(tmp_path / "x.yaml", "extends: lama-2-7b\n")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert "unknown spec 'lama-2-7b'" in str(err.value)
    assert "did you mean 'llama-2-7b'" in str(err.value)
    assert f"{path}:1:10" in str(err.value)


def test_unknown_key_has_file_line_path_and_suggestion(tmp_path: Path) -> None:
    path = write(
        tmp_path / "m.yaml",
        """
        extends: gpt2
        attention:
          biass: false
        """,
    )
    with pytest.raises(SpecError) as err:
        load_spec(path)
    message = str(err.value)
    assert f"{path}:3:3" in message
    assert "attention.biass" in message and "did you mean 'bias'" in message


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("n_layers: twelve", "expected an integer, got str 'twelve'"),
        ("n_layers: 0", "expected a positive number, got 0"),
        ("n_layers: -3", "expected a positive number, got -3"),
        ("n_layers: true", "expected an integer, got the boolean true"),
        (
            "norm: {kind: batchnorm}",
            "expected one of layernorm | rmsnorm | offset_rmsnorm | offset_layernorm | "
            "nonparametric_layernorm, got str 'batchnorm'",
        ),
        ("residual: prenorm", "did you mean 'pre'"),
        ("d_model: 770", "n_heads (12) does not divide d_model (770)"),
        ("n_kv_heads: 5", "n_heads (12) is not a multiple of n_kv_heads (5)"),
        ("moe: {n_experts: 2, top_k: 3}", "top_k (3) exceeds n_experts (2)"),
        ("head: {pooler: true}", "a pooler needs layout: encoder, not decoder"),
        ("mlp: [1, 2]", "expected a mapping, got a list"),
    ],
)
def test_bad_values_print_the_values(tmp_path: Path, yaml_text: str, expected: str) -> None:
    path = write(tmp_path / "bad.yaml", f"extends: gpt2\n{yaml_text}\n")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert expected in str(err.value)
    assert str(path) in str(err.value)


def test_missing_required_key(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", "extends: _gpt2\nsource: x\nd_model: 64\nn_layers: 2\n")
    with pytest.raises(SpecError, match="missing required key 'n_heads'"):
        load_spec(path)


def test_duplicate_key_and_yaml_syntax(tmp_path: Path) -> None:
    dup = write(tmp_path / "dup.yaml", "extends: gpt2\nn_layers: 2\nn_layers: 3\n")
    with pytest.raises(SpecError, match=r"dup.yaml:3:1: error: at 'n_layers': duplicate key"):
        load_spec(dup)
    broken = write(tmp_path / "broken.yaml", "extends: gpt2\nnorm: {kind: layernorm\n")
    with pytest.raises(SpecError, match="YAML syntax error"):
        load_spec(broken)


def test_yaml_11_exponent_without_dot_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path / "e.yaml", "extends: gpt2\nnorm: {eps: 1e-6}\n")
    assert load_spec(path).norm.eps == 1e-6


def test_set_overrides_nested_fields() -> None:
    spec = load_spec("gpt2", ["n_layers=48", "norm.kind=rmsnorm", "attention.bias=false"])
    assert (spec.n_layers, spec.norm.kind, spec.attention.bias) == (48, "rmsnorm", False)
    with pytest.raises(SpecError, match=r"--set n_layers=x: error: at 'n_layers'"):
        load_spec("gpt2", ["n_layers=x"])
    with pytest.raises(SpecError, match="expects key=value"):
        load_spec("gpt2", ["n_layers"])


def test_cli_count_json() -> None:
    result = runner.invoke(app, ["count", "mixtral-8x7b", "--json"])
    assert result.exit_code == 0, result.output
    import json

    data = json.loads(result.stdout)
    assert data["name"] == "mixtral-8x7b"
    assert data["params"]["total"] == 46_702_792_704
    assert data["params"]["active"] == 12_879_925_248
    assert sum(row["count"] for row in data["params"]["rows"]) == data["params"]["total"]
    assert all(set(row) >= {"name", "count"} for row in data["params"]["rows"])


def test_cli_count_table_and_symbolic() -> None:
    result = runner.invoke(app, ["count", "bert-base", "--symbolic"])
    assert result.exit_code == 0
    assert "109,482,240" in result.stdout
    assert "encoder.blocks.i.attn.q" in result.stdout
    assert "n_layers*" in result.stdout


def test_cli_list_and_validate(tmp_path: Path) -> None:
    import json

    listed = json.loads(runner.invoke(app, ["list", "--json"]).stdout)
    assert {"bert-base", "palm-540b", "transformer-base"} <= {e["name"] for e in listed}
    good = write(tmp_path / "g.yaml", "extends: gpt2\nn_layers: 2\n")
    assert runner.invoke(app, ["validate", str(good)]).exit_code == 0


def test_user_error_exit_code_2_one_message_no_traceback(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", "extends: gpt2\nnorm: {kind: batchnorm}\n")
    result = run_main(["count", str(bad)], text=True)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert f"{bad}:2:14: error: at 'norm.kind'" in result.stderr
    typo = run_main(["count", "bert-bsae"], text=True)
    assert typo.stderr.strip().endswith("did you mean 'bert-base'?")
    debug = run_main(["count", str(bad), "--debug"], text=True)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_count_does_not_import_torch() -> None:
    code = "from archspec.cli import app\n"
    code += "try:\n    app(['count', 'llama-2-70b', '--json'])\nexcept SystemExit:\n    pass\n"
    _, modules = run_python(code)
    assert "torch" not in modules, "torch imported"
    assert "sympy" not in modules, "sympy imported for a plain count"
