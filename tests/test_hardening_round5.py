"""Hostile inputs a fuzz of the command line found mishandled (2026-11-29): NaN and infinities
in a config.json (a Python traceback), a non-finite partial_rotary_factor handed to import-hf
as a dict, and rich's emoji codes, which turned ":skull:" in a name or source into a glyph
the input never held."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_reference import FAMILY_CONFIGS
from tests.hostile import cli, refused


def _config(model_type: str, **changes) -> dict:
    return {"model_type": model_type, **FAMILY_CONFIGS[model_type], **changes}


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_a_config_json_holding_nan_or_an_infinity_is_one_message(tmp_path: Path, word) -> None:
    text = json.dumps(_config("falcon"), indent=1)[:-2] + f',\n "partial_rotary_factor": {word}\n}}'
    path = tmp_path / "config.json"
    path.write_text(text)
    err = refused(cli("import-hf", str(path)), f"{word} is not a JSON number")
    line = text[: text.index(word)].count("\n") + 1
    assert f"config.json:{line}:" in err


def test_a_string_holding_nan_is_still_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("llama", _name_or_path="NaN and Infinity")))
    assert cli("count", str(path), "--json").exit_code == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0, -0.5])
@pytest.mark.parametrize("model_type", ["falcon", "phi3"])
def test_a_partial_rotary_factor_that_is_no_fraction_is_refused(model_type, value) -> None:
    with pytest.raises(SpecError, match="expected a positive finite number") as err:
        import_config(_config(model_type, partial_rotary_factor=value))
    assert err.value.path == "partial_rotary_factor"


def test_a_float_field_given_nan_is_refused_naming_it() -> None:
    with pytest.raises(SpecError, match="expected a finite number") as err:
        import_config(_config("llama", rms_norm_eps=float("nan")))
    assert err.value.path == "rms_norm_eps"


def test_emoji_codes_in_a_name_print_as_written(tmp_path: Path) -> None:
    systems = tmp_path / "systems.yaml"
    systems.write_text(
        "accelerators:\n  acc:\n    name: 'Evil :skull: GPU'\n    peak_tflops: {bf16: 1000}\n"
        "    memory_gib: 80\n    memory_bandwidth_gbs: 3000\n    source: s\n"
    )
    listed = cli("plan", "--system", str(systems), "--list-systems")
    assert listed.exit_code == 0, listed.output
    assert ":skull:" in listed.stdout and "\N{SKULL}" not in listed.stdout
