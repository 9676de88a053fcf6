"""Issue 28, round 4: more text model types transformers ships that reuse what archspec has,
each against transformers' own classes (tests/zoo_check.py says what is measured): a public
full-size config.json counted on the meta device, tiny random models for logits, greedy
tokens and FLOPs.

InternLM3 (`internlm3`) and IQuest-Coder (`iquestcoder`) are model types transformers builds
with LLaMA's classes: their files name their own remote code's class, and transformers saves
`LlamaForCausalLM`; both import as the model type's family. So does EXAONE 3 (`exaone`),
whose checkpoints keep its own code's module names.
"""

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

pytest.importorskip("transformers")

# Full sizes: real config.json files (their architecture fields, written out from the source
# named above each), or a config class's defaults where no file was at hand (the comment
# says so).
REAL: dict[str, dict[str, Any]] = {
    # https://huggingface.co/internlm/internlm3-8b-instruct/blob/main/config.json, as quoted
    # in the InternLM3 configuration tests of an MLX port (realConfigJSON)
    "internlm3": {
        "architectures": ["InternLM3ForCausalLM"], "bias": False, "head_dim": 128,
        "hidden_size": 4096, "intermediate_size": 10240, "max_position_embeddings": 32768,
        "model_type": "internlm3", "num_attention_heads": 32, "num_hidden_layers": 48,
        "num_key_value_heads": 2, "qkv_bias": False, "rms_norm_eps": 1e-5,
        "rope_scaling": {"factor": 6.0, "rope_type": "dynamic"}, "rope_theta": 50000000,
        "tie_word_embeddings": False, "vocab_size": 128512,
    },
    # LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct's config.json (ExaoneConfig as printed, with its
    # _name_or_path, in a public model notes file; auto_map shortened to its two entries)
    "exaone": {
        "activation_function": "silu", "architectures": ["ExaoneForCausalLM"],
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct--configuration_exaone.ExaoneConfig",
            "AutoModelForCausalLM":
                "LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct--modeling_exaone.ExaoneForCausalLM",
        },
        "bos_token_id": 1, "embed_dropout": 0.0, "eos_token_id": 361, "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 14336, "layer_norm_epsilon": 1e-05,
        "max_position_embeddings": 4096, "model_type": "exaone", "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_layers": 32, "pad_token_id": 0, "rope_scaling": None,
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "transformers_version": "4.45.2", "use_cache": True, "vocab_size": 102400,
    },
    # https://huggingface.co/roneneldan/TinyStories-1M/resolve/77f1b168e219585646439073245fe87e56b3023e/config.json
    # (GPT-Neo), as a public reproduction pins it (EXPECTED_CONFIG)
    "gpt_neo": {
        "architectures": ["GPTNeoForCausalLM"], "activation_function": "gelu_new",
        "attention_dropout": 0,
        "attention_layers": ["global", "local", "global", "local",
                             "global", "local", "global", "local"],
        "attention_types": [[["global", "local"], 4]], "bos_token_id": 50256,
        "embed_dropout": 0, "eos_token_id": 50256, "intermediate_size": None,
        "layer_norm_epsilon": 1e-5, "max_position_embeddings": 2048, "model_type": "gpt_neo",
        "hidden_size": 64, "num_layers": 8, "num_heads": 16, "resid_dropout": 0,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": 50257, "window_size": 256,
    },
    # mosaicml/mpt-7b-instruct's config.json, as written out in a public port's notes ("The
    # original config for the model")
    "mpt": {
        "architectures": ["MPTForCausalLM"],
        "attn_config": {
            "alibi": True, "alibi_bias_max": 8, "attn_impl": "torch", "attn_pdrop": 0,
            "attn_type": "multihead_attention", "attn_uses_sequence_id": False,
            "clip_qkv": None, "prefix_lm": False, "qk_ln": False, "softmax_scale": None,
        },
        "auto_map": {"AutoConfig": "configuration_mpt.MPTConfig",
                     "AutoModelForCausalLM": "modeling_mpt.MPTForCausalLM"},
        "d_model": 4096, "emb_pdrop": 0, "embedding_fraction": 1.0, "expansion_ratio": 4,
        "init_config": {
            "emb_init_std": None, "emb_init_uniform_lim": None, "fan_mode": "fan_in",
            "init_div_is_residual": True, "init_gain": 0, "init_nonlinearity": "relu",
            "init_std": 0.02, "name": "kaiming_normal_", "verbose": 0,
        },
        "init_device": "cpu", "learned_pos_emb": True, "logit_scale": None,
        "max_seq_len": 2048, "model_type": "mpt", "n_heads": 32, "n_layers": 32,
        "no_bias": True, "norm_type": "low_precision_layernorm", "resid_pdrop": 0,
        "tokenizer_name": "EleutherAI/gpt-neox-20b", "torch_dtype": "bfloat16",
        "transformers_version": "4.28.1", "use_cache": False, "verbose": 0,
        "vocab_size": 50432,
    },
    # FlexOlmoConfig's defaults (allenai/FlexOlmo-7x7B-1T, its docstring's checkpoint)
    "flex_olmo": {"architectures": ["FlexOlmoForCausalLM"], "model_type": "flex_olmo"},
    # LGAI-EXAONE/EXAONE-4.0-1.2B's sizes as a public Megatron bridge's test writes its
    # config (make_exaone4_config), every layer global (sliding_window null, layer_types)
    "exaone4": {
        "architectures": ["Exaone4ForCausalLM"], "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 4096,
        "max_position_embeddings": 65536, "model_type": "exaone4", "num_attention_heads": 32,
        "num_hidden_layers": 30, "num_key_value_heads": 8, "rms_norm_eps": 1e-5,
        "rope_scaling": {
            "rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
        },
        "rope_theta": 1000000.0, "tie_word_embeddings": True, "vocab_size": 102400,
        "head_dim": 64, "sliding_window": None, "layer_types": ["full_attention"] * 30,
    },
    # GraniteMoeSharedConfig's defaults, with the shared expert its docstring describes
    # (shared_intermediate_size 1024; the class's own default, 0, is Granite MoE's layers)
    "granitemoeshared": {
        "architectures": ["GraniteMoeSharedForCausalLM"], "model_type": "granitemoeshared",
        "shared_intermediate_size": 1024,
    },
    # BioGptConfig's defaults (microsoft/biogpt, its docstring's checkpoint)
    "biogpt": {"architectures": ["BioGptForCausalLM"], "model_type": "biogpt"},
    # https://huggingface.co/adept/persimmon-8b-base/blob/main/config.json (SHA 94dc4e0b), as
    # a public snapshot of the Hub's files writes it out
    "persimmon": {
        "architectures": ["PersimmonForCausalLM"], "model_type": "persimmon",
        "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 36,
        "num_attention_heads": 64, "num_key_value_heads": 64, "hidden_act": "relu2",
        "hidden_dropout": 0.6, "attention_dropout": 0.0, "layer_norm_eps": 1e-5,
        "max_position_embeddings": 16384, "qk_layernorm": True, "rope_theta": 25000.0,
        "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "vocab_size": 262144, "bos_token_id": 71013, "eos_token_id": 71013,
    },
    # CodeGenConfig's defaults (its docstring names Salesforce/codegen-2B-mono)
    "codegen": {"architectures": ["CodeGenForCausalLM"], "model_type": "codegen"},
    # XLMRobertaXLConfig's defaults (facebook/xlm-roberta-xl's sizes, its docstring's
    # checkpoint)
    "xlm-roberta-xl": {
        "architectures": ["XLMRobertaXLForMaskedLM"], "model_type": "xlm-roberta-xl",
    },
    # RobertaPreLayerNormConfig's defaults (its docstring's checkpoint:
    # andreasmadsen/efficient_mlm_m0.40)
    "roberta-prelayernorm": {
        "architectures": ["RobertaPreLayerNormForMaskedLM"], "model_type": "roberta-prelayernorm",
    },
    # XGLMConfig's defaults (facebook/xglm-564M, its docstring's checkpoint)
    "xglm": {"architectures": ["XGLMForCausalLM"], "model_type": "xglm"},
    # RemBertConfig's defaults (google/rembert's sizes, its docstring's checkpoint)
    "rembert": {"architectures": ["RemBertModel"], "model_type": "rembert"},
    # CTRLConfig's defaults (Salesforce/ctrl's sizes)
    "ctrl": {"architectures": ["CTRLLMHeadModel"], "model_type": "ctrl"},
    # HyperCLOVAXConfig's defaults (its docstring names
    # naver-hyperclovax/HyperCLOVAX-SEED-Think-14B)
    "hyperclovax": {"architectures": ["HyperCLOVAXForCausalLM"], "model_type": "hyperclovax"},
    # EuroBertConfig's defaults (the eurobert-base style its docstring describes)
    "eurobert": {"architectures": ["EuroBertForMaskedLM"], "model_type": "eurobert"},
    # IQuestCoderConfig's defaults (IQuestLab/IQuest-Coder-V1-40B-Instruct, its docstring's
    # checkpoint: 80 layers, width 5120, 40 query and 8 key/value heads, as the release's
    # table at https://developer.aliyun.com/article/1703900 lists)
    "iquestcoder": {"architectures": ["IQuestCoderForCausalLM"], "model_type": "iquestcoder"},
}  # fmt: skip

# fmt: off
_LLAMA = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, intermediate_size=96,
              max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    "internlm3": ("LlamaForCausalLM", dict(model_type="internlm3", **_LLAMA, qkv_bias=True,
                                           bias=True, initializer_range=0.2)),
    # saved in EXAONE's own names (transformer.h.0.attn.attention.q_proj)
    "exaone": ("LlamaForCausalLM", dict(model_type="exaone", **_LLAMA, initializer_range=0.2)),
    # global, local (a window of 4), global: unscaled scores, q/k/v without biases
    "gpt_neo": ("GPTNeoForCausalLM", dict(
        model_type="gpt_neo", hidden_size=64, num_layers=3, num_heads=4, window_size=4,
        attention_types=[[["global", "local"], 1], [["global"], 1]], max_position_embeddings=64,
        initializer_range=0.2, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    # ALiBi over 4 heads, q/k/v clamped, the scores scaled by 0.25
    "mpt": ("MptForCausalLM", dict(
        model_type="mpt", d_model=64, n_layers=2, n_heads=4, max_seq_len=64,
        attn_config={"clip_qkv": 0.4, "softmax_scale": 0.25}, initializer_range=0.2,
        pad_token_id=0)),
    "flex_olmo": ("FlexOlmoForCausalLM", dict(
        model_type="flex_olmo", **_LLAMA, num_experts=4,
        num_experts_per_tok=2, initializer_range=0.2)),
    "exaone4": ("Exaone4ForCausalLM", dict(
        model_type="exaone4", **_LLAMA, sliding_window=None,
        layer_types=["full_attention"] * 2, initializer_range=0.2)),
    # EXAONE-4.0-32B's hybrid: windows of 6 keys (the 16 greedy tokens go past them) on
    # layers 0-2, which alone rotate; layer 3 global without positions (Exaone4Config's
    # sliding_window_pattern 4)
    "exaone4-windows": ("Exaone4ForCausalLM", dict(
        model_type="exaone4", **{**_LLAMA, "num_hidden_layers": 4}, sliding_window=6,
        initializer_range=0.2)),
    "granitemoeshared": ("GraniteMoeSharedForCausalLM", dict(
        model_type="granitemoeshared", **{**_LLAMA, "intermediate_size": 32},
        shared_intermediate_size=48, num_local_experts=4, num_experts_per_tok=2,
        embedding_multiplier=2.0, residual_multiplier=0.5, attention_multiplier=0.125,
        logits_scaling=2.0, initializer_range=0.2)),
    "biogpt": ("BioGptForCausalLM", dict(
        model_type="biogpt", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=64, initializer_range=0.5,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "persimmon": ("PersimmonForCausalLM", dict(
        model_type="persimmon", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=64, initializer_range=0.2,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    # 8 heads over the 4 shards, RoPE on 8 of each head's 16 channels
    "codegen": ("CodeGenForCausalLM", dict(
        model_type="codegen", n_embd=128, n_layer=2, n_head=8, rotary_dim=8, n_positions=64,
        initializer_range=0.2, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "xglm": ("XGLMForCausalLM", dict(
        model_type="xglm", d_model=64, num_layers=2, attention_heads=4, ffn_dim=128,
        max_position_embeddings=64, init_std=0.3, pad_token_id=0, bos_token_id=1,
        eos_token_id=2)),
    "ctrl": ("CTRLLMHeadModel", dict(
        model_type="ctrl", n_embd=64, n_layer=2, n_head=4, dff=128, n_positions=64,
        initializer_range=0.3, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    "hyperclovax": ("HyperCLOVAXForCausalLM", dict(
        model_type="hyperclovax", **_LLAMA, embedding_multiplier=2.0, residual_multiplier=0.5,
        logits_scaling=0.5, initializer_range=0.2)),
    "iquestcoder": ("LlamaForCausalLM", dict(model_type="iquestcoder", **_LLAMA,
                                             initializer_range=0.2)),
}
# fmt: on


@pytest.mark.parametrize("name", list(REAL))
def test_real_size_total_equals_the_transformers_class(name: str) -> None:
    ours, theirs = real_total_equals_transformers(REAL[name])
    assert ours == theirs


# A tiny model saved, imported, loaded and decoded takes seconds on two shared cores: GPT-Neo
# (windows) and RoBERTa-PreLayerNorm stay in the default suite, the others run with the long
# tests (`-m long`).
FAST = ("gpt_neo", "roberta-prelayernorm", "exaone4-windows")


def default_or_long(names) -> list:
    return [pytest.param(n, marks=() if n in FAST else pytest.mark.long) for n in names]


@pytest.mark.parametrize("name", default_or_long(TINY))
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize("name", default_or_long(TINY))
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


def test_classes_built_as_llama_import_under_either_name() -> None:
    saved = {**REAL["internlm3"], "architectures": ["LlamaForCausalLM"]}
    assert import_config(saved).hf_class == "InternLM3ForCausalLM"
    assert import_config(REAL["internlm3"]).spec.attention.bias is False
    with pytest.raises(SpecError, match="qkv_bias"):
        import_config({**REAL["internlm3"], "qkv_bias": True})
    with pytest.raises(SpecError, match="clip_qkv"):
        import_config({**REAL["iquestcoder"], "clip_qkv": 8.0})


def test_exaone_loads_transformers_memory_names_too() -> None:
    """transformers renames EXAONE's modules to LLaMA's in memory (what bench --vs-hf copies)."""
    import torch

    from archspec.hf.weights import load_weights
    from archspec.ir.build import build_ir
    from tests.test_hf_weights import batch
    from tests.tiny import generated_module
    from tests.zoo_check import tiny_model

    cls, fields = TINY["exaone"]
    hf = tiny_model(cls, fields)
    assert "model.layers.0.self_attn.q_proj.weight" in hf.state_dict()
    spec = import_config({**hf.config.to_dict(), "architectures": [cls]}).spec
    ir = build_ir(spec)
    model = load_weights(generated_module(ir).Model().eval(), hf.state_dict(), spec=ir)
    ids, mask = batch(0)
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert torch.allclose(model(ids, mask)[mask.bool()], ref[mask.bool()], atol=1e-4)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"n_heads": 24}, "n_heads"),  # MosaicML's slopes then differ from BLOOM's
        ({"no_bias": False}, "no_bias"),  # transformers' MPT has no biases anyway
        ({"expansion_ratio": 2}, "expansion_ratio"),
        ({"attn_config": {"qk_ln": True}}, "attn_config"),
        ({"attn_config": {"alibi_bias_max": 16}}, "attn_config"),
    ],
)
def test_mpt_refuses_what_transformers_does_not_compute(changes, field: str) -> None:
    with pytest.raises(SpecError) as err:
        import_config({**REAL["mpt"], **changes})
    assert err.value.path == field


def test_exaone4_with_windows_rotates_its_windowed_layers_alone() -> None:
    """EXAONE-4.0-32B's hybrid (Exaone4Attention rotates only when the layer slides): the
    window_pattern, and the global layers without positions; a window with no sliding layer
    would leave none rotated, and is refused naming layer_types."""
    # Exaone4Config's default layer_types: every fourth layer global
    hybrid = {k: v for k, v in REAL["exaone4"].items() if k != "layer_types"}
    spec = import_config({**hybrid, "sliding_window": 4096}).spec
    assert spec.attention.sliding_window == 4096
    assert spec.attention.window_pattern == "LLLG" and spec.position_pattern == "PPPN"
    from archspec.hf.export_config import hf_config_dict

    exported = hf_config_dict(spec)  # itself checks import(export(spec)) == spec
    assert exported["sliding_window"] == 4096
    assert exported["layer_types"] == [
        "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(30)
    ]
    with pytest.raises(SpecError, match="no layer slides") as err:
        import_config({**REAL["exaone4"], "sliding_window": 4096})  # every layer global
    assert err.value.path == "layer_types"


# Encoders: hidden states and masked-LM logits of a right-padded batch after load_weights.
ENCODERS: dict[str, tuple[str, dict[str, Any]]] = {
    "xlm-roberta-xl": ("XLMRobertaXLForMaskedLM", dict(
        model_type="xlm-roberta-xl", vocab_size=99, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=34,
        pad_token_id=1)),
    "roberta-prelayernorm": ("RobertaPreLayerNormForMaskedLM", dict(
        model_type="roberta-prelayernorm", vocab_size=99, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=34,
        pad_token_id=1, hidden_act="relu")),
    # bidirectional LLaMA layers, biases on (mlp_bias: the head's too)
    "eurobert": ("EuroBertForMaskedLM", dict(
        model_type="eurobert", vocab_size=99, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        max_position_embeddings=32, attention_bias=True, mlp_bias=True, pad_token_id=0)),
    # embeddings 32 wide, projected to 64
    "rembert": ("RemBertModel", dict(
        model_type="rembert", vocab_size=99, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=32,
        input_embedding_size=32, output_embedding_size=48, pad_token_id=0)),
}  # fmt: skip


@pytest.mark.parametrize("name", default_or_long(ENCODERS))
def test_encoder_logits_equal_transformers(name: str, tmp_path: Path) -> None:
    import torch

    from archspec.hf.weights import load_weights
    from tests.test_hf_weights import assert_close, generated
    from tests.zoo_check import tiny_model

    hf = tiny_model(*ENCODERS[name])
    with torch.no_grad():  # the masked-LM head's output bias too
        for key, param in hf.named_parameters():
            if key.endswith("bias") and param.numel() == 99:
                param.normal_(0.0, 0.5)
    hf.save_pretrained(tmp_path / "checkpoint")
    module, _ = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    torch.manual_seed(1)
    ids = torch.randint(3, 99, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:], ids[1, 7:] = 0, hf.config.pad_token_id
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask)
        ref = out.logits if hasattr(out, "logits") else out.last_hidden_state
        got = model(ids, mask)
        got = got[0] if isinstance(got, tuple) else got  # hidden states before the pooler
        assert_close(got[mask.bool()], ref[mask.bool()])


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.long) for n in ENCODERS])
def test_encoder_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*ENCODERS[name])


def test_bench_builds_the_class_transformers_runs_for_the_files_class() -> None:
    """bench --vs-hf builds ExaoneForCausalLM's implementation, LlamaForCausalLM, and copies
    its in-memory weights into ours (tests/test_bench.py compares the two runs)."""
    import torch

    from archspec.bench.hf_side import build_hf_model, copy_weights
    from archspec.hf.export_config import hf_config_dict
    from archspec.ir.build import build_ir
    from tests.hf_reference import FAMILY_CONFIGS
    from tests.tiny import generated_module

    spec = import_config({"model_type": "exaone", **FAMILY_CONFIGS["exaone"]}).spec
    data = hf_config_dict(spec)
    assert data["architectures"] == ["ExaoneForCausalLM"]
    hf, _ = build_hf_model(data, torch.device("cpu"))
    assert type(hf).__name__ == "LlamaForCausalLM"
    ir = build_ir(spec)
    ours = generated_module(ir).Model().eval()
    copy_weights(ours, hf, ir)
    ids = torch.randint(3, 99, (1, 6))
    with torch.no_grad():
        assert torch.allclose(ours(ids), hf.eval()(input_ids=ids).logits, atol=1e-4)


def test_rembert_masked_lm_is_refused_pointing_at_the_encoder() -> None:
    with pytest.raises(SpecError, match="RemBertModel") as err:
        import_config({**REAL["rembert"], "architectures": ["RemBertForMaskedLM"]})
    assert "output_embedding_size" in err.value.message
