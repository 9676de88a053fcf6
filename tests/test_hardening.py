"""Broken and hostile specs: every one gets one clear message (a SpecError), nothing else."""

from __future__ import annotations

import textwrap
import tracemalloc
from pathlib import Path

import pytest

from archspec import SpecError, load_spec
from archspec.spec.yaml_loader import MAX_FILE_BYTES, MAX_NODES


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
