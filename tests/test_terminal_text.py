"""Issue 19, control characters: no control, bidi or invisible character from a spec, a key,
a file name or a library's error reaches the terminal or generated code; rich markup in a
value is shown, not interpreted (archspec/safety/text.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from archspec import SpecError, load_spec
from archspec.errors import Location
from archspec.safety.text import has_unsafe, markup_safe, visible
from tests.hostile import cli, refused

HOSTILE = ["\u202e", "\u200b", "\u009b", "\x1b", "\x1b[2J", "\u2066", "\ufeff", "\x7f"]


@pytest.mark.parametrize("char", HOSTILE)
def test_visible_escapes_every_hostile_character(char: str) -> None:
    shown = visible(f"a{char}b")
    assert not has_unsafe(shown) and shown.startswith("a\\") and shown.endswith("b")


def test_error_messages_are_one_visible_line_per_part() -> None:
    err = SpecError(
        "unknown key 'a\nerror: forged line'",
        location=Location("f\x1b[31m.yaml", 1, 1),
        path="x\u202ey",
        hint="try\x9b",
    )
    text = str(err)
    assert text.count("\n") == 1  # only the hint's own line break
    assert not has_unsafe(text.replace("\n  hint:", " hint:"))


@pytest.mark.parametrize("char", HOSTILE + ["\ud800"])
@pytest.mark.parametrize("field", ["source", "name", "family"])
def test_hostile_characters_in_strings_are_refused(tmp_path: Path, field: str, char: str):
    text = yaml.safe_dump({"extends": "gpt2", field: f"x{char}y"}, allow_unicode=True)
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = cli("build", str(path), "-o", str(tmp_path / "m.py"))
    err = refused(result)
    assert not has_unsafe(err.replace("\n", " ")), err
    assert not (tmp_path / "m.py").exists()


def test_hostile_characters_in_keys_reach_no_terminal(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text('extends: gpt2\n"n_lay\\u202eers\\nerror: forged": 2\n')
    err = refused(cli("count", str(path)), "unknown key")
    # The newline in the key is shown as \x0a: no line of the output starts with the forgery.
    assert not any(line.startswith("error: forged") for line in err.splitlines())
    assert "\u202e" not in err and "\\x0a" in err


def test_a_lone_surrogate_in_an_override(tmp_path: Path) -> None:
    value = os.fsdecode(b"source=paper \xff")
    err = refused(cli("build", "gpt2", "--set", value, "-o", str(tmp_path / "m.py")))
    assert "\\udcff" in err


@pytest.mark.parametrize("source", ["[/bold] closes nothing", "[link=https://evil.example]x"])
def test_rich_markup_in_a_source_is_shown_as_written(source: str) -> None:
    result = cli("count", "gpt2", "--set", f"source={source}")
    assert result.exit_code == 0, result.output
    assert source in result.stdout.replace("\n", "")
    assert markup_safe(source) != source  # it was escaped on the way


def test_generated_code_has_no_control_characters(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    name = os.fsdecode(b"m\x1b[2J\xe2\x80\xae.py")
    assert cli("build", "gpt2", "--set", "n_layers=1", "-o", name).exit_code == 0
    code = Path(name).read_text()
    assert not has_unsafe(code.replace("\n", "").replace("\t", ""))


def test_escape_in_a_spec_file_is_refused_at_its_place(tmp_path: Path) -> None:
    path = tmp_path / "e.yaml"
    path.write_bytes(b"extends: gpt2\nsource: a\x1bb\n")
    with pytest.raises(SpecError, match=r"2:\d+: error: character #x001b"):
        load_spec(path)
