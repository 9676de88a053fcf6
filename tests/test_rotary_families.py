"""The rotary and parallel-residual families (GPT-NeoX, GPT-J, Phi, Falcon): their real
config.json files import to the built-in specs, what transformers computes differently is
refused naming the field, and a partial rotation costs what its formula says.

The numerical checks against transformers (logits, greedy tokens, FLOPs, totals) are the
shared ones: tests/test_hf_weights.py, tests/test_flops.py, tests/test_counts.py and
tests/test_hf_families.py, whose tables list these families.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import sympy as sp

from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import B, S, flop_figures
from archspec.errors import SpecError
from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec

# The public config.json files (huggingface.co/<repo>/blob/main/config.json), generation and
# tokenizer fields left out.
# fmt: off
PYTHIA_1_4B = {
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
    "hidden_act": "gelu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 8192, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
    "model_type": "gpt_neox", "num_attention_heads": 16, "num_hidden_layers": 24,
    "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False,
    "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": True,
    "use_parallel_residual": True, "vocab_size": 50304,
}
GPT_J_6B = {
    "activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"], "attn_pdrop": 0.0,
    "bos_token_id": 50256, "embd_pdrop": 0.0, "eos_token_id": 50256,
    "gradient_checkpointing": False, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_inner": None, "n_layer": 28,
    "n_positions": 2048, "resid_pdrop": 0.0, "rotary": True, "rotary_dim": 64,
    "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
    "tie_word_embeddings": False, "tokenizer_class": "GPT2Tokenizer",
    "transformers_version": "4.18.0.dev0", "use_cache": True, "vocab_size": 50400,
}
PHI_2 = {
    "_name_or_path": "microsoft/phi-2", "architectures": ["PhiForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 50256, "embd_pdrop": 0.0, "eos_token_id": 50256,
    "hidden_act": "gelu_new", "hidden_size": 2560, "initializer_range": 0.02,
    "intermediate_size": 10240, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
    "model_type": "phi", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "partial_rotary_factor": 0.4, "qk_layernorm": False,
    "resid_pdrop": 0.1, "rope_scaling": None, "rope_theta": 10000.0,
    "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.37.0",
    "use_cache": True, "vocab_size": 51200,
}
FALCON_7B = {
    "alibi": False, "apply_residual_connection_post_layernorm": False,
    "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0,
    "auto_map": {
        "AutoConfig": "configuration_falcon.FalconConfig",
        "AutoModel": "modeling_falcon.FalconModel",
        "AutoModelForCausalLM": "modeling_falcon.FalconForCausalLM",
    },
    "bias": False, "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0,
    "hidden_size": 4544, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "model_type": "falcon", "multi_query": True, "new_decoder_architecture": False,
    "num_attention_heads": 71, "num_hidden_layers": 32, "parallel_attn": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.27.4", "use_cache": True,
    "vocab_size": 65024,
}
# fmt: on


def architecture(spec) -> dict[str, Any]:
    skip = {"name", "source"}
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in skip}


@pytest.mark.parametrize(
    ("config", "builtin"),
    [(PYTHIA_1_4B, "pythia-1.4b"), (GPT_J_6B, "gpt-j-6b"), (PHI_2, "phi-2"),
     (FALCON_7B, "falcon-7b")],
)  # fmt: skip
def test_real_config_imports_to_the_builtin(config: dict[str, Any], builtin: str) -> None:
    imported = import_config(config)
    assert architecture(imported.spec) == architecture(load_spec(builtin))


def test_auto_map_is_no_reason_to_refuse_a_model_type_transformers_implements() -> None:
    notes = import_config(FALCON_7B).notes
    assert any("auto_map" in note for note in notes)
    # A class of the custom code itself is still refused.
    with pytest.raises(SpecError, match="RWForCausalLM"):
        import_config({**FALCON_7B, "architectures": ["RWForCausalLM"]})


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**FALCON_7B, "alibi": True}, "alibi"),
        ({**FALCON_7B, "num_ln_in_parallel_attn": 2}, "num_ln_in_parallel_attn"),
        ({**FALCON_7B, "hidden_dropout": 0.1}, "hidden_dropout"),
        ({**GPT_J_6B, "rotary_dim": None}, "rotary_dim"),
        ({**GPT_J_6B, "scale_attn_weights": False}, "scale_attn_weights"),
        ({**PHI_2, "qk_layernorm": True}, "qk_layernorm"),
        # 0.4125 of head_dim 80 is 33 channels: RoPE turns pairs.
        ({**PHI_2, "partial_rotary_factor": 0.4125}, "partial_rotary_factor"),
        # transformers would read the text as true, whatever it says
        ({**PYTHIA_1_4B, "rope_scaling": {"type": "yarn", "factor": 2.0, "truncate": "false",
                                          "original_max_position_embeddings": 1024}},
         "rope_scaling"),
        ({**PYTHIA_1_4B, "rotary_pct": 0.5, "rope_parameters": {"partial_rotary_factor": 0.25}},
         "rotary_pct"),
    ],
)  # fmt: skip
def test_what_transformers_computes_otherwise_is_refused_naming_the_field(
    config: dict[str, Any], field: str
) -> None:
    with pytest.raises(SpecError) as caught:
        import_config(config)
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (["position.rotary_dim=31"], "rotary_dim"),
        (["position.rotary_dim=130"], "rotary_dim"),
        (["position.kind=alibi", "position.rotary_dim=null", "position.interleaved=true"],
         "interleaved"),
        (["position.interleaved=true", "position.scaling=llama3"], "interleaved"),
    ],
)  # fmt: skip
def test_rotation_settings_are_validated(overrides: list[str], field: str) -> None:
    with pytest.raises(SpecError, match=field):
        load_spec("pythia-1.4b", overrides)


def test_a_partial_rotation_costs_its_share_of_the_channels() -> None:
    """RoPE's elementwise work (x·cos + rotate(x)·sin: 3 FLOPs per rotated element, on q and
    k) over the rotated channels only: 3 · B·S · (n_heads + n_kv_heads) · rotary_dim per
    layer, written here from the formula, compared between two rotated widths."""
    executed = CONVENTIONS["executed"]

    def rope_flops(rotary_dim: int) -> int:
        ir = build_ir(load_spec("pythia-1.4b", [f"position.rotary_dim={rotary_dim}"]))
        _, other = flop_figures(ir, executed).components["attn_proj"]  # (matmul, other)
        return int(sp.sympify(other).xreplace({**ir.env, B: 2, S: 100}))

    layers, heads = 24, 16
    per_channel = 3 * 2 * 100 * (heads + heads) * layers
    assert rope_flops(128) - rope_flops(32) == per_channel * (128 - 32)
    assert rope_flops(64) - rope_flops(32) == per_channel * 32


# fmt: off
PHI_3_MINI_4K = {
    "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
    "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072,
    "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 4096,
    "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "pad_token_id": 32000,
    "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.2", "use_cache": True, "vocab_size": 32064,
}
# fmt: on


def test_phi3_imports_its_window() -> None:
    spec = import_config(PHI_3_MINI_4K).spec
    assert spec.max_seq_len == 4096 and spec.attention.sliding_window == 2047
    assert spec.attention.window_pattern == "L" and spec.position.rotary_dim is None


# Phi-3-mini-128k's shape: LongRoPE over head_dim 96 (48 pairs), its original context at the
# top level; the factors here are made up (the real ones are 48 measured numbers).
SHORT, LONG = [1.0 + 0.01 * i for i in range(48)], [1.0 + 0.5 * i for i in range(48)]
PHI_3_MINI_128K = {
    **PHI_3_MINI_4K,
    "max_position_embeddings": 131072,
    "sliding_window": 262144,
    "rope_scaling": {"type": "su", "short_factor": SHORT, "long_factor": LONG},
}


@pytest.mark.parametrize("name", ["su", "longrope", "yarn"])
def test_phi3_longrope_imports_exports_and_reimports(name: str) -> None:
    """Phi3Config reads su and yarn as longrope, and its top-level
    original_max_position_embeddings; the factor defaults to 131072 / 4096."""
    config = {**PHI_3_MINI_128K, "rope_scaling": {**PHI_3_MINI_128K["rope_scaling"], "type": name}}
    p = import_config(config).spec.position.scaling
    assert (p.type, p.original_max_seq_len, p.factor) == ("longrope", 4096, 32.0)
    assert p.short_factor == tuple(SHORT) and p.long_factor == tuple(LONG)
    exported = hf_config_dict(import_config(config).spec)
    assert exported["original_max_position_embeddings"] == 4096
    assert exported["rope_parameters"]["long_factor"] == LONG
    again = import_config(exported).spec.position.scaling
    assert dataclasses.replace(again) == p


def test_longrope_factor_lists_of_the_wrong_length_are_refused_naming_the_field() -> None:
    short = {**PHI_3_MINI_128K["rope_scaling"], "short_factor": SHORT[:47]}
    with pytest.raises(SpecError, match="short_factor has 47 numbers.*48"):
        import_config({**PHI_3_MINI_128K, "rope_scaling": short})
    bad = {**PHI_3_MINI_128K["rope_scaling"], "long_factor": "1.0"}
    with pytest.raises(SpecError, match="long_factor: expected a list of numbers"):
        import_config({**PHI_3_MINI_128K, "rope_scaling": bad})


@pytest.mark.parametrize(
    ("config_cls", "fields"),
    [
        ("GPTNeoXConfig", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=128, rotary_pct=0.25)),
        ("GPTJConfig", dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8)),
        ("PhiConfig", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, intermediate_size=128,
                           partial_rotary_factor=0.5)),
        ("FalconConfig", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
                              num_kv_heads=2, new_decoder_architecture=True)),
        ("Phi3Config", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, intermediate_size=128, sliding_window=None,
                            partial_rotary_factor=0.5, vocab_size=32064)),
    ],
)  # fmt: skip
def test_executed_flops_equal_flop_counter_on_the_transformers_class(
    config_cls: str, fields: dict[str, Any]
) -> None:
    """The families without a built-in spec of that shape (Falcon's new architecture, Phi-3):
    FlopCounterMode on transformers' own model, on the meta device, against the executed
    convention of the imported spec."""
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    config = getattr(transformers, config_cls)(**{"vocab_size": 99, **fields})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    data = {**config.to_dict(), "architectures": [type(model).__name__]}
    ir = build_ir(import_config(data).spec)
    figures = flop_figures(ir, CONVENTIONS["executed"])
    b, s = 2, 24
    with FlopCounterMode(display=False) as counter:
        model(torch.zeros(b, s, dtype=torch.long, device="meta"))
    expected = sp.sympify(figures.forward_matmul).xreplace({**ir.env, B: b, S: s})
    assert int(expected) == counter.get_total_flops()


def _longrope_spec(tmp_path, short: str, long: str = "[1, 2, 3, 4]"):
    path = tmp_path / "longrope.yaml"
    path.write_text(
        "extends: llama-2-7b\nsource: a what-if\nhead_dim: 8\n"
        "position: {kind: rope, scaling: longrope, original_max_seq_len: 1024, factor: 4.0, "
        f"short_factor: {short}, long_factor: {long}}}\n"
    )
    return load_spec(path)


def test_longrope_spec_lists_are_checked_item_by_item(tmp_path) -> None:
    """A YAML list becomes a tuple of floats; a bad item, a wrong length or a missing list is
    refused naming the field. The default attention factor is transformers':
    sqrt(1 + ln(factor) / ln(original))."""
    spec = _longrope_spec(tmp_path, "[1, 1.5, 2, 2.5]")
    assert spec.position.scaling.short_factor == (1.0, 1.5, 2.0, 2.5)
    position = build_ir(spec).root.stacks[0].position
    values = position.values()
    assert position.entry.name == "rope_longrope" and values["long_factor"] == (1.0, 2.0, 3.0, 4.0)
    assert values["attention_factor"] == pytest.approx((1 + math.log(4.0) / math.log(1024)) ** 0.5)
    with pytest.raises(SpecError, match=r"position.short_factor\[1\]") as bad:
        _longrope_spec(tmp_path, "[1, x, 2, 2.5]")
    assert "expected a number" in str(bad.value)
    with pytest.raises(SpecError, match=r"position.long_factor\[0\]"):
        _longrope_spec(tmp_path, "[1, 1, 1, 1]", "[-1, 1, 1, 1]")
    with pytest.raises(SpecError, match="long_factor has 3 numbers"):
        _longrope_spec(tmp_path, "[1, 1, 1, 1]", "[1, 1, 1]")
    with pytest.raises(SpecError, match="expected a non-empty list"):
        _longrope_spec(tmp_path, "2.0")
