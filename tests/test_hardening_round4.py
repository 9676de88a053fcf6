"""Hostile inputs found by a fourth round of fuzzing, each with the behaviour it now has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.hostile import cli, refused

LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 172,
    "vocab_size": 128,
    "max_position_embeddings": 256,
    "rms_norm_eps": 1e-06,
}


def test_a_field_name_cannot_write_spec_lines_through_its_note(tmp_path: Path) -> None:
    """An ignored field's name is echoed in a comment of the imported spec. YAML ends a comment
    at U+2028 and U+0085 as at a newline: unescaped, this key wrote `attention: {bias: true}`
    into the spec as a line of its own."""
    config = tmp_path / "config.json"
    for breaker in ("\u2028", "\u0085", "\u2029"):
        key = f"zz{breaker}attention: {{bias: true, qkv_bias: true}} #"
        config.write_text(json.dumps({**LLAMA, key: 1}))
        out = tmp_path / "out.yaml"
        result = cli("import-hf", str(config), "-o", str(out), "--force")
        assert result.exit_code == 0, result.output
        text = out.read_text()
        assert breaker not in text
        assert "attention" not in yaml.safe_load(text)


def _import(tmp_path: Path, config: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return cli("import-hf", str(path))


@pytest.mark.parametrize(
    ("scaling", "words"),
    [
        ({"rope_type": "linear", "factor": "2"}, "factor: expected a number, got '2'"),
        ({"rope_type": "linear", "factor": None}, "factor: expected a number, got None"),
        ({"type": "dynamic", "factor": "2"}, "factor: expected a number"),
        ({"rope_type": "llama3", "factor": 8, "low_freq_factor": "1", "high_freq_factor": 4,
          "original_max_position_embeddings": 128}, "low_freq_factor: expected a number"),
        ({"rope_type": "yarn", "factor": 4, "beta_fast": "32",
          "original_max_position_embeddings": 128}, "beta_fast: expected a number"),
        ({"rope_type": "yarn", "factor": 4, "attention_factor": True,
          "original_max_position_embeddings": 128}, "attention_factor: expected a number"),
    ],
)  # fmt: skip
def test_rope_scaling_numbers_that_are_not_numbers_are_refused(tmp_path, scaling, words) -> None:
    """A factor written as text or a boolean crashed the import (an assertion that the spec
    read back what was written) or was quietly converted ("32" to 32.0, true to 1.0)."""
    refused(_import(tmp_path, {**LLAMA, "rope_scaling": scaling}), "rope_scaling", words)


@pytest.mark.parametrize(
    ("model_type", "field", "value", "words"),
    [
        ("gemma2", "num_hidden_layers", 0, "at least one layer"),
        ("cohere2", "num_hidden_layers", 0, "at least one layer"),
        ("qwen2", "num_hidden_layers", 10**9, "at most 100,000 layers"),
        ("gemma2", "num_hidden_layers", 10**12, "at most 100,000 layers"),
        ("gpt2", "n_inner", 0, "expected a positive integer"),
        ("gptj", "n_inner", 0, "expected a positive integer"),
        ("gpt_neo", "intermediate_size", 0, "expected a positive integer"),
        ("falcon", "ffn_hidden_size", 0, "expected a positive integer"),
        ("t5", "d_kv", 0, "expected a positive integer"),
        ("qwen2_moe", "layer_types", [[1], [1]], "full_attention"),
        ("gemma2", "layer_types", [[1], [1]], "sliding_attention"),
        ("exaone4", "layer_types", "full_attention", "a list of layer types"),
    ],
)  # fmt: skip
def test_degenerate_sizes_are_refused_naming_the_field(
    tmp_path, model_type, field, value, words
) -> None:
    """Zero layers and odd layer_types crashed (StopIteration, TypeError); a billion layers
    took 8 GB to list their types; a zero-width MLP (n_inner: 0) was read as left out (4 ×
    the width: transformers builds it zero wide); T5's d_kv 0 crashed."""
    from tests.hf_reference import FAMILY_CONFIGS

    config = {"model_type": model_type, **FAMILY_CONFIGS[model_type], field: value}
    refused(_import(tmp_path, config), field, words)


@pytest.mark.parametrize("key", ["\x1b[31mfoo", "a\u202eb", "zero\u200bwidth"])
def test_an_ignored_field_name_reaches_the_terminal_escaped(tmp_path, key) -> None:
    """Values were escaped in the 'ignored' note, names were not: ESC and bidi controls in a
    key reached stdout raw."""
    result = _import(tmp_path, {**LLAMA, key: 3})
    assert result.exit_code == 0, result.output
    assert key not in result.stdout and "is ignored" in result.stdout


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("attention.bias.x=1", "at 'attention.bias': expected true or false"),
        ("x.y.z=1", "unknown key 'x'"),
        ("attention={bias: 3}", "at 'attention.bias'"),
        ("n_layers.=1", "a dotted key of names"),
        ("..=1", "a dotted key of names"),
        ("extends=gpt2", "cannot change `extends`"),
    ],
)
def test_a_set_error_names_the_option_not_the_spec_file(override: str, words: str) -> None:
    """An override that made a value a mapping, or added an unknown section, was blamed on
    the built-in spec file's line of what it replaced (`_gpt2.yaml:11:19`)."""
    err = refused(cli("count", "gpt2", "--set", override), words)
    assert err.startswith(f"--set {override}: error:"), err
    assert ".yaml" not in err.splitlines()[0]


def test_a_misspelt_extends_is_suggested(tmp_path: Path) -> None:
    spec = tmp_path / "typo.yaml"
    spec.write_text("extend: gpt2\n")
    refused(cli("count", str(spec)), "unknown key 'extend'", "did you mean 'extends'?")


def test_a_symlink_loop_is_not_called_missing(tmp_path: Path) -> None:
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    refused(cli("count", str(loop)), "a symbolic link that leads to no file")


@pytest.mark.parametrize("recompute", ["none", "selective", "op"])
def test_a_checkpoint_that_changes_nothing_is_reported_ignored(recompute: str) -> None:
    """--checkpoint picks what full recomputation replays: beside another --recompute it
    changed nothing, and said nothing."""
    args = ["plan", "llama-2-7b", "--gpu", "h100", "--gpus", "8", "--global-batch", "64",
            "--batch", "1", "--tp", "2", "--checkpoint", "pruned", "--recompute", recompute,
            "--json"]  # fmt: skip
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ignored"] == ["--checkpoint"]
    assert "ignored with --recompute" in result.stderr
    full = cli(*args[:-2], "full", "--json")
    assert "ignored" not in json.loads(full.stdout)
