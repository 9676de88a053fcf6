"""gpt-oss (`gpt_oss`) against transformers' own classes (tests/zoo_check.py says what the zoo
checks measure): attention sinks, windowed and full layers alternating, YaRN with an
unrounded correction range, and experts routed by a biased top-k softmax, each with biases
and a clamped SwiGLU, stored interleaved and transposed as GptOssExperts holds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

transformers = pytest.importorskip("transformers")

# fmt: off
# openai/gpt-oss-120b's and -20b's shapes as MaxText writes their config.json out
# (AI-Hypercomputer/maxtext src/maxtext/configs/models/gpt-oss-120b.yml and gpt-oss-20b.yml
# at e591f30cb, each citing huggingface.co/openai/gpt-oss-*/blob/main/config.json); the
# released files' quantization_config (MXFP4 experts) is left out, as archspec refuses
# quantized checkpoints: the architecture is the rest.
_REAL = dict(
    model_type="gpt_oss", hidden_size=2880, intermediate_size=2880, head_dim=64,
    num_attention_heads=64, num_key_value_heads=8, sliding_window=128, attention_bias=True,
    max_position_embeddings=131072, vocab_size=201088, rms_norm_eps=1e-5,
    num_experts_per_tok=4, tie_word_embeddings=False,
    rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                     "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                     "original_max_position_embeddings": 4096},
)
REAL = {
    "gpt-oss-120b": {"architectures": ["GptOssForCausalLM"], **_REAL, "num_hidden_layers": 36,
                     "num_local_experts": 128},
    "gpt-oss-20b": {"architectures": ["GptOssForCausalLM"], **_REAL, "num_hidden_layers": 24,
                    "num_local_experts": 32},
}

_TINY = dict(
    model_type="gpt_oss", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, intermediate_size=32, max_position_embeddings=64,
    num_local_experts=8, num_experts_per_tok=2, pad_token_id=0, tie_word_embeddings=False,
    # GptOssExperts start at std initializer_range: at 0.02 the tiny model's experts add
    # next to nothing and its greedy tokens repeat one token
    initializer_range=0.2,
)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # windows of 4 keys on the first and third layers (GptOssConfig's alternation), past which
    # the 16 greedy tokens go; YaRN stretching 16 positions 4 times, its ramp unrounded
    "gpt_oss": ("GptOssForCausalLM", dict(
        _TINY, sliding_window=4,
        rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0,
                         "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                         "original_max_position_embeddings": 16})),
    # every layer full, plain RoPE, a tighter clamp that binds on the tiny model's activations
    "gpt_oss-full": ("GptOssForCausalLM", dict(
        _TINY, layer_types=["full_attention"] * 3, swiglu_limit=0.5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
}
# fmt: on


@pytest.mark.long  # transformers' full-size model on the meta device: seconds
@pytest.mark.parametrize("name", list(REAL))
def test_real_size_total_equals_the_transformers_class(name: str) -> None:
    ours, theirs = real_total_equals_transformers(REAL[name])
    assert ours == theirs


def test_builtin_is_the_imported_config() -> None:
    """The built-in gpt-oss-120b is what its config.json imports to."""
    from archspec.backends.count.params import parameter_count
    from archspec.cli.common import resolve_spec
    from archspec.ir.build import build_ir

    for name, config in REAL.items():
        imported = build_ir(import_config(config).spec)
        builtin = build_ir(resolve_spec(name, []))
        assert imported.value(parameter_count(imported.root)) == builtin.value(
            parameter_count(builtin.root)
        )


@pytest.mark.parametrize("name", list(TINY))
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize("name", list(TINY))
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


def test_quantized_release_is_refused_naming_the_field() -> None:
    with pytest.raises(SpecError, match="quantization_config"):
        import_config({**REAL["gpt-oss-20b"], "quantization_config": {"quant_method": "mxfp4"}})


def test_export_round_trips() -> None:
    from archspec.hf.export_config import hf_config_dict

    spec = import_config(REAL["gpt-oss-120b"]).spec
    back = import_config(hf_config_dict(spec)).spec
    assert back == spec
