"""A field a config.json leaves out takes the transformers config class's default.

For every family's tiny config (tests/hf_reference.py), archspec imports the file as written
(fields left out) and as transformers fills it in (`AutoConfig.for_model(...).to_dict()`, every
default written out); both must give the same spec. This caught RoPE bases that Mixtral,
Cohere, ERNIE 4.5 and Helium configs change from LLaMA's 10,000 (a file without `rope_theta`
was imported with the wrong rotation) and Seed-OSS's dropouts (0.1 in SeedOssConfig)."""

from __future__ import annotations

import warnings

import pytest

from archspec.hf.import_config import import_config
from tests.hf_reference import FAMILY_CONFIGS

# DeepseekV3Config's default num_key_value_heads (128) with the tiny config's 4 heads is a
# model transformers itself cannot run (4 // 128 key/value groups); archspec refuses it.
INCONSISTENT_WHEN_FILLED = {"deepseek_v3"}


@pytest.mark.parametrize("name", sorted(set(FAMILY_CONFIGS) - INCONSISTENT_WHEN_FILLED))
def test_left_out_fields_take_the_config_class_defaults(name: str) -> None:
    import transformers

    written = {"model_type": name, **FAMILY_CONFIGS[name]}
    fields = {k: v for k, v in written.items() if k != "architectures"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        filled = transformers.AutoConfig.for_model(**fields).to_dict()
    filled["architectures"] = written["architectures"]
    assert import_config(filled).spec == import_config(written).spec
