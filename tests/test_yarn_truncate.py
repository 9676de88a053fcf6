"""YaRN's `truncate` (gpt-oss writes false: the ramp's ends unrounded) through import and
export: a config.json's value becomes the spec's `position.truncate`, exported back when
false, so that export(import(config)) gives the config again; null reads as transformers
reads it (false), text is refused. The frequencies are tests/test_runtime_rope.py's, a
generated model's logits tests/test_hf_weights.py's (llama-rope-yarn-unrounded)."""

from __future__ import annotations

import pytest

from archspec.backends.torchgen import generate_source
from archspec.errors import SpecError
from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir
from archspec.kinds.positions.rope_yarn import YarnScaling
from archspec.spec.resolve import load_spec
from tests.hf_reference import FAMILY_CONFIGS

# gpt-oss's rope_parameters
GPT_OSS_YARN = {
    "rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
    "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096,
}  # fmt: skip


def config(model_type: str, **rope) -> dict:
    """The family's reference config with gpt-oss's RoPE (its own rope_theta left out)."""
    kept = {k: v for k, v in FAMILY_CONFIGS[model_type].items() if k != "rope_theta"}
    return {
        "model_type": model_type,
        **kept,
        "max_position_embeddings": 131072,
        "rope_parameters": {**GPT_OSS_YARN, **rope},
    }


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "gpt_neox"])
@pytest.mark.parametrize("truncate", [False, True])
def test_export_of_import_round_trips(model_type: str, truncate: bool) -> None:
    given = config(model_type, truncate=truncate)
    spec = import_config(given).spec
    assert isinstance(spec.position.scaling, YarnScaling)
    assert spec.position.scaling.truncate is truncate
    exported = hf_config_dict(spec)  # itself checks import(export(spec)) == spec
    rope = exported["rope_parameters"]
    assert rope.get("truncate", True) is truncate
    assert {k: v for k, v in rope.items() if k != "partial_rotary_factor"} == {
        k: v for k, v in given["rope_parameters"].items() if truncate is False or k != "truncate"
    }
    assert import_config(exported).spec == spec


def test_left_out_is_true_and_null_false_as_transformers_reads_them() -> None:
    left_out = config("llama")
    del left_out["rope_parameters"]["truncate"]
    assert import_config(left_out).spec.position.scaling.truncate is True
    null = import_config(config("llama", truncate=None)).spec
    assert null.position.scaling.truncate is False


@pytest.mark.parametrize("value", ["false", 0, 1.0])
def test_anything_but_a_boolean_is_refused_naming_the_field(value) -> None:
    with pytest.raises(SpecError) as caught:
        import_config(config("llama", truncate=value))
    assert "truncate" in str(caught.value) and "rope_parameters" in str(caught.value)


def test_a_spec_says_it_and_the_generated_config_holds_it() -> None:
    spec = load_spec(
        "llama-2-7b",
        ["position.scaling=yarn", "position.factor=32", "position.truncate=false"],
    )
    assert spec.position.scaling.truncate is False
    assert "rope_truncate: bool = False" in generate_source(build_ir(spec))
