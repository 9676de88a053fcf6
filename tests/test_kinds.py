"""The catalogue of kinds: every choice the schema allows has one complete entry, and backends
never decide what a kind means by its name."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import typing
from pathlib import Path

import pytest

from archspec import kinds
from archspec.kinds.positions import POSITION_KINDS
from archspec.spec import schema

ROOT = Path(__file__).resolve().parents[1]

CATEGORIES = [
    (schema.NormKind, kinds.NORMS),
    (schema.Activation, kinds.ACTIVATIONS),
    (typing.Literal[tuple(POSITION_KINDS)], kinds.POSITIONS),
    (schema.Residual, kinds.RESIDUALS),
    (schema.Router, kinds.ROUTERS),
]


@pytest.mark.parametrize("literal, table", CATEGORIES, ids=lambda x: getattr(x, "__name__", ""))
def test_every_schema_choice_has_a_complete_entry(literal, table) -> None:
    for name in typing.get_args(literal):
        entry = table[name]
        assert entry.name == name
        for f in dataclasses.fields(entry):
            value = getattr(entry, f.name)
            # Every field the kind declares is set to something (no placeholder text).
            assert value != "" or f.name == "description", (name, f.name)
        assert entry.label


def test_derived_defaults_come_from_the_kinds() -> None:
    layernorm = schema.NormSpec(kind="layernorm")
    rmsnorm = schema.NormSpec(kind="rmsnorm")
    assert layernorm.has_bias and not rmsnorm.has_bias
    assert kinds.norm("layernorm").bias_by_default and not kinds.norm("rmsnorm").bias_by_default
    assert not kinds.residual("post").final_norm_by_default
    assert kinds.residual("pre").final_norm_by_default


KIND_NAMES = sorted({name for literal, _ in CATEGORIES for name in typing.get_args(literal)})


@pytest.mark.parametrize("name", KIND_NAMES)
def test_a_kind_name_is_written_in_at_most_two_files_outside_spec_and_hf(name: str) -> None:
    """The issue's check: `grep -rlE "[\\"']rope[\\"']" archspec | grep -vE
    "^archspec/(spec|hf)/"` lists at most two files, for every kind."""
    pattern = re.compile(rf"[\"']{re.escape(name)}[\"']")
    found = []
    for path in sorted((ROOT / "archspec").rglob("*")):
        relative = path.relative_to(ROOT).as_posix()
        if not path.is_file() or re.match(r"archspec/(spec|hf)/", relative):
            continue
        if "__pycache__" in relative:
            continue
        if pattern.search(path.read_text(encoding="utf-8", errors="replace")):
            found.append(relative)
    assert len(set(map(_place, found))) <= 2, found


def test_the_grep_of_the_issue_agrees() -> None:
    """The same check with grep itself, for the kind the issue names."""
    out = subprocess.run(
        ["grep", "-rlE", "[\"']rope[\"']", "archspec"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    outside = [p for p in out if not re.match(r"archspec/(spec|hf)/", p) and "__pycache__" not in p]
    assert len(set(map(_place, outside))) <= 2, outside


def _place(path: str) -> str:
    """The position catalogue is a package, a module per kind (the scaling type "none"
    beside the kind "none"): one place, as its single file was."""
    return "archspec/kinds/positions/" if path.startswith("archspec/kinds/positions/") else path
