"""A config.json field left out, or written null, reads as transformers' config class reads it.

tests/test_hf_config_defaults.py imports each family's tiny config with the fields it never
sets filled in. Here every field the tiny config does set is left out in turn: the import must
match the one of the file transformers fills in (`AutoConfig.for_model(...).to_dict()`), or
both are refused. A fuzz of the real config classes found Qwen2, Qwen3 and dots1 reading a
left-out `num_key_value_heads` as one per head (their classes default it to 32: with 64 heads,
a silent 2× on the keys and values) and DeepSeek-V3 taking DeepSeek-V2's sizes."""

from __future__ import annotations

import copy
import warnings

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_counts import counts
from tests.hf_reference import FAMILY_CONFIGS

transformers = pytest.importorskip("transformers")


def _spec_or_refused(config: dict):
    try:
        return import_config(copy.deepcopy(config)).spec
    except SpecError:
        return "refused"


def _filled(written: dict) -> dict | None:
    fields = {k: copy.deepcopy(v) for k, v in written.items() if k != "architectures"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            filled = transformers.AutoConfig.for_model(**fields).to_dict()
        except Exception:  # noqa: BLE001 - transformers refuses the file itself, its own way
            return None
    return {**filled, "architectures": written["architectures"]}


@pytest.mark.parametrize("name", sorted(FAMILY_CONFIGS))
def test_each_field_left_out_reads_as_its_config_class_fills_it(name: str) -> None:
    full = {"model_type": name, **FAMILY_CONFIGS[name]}
    for key in FAMILY_CONFIGS[name]:
        if key == "architectures":
            continue
        written = {k: v for k, v in full.items() if k != key}
        filled = _filled(written)
        if filled is None:
            continue
        expected = _spec_or_refused(filled)
        if expected == "refused":
            continue  # the filled-in file is one archspec refuses (e.g. 128 KV heads for 4)
        assert _spec_or_refused(written) == expected, (name, key)


@pytest.mark.parametrize("name", ["qwen2", "llama", "ernie4_5", "internlm3"])
def test_null_key_value_heads_is_one_per_head(name: str) -> None:
    """Written null, `num_key_value_heads` is one per head in the LLaMA-like config classes
    that take null (left out, it is the class's default: 32, 2 ...); it was read as left
    out."""
    config = {"model_type": name, **FAMILY_CONFIGS[name], "num_key_value_heads": None}
    spec = import_config(copy.deepcopy(config)).spec
    assert spec.kv_heads == spec.n_heads
    ours, theirs = counts(config)
    assert ours == theirs


@pytest.mark.parametrize("name", ["deepseek_v2", "deepseek_v3", "glm4_moe", "dots1"])
def test_dense_layers_over_the_whole_stack_leave_no_experts(name: str) -> None:
    """`first_k_dense_replace` at or beyond the layer count makes every layer dense; the
    import left out its `moe` section and the base spec's experts (DeepSeek-V2-Lite's 64)
    stood in: 17.9M parameters counted for transformers' 48K."""
    config = {"model_type": name, **FAMILY_CONFIGS[name]}
    config["first_k_dense_replace"] = config["num_hidden_layers"]
    assert import_config(copy.deepcopy(config)).spec.moe is None
    ours, theirs = counts(config)
    assert ours == theirs
