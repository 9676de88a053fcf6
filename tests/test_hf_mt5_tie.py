"""Issue 28: mT5's head. transformers' MT5Config forces tie_word_embeddings to true whatever
config.json says, so a model built from the config alone ties the head; from_pretrained on a
checkpoint that stores its own lm_head.weight (as the real mT5 ones do) keeps it untied.
archspec follows the checkpoint and says where the two differ."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from archspec.backends.count.params import parameter_count
from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir

transformers = pytest.importorskip("transformers")

SMALL = dict(
    vocab_size=99, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=4,
    feed_forward_proj="gated-gelu",
)  # fmt: skip


def test_the_note_says_what_a_config_built_model_counts() -> None:
    data = {"model_type": "mt5", "architectures": ["MT5ForConditionalGeneration"], **SMALL,
            "tie_word_embeddings": False}  # fmt: skip
    imported = import_config(data)
    assert imported.spec.head.tied is False
    (note,) = [n for n in imported.notes if "tie_word_embeddings" in n]
    assert "1,584 parameters fewer" in note  # 99 x 16
    ours = build_ir(imported.spec)
    with torch.device("meta"):
        built = transformers.MT5ForConditionalGeneration(transformers.MT5Config(**SMALL))
    assert built.config.tie_word_embeddings is True  # forced
    theirs = sum(p.numel() for p in built.parameters())
    assert ours.value(parameter_count(ours.root)) - theirs == 99 * 16
    # A tied config.json says nothing.
    tied = import_config({**data, "tie_word_embeddings": True})
    assert not [n for n in tied.notes if "tie_word_embeddings" in n]


def test_t5_says_the_same_as_its_config_class_forces_the_tie_too() -> None:
    """T5Config (transformers 5) forces the tie as MT5Config does; T5 v1.1's and FLAN-T5's
    config.json say false. The note was mT5's alone (a helper's audit of the encoders)."""
    data = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], **SMALL,
            "tie_word_embeddings": False}  # fmt: skip
    assert transformers.T5Config(**SMALL, tie_word_embeddings=False).tie_word_embeddings
    imported = import_config(data)
    assert imported.spec.head.tied is False
    (note,) = [n for n in imported.notes if "tie_word_embeddings" in n]
    assert "T5Config forces the tie" in note and "1,584 parameters fewer" in note


def test_from_pretrained_on_a_checkpoint_with_its_own_head_counts_like_archspec(
    tmp_path: Path,
) -> None:
    from safetensors.torch import save_file

    torch.manual_seed(0)
    model = transformers.MT5ForConditionalGeneration(transformers.MT5Config(**SMALL))
    model.save_pretrained(tmp_path)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["lm_head.weight"] = torch.randn(99, 16)  # a head of its own, as mT5's files hold
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((tmp_path / "config.json").read_text())
    config["tie_word_embeddings"] = False
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = transformers.MT5ForConditionalGeneration.from_pretrained(tmp_path)
    assert loaded.lm_head.weight.data_ptr() != loaded.shared.weight.data_ptr()
    ir = build_ir(import_config(tmp_path / "config.json").spec)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in loaded.parameters())
