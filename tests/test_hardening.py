"""Broken and hostile specs: every one gets one clear message (a SpecError), nothing else."""

from __future__ import annotations

import os
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from archspec import SpecError, load_spec
from archspec.spec.yaml_loader import MAX_FILE_BYTES, MAX_NODES
from tests.tiny import generated_module, tiny_sizes


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="the file is empty"):
        load_spec(write(tmp_path / "empty.yaml", ""))


def test_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        load_spec(write(tmp_path / "list.yaml", "- 1\n- 2\n"))


def test_binary_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="binary file"):
        load_spec(write(tmp_path / "bin.yaml", bytes(range(256))))
    with pytest.raises(SpecError, match="NUL bytes"):
        load_spec(write(tmp_path / "nul.yaml", b"extends: gpt2\x00\n"))


def test_oversized_file_is_refused_naming_the_limit(tmp_path: Path) -> None:
    big = write(tmp_path / "big.yaml", "# " + "x" * MAX_FILE_BYTES + "\n")
    with pytest.raises(SpecError, match=f"limit of {MAX_FILE_BYTES:,} bytes"):
        load_spec(big)


def test_alias_bomb_is_refused_quickly_in_bounded_memory(tmp_path: Path) -> None:
    # "Billion laughs": each level references the previous one nine times.
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 9)
        lines.append(f"a{i}: &a{i} [{refs}]")
    bomb = write(tmp_path / "bomb.yaml", "\n".join(lines) + "\n")
    tracemalloc.start()
    with pytest.raises(SpecError, match=f"more than {MAX_NODES:,} YAML nodes"):
        load_spec(bomb)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 100 * 2**20


@pytest.mark.parametrize(
    "document",
    [
        "!!python/object/apply:os.system ['echo pwned']",
        "extends: !!python/name:os.system gpt2",
        "n_layers: !!python/object/new:int [3]",
    ],
)
def test_only_safe_yaml_tags(tmp_path: Path, document: str) -> None:
    with pytest.raises(SpecError, match="YAML"):
        load_spec(write(tmp_path / "evil.yaml", document + "\n"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", 'x"; import os; os.system("id"); "'),
        ("name", "a\nb"),
        ("family", "llama'''"),
        ("hf_class", "__import__('os').system"),
        ("source", 'paper"""\nimport os\n"""'),
        ("source", "C:\\\\path"),
    ],
)
def test_strings_that_reach_generated_code_are_allow_listed(
    tmp_path: Path, field: str, value: str
) -> None:
    import yaml

    spec = {"extends": "gpt2", field: value}
    path = write(tmp_path / "inject.yaml", yaml.safe_dump(spec))
    with pytest.raises(SpecError, match="is not allowed here"):
        load_spec(path)


def test_keys_must_be_strings(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="keys must be strings"):
        load_spec(write(tmp_path / "k.yaml", "extends: gpt2\n1: 2\n"))


def test_extends_must_be_a_name_or_path(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="`extends` takes"):
        load_spec(write(tmp_path / "e.yaml", "extends: [gpt2]\n"))
    with pytest.raises(SpecError, match="spec file not found"):
        load_spec(write(tmp_path / "f.yaml", "extends: ./nowhere.yaml\n"))


# --- `archspec build` end to end: hostile input never becomes code, a failure leaves no file ---


def build(*args: str):
    from typer.testing import CliRunner

    from archspec.cli import app

    return CliRunner().invoke(app, ["build", *args])


def top_level_code(source: str) -> list[str]:
    """The kinds of the module's top-level statements after its docstring."""
    import ast

    body = ast.parse(source).body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    return sorted({type(node).__name__ for node in body[1:]})


@pytest.mark.parametrize(
    ("override", "output"),
    [
        # Values that still validate (YAML drops the comment) while the raw text, recorded in
        # the file's header, tries to close the docstring.
        ('n_layers=2 # """; import os; os.system("touch PWNED") #', "model.py"),
        ("n_layers=2\n# '''\n#\"\"\"; import os; os.system('touch PWNED') #\n", "model.py"),
        ("n_layers=\n2\n", "model.py"),
        ("n_layers=2 # \\", "model.py"),
        ("n_layers=2", 'x"""\nimport os; os.system("touch PWNED")\n#.py'),
        ("n_layers=2", "x'''\\.py"),
    ],
)
def test_injection_through_build_stays_in_the_docstring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, override: str, output: str
) -> None:
    from archspec.backends.torchgen import load_generated

    monkeypatch.chdir(tmp_path)
    result = build("gpt2", "--set", override, "-o", output)
    assert result.exit_code == 0, result.output
    source = Path(output).read_text()
    assert top_level_code(source) == ["ClassDef", "FunctionDef", "Import", "ImportFrom"]
    module = load_generated(source, tmp_path)
    assert module.Config().n_layers == 2
    assert not (tmp_path / "PWNED").exists()


def recorded_command(source: str) -> list[str]:
    """The words of the command build's header records, as bash reads them back."""
    import ast
    import shutil
    import subprocess

    bash = shutil.which("bash") or pytest.skip("no bash to read the command back")
    doc = ast.get_docstring(ast.parse(source), clean=False) or ""
    command = doc.split(" with:\n\n", 1)[1].split("\n\n", 1)[0]
    script = f'archspec() {{ printf "%s\\0" "$@"; }}\n{command}\n'
    out = subprocess.run([bash, "-c", script], capture_output=True, check=True).stdout
    return ["archspec", *(os.fsdecode(word) for word in out.split(b"\0")[:-1])]


@pytest.mark.parametrize(
    "name",
    ['x"""y.yaml', "a\'\'\'b.yaml", "a\\N{x}b\\x.yaml", "e\x1b[31m.yaml", "n\nl.yaml",
     os.fsdecode(b"b\xff.yaml"), "it's a " + "long " * 20 + '"q" name.yaml'],
)  # fmt: skip
def test_builds_header_records_the_command_that_rebuilds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The spec's path as given, quoted for the shell ($'...' for a control character or a
    byte that is not UTF-8, and for three double quotes, which the docstring cannot hold)."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / name, "extends: gpt2\nn_layers: 1\n")
    result = build(name, "--set", "n_layers=2", "-o", "out.py")
    assert result.exit_code == 0, result.output
    source = Path("out.py").read_text()
    assert top_level_code(source) == ["ClassDef", "FunctionDef", "Import", "ImportFrom"]
    assert "\x1b" not in source.split("import", 1)[0]  # the raw escape never reaches the file
    words = recorded_command(source)
    assert words == ["archspec", "build", name, "--set", "n_layers=2", "-o", "out.py"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("source", 'x"""; import os; os.system("touch PWNED"); """'),
        ("source", "paper `import os`"),
        ("name", "../../model"),
        ("hf_class", "Llama; import os"),
    ],
)
def test_injection_through_build_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    import yaml

    monkeypatch.chdir(tmp_path)
    spec = write(tmp_path / "evil.yaml", yaml.safe_dump({"extends": "gpt2", field: value}))
    for args in ([str(spec)], ["gpt2", "--set", f"{field}={value}"]):
        result = build(*args, "-o", "model.py")
        assert result.exit_code == 2 and "is not allowed here" in result.stderr, result.output
        assert result.stdout == "" and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.yaml"]


def test_failed_build_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.chdir(tmp_path)
    # A spec error, a checkpoint that is not there: nothing is written.
    assert build("gpt2", "--set", "n_layers=0", "-o", "model.py").exit_code == 2
    assert build("gpt2", "--hf-weights", "missing", "-o", "model.py").exit_code == 2
    assert list(tmp_path.iterdir()) == []

    # The disk fails while writing: no partial file, no temporary file, the old file intact.
    def fail(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    result = build("gpt2", "--set", "n_layers=1", "-o", "model.py")
    assert result.exit_code == 2 and "cannot write model.py" in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []
    Path("model.py").write_text("# mine\n")
    result = build("gpt2", "--set", "n_layers=1", "-o", "model.py", "--force")
    assert result.exit_code == 2 and "No space left on device" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["model.py"]
    assert Path("model.py").read_text() == "# mine\n"


# --- found by tests/test_properties.py: each used to escape as another exception or bad code ---


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # YAML's own constructors refusing their text (ValueError, KeyError before).
        ("n_layers: 2001-13-45", "2:11: error: cannot read '2001-13-45' as timestamp"),
        ('n_layers: !!float "abc"', "2:11: error: cannot read 'abc' as float"),
        ('n_layers: !!bool "x"', "2:11: error: cannot read 'x' as bool"),
        ("2001-13-45: 1", "2:1: error: cannot read '2001-13-45' as timestamp"),
        # A control character (a ReaderError raised before parsing began).
        ("n_layers: 2\x1f", "2:12: error: character #x001f is not allowed in YAML"),
        # Numbers that are not finite reached the generated code as a bare `nan` or `inf`.
        ("norm: {eps: .nan}", "at 'norm.eps': expected a finite number, got nan"),
        ("norm: {eps: 1e400}", "at 'norm.eps': expected a finite number, got inf"),
        ("position: {kind: rope, theta: .inf}", "at 'position.theta': expected a finite number"),
        ("norm: {eps: " + "9" * 400 + "}", "at 'norm.eps': expected a number, got an integer"),
        # T5's buckets divided by zero (or by log 1) in the generated code.
        ("position: {kind: relative_bias, num_buckets: 1}", "needs num_buckets >= 2"),
        (
            "position: {kind: relative_bias, num_buckets: 8, max_distance: 4}",
            "needs max_distance (4) above the 4 exact distances",
        ),
    ],
)
def test_found_by_property_tests_in_files(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "bad.yaml", f"extends: gpt2\n{text}\n")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("norm={1.5: 2}", "at 'norm': keys must be strings, got float 1.5"),
        ("head={null: true}", "at 'head': keys must be strings, got nothing (null)"),
        ("n_layers=2001-13-45", "at 'n_layers': expected an integer, got str '2001-13-45'"),
        ("n_layers=!!bool x", "at 'n_layers': expected an integer, got str '!!bool x'"),
        ("norm.eps=nan", "at 'norm.eps': expected a finite number, got nan"),
    ],
)
def test_found_by_property_tests_in_overrides(override: str, expected: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec("gpt2", [override])
    assert expected in str(err.value)


def test_relative_bias_bucket_rule_counts_both_directions_in_an_encoder() -> None:
    bert = ["position.kind=relative_bias"]
    # An encoder splits its buckets between the keys before and after the query.
    with pytest.raises(SpecError, match=r"num_buckets >= 4 with layout: encoder-decoder"):
        load_spec("t5-small", ["position.num_buckets=3"])
    # Its decoder's causal buckets are not split: 4 buckets give 2 exact distances there.
    with pytest.raises(SpecError, match=r"max_distance \(2\) above the 2 exact distances"):
        load_spec("t5-small", ["position.num_buckets=4", "position.max_distance=2"])
    assert load_spec("t5-small", ["position.num_buckets=4", "position.max_distance=3"])
    assert load_spec("bert-base", [*bert, "position.num_buckets=4", "position.max_distance=2"])
    assert load_spec("gpt2", ["position.kind=relative_bias", "position.num_buckets=2"])


def test_sinusoidal_positions_with_an_odd_width(tmp_path: Path) -> None:
    """The sine/cosine table had d_model + 1 channels for an odd d_model: a shape error."""
    import torch

    sizes = tiny_sizes(n_layers=1, d_model=5, n_heads=1, d_ff=8, vocab_size=11, max_seq_len=9)
    module = generated_module("gpt2", ["position.kind=sinusoidal", *sizes], tmp_path)
    positions = torch.arange(9)
    table = module.sinusoids(positions, 5)
    assert table.shape == (9, 5)
    torch.testing.assert_close(table[:, 4], torch.sin(positions / 10000 ** (4 / 5)))
    assert module.Model()(torch.randint(11, (2, 9))).shape == (2, 9, 11)
