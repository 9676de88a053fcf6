"""Issue 28: model types import-hf refuses, with a reason. Audio, vision, time-series and
vision-language models are recognised from transformers' own registries (the tasks their
auto classes serve, the processors of their inputs), not from a list of names; text models
whose architecture the spec cannot express name what it lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.unsupported import modalities
from tests.hostile import run_main

pytest.importorskip("transformers")


@pytest.mark.parametrize(
    ("model_type", "takes"),
    [
        ("whisper", "audio"),
        ("wav2vec2", "audio"),
        ("speecht5", "audio"),
        ("vit", "images or video"),
        ("clip", "images or video"),
        ("siglip", "images or video"),
        ("llava", "images or video"),
        ("qwen2_vl", "images or video"),
        ("detr", "images or video"),
        ("patchtst", "time series"),
    ],
)
def test_models_that_are_not_text_models_are_refused_saying_so(model_type: str, takes: str) -> None:
    with pytest.raises(SpecError, match=f"not a text model: it takes {takes} input") as caught:
        import_config({"model_type": model_type})
    assert "text model types only" in (caught.value.hint or "")


def test_text_models_are_not_called_anything_else() -> None:
    for model_type in ("gpt_neo", "codegen", "modernbert", "deberta-v2", "gemma3_text"):
        assert modalities(model_type) == {}, model_type


def test_a_vision_language_model_points_at_its_text_config() -> None:
    data = {"model_type": "llava", "text_config": {"model_type": "llama"}}
    with pytest.raises(SpecError) as caught:
        import_config(data)
    assert "text_config (model_type 'llama'): `archspec import-hf --text-config` imports it" in (
        caught.value.hint or ""
    )


@pytest.mark.parametrize(
    ("model_type", "text", "says"),
    [
        ("mllama", "mllama_text_model", "which import-hf does not read either"),
        ("gemma3n", "gemma3n_text", "which import-hf refuses too: Gemma 3n adds"),
    ],
)
def test_a_language_model_import_hf_cannot_read_is_not_promised(
    model_type: str, text: str, says: str
) -> None:
    """The pointer at text_config says --text-config imports it only where it does."""
    with pytest.raises(SpecError) as caught:
        import_config({"model_type": model_type, "text_config": {"model_type": text}})
    hint = caught.value.hint or ""
    assert says in hint and "--text-config" not in hint
    with pytest.raises(SpecError):
        import_config({"model_type": text})


@pytest.mark.parametrize(
    ("model_type", "named"),
    [
        ("deberta-v2", ["disentangled attention", "pos_att_type"]),
        ("blenderbot-small", ["layernorm_embedding", "before adding its positions"]),
        ("fsmt", ["src_vocab_size", "tgt_vocab_size"]),
        ("umt5", ["relative-position bias table of its own"]),
        ("step3p5", ["sigmoid(g_proj(x))", "num_sliding_attention_heads"]),
    ],
)
def test_text_models_the_spec_cannot_express_name_what_is_missing(
    model_type: str, named: list[str]
) -> None:
    with pytest.raises(SpecError) as caught:
        import_config({"model_type": model_type})
    assert all(part in caught.value.message for part in named)


def test_the_cli_exits_2_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "whisper", "d_model": 384}))
    result = run_main(["import-hf", str(path)], text=True)
    assert result.returncode == 2
    assert "not a text model" in result.stderr and "Traceback" not in result.stderr


def test_a_quantized_checkpoint_is_refused_saying_how_to_count_its_architecture() -> None:
    """DeepSeek-V3's real config.json carries its fp8 blocks' quantization_config."""
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    }
    with pytest.raises(SpecError, match="quant_method 'fp8'") as caught:
        import_config(config)
    assert caught.value.path == "quantization_config"
    assert "import-hf --dequantized" in (caught.value.hint or "")
