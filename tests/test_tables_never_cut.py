"""Every command's table at 80 and 200 columns: nothing cut ("decoder.blocks.i.at…"), no figure
split from its unit ("11.56" / "s") or folded mid-number, no line wider than the terminal, and
`list` one table (archspec/cli/tables.py has the rule)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.cli.tables import breaks

runner = CliRunner()

COMMANDS = {
    "count": ["count", "gpt3-175b"],
    "count --names hf": ["count", "bert-base", "--names", "hf"],
    "count --seq --batch": ["count", "llama-2-7b", "--seq", "4096", "--batch", "2", "--dtype",
                            "bf16"],
    "count sweep": ["count", "llama-2-7b", "--seq", "512,1024,2048,4096", "--dtype", "bf16"],
    "count --by module": ["count", "gpt2", "--seq", "1024", "--by", "module"],
    "count --symbolic": ["count", "t5-small", "--seq", "512", "--symbolic"],
    "compare": ["compare", "gpt2", "llama-2-7b", "t5-small"],
    "diff": ["diff", "bert-base", "roberta-base"],
    "plan train": ["plan", "gpt3-175b", "--gpu", "a100-80g", "--gpus", "64", "--global-batch",
                   "64", "--seq", "2048"],
    "plan serve": ["plan", "llama-2-70b", "--mode", "serve", "--gpu", "h100-sxm", "--gpus", "8",
                   "--tp", "8", "--batch", "8", "--prompt", "1024", "--new-tokens", "256"],
    "plan --list-systems": ["plan", "--list-systems"],
    "list": ["list"],
}  # fmt: skip

# A figure with its unit, as the tables print them: "174,604,259,328", "11.56 s", "40 GiB",
# "61.1%", "14.1T", "1.00×".
UNIT = r"(?: ?(?:[KMGT]i?B|B|s|ms|µs|TFLOP/s|GB/s)\b|[KMBTPE%×])"
FIGURE = re.compile(rf"(?<![\w.,])\d[\d,.]*{UNIT}?")


def _render(args: list[str], width: int) -> str:
    result = runner.invoke(app, args, env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


def _figures(text: str) -> set[str]:
    return set(FIGURE.findall(text))


@pytest.mark.parametrize("name", COMMANDS)
def test_nothing_cut_at_80_or_200_columns(name: str) -> None:
    wide, narrow = (_render(COMMANDS[name], width) for width in (200, 80))
    for width, text in ((200, wide), (80, narrow)):
        assert "…" not in text, text
        assert all(len(line) <= width for line in text.splitlines()), text
    # Figures never wrap: each one shown at 200 columns is whole at 80, unless it is in the
    # share column, which goes first when a table does not fit.
    dropped_share = "share" in wide and "share" not in narrow
    missing = {f for f in _figures(wide) - _figures(narrow) if not (dropped_share and "%" in f)}
    assert not missing, narrow


def test_list_stays_one_table_at_80_columns() -> None:
    text = _render(["list"], 80)
    assert text.count("built-in specs") == 1 and "(1 of" not in text
    for name in ("albert-base-v2", "qwen1.5-moe-a2.7b", "xlm-roberta-base"):
        assert name in text  # short enough that the key column never wraps them


def test_system_names_are_whole_at_80_columns() -> None:
    """The names you type after --gpu are never cut or wrapped."""
    text = _render(["plan", "--list-systems"], 80)
    for name in ("a100-40g", "a100-80g", "h100-sxm", "h100-pcie", "h200", "l4", "mi300x"):
        assert re.search(rf"│ {re.escape(name)} +│", text), text


def test_breaks_keep_figures_whole_and_wrap_names_at_their_dots() -> None:
    assert breaks("decoder.blocks.i.attn_norm") == ["decoder.", "blocks.", "i.", "attn_", "norm"]
    assert breaks("11.56 s") == ["11.56 s"]
    assert breaks("40 GiB of 80 GiB usable") == ["40 GiB ", "of ", "80 GiB ", "usable"]
    assert breaks("qwen1.5-moe-a2.7b") == ["qwen1.5-", "moe-", "a2.7b"]
    assert breaks("BertForMaskedLM") == ["Bert", "For", "Masked", "LM"]
