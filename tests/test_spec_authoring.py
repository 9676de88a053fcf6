"""Writing a spec by hand (issue 29, point 5): `source` optional with a warning, a kind's name
alone for a section without other parameters, every structural mistake of a file reported at
once, and the README's table of keys listing every key the schema accepts."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.kinds.positions import POSITION_KINDS, SCALINGS
from archspec.spec.resolve import load_spec
from archspec.spec.schema import Spec

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

DIMENSIONS = (
    "layout: decoder\nd_model: 64\nn_layers: 2\nn_heads: 4\nd_ff: 128\nvocab_size: 100\n"
    "max_seq_len: 32\n"
)


def write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- a. source optional ----------------------------------------------------------------------


def test_a_spec_without_source_is_accepted_with_a_one_line_warning(tmp_path: Path) -> None:
    path = write(tmp_path, DIMENSIONS)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and "mine.yaml" in warning[0] and "source" in warning[0]
    count = runner.invoke(app, ["count", str(path)])
    assert count.exit_code == 0 and "source: None" not in count.stdout
    assert json.loads(runner.invoke(app, ["count", str(path), "--json"]).stdout)["source"] is None


def test_built_in_specs_and_specs_with_a_source_get_no_warning(tmp_path: Path) -> None:
    assert "warning" not in runner.invoke(app, ["validate", "gpt2"]).stderr
    path = write(tmp_path, DIMENSIONS + "source: my notes\n")
    assert "warning" not in runner.invoke(app, ["validate", str(path)]).stderr


def test_a_report_of_a_spec_without_source_says_nothing_of_it(tmp_path: Path) -> None:
    path = write(tmp_path, DIMENSIONS)
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "<p class='source'></p>" in out.read_text()


# --- b. shorthands ---------------------------------------------------------------------------


def test_a_kind_alone_means_the_mapping_with_that_kind(tmp_path: Path) -> None:
    short = load_spec(write(tmp_path, DIMENSIONS + "position: rope\nnorm: rmsnorm\n", "s.yaml"))
    full = load_spec(
        write(tmp_path, DIMENSIONS + "position: {kind: rope}\nnorm: {kind: rmsnorm}\n", "s.yaml")
    )
    assert short == full and short.position.kind == "rope" and short.norm.kind == "rmsnorm"


def test_a_shorthand_merges_with_the_parent_as_the_mapping_would(tmp_path: Path) -> None:
    write(
        tmp_path, DIMENSIONS + "abstract: true\nnorm: {kind: layernorm, eps: 1.0e-6}\n", "base.yaml"
    )
    spec = load_spec(write(tmp_path, "extends: base.yaml\nnorm: rmsnorm\n"))
    assert (spec.norm.kind, spec.norm.eps) == ("rmsnorm", 1e-6)
    over = load_spec("gpt2", ["position=rope"])
    assert over.position.kind == "rope"


def test_validate_resolved_shows_the_full_form(tmp_path: Path) -> None:
    path = write(tmp_path, DIMENSIONS + "source: x\nposition: alibi\n")
    shown = runner.invoke(app, ["validate", str(path), "--resolved"]).stdout
    assert "position:\n  kind: alibi\n" in shown


def test_a_misspelt_shorthand_names_the_field_and_lists_the_kinds(tmp_path: Path) -> None:
    path = write(tmp_path, DIMENSIONS + "source: x\nposition: rop\n")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr == (
        "mine.yaml:9:11: error: at 'position.kind': expected one of learned | sinusoidal | "
        "rope | alibi | relative_bias | none, got str 'rop'\n  hint: did you mean 'rope'?\n"
    ).replace("mine.yaml", str(path))


@pytest.mark.parametrize(("section", "kind"), [("norm", "rmsnorm"), ("position", "rope")])
def test_a_section_that_is_neither_says_a_kind_name_is_allowed(section: str, kind: str) -> None:
    with pytest.raises(Exception, match=rf"expected a mapping or a kind's name \(.*{kind}"):
        load_spec("gpt2", [f"{section}=5"])


# --- c. every mistake at once -----------------------------------------------------------------

MANY = (
    "layout: decodr\nd_model: -3\nn_layers: x\nn_heads: 4\nd_ff: 128\nvocab_size: 100\n"
    "max_seq_len: 32\nattention: {biass: true}\n"
)


def test_every_structural_mistake_is_reported_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path, MANY)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert [line.split(": error")[0].rsplit(":", 2)[1] for line in lines] == ["1", "2", "3", "8"]
    assert "did you mean 'decoder'?" in result.stderr
    assert "did you mean 'bias'?" in result.stderr


def test_json_lists_every_error(tmp_path: Path) -> None:
    path = write(tmp_path, MANY)
    result = runner.invoke(app, ["validate", str(path), "--json"])
    data = json.loads(result.stdout)
    assert [e["key"] for e in data["errors"]] == [
        "layout",
        "d_model",
        "n_layers",
        "attention.biass",
    ]
    assert data["error"] == data["errors"][0]


def test_errors_stop_at_the_limit_and_say_so(tmp_path: Path) -> None:
    from archspec.spec.validate import MAX_ERRORS

    keys = "".join(f"wrong_{i}: 1\n" for i in range(MAX_ERRORS + 5))
    result = runner.invoke(app, ["validate", str(write(tmp_path, DIMENSIONS + keys))])
    assert result.stderr.count("unknown key") == MAX_ERRORS
    assert f"stopped after {MAX_ERRORS} errors" in result.stderr


def test_one_error_is_reported_as_before(tmp_path: Path) -> None:
    path = write(tmp_path, "extends: gpt2\nattention:\n  biass: true\n")
    result = runner.invoke(app, ["count", str(path)])
    assert result.stderr == (
        f"{path}:3:3: error: at 'attention.biass': unknown key 'biass'\n"
        "  hint: did you mean 'bias'?\n"
    )
    assert list(json.loads(runner.invoke(app, ["count", str(path), "--json"]).stdout)) == [
        "error",
        "errors",
    ]


# --- d. the README's table of keys ------------------------------------------------------------


def _key_table() -> dict[str, str]:
    """The README's table of spec keys: each key of the first column -> its row's text."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| key | meaning |") :].split("\n\n")[0]
    rows = {}
    for line in table.splitlines()[2:]:
        first, meaning = line.strip("|").split(" | ", 1)
        for key in re.findall(r"`([^`]+)`", first):
            for name in key.split(", "):
                rows[name] = meaning
    return rows


def _records(cls: type) -> list[type]:
    """The records a field of type `cls` holds (`MoESpec | None`: MoESpec)."""
    return [part for part in (*typing.get_args(cls), cls) if dataclasses.is_dataclass(part)]


def _sections(cls: type = Spec, prefix: str = "") -> dict[str, set[str]]:
    """Each section of the schema (`attention.latent` too) -> the keys it accepts; the
    position section's are every kind's and every scaling's."""
    sections = {}
    for name, hint in typing.get_type_hints(cls).items():
        if name == "position" and cls is Spec:
            records = [*POSITION_KINDS.values(), *SCALINGS.values()]
        else:
            records = _records(hint)
        for record in records:
            keys = sections.setdefault(prefix + name, set())
            keys |= {f.name for f in dataclasses.fields(record)}
            if record not in (*POSITION_KINDS.values(), *SCALINGS.values()):
                sections |= _sections(record, f"{prefix}{name}.")
    return sections


def test_the_readme_lists_every_key_the_schema_accepts() -> None:
    rows = _key_table()
    top = {f.name for f in dataclasses.fields(Spec)}
    sections = _sections()
    assert sorted(top - set(rows)) == [], "top-level keys missing from the README's table"
    assert set(rows) - top - {"extends"} == {"attention.latent"}
    for section, keys in sections.items():
        shown = set(re.findall(r"`(\w+)", rows[section]))  # `eps` or `kind: rmsnorm`
        nested = {key.split(".")[-1] for key in sections if key.startswith(section + ".")}
        missing = keys - shown - nested
        assert sorted(missing) == [], f"{section}: missing from the README's table"
