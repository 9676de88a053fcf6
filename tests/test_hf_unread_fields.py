"""Real config.json files as they are (issue 28, point 2): a field that no transformers code
for the model_type reads is accepted, whatever its value, and reported once as ignored; a field
transformers reads and archspec does not understand is refused, naming it. Whether transformers
reads a field is found in its source files (archspec/hf/transformers_reads.py), and checked here
against transformers itself: an unread field set to anything leaves the model's output equal."""

from __future__ import annotations

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.transformers_reads import fields_read, unread_fields
from tests.hf_reference import FAMILY_CONFIGS
from tests.hostile import run_python

transformers = pytest.importorskip("transformers")


def config(model_type: str, **extra) -> dict:
    return {"model_type": model_type, **FAMILY_CONFIGS[model_type], **extra}


@pytest.mark.parametrize(
    "model_type", ["llama", "qwen2", "gpt2", "bert", "t5", "olmoe", "ernie4_5_moe"]
)
def test_a_field_nothing_reads_is_ignored_and_reported_once(model_type: str) -> None:
    imported = import_config(config(model_type, made_up_flag=[1, 2]))
    notes = [n for n in imported.notes if "made_up_flag" in n]
    assert notes == [
        f"field 'made_up_flag' (= [1, 2]) is ignored, as transformers' {model_type} "
        "configuration and modeling code ignore it"
    ]
    assert imported.spec == import_config(config(model_type)).spec


def test_an_ignored_field_changes_nothing_transformers_computes() -> None:
    """The same weights under a config with and without the field: the same logits."""
    fields = {k: v for k, v in FAMILY_CONFIGS["qwen2"].items() if k != "architectures"}
    torch.manual_seed(0)
    plain = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**fields)).eval()
    odd = transformers.Qwen2ForCausalLM(
        transformers.Qwen2Config(**fields, made_up_flag=[1, 2], use_mrope=True)
    ).eval()
    odd.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 99, (2, 7))
    with torch.no_grad():
        assert torch.equal(plain(ids).logits, odd(ids).logits)


def test_a_field_transformers_reads_is_still_refused_naming_it() -> None:
    # LlamaConfig knows nothing of layer_norm_eps, but transformers' shared code reads it
    assert "layer_norm_eps" in fields_read("llama")
    with pytest.raises(SpecError, match="transformers' llama code reads it") as err:
        import_config(config("llama", layer_norm_eps=1e-3))
    assert err.value.path == "layer_norm_eps"


def test_the_real_files_fields_are_found_unread() -> None:
    """The fields round 2 refused (Qwen2.5's use_mrope, Gemma-2's sliding_window_size,
    Phi-3.5's attention_bias, DistilBERT's tie_weights_) are the ones the scan finds unread."""
    assert unread_fields("qwen2", ["use_mrope", "rope_scaling"]) == ["use_mrope"]
    assert unread_fields("gemma2", ["sliding_window_size"]) == ["sliding_window_size"]
    assert unread_fields("phi3", ["attention_bias"]) == ["attention_bias"]
    assert unread_fields("distilbert", ["tie_weights_", "sinusoidal_pos_embds"]) == ["tie_weights_"]


def test_the_scan_imports_neither_torch_nor_transformers() -> None:
    code = (
        "from archspec.hf.transformers_reads import fields_read\n"
        "assert 'use_mrope' not in fields_read('qwen2')\n"
    )
    _, modules = run_python(code)
    assert "torch" not in modules and "transformers" not in modules


def test_count_on_the_file_reports_the_ignored_field_once(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from archspec.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config("llama", made_up_flag=1)))
    result = CliRunner().invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert result.stderr.count("field 'made_up_flag' (= 1) is ignored") == 1
    assert "made_up_flag" not in result.stdout


def test_a_docstring_of_the_shared_config_code_reads_nothing() -> None:
    """configuration_utils' docstring shows `update_from_string("n_embd=10,...,
    scale_attn_weights=false,...")`: an example, not a read. StarCoder2's real config carries
    scale_attn_weights (a GPT-BigCode leftover), which its code never reads; GPT-2's reads it."""
    assert "scale_attn_weights" not in fields_read("starcoder2")
    assert "scale_attn_weights" in fields_read("gpt2")
    imported = import_config(config("starcoder2", scale_attn_weights=True))
    assert imported.spec == import_config(config("starcoder2")).spec
    assert any("'scale_attn_weights' (= true) is ignored" in n for n in imported.notes)


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}


def test_a_rope_setting_transformers_does_not_recognise_is_ignored() -> None:
    """Some Qwen3 YaRN configs carry rope_scaling.attn_factor, which transformers' RoPE code
    never reads ("Unrecognized keys in `rope_parameters`"): accepted and reported once."""
    odd = import_config(config("qwen3", rope_scaling={**YARN, "attn_factor": 0.878}))
    assert odd.spec == import_config(config("qwen3", rope_scaling=YARN)).spec
    assert [n for n in odd.notes if "attn_factor" in n] == [
        "RoPE setting 'attn_factor' (= 0.878) in rope_scaling is ignored, as transformers' "
        "qwen3 code and RoPE functions ignore it"
    ]


def test_an_ignored_rope_setting_changes_nothing_transformers_computes() -> None:
    fields = {k: v for k, v in FAMILY_CONFIGS["qwen3"].items() if k != "architectures"}
    torch.manual_seed(0)
    plain = transformers.Qwen3ForCausalLM(
        transformers.Qwen3Config(**fields, rope_scaling=YARN)
    ).eval()
    odd = transformers.Qwen3ForCausalLM(
        transformers.Qwen3Config(**fields, rope_scaling={**YARN, "attn_factor": 0.878})
    ).eval()
    odd.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 99, (2, 40))
    with torch.no_grad():
        assert torch.equal(plain(ids).logits, odd(ids).logits)


def test_a_rope_setting_transformers_may_read_is_still_refused() -> None:
    # `factor` means something to transformers' RoPE functions (for other rope types)
    with pytest.raises(SpecError, match="RoPE settings not supported: factor"):
        import_config(config("qwen3", rope_scaling={"rope_type": "default", "factor": 2.0}))
