"""`import-hf --dequantized`: a quantized checkpoint's config (DeepSeek-V3's fp8 blocks,
gpt-oss's MXFP4 experts) imports as the model under its quantization. transformers' class
built from that config is that model (its quantizer runs only in from_pretrained), so the
count is checked against it, quantization_config and all; without the flag it is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_counts import counts
from tests.hf_reference import FAMILY_CONFIGS
from tests.hostile import cli, refused

pytest.importorskip("transformers")

FP8 = {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}
MXFP4 = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}


def _config(model_type: str, **extra) -> dict:
    return {"model_type": model_type, **FAMILY_CONFIGS[model_type], **extra}


@pytest.mark.parametrize(("model_type", "quant"), [("deepseek_v3", FP8), ("gpt_oss", MXFP4)])
def test_a_quantized_config_imports_as_transformers_builds_it(model_type: str, quant) -> None:
    config = _config(model_type, quantization_config=quant)
    with pytest.raises(SpecError, match="quantized checkpoints are not supported"):
        import_config(config)
    ours, theirs = counts(config, dequantized=True)
    assert ours == theirs
    imported = import_config(config, dequantized=True)
    assert imported.spec == import_config(_config(model_type)).spec
    method = quant["quant_method"]
    assert [n for n in imported.notes if "quantization_config" in n] == [
        f"quantization_config (quant_method '{method}') set aside (--dequantized): the spec "
        "is the model its checkpoint dequantizes to, with the same parameters; its weights "
        "are not this checkpoint's"
    ]


def test_the_command_line_takes_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("qwen3", quantization_config=FP8)))
    refused(cli("import-hf", str(path)), "quant_method 'fp8'", "--dequantized")
    result = cli("import-hf", str(path), "--dequantized")
    assert result.exit_code == 0, result.output
    assert "set aside (--dequantized)" in result.stdout  # the spec's header notes it


def test_a_vision_language_models_quantization_covers_its_language_model() -> None:
    outer = {"model_type": "llava", "quantization_config": FP8,
             "text_config": _config("llama")}  # fmt: skip
    with pytest.raises(SpecError, match="quantized checkpoints") as caught:
        import_config(outer, text_config=True)
    assert caught.value.path == "quantization_config"
    imported = import_config(outer, text_config=True, dequantized=True)
    assert imported.spec == import_config(_config("llama")).spec
    assert any("set aside" in n for n in imported.notes)
