"""`archspec import-hf`, the transformers name mapping and `count --names hf`, at full size.

Full sizes need no memory: the transformers reference is built on the meta device, and the
name mapping is checked on meta tensors.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from archspec.backends.count.params import parameter_count
from archspec.cli import app
from archspec.errors import SpecError
from archspec.hf.expert_stacks import stack
from archspec.hf.import_config import import_config
from archspec.hf.names import naming
from archspec.hf.tensor_rules import tensor_rules
from archspec.hf.weights import convert, to_hf
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.hf_reference import HF_CONFIGS, build_meta
from tests.hostile import run_python

transformers = pytest.importorskip("transformers")

runner = CliRunner()


def model_type(config_cls: str) -> str:
    return getattr(transformers, config_cls).model_type


def write_config(folder: Path, data: dict[str, Any]) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def import_cli(config: Path, out: Path, *args: str) -> Path:
    result = runner.invoke(app, ["import-hf", str(config), "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    return out


def count(ir) -> int:
    return ir.value(parameter_count(ir.root))


def same_architecture(a, b) -> dict[str, tuple]:
    """The spec fields in which two specs differ, apart from their name and source."""
    skip = {"name", "source"}
    return {
        f.name: (getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(a)
        if f.name not in skip and getattr(a, f.name) != getattr(b, f.name)
    }


# --- Every built-in spec with a transformers counterpart, at full size ----------------------


# The largest mixtures of experts on the meta device, every expert named one by one, take most
# of the file's time: the long run maps them at full size. The default run maps their names at
# a tiny size, on real tensors (DeepSeek-V3: tests/test_hf_zoo_sigmoid_router.py; Qwen3-MoE:
# tests/test_hf_zoo_moe.py, which also counts Qwen3-30B-A3B at full size) and gpt-oss at 20B.
LONG = {"deepseek-v3", "qwen3-30b-a3b", "gpt-oss-120b"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.long) if n in LONG else n for n in HF_CONFIGS]
)
def test_imported_spec_counts_and_maps_like_transformers(name: str, tmp_path: Path) -> None:
    cls, config_cls, fields = HF_CONFIGS[name]
    config = write_config(
        tmp_path, {"model_type": model_type(config_cls), "architectures": [cls], **fields}
    )
    spec_path = import_cli(config, tmp_path / f"{name}.yaml")
    ir = build_ir(load_spec(spec_path))
    reference = build_meta(name)
    assert count(ir) == sum(p.numel() for p in reference.parameters())

    # Our tensors, converted to transformers' names, are exactly its state dict (tied copies
    # and buffers included), shape for shape; and back.
    theirs = {k: tuple(v.shape) for k, v in reference.state_dict().items()}
    # transformers' in-memory names, where they differ from its files (Mixtral, GPT-NeoX).
    variant = "module" if "module" in naming(ir).family.names.variants else "checkpoint"
    ours = {
        k: torch.empty(shape, device="meta")
        for rule in tensor_rules(naming(ir), ir)
        for k, shape in zip(rule.ours, rule.shapes, strict=True)
    }
    converted = to_hf(ir, ours, variant=variant)
    assert {k: tuple(v.shape) for k, v in converted.items()} == theirs
    back = convert(ir, reference.state_dict())  # the routed experts stacked, as generated
    assert {k: tuple(v.shape) for k, v in back.items()} == {
        k: tuple(v.shape) for k, v in stack(ir, ours).items()
    }

    # The built-in spec names the same tensors (what `count --names hf` shows), one-to-one:
    # each tensor of ours sits in exactly one transformers tensor, tied copies aside.
    builtin = build_ir(load_spec(name))
    rules = tensor_rules(naming(builtin, variant=variant), builtin)
    assert {r.hf: r.hf_shape() for r in rules if r.ours or r.buffer_shape} == theirs
    primary = [k for r in rules if r.ours and not r.optional for k in r.ours]
    assert len(primary) == len(set(primary))


# --- Published config.json files ------------------------------------------------------------
# Shaped like the files on the Hugging Face hub, old fields and all (abridged where a field
# only repeats a default); each must import, and where archspec ships the model, give it back.

# fmt: off
PUBLISHED: dict[str, tuple[dict[str, Any], str | None, str | None]] = {
    # name: (config.json, --architecture, the built-in spec it must equal)
    "gpt2": (
        {
            "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
            "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1,
            "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
            "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12,
            "n_positions": 1024, "resid_pdrop": 0.1, "summary_activation": None,
            "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
            "summary_type": "cls_index", "summary_use_proj": True,
            "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
            "vocab_size": 50257,
        },
        None,
        "gpt2",
    ),
    "bert-base-uncased": (
        {
            "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
            "gradient_checkpointing": False, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
            "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
            "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
            "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0,
            "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0",
            "type_vocab_size": 2, "use_cache": True, "vocab_size": 30522,
        },
        "BertModel",
        "bert-base",
    ),
    "roberta-base": (
        {
            "architectures": ["RobertaForMaskedLM"], "attention_probs_dropout_prob": 0.1,
            "bos_token_id": 0, "eos_token_id": 2, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
            "intermediate_size": 3072, "layer_norm_eps": 1e-05, "max_position_embeddings": 514,
            "model_type": "roberta", "num_attention_heads": 12, "num_hidden_layers": 12,
            "pad_token_id": 1, "type_vocab_size": 1, "vocab_size": 50265,
        },
        "RobertaModel",
        "roberta-base",
    ),
    "openai-gpt": (
        {
            "afn": "gelu", "architectures": ["OpenAIGPTLMHeadModel"], "attn_pdrop": 0.1,
            "embd_pdrop": 0.1, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
            "model_type": "openai-gpt", "n_ctx": 512, "n_embd": 768, "n_head": 12,
            "n_layer": 12, "n_positions": 512, "n_special": 0, "predict_special_tokens": True,
            "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True, "summary_type": "cls_index",
            "summary_use_proj": True, "vocab_size": 40478,
        },
        None,
        "gpt-1",
    ),
    "t5-small": (
        {
            "architectures": ["T5WithLMHeadModel"], "d_ff": 2048, "d_kv": 64, "d_model": 512,
            "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1,
            "initializer_factor": 1.0, "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06,
            "model_type": "t5", "n_positions": 512, "num_heads": 8, "num_layers": 6,
            "output_past": True, "pad_token_id": 0, "relative_attention_num_buckets": 32,
            "task_specific_params": {"summarization": {"prefix": "summarize: "}},
            "vocab_size": 32128,
        },
        None,
        "t5-small",
    ),
    "flan-t5-small": (
        {
            "architectures": ["T5ForConditionalGeneration"], "d_ff": 1024, "d_kv": 64,
            "d_model": 512, "decoder_start_token_id": 0, "dense_act_fn": "gelu_new",
            "dropout_rate": 0.1, "eos_token_id": 1, "feed_forward_proj": "gated-gelu",
            "initializer_factor": 1.0, "is_encoder_decoder": True, "is_gated_act": True,
            "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512,
            "num_decoder_layers": 8, "num_heads": 6, "num_layers": 8, "output_past": True,
            "pad_token_id": 0, "relative_attention_max_distance": 128,
            "relative_attention_num_buckets": 32, "tie_word_embeddings": False,
            "torch_dtype": "float32", "transformers_version": "4.23.1", "use_cache": True,
            "vocab_size": 32128,
        },
        None,
        "flan-t5-small",
    ),
    "bart-base": (
        {
            "activation_dropout": 0.1, "activation_function": "gelu", "add_bias_logits": False,
            "add_final_layer_norm": False, "architectures": ["BartForConditionalGeneration"],
            "attention_dropout": 0.1, "bos_token_id": 0, "classif_dropout": 0.1,
            "classifier_dropout": 0.0, "d_model": 768, "decoder_attention_heads": 12,
            "decoder_ffn_dim": 3072, "decoder_layerdrop": 0.0, "decoder_layers": 6,
            "decoder_start_token_id": 2, "dropout": 0.1, "early_stopping": True,
            "encoder_attention_heads": 12, "encoder_ffn_dim": 3072, "encoder_layerdrop": 0.0,
            "encoder_layers": 6, "eos_token_id": 2, "forced_eos_token_id": 2,
            "gradient_checkpointing": False, "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
            "init_std": 0.02, "is_encoder_decoder": True,
            "label2id": {"LABEL_0": 0, "LABEL_1": 1}, "max_position_embeddings": 1024,
            "model_type": "bart", "no_repeat_ngram_size": 3, "normalize_before": False,
            "normalize_embedding": True, "num_beams": 4, "num_hidden_layers": 6,
            "pad_token_id": 1, "scale_embedding": False, "vocab_size": 50265,
        },
        None,
        "bart-base",
    ),
    "llama-2-7b": (
        {
            "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
            "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
            "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "llama",
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
            "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
            "tie_word_embeddings": False, "torch_dtype": "float16",
            "transformers_version": "4.31.0.dev0", "use_cache": True, "vocab_size": 32000,
        },
        None,
        "llama-2-7b",
    ),
    "mixtral-8x7b": (
        {
            "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0,
            "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096,
            "initializer_range": 0.02, "intermediate_size": 14336,
            "max_position_embeddings": 32768, "model_type": "mixtral",
            "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
            "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
            "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
            "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "transformers_version": "4.36.0.dev0", "use_cache": True, "vocab_size": 32000,
        },
        None,
        "mixtral-8x7b",
    ),
    "mistral-7b-v0.1": (
        {
            "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
            "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
            "intermediate_size": 14336, "max_position_embeddings": 32768,
            "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
            "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
            "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000,
        },
        None,
        "mistral-7b",
    ),
    "gemma-2b": (
        {
            "architectures": ["GemmaForCausalLM"], "attention_bias": False,
            "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256,
            "hidden_act": "gelu", "hidden_size": 2048, "initializer_range": 0.02,
            "intermediate_size": 16384, "max_position_embeddings": 8192, "model_type": "gemma",
            "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1,
            "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": None,
            "rope_theta": 10000.0, "torch_dtype": "bfloat16",
            "transformers_version": "4.38.0.dev0", "use_cache": True, "vocab_size": 256000,
        },
        None,
        "gemma-2b",
    ),
    "gemma-2-2b": (
        {
            "architectures": ["Gemma2ForCausalLM"], "attention_bias": False,
            "attention_dropout": 0.0, "attn_logit_softcapping": 50.0, "bos_token_id": 2,
            "cache_implementation": "hybrid", "eos_token_id": 1,
            "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
            "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304,
            "initializer_range": 0.02, "intermediate_size": 9216,
            "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
            "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
            "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
            "sliding_window": 4096, "torch_dtype": "float32",
            "transformers_version": "4.42.4", "use_cache": True, "vocab_size": 256000,
        },
        None,
        "gemma-2-2b",
    ),
    "qwen2-7b": (
        {
            "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
            "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
            "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
            "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2",
            "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
            "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "transformers_version": "4.37.2", "use_cache": True, "use_sliding_window": False,
            "vocab_size": 152064,
        },
        None,
        "qwen2-7b",
    ),
    "qwen3-0.6b": (
        {
            "architectures": ["Qwen3ForCausalLM"], "attention_bias": False,
            "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
            "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
            "initializer_range": 0.02, "intermediate_size": 3072,
            "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
            "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
            "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
            "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
            "vocab_size": 151936,
        },
        None,
        "qwen3-0.6b",
    ),
    # Phi-3-mini-4k-instruct: every layer windowed to 2047 of its 4096 positions.
    "phi-3-mini-4k": (
        {
            "architectures": ["Phi3ForCausalLM"], "attention_dropout": 0.0,
            "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu",
            "hidden_size": 3072, "initializer_range": 0.02, "intermediate_size": 8192,
            "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32,
            "num_hidden_layers": 32, "num_key_value_heads": 32,
            "original_max_position_embeddings": 4096, "pad_token_id": 32000,
            "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None,
            "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "transformers_version": "4.40.2", "use_cache": True,
            "vocab_size": 32064,
        },
        None,
        "phi-3-mini-4k",
    ),
    "bloom-560m": (
        {
            "apply_residual_connection_post_layernorm": False, "architectures":
            ["BloomForCausalLM"], "attention_dropout": 0.0, "attention_softmax_in_fp32": True,
            "bias_dropout_fusion": True, "bos_token_id": 1, "eos_token_id": 2,
            "hidden_dropout": 0.0, "hidden_size": 1024, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": True, "model_type": "bloom",
            "n_head": 16, "n_inner": None, "n_layer": 24, "offset_alibi": 100,
            "pad_token_id": 3, "pretraining_tp": 1, "skip_bias_add": True,
            "skip_bias_add_qkv": False, "slow_but_exact": False, "unk_token_id": 0,
            "use_cache": True, "vocab_size": 250880,
        },
        None,
        "bloom-560m",
    ),
    "opt-125m": (
        {
            "_remove_final_layer_norm": False, "activation_dropout": 0.0,
            "activation_function": "relu", "architectures": ["OPTForCausalLM"],
            "attention_dropout": 0.0, "bos_token_id": 2, "do_layer_norm_before": True,
            "dropout": 0.1, "eos_token_id": 2, "ffn_dim": 3072, "hidden_size": 768,
            "init_std": 0.02, "layerdrop": 0.0, "max_position_embeddings": 2048,
            "model_type": "opt", "num_attention_heads": 12, "num_hidden_layers": 12,
            "pad_token_id": 1, "prefix": "</s>", "torch_dtype": "float16",
            "transformers_version": "4.21.0.dev0", "use_cache": True, "vocab_size": 50272,
            "word_embed_proj_dim": 768,
        },
        None,
        None,
    ),
}
# fmt: on


# fmt: off
MISTRAL_V01: dict[str, Any] = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000,
}
# fmt: on


def meta_reference(data: dict[str, Any], cls_name: str):
    config = transformers.AutoConfig.for_model(**data)
    with torch.device("meta"):
        model = getattr(transformers, cls_name)(config)
    if data.get("tie_word_embeddings") is False and cls_name.startswith("T5"):
        # as tests/hf_reference.py: transformers 5 ties T5's head regardless; the checkpoint
        # (and the config) keep it separate
        model.lm_head.weight = torch.nn.Parameter(torch.empty_like(model.lm_head.weight))
    return model


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_published_config_imports(name: str, tmp_path: Path) -> None:
    data, architecture, builtin = PUBLISHED[name]
    args = ["--architecture", architecture] if architecture else []
    spec_path = import_cli(write_config(tmp_path, data), tmp_path / "spec.yaml", *args)
    spec = load_spec(spec_path)
    if builtin is not None:
        assert same_architecture(spec, load_spec(builtin)) == {}
    cls_name = architecture or {"T5WithLMHeadModel": "T5ForConditionalGeneration"}.get(
        data["architectures"][0], data["architectures"][0]
    )
    reference = meta_reference(data, cls_name)
    assert count(build_ir(spec)) == sum(p.numel() for p in reference.parameters())


def test_imported_spec_is_minimal(tmp_path: Path) -> None:
    data, architecture, _ = PUBLISHED["bert-base-uncased"]
    config = write_config(tmp_path, data)
    text = import_cli(config, tmp_path / "bert.yaml", "--architecture", "BertModel").read_text()
    keys = [line.split(":")[0] for line in text.splitlines() if not line.startswith("#")]
    assert keys == [
        "extends",
        "source",
        "d_model",
        "n_layers",
        "n_heads",
        "d_ff",
        "vocab_size",
        "max_seq_len",
    ]
    assert "extends: _bert" in text


def test_import_prints_yaml_or_json(tmp_path: Path) -> None:
    config = write_config(tmp_path, PUBLISHED["gpt2"][0])
    result = runner.invoke(app, ["import-hf", str(tmp_path)])
    assert result.exit_code == 0
    assert "extends: _gpt2" in result.stdout
    result = runner.invoke(app, ["import-hf", str(config), "--json"])
    assert json.loads(result.stdout)["extends"] == "_gpt2"


def test_import_writes_and_refuses_to_clobber(tmp_path: Path) -> None:
    config = write_config(tmp_path, PUBLISHED["gpt2"][0])
    out = tmp_path / "gpt2.yaml"
    result = runner.invoke(app, ["import-hf", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.stderr
    imported = out.read_text()
    result = runner.invoke(app, ["import-hf", str(config), "-o", str(out)])
    assert result.exit_code == 0 and "unchanged" in result.stderr  # same content: fine
    edited = imported + "n_layers: 2  # my edit\n"
    out.write_text(edited)
    result = runner.invoke(app, ["import-hf", str(config), "-o", str(out)])
    assert result.exit_code == 2
    assert "differs from the imported spec" in result.stderr and "--force" in result.stderr
    assert out.read_text() == edited
    result = runner.invoke(app, ["import-hf", str(config), "-o", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert out.read_text() == imported
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "gpt2.yaml"]


@pytest.mark.parametrize(
    "folder",
    [
        'q"uo`te',
        "back\\slash",
        "x\nn_layers: 99",
        "byte" + os.fsdecode(b"\xff"),
        "d" * 200 + "/d" * 60,
    ],
)
def test_a_config_imports_whatever_its_folder_is_called(tmp_path: Path, folder: str) -> None:
    """The path goes into the spec's `source`, a text field without quotes, backslashes,
    backticks or controls, of at most 300 characters: such characters are percent-encoded and
    a long path kept by its end, so a valid config is never refused for its folder's name."""
    from archspec.hf.import_config import path_source
    from archspec.spec.schema import TEXT_PATTERN

    (tmp_path / folder).mkdir(parents=True)
    config = write_config(tmp_path / folder, SMALL_GPT2)
    source = path_source(str(config))
    assert re.fullmatch(TEXT_PATTERN, source) and source.endswith("/config.json")
    result = runner.invoke(app, ["count", str(config), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["source"] == source
    if "\n" in folder or "\udcff" in folder:
        return  # import-hf refuses a control character or a non-UTF-8 byte in the path itself
    written = import_cli(config, tmp_path / "spec.yaml")
    assert load_spec(str(written)).source == source


def test_the_commands_import_hf_suggests_are_quoted_for_the_shell(tmp_path: Path) -> None:
    import shlex

    folder = tmp_path / "my $(touch pwned) model"
    folder.mkdir()
    write_config(folder, SMALL_GPT2)
    out = tmp_path / "it's out.yaml"
    result = runner.invoke(app, ["import-hf", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    suggested = result.stderr.replace("\n", "").split("count it with `", 1)[1].split("`")[0]
    assert shlex.split(suggested) == ["archspec", "count", str(out)]
    result = runner.invoke(app, ["count", str(folder)])
    assert result.exit_code == 0, result.output
    note = result.stderr.replace("\n", "").split("; `", 1)[1].split("`")[0]
    assert shlex.split(note) == ["archspec", "import-hf", str(folder), "-o", "FILE.yaml"]


def test_t5_heads_follow_the_config() -> None:
    base = {
        "model_type": "t5",
        "architectures": ["T5ForConditionalGeneration"],
        "d_model": 64,
        "d_kv": 16,
        "d_ff": 128,
        "num_layers": 2,
        "num_heads": 4,
    }
    v10 = import_config(base).spec
    assert (v10.head.tied, v10.head.scale_tied_output, v10.mlp.gated) == (True, True, False)
    flan = import_config(
        {**base, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    ).spec
    assert (flan.head.tied, flan.head.scale_tied_output) == (False, False)
    assert (flan.mlp.gated, flan.mlp.activation) == (True, "gelu_tanh")
    # transformers 5 writes a v1.1 config as tied, with the output scaling switched off
    saved = import_config(
        {
            **base,
            "feed_forward_proj": "gated-gelu",
            "tie_word_embeddings": True,
            "scale_decoder_outputs": False,
        }
    ).spec
    assert (saved.head.tied, saved.head.scale_tied_output) == (True, False)
    silu = import_config({**base, "feed_forward_proj": "gated-silu"}).spec
    assert (silu.mlp.gated, silu.mlp.activation) == (True, "silu")
    encoder = import_config({**base, "architectures": ["T5EncoderModel"]}).spec
    assert (encoder.layout, encoder.head.lm_head) == ("encoder", False)


# --- Refusals: each names what it cannot express -------------------------------------------

SMALL_GPT2 = {
    "model_type": "gpt2",
    "architectures": ["GPT2LMHeadModel"],
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "vocab_size": 100,
    "n_positions": 32,
}


@pytest.mark.parametrize(
    ("data", "args", "needle"),
    [
        ({"model_type": "mamba", "hidden_size": 64}, [], "model_type 'mamba'"),
        ({}, [], "no model_type"),
        (
            {**SMALL_GPT2, "scale_attn_by_inverse_layer_idx": True},
            [],
            "scale_attn_by_inverse_layer_idx",
        ),
        # a field transformers' shared code reads (a made-up one is ignored, with a note)
        ({**SMALL_GPT2, "sliding_window": 3}, [], "'sliding_window'"),
        ({**SMALL_GPT2, "add_cross_attention": True}, [], "add_cross_attention"),
        ({**SMALL_GPT2, "activation_function": "quick_gelu"}, [], "quick_gelu"),
        ({**SMALL_GPT2, "architectures": ["GPT2DoubleHeadsModel"]}, [], "GPT2DoubleHeadsModel"),
        ({**SMALL_GPT2, "architectures": ["LlamaForCausalLM"]}, [], "is a llama class"),
        (SMALL_GPT2, ["--architecture", "Nope"], "'Nope'"),
        (
            {**PUBLISHED["bert-base-uncased"][0], "architectures": ["BertForPreTraining"]},
            [],
            "BertForPreTraining",
        ),
        (
            {**PUBLISHED["bert-base-uncased"][0], "position_embedding_type": "relative_key"},
            ["--architecture", "BertModel"],
            "position_embedding_type",
        ),
        (
            {**PUBLISHED["bert-base-uncased"][0], "is_decoder": True},
            ["--architecture", "BertModel"],
            "is_decoder",
        ),
        (
            {**PUBLISHED["opt-125m"][0], "layer_norm_elementwise_affine": False},
            [],
            "layer_norm_elementwise_affine",
        ),
        (
            {**PUBLISHED["llama-2-7b"][0], "rope_scaling": {"type": "yarn", "factor": 2.0}},
            [],
            "'yarn'",
        ),
        (
            {
                **PUBLISHED["llama-2-7b"][0],
                # llama3 scaling without its settings
                "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5},
            },
            [],
            "'llama3' needs factor",
        ),
        (
            {**PUBLISHED["bart-base"][0], "decoder_attention_heads": 16},
            [],
            "decoder_attention_heads",
        ),
        ({**PUBLISHED["bart-base"][0], "normalize_before": True}, [], "normalize_before"),
        (
            {**PUBLISHED["bloom-560m"][0], "apply_residual_connection_post_layernorm": True},
            [],
            "apply_residual_connection_post_layernorm",
        ),
        ({**PUBLISHED["t5-small"][0], "feed_forward_proj": "gated-quick_gelu"}, [], "quick_gelu"),
        ({**PUBLISHED["t5-small"][0], "dense_act_fn": "silu"}, [], "dense_act_fn"),
        ({**PUBLISHED["openai-gpt"][0], "n_special": 3}, [], "n_special"),
        ({**SMALL_GPT2, "n_head": 5}, [], "n_heads (5) does not divide d_model (64)"),
        ({**SMALL_GPT2, "quantization_config": {"bits": 4}}, [], "quantization_config"),
        ({**SMALL_GPT2, "n_embd": 64, "hidden_size": 128}, [], "disagree"),
    ],
)
def test_import_refuses_what_it_cannot_express(
    data: dict[str, Any], args: list[str], needle: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, data)
    result = runner.invoke(app, ["import-hf", str(config), *args])
    assert result.exit_code == 2, result.output
    assert needle in result.stderr
    assert "Traceback" not in result.output


def test_import_reports_unreadable_files(tmp_path: Path) -> None:
    result = runner.invoke(app, ["import-hf", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "no such file" in result.stderr
    bad = tmp_path / "config.json"
    bad.write_text("{ not json")
    result = runner.invoke(app, ["import-hf", str(bad)])
    assert result.exit_code == 2 and "not valid JSON" in result.stderr
    with pytest.raises(SpecError, match="JSON object"):
        bad.write_text("[1, 2]")
        import_config(bad)


# --- count --names hf ------------------------------------------------------------------------


def test_count_names_hf_reads_like_the_bert_table() -> None:
    result = runner.invoke(app, ["count", "bert-base", "--names", "hf"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    for ours, theirs in [
        ("tok_emb", "embeddings.word_embeddings"),
        ("encoder.pos_emb", "embeddings.position_embeddings"),
        ("type_emb", "embeddings.token_type_embeddings"),
        ("encoder.emb_norm", "embeddings.LayerNorm"),
        ("encoder.blocks.i.attn.q", "encoder.layer.i.attention.self.query"),
        ("encoder.blocks.i.attn.o", "encoder.layer.i.attention.output.dense"),
        ("encoder.blocks.i.attn_norm", "encoder.layer.i.attention.output.LayerNorm"),
        ("encoder.blocks.i.mlp.up", "encoder.layer.i.intermediate.dense"),
        ("encoder.blocks.i.mlp.down", "encoder.layer.i.output.dense"),
        ("encoder.blocks.i.mlp_norm", "encoder.layer.i.output.LayerNorm"),
        ("pooler", "pooler.dense"),
    ]:
        row = next(line for line in result.stdout.splitlines() if f" {ours} " in line)
        assert theirs in row


@pytest.mark.parametrize("name", ["gpt2", "t5-small", "mixtral-8x7b", "bloom-560m", "bart-base"])
def test_count_names_hf_json_names_every_row(name: str) -> None:
    result = runner.invoke(app, ["count", name, "--names", "hf", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["params"]["rows"]
    assert all(row["hf_name"] for row in rows)
    by_name = {row["name"]: row["hf_name"] for row in rows}
    if name == "t5-small":
        assert by_name["encoder.rel_bias"] == (
            "encoder.block.0.layer.0.SelfAttention.relative_attention_bias"
        )
        assert by_name["decoder.blocks.i.mlp.up"] == "decoder.block.i.layer.2.DenseReluDense.wi"
    if name == "mixtral-8x7b":
        assert by_name["decoder.blocks.i.moe.experts.j.up"] == (
            "model.layers.i.block_sparse_moe.experts.j.w3"
        )
    if name == "gpt2":
        assert by_name["decoder.blocks.i.attn.k"].startswith("transformer.h.i.attn.c_attn")


def test_count_names_hf_refuses_specs_without_a_transformers_class() -> None:
    result = runner.invoke(app, ["count", "gpt3-175b", "--names", "hf"])
    assert result.exit_code == 2 and "hf_class is null" in result.stderr
    result = runner.invoke(app, ["count", "gpt2", "--names", "theirs"])
    assert result.exit_code == 2 and "--names" in result.stderr


def test_count_names_hf_does_not_import_torch() -> None:
    # `count` must feel instant: the name mapping lives apart from the torch tensor rules.
    code = (
        "from archspec.cli import app\n"
        "for name in ('bert-base', 'gpt2', 't5-small', 'mixtral-8x7b'):\n"
        "    try:\n"
        "        app(['count', name, '--names', 'hf', '--json'])\n"
        "    except SystemExit as exc:\n"
        "        assert not exc.code, f'{name}: exit {exc.code}'\n"
    )
    printed, modules = run_python(code)
    assert "torch" not in modules, "torch imported"
    assert '"hf_name"' in printed


def test_mistral_sliding_window_is_imported() -> None:
    # Mistral 7B v0.1: a 4096 window over 32768 positions, every layer.
    v01 = import_config(MISTRAL_V01).spec
    assert (v01.max_seq_len, v01.attention.sliding_window) == (32768, 4096)
    assert v01.attention.window_pattern == "L"
    # No field: MistralConfig's default window, 4096.
    absent = {k: v for k, v in MISTRAL_V01.items() if k != "sliding_window"}
    assert import_config(absent).spec.attention.sliding_window == 4096


def test_sliding_window_that_masks_nothing_is_exact() -> None:
    # `null` (Mistral v0.2, v0.3, Nemo) is no window: all 32768 positions, not 4096.
    v02 = import_config({**MISTRAL_V01, "sliding_window": None})
    assert v02.base == "_mistral" and v02.spec.max_seq_len == 32768
    assert v02.spec.attention.sliding_window is None
    short = import_config({**MISTRAL_V01, "max_position_embeddings": 4096})
    assert short.spec.max_seq_len == 4096


def test_qwen2_window_from_max_window_layers_is_a_pattern_as_long_as_the_stack() -> None:
    qwen2 = {
        "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 99,
        "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64,
        "sliding_window": 16, "max_window_layers": 2,
    }  # fmt: skip
    # Qwen2's configs carry a window but switch it off: plain causal attention.
    off = import_config(qwen2).spec
    assert off.attention.qkv_bias is True and off.attention.sliding_window is None
    # Qwen2Config windows the layers from max_window_layers on.
    spec = import_config({**qwen2, "use_sliding_window": True}).spec
    assert (spec.attention.sliding_window, spec.attention.window_pattern) == (16, "GGLL")
    assert [spec.windowed(i) for i in range(4)] == [False, False, True, True]
    # transformers 5 writes layer_types out; it wins over max_window_layers.
    alternating = ["full_attention", "sliding_attention"] * 2
    spec = import_config({**qwen2, "use_sliding_window": True, "layer_types": alternating}).spec
    assert spec.attention.window_pattern == "GL"
    with pytest.raises(SpecError) as err:
        import_config({**qwen2, "use_sliding_window": True, "layer_types": alternating[:3]})
    assert err.value.path == "layer_types"
