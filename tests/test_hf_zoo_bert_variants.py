"""Issue 28, encoders that are BERT or RoBERTa under other names: ERNIE (`ernie.`, BERT's
modules), data2vec-text (`data2vec_text.`, RoBERTa's), CamemBERT (RoBERTa's, `roberta.`),
BertGeneration (BERT without token types or pooler) and Megatron-BERT (BERT made pre-norm),
against transformers' own classes:
a tiny random model saved by transformers gives the same hidden states or masked-LM logits
(fp32) after `load_weights`, counts the same parameters, and a full-size config counts
exactly on the meta device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from archspec.backends.count.params import parameter_count
from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from archspec.ir.build import build_ir
from tests.test_hf_weights import assert_close, generated
from tests.test_hf_zoo_encoders import assert_encoder_equal, right_padded

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models

SMALL = dict(
    vocab_size=99, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=128, max_position_embeddings=34,
)  # fmt: skip
CLASSES = [
    ("ErnieModel", "ErnieConfig"),
    ("ErnieForMaskedLM", "ErnieConfig"),
    ("Data2VecTextModel", "Data2VecTextConfig"),
    ("Data2VecTextForMaskedLM", "Data2VecTextConfig"),
    ("MegatronBertModel", "MegatronBertConfig"),
    ("MegatronBertForMaskedLM", "MegatronBertConfig"),
    ("CamembertModel", "CamembertConfig"),
    ("CamembertForMaskedLM", "CamembertConfig"),
    ("BertGenerationEncoder", "BertGenerationConfig"),
]


def tiny(cls: str, config_cls: str):
    config = getattr(transformers, config_cls)(**SMALL)
    config.architectures = [cls]
    torch.manual_seed(0)
    hf = getattr(transformers, cls)(config).eval()
    with torch.no_grad():  # biases and norms away from their init, so a misplaced one shows
        for name, param in hf.named_parameters():
            if param.dim() == 1:
                norm = "LayerNorm.weight" in name or name.endswith("ln.weight")
                param.normal_(1.0 if norm else 0.0, 0.3)
    return hf


@pytest.mark.parametrize(("cls", "config_cls"), CLASSES)
def test_outputs_and_count_equal_transformers(cls: str, config_cls: str, tmp_path: Path) -> None:
    hf = tiny(cls, config_cls)
    hf.save_pretrained(tmp_path / "checkpoint")
    module, _ = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hf.parameters())
    if cls.endswith("ForMaskedLM"):
        ids, mask = right_padded(hf.config.pad_token_id or 0)
        real = mask.bool()
        with torch.no_grad():
            assert_close(
                model(ids, mask)[real], hf(input_ids=ids, attention_mask=mask).logits[real]
            )
    else:
        assert_encoder_equal(hf, model)


# nghuyong/ernie-3.0-base-zh's config.json: use_task_id true, refused; as the fine-tuning
# guide that quotes it edits it (use_task_id: false), it counts like ErnieForMaskedLM.
ERNIE_3_BASE = {
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "max_position_embeddings": 2048,
    "num_attention_heads": 12, "num_hidden_layers": 12, "task_type_vocab_size": 3,
    "type_vocab_size": 4, "use_task_id": True, "vocab_size": 40000, "layer_norm_eps": 1e-05,
    "model_type": "ernie", "architectures": ["ErnieForMaskedLM"], "intermediate_size": 3072,
}  # fmt: skip
# Data2VecTextConfig's defaults, which transformers documents as facebook/data2vec-text-base's
# (`@auto_docstring(checkpoint=...)`).
DATA2VEC_TEXT_BASE = {"model_type": "data2vec-text", "architectures": ["Data2VecTextModel"]}
# MegatronBertConfig's defaults, documented as nvidia/megatron-bert-uncased-345m's.
MEGATRON_BERT_345M = {"model_type": "megatron-bert", "architectures": ["MegatronBertForMaskedLM"]}
# BertGenerationConfig's defaults, documented as google/bert_for_seq_generation_L-24_bbc_encoder's.
BERT_GENERATION_L24 = {"model_type": "bert-generation", "architectures": ["BertGenerationEncoder"]}


def test_ernie_task_type_embeddings_are_refused() -> None:
    with pytest.raises(SpecError, match="use_task_id"):
        import_config(ERNIE_3_BASE)


@pytest.mark.parametrize(
    "data",
    [
        {**ERNIE_3_BASE, "use_task_id": False},
        DATA2VEC_TEXT_BASE,
        MEGATRON_BERT_345M,
        BERT_GENERATION_L24,
    ],
    ids=["ernie", "d2v", "megatron", "bert-generation"],
)
def test_full_size_configs_count_like_transformers_on_meta(data: dict[str, Any]) -> None:
    ir = build_ir(import_config(data).spec)
    config = transformers.AutoConfig.for_model(**data)
    with torch.device("meta"):
        hf = getattr(transformers, data["architectures"][0])(config)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in hf.parameters())
