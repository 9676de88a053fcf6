"""Hostile inputs found by a fourth round of fuzzing, each with the behaviour it now has."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.hostile import cli

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
