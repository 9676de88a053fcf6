"""Real config.json files with a field their transformers class never reads.

Qwen2.5's `use_mrope`, Gemma-2's `sliding_window_size`, Phi-3.5's and Phi-4's
`attention_bias` and DistilBERT's `tie_weights_` appear in no transformers code for their
model_type (Qwen2Config, Gemma2Config, Phi3Config, DistilBertConfig and their models keep
them as plain attributes nobody reads), so whatever their value, transformers builds the
model it builds without them. archspec imports them as they are, reports each as ignored
once, and gives the spec it gives with the field deleted. The configs are the public files'
values (the fields that shape the architecture, and the ignored one as the file writes it).
"""

from __future__ import annotations

from typing import Any

import pytest

from archspec.hf.import_config import import_config

PHI_3_5_MINI: dict[str, Any] = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 32000,
    "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "pad_token_id": 32000, "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 262144,
    "rope_scaling": {"type": "longrope", "short_factor": [1.0 + i / 100 for i in range(48)],
                     "long_factor": [1.0 + i for i in range(48)]},
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "vocab_size": 32064,
}  # fmt: skip
PHI_4: dict[str, Any] = {
    "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 100257, "embd_pdrop": 0.0,
    "eos_token_id": 100265, "hidden_act": "silu", "hidden_size": 5120,
    "initializer_range": 0.02, "intermediate_size": 17920, "max_position_embeddings": 16384,
    "num_attention_heads": 40, "num_hidden_layers": 40, "num_key_value_heads": 10,
    "original_max_position_embeddings": 16384, "pad_token_id": 100349, "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 250000,
    "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 100352,
}  # fmt: skip
QWEN2_5_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu",
    "hidden_size": 3584, "initializer_range": 0.02, "intermediate_size": 18944,
    "max_position_embeddings": 32768, "max_window_layers": 28, "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "use_mrope": False,
    "use_sliding_window": False, "vocab_size": 152064,
}  # fmt: skip
GEMMA_2_9B: dict[str, Any] = {
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attention_bias": False,
    "attention_dropout": 0.0, "attn_logit_softcapping": 50.0, "bos_token_id": 2,
    "cache_implementation": "hybrid", "eos_token_id": 1, "final_logit_softcapping": 30.0,
    "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
    "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_theta": 10000.0, "sliding_window": 4096, "sliding_window_size": 4096,
    "torch_dtype": "float32", "use_cache": True, "vocab_size": 256000,
}  # fmt: skip
DISTILBERT_BASE: dict[str, Any] = {
    "activation": "gelu", "architectures": ["DistilBertForMaskedLM"],
    "model_type": "distilbert", "attention_dropout": 0.1, "dim": 768, "dropout": 0.1,
    "hidden_dim": 3072, "initializer_range": 0.02, "max_position_embeddings": 512,
    "n_heads": 12, "n_layers": 6, "pad_token_id": 0, "qa_dropout": 0.1,
    "seq_classif_dropout": 0.2, "sinusoidal_pos_embds": False, "tie_weights_": True,
    "vocab_size": 30522,
}  # fmt: skip

CASES = [
    (QWEN2_5_7B, "use_mrope"),
    (GEMMA_2_9B, "sliding_window_size"),
    (PHI_3_5_MINI, "attention_bias"),
    (PHI_4, "attention_bias"),
    (DISTILBERT_BASE, "tie_weights_"),
]
IDS = ["qwen2.5", "gemma-2", "phi-3.5", "phi-4", "distilbert"]


def without(config: dict[str, Any], field: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != field}


@pytest.mark.parametrize(("config", "field"), CASES, ids=IDS)
def test_the_real_file_imports_as_it_is_reporting_the_field_once(config, field) -> None:
    imported = import_config(config)
    assert imported.spec == import_config(without(config, field)).spec
    notes = [note for note in imported.notes if f"'{field}'" in note]
    assert len(notes) == 1 and "ignored" in notes[0], imported.notes


@pytest.mark.parametrize(("config", "field"), CASES, ids=IDS)
def test_any_value_is_ignored_since_transformers_never_reads_it(config, field) -> None:
    """use_mrope: true would be Qwen2-VL's rotation, but Qwen2ForCausalLM does not read it
    (Qwen2-VL is model_type qwen2_vl); attention_bias: true would be biases Phi3Attention
    never builds. The model transformers builds is the same, so is archspec's."""
    other = not config[field] if isinstance(config[field], bool) else 2048
    assert import_config({**config, field: other}).spec == import_config(config).spec


@pytest.mark.parametrize("old", [{"n_layer": 2}, {"n_head": 4, "num_kv_heads": 1}])
def test_falcon_s_old_layer_and_head_names_are_ignored_as_falcon_config_ignores_them(
    old: dict[str, int],
) -> None:
    """FalconConfig maps RefinedWeb's n_embed to hidden_size but not n_head or n_layer, which
    it keeps as attributes nothing reads: the defaults (71 heads, 32 layers) build the model.
    Counted against transformers' FalconForCausalLM on the meta device."""
    import torch
    from transformers import FalconConfig, FalconForCausalLM

    from archspec import build_ir
    from archspec.backends.count.params import parameter_count

    config = {"model_type": "falcon", "architectures": ["FalconForCausalLM"],
              "hidden_size": 568, "num_attention_heads": 4, "vocab_size": 512,
              "ffn_hidden_size": 256, "new_decoder_architecture": "n_head" in old,
              **old}  # fmt: skip
    if "n_head" in old:
        del config["num_attention_heads"]
    imported = import_config(config)
    with torch.device("meta"):
        reference = FalconForCausalLM(FalconConfig(**config))
    ir = build_ir(imported.spec)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in reference.parameters())
    assert any(f"'{next(iter(old))}'" in n and "ignored" in n for n in imported.notes)


@pytest.mark.parametrize(
    ("model_type", "cls", "field", "value"),
    [("qwen2", "Qwen2ForCausalLM", "attention_bias", False),
     ("gpt_bigcode", "GPTBigCodeForCausalLM", "num_key_value_heads", 2)],
)  # fmt: skip
def test_fields_the_config_class_overrides_or_never_reads_are_ignored(
    model_type: str, cls: str, field: str, value: Any
) -> None:
    """Qwen2Attention's q, k and v always have biases (attention_bias is named nowhere in
    qwen2's code); GPTBigCodeConfig sets one key/value head under multi_query. The count is
    transformers' on the meta device with or without the field."""
    import torch
    import transformers

    from archspec import build_ir
    from archspec.backends.count.params import parameter_count

    config = {"model_type": model_type, "architectures": [cls], "vocab_size": 512,
              "hidden_size": 64, "n_embd": 64, "num_attention_heads": 4, "n_head": 4,
              "num_hidden_layers": 2, "n_layer": 2, "intermediate_size": 128,
              "num_key_value_heads": 2, field: value}  # fmt: skip
    if model_type == "gpt_bigcode":
        config = {k: v for k, v in config.items() if k not in ("hidden_size", "num_attention_heads",
                  "num_hidden_layers", "intermediate_size")} | {field: value}  # fmt: skip
    else:
        config = {k: v for k, v in config.items() if k not in ("n_embd", "n_head", "n_layer")}
    imported = import_config(config)
    hf_config = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        reference = getattr(transformers, cls)(hf_config)
    ir = build_ir(imported.spec)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in reference.parameters())
    assert any(f"'{field}'" in n and "ignored" in n for n in imported.notes), imported.notes
