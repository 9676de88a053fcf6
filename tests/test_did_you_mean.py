"""A misspelt choice gets a suggestion: the choices of the command line's options (--dtype,
--mode, --device, --format, ...), and the names import-hf reads from a config.json
(model_type, hidden_act, architectures) where transformers does not know the name either: a
name it implements is another model, class or function, and gets no suggestion however close
its spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile import TINY, cli, refused

BENCH = ["bench", "gpt2", *TINY, "--steps", "1"]
PLAN = ["plan", "gpt2", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch", "8"]


@pytest.mark.parametrize(
    ("args", "suggested"),
    [
        (["count", "gpt2", "--dtype", "bf61"], "bf16"),
        (["count", "gpt2", "--optimizer", "adamm"], "adamw"),
        (["count", "gpt2", "--engine", "torchh"], "torch"),
        ([*PLAN, "--dtype", "bf61"], "bf16"),
        ([*PLAN, "--mode", "trian"], "train"),
        ([*BENCH, "--mode", "trian"], "train"),
        ([*BENCH, "--dtype", "bf61"], "bf16"),
        ([*BENCH, "--device", "cdua"], "cuda"),
        ([*BENCH, "--device", "cdua:1"], "cuda:1"),
        (["draw", "gpt2", "--format", "svgg"], "svg"),
    ],
)
def test_a_misspelt_option_choice_gets_a_suggestion(args: list[str], suggested: str) -> None:
    refused(cli(*args), f"hint: did you mean '{suggested}'?")


LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2,
    "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 64,
}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "suggested"),
    [
        ("model_type", "lamma", "llama"),
        ("hidden_act", "sillu", "silu"),
        ("architectures", ["LlamaForCausalLMM"], "LlamaForCausalLM"),
        # Names transformers implements: other functions and classes, not typos.
        ("hidden_act", "quick_gelu", None),
        ("architectures", ["MambaForCausalLM"], None),
    ],
)
def test_a_misspelt_config_name_gets_a_suggestion(
    tmp_path: Path, field: str, value, suggested: str | None
) -> None:
    pytest.importorskip("transformers")  # what tells a typo from another model
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, field: value}))
    err = refused(cli("import-hf", str(tmp_path)), "not supported")
    if suggested is None:
        assert "did you mean" not in err
    else:
        assert f"hint: did you mean '{suggested}'?" in err
