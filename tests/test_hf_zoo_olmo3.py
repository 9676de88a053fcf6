"""Issue 28, OLMo 3 (`olmo3`) against transformers' Olmo3ForCausalLM (tests/zoo_check.py says
what is measured), and its RoPE settings per layer type (the windowed layers' a local_position
where they differ: tests/test_hf_zoo_rope_layers.py checks such a model against transformers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

pytest.importorskip("transformers")

# Olmo3Config's defaults: a full-size stack (the OLMo 3 7B style its docstring describes).
REAL = {"architectures": ["Olmo3ForCausalLM"], "model_type": "olmo3"}
# fmt: off
TINY = dict(model_type="olmo3", hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=96, max_position_embeddings=64,
            pad_token_id=0, sliding_window=4, rms_norm_eps=1e-6)
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
# fmt: on


def test_real_size_total_equals_the_transformers_class() -> None:
    ours, theirs = real_total_equals_transformers(REAL)
    assert ours == theirs
    spec = import_config(REAL).spec
    assert (spec.attention.sliding_window, spec.attention.window_pattern) == (4096, "LLLG")
    assert spec.position.theta == 500000.0 and spec.residual == "output_norm"


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {
            "rope_parameters": {
                t: {"rope_type": "default", "rope_theta": 1e4}
                for t in ("sliding_attention", "full_attention")
            }
        },
    ],
    ids=["defaults", "theta"],
)
def test_logits_tokens_and_flops_equal_transformers(changes, tmp_path: Path) -> None:
    check_logits_and_tokens("Olmo3ForCausalLM", {**TINY, **changes}, tmp_path)
    check_forward_matmul_flops("Olmo3ForCausalLM", {**TINY, **changes})


def test_settings_of_the_full_layers_alone_make_a_local_position() -> None:
    """As Olmo3Config reads them (its rope_parameters, compared): rope_scaling and a
    top-level rope_theta go to the full layers only, the windowed ones keep theirs."""
    from transformers import Olmo3Config

    for extra in ({"rope_scaling": YARN}, {"rope_theta": 1e4}):
        spec = import_config({**REAL, **extra}).spec
        theirs = Olmo3Config(**extra).rope_parameters
        assert spec.position.theta == theirs["full_attention"]["rope_theta"]
        assert spec.local_position.theta == theirs["sliding_attention"]["rope_theta"]
        assert spec.position_pattern == "LLLP"
        assert import_config(hf_config_dict(spec)).spec == spec
    assert spec.local_position.theta != spec.position.theta


def test_without_windowed_layers_the_full_layers_setting_is_the_stack_s() -> None:
    full = ["full_attention"] * 32
    spec = import_config({**REAL, "rope_scaling": YARN, "layer_types": full}).spec
    assert spec.position.scaling.type == "yarn" and spec.attention.sliding_window is None
    assert import_config(hf_config_dict(spec)).spec == spec
