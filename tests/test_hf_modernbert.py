"""ModernBERT against transformers' own classes: its two-sided sliding window (the mask and the
pairs it keeps against transformers' `sliding_window_bidirectional_overlay`), its first block
without an attention norm, and the family (tiny random models saved by transformers: count,
print, masked-LM logits and hidden states after load_weights, forward FLOPs against
FlopCounterMode; ModernBERT-base's published config.json counted on the meta device)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import sympy as sp
import torch

from archspec.backends.printer import module_repr
from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from archspec.ir.build import build_ir
from archspec.kinds.masks import Mask
from archspec.runtime.masks import two_sided_window
from archspec.spec.resolve import load_spec
from tests.test_hf_weights import assert_close, batch, generated
from tests.test_torchgen import ruff
from tests.zoo_check import check_forward_matmul_flops, real_total_equals_transformers, tiny_model

transformers = pytest.importorskip("transformers")

# 4 layers: layer 0 full and without an attention norm, 1 and 2 windowed (|q - k| <= 2), 3 full.
TINY = {
    "model_type": "modernbert", "hidden_size": 64, "num_hidden_layers": 4,
    "num_attention_heads": 4, "intermediate_size": 96, "max_position_embeddings": 64,
    "local_attention": 4, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "cls_token_id": 1, "sep_token_id": 2, "global_rope_theta": 1000.0,
    "local_rope_theta": 50.0, "decoder_bias": True,
}  # fmt: skip

# ModernBERT-base's config.json as published, from the copy at
# https://huggingface.co/unsloth/ModernBERT-base/blob/main/config.json (its _name_or_path:
# ModernBERT-base; answerdotai's own file lists the same values), and ModernBERT-large's from
# https://huggingface.co/answerdotai/ModernBERT-large/blob/e0e1696f42eaf3a8b1f75813d77aafdb638597ec/config.json
PUBLISHED = {
    "ModernBERT-base": {
        "_name_or_path": "ModernBERT-base", "architectures": ["ModernBertForMaskedLM"],
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 50281,
        "classifier_activation": "gelu", "classifier_bias": False, "classifier_dropout": 0.0,
        "classifier_pooling": "mean", "cls_token_id": 50281, "decoder_bias": True,
        "deterministic_flash_attn": False, "embedding_dropout": 0.0, "eos_token_id": 50282,
        "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
        "gradient_checkpointing": False, "hidden_activation": "gelu", "hidden_size": 768,
        "initializer_cutoff_factor": 2.0, "initializer_range": 0.02, "intermediate_size": 1152,
        "layer_norm_eps": 1e-05, "local_attention": 128, "local_rope_theta": 10000.0,
        "max_position_embeddings": 8192, "mlp_bias": False, "mlp_dropout": 0.0,
        "model_type": "modernbert", "norm_bias": False, "norm_eps": 1e-05,
        "num_attention_heads": 12, "num_hidden_layers": 22, "pad_token_id": 50283,
        "position_embedding_type": "absolute", "sep_token_id": 50282,
        "tie_word_embeddings": True, "torch_dtype": "float32",
        "transformers_version": "4.47.0.dev0", "vocab_size": 50368,
    },
    "ModernBERT-large": {
        "_name_or_path": "ModernBERT-large", "architectures": ["ModernBertForMaskedLM"],
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 50281,
        "classifier_activation": "gelu", "classifier_bias": False, "classifier_dropout": 0.0,
        "classifier_pooling": "mean", "cls_token_id": 50281, "decoder_bias": True,
        "deterministic_flash_attn": False, "embedding_dropout": 0.0, "eos_token_id": 50282,
        "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
        "gradient_checkpointing": False, "hidden_activation": "gelu", "hidden_size": 1024,
        "initializer_cutoff_factor": 2.0, "initializer_range": 0.02, "intermediate_size": 2624,
        "layer_norm_eps": 1e-12, "local_attention": 128, "local_rope_theta": 10000.0,
        "max_position_embeddings": 512, "mlp_bias": False, "mlp_dropout": 0.0,
        "model_type": "modernbert", "norm_bias": False, "norm_eps": 1e-05,
        "num_attention_heads": 16, "num_hidden_layers": 28, "pad_token_id": 50283,
        "position_embedding_type": "absolute", "sep_token_id": 50282,
        "tie_word_embeddings": True, "torch_dtype": "float32",
        "transformers_version": "4.47.0.dev0", "vocab_size": 50368,
    },
}  # fmt: skip


# --- The two-sided window ---------------------------------------------------------------------


@pytest.mark.parametrize("half", [1, 3])
def test_two_sided_window_hides_what_transformers_hides(half: int) -> None:
    """The generated mask hides exactly the keys transformers' bidirectional overlay hides,
    with the spec's window half + 1 (keys on each side, the query's own included); the FLOP
    counter's pairs are the ones it keeps."""
    from transformers.masking_utils import sliding_window_bidirectional_overlay

    sees = sliding_window_bidirectional_overlay(half)
    n = 9
    positions = torch.arange(n)
    mask = two_sided_window(None, positions, positions, half + 1, torch.float32)
    kept = mask == 0
    expected = torch.tensor([[sees(0, 0, q, k) for k in range(n)] for q in range(n)])
    assert torch.equal(kept, expected)
    pairs = Mask(causal=False, window=half + 1).visible_pairs(sp.Integer(n), sp.Integer(n))
    assert int(pairs) == int(expected.sum())
    # A padding mask's columns go with the keys.
    padding = torch.zeros(1, 1, 1, n)
    padding[..., -2:] = torch.finfo(torch.float32).min
    padded = two_sided_window(padding, positions, positions, half + 1, torch.float32)
    assert torch.equal(padded[0, 0] == 0, expected & (positions < n - 2))


def test_an_encoder_window_is_two_sided_and_an_encoder_decoder_has_none() -> None:
    spec = load_spec("bert-base", ["attention.sliding_window=8"])
    (attention,) = {b.attn for b in build_ir(spec).root.stacks[0].block_variants}
    assert attention.mask.two_sided and attention.window == 8
    with pytest.raises(SpecError, match="encoder \\(two-sided\\)"):
        load_spec("t5-small", ["attention.sliding_window=8"])


@pytest.mark.parametrize(
    "policy", ["none", "selective", pytest.param("full", marks=pytest.mark.long)]
)
def test_two_sided_window_and_bare_first_block_keep_what_count_says(policy: str) -> None:
    """A pre-norm BERT whose first block has no attention norm and whose layers attend within
    5 keys on each side (32 tokens): what autograd keeps equals the activation count (each
    windowed layer's own mask, kept by the fused kernel and the selective checkpoint)."""
    from archspec.backends.count.activations import activation_parts
    from tests.test_recompute import cpu_kernel, run_forward

    two_sided = ("attention.sliding_window=5", "residual=pre", "norm.first_attention=false")
    ir, _, kept, values = run_forward("bert-base", policy, False, extra=two_sided)
    parts = activation_parts(ir, 4, cpu_kernel("bert-base", False), policy, device="cpu")
    assert kept == (parts.total - parts.rebuilt).xreplace(values)


def test_a_bare_first_block_needs_an_embedding_norm_before_it() -> None:
    with pytest.raises(SpecError, match="needs embedding.norm"):
        load_spec("llama-3-8b", ["norm.first_attention=false"])
    with pytest.raises(SpecError, match="pre-norm residual"):
        load_spec("bert-base", ["norm.first_attention=false"])


# --- The family -------------------------------------------------------------------------------


def _tiny(cls: str, tmp_path: Path):
    hf = tiny_model(cls, TINY)
    hf.save_pretrained(tmp_path / "checkpoint")
    module, spec = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    assert repr(model) == module_repr(build_ir(load_spec(spec)))
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hf.parameters())
    return hf, model


def test_masked_lm_equals_transformers(tmp_path: Path) -> None:
    """Logits of a right-padded batch longer than the window: the first layer without an
    attention norm, the two-sided windowed layers with their own rope base, the fused Wqkv and
    Wi, the head's dense without bias, its norm and the tied decoder with its bias."""
    hf, model = _tiny("ModernBertForMaskedLM", tmp_path)
    ids, mask = batch(0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(model(ids, mask)[real], ref[real])
    assert type(model.encoder.blocks[0]).__name__ == "FirstFullBlock"
    assert not hasattr(model.encoder.blocks[0], "attn_norm")
    # The generated file (its two-sided window's function copied in) is ruff-clean at 88.
    rules = ["--select", "E,F,W,I,UP,B", "--target-version", "py310", "--line-length", "88"]
    for command in (["check", "--isolated", *rules], ["format", "--isolated", "--check"]):
        result = subprocess.run([*ruff(), *command, str(tmp_path / "model.py")], check=False)
        assert result.returncode == 0


@pytest.mark.long
def test_base_model_equals_transformers(tmp_path: Path) -> None:
    hf, model = _tiny("ModernBertModel", tmp_path)
    ids, mask = batch(0, length=12)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        got = model(ids, mask)
    got = got[0] if isinstance(got, tuple) else got
    assert_close(got[real], ref[real])


@pytest.mark.parametrize(
    "cls", ["ModernBertForMaskedLM", pytest.param("ModernBertModel", marks=pytest.mark.long)]
)
def test_forward_flops_equal_flop_counter(cls: str) -> None:
    fields = {k: v for k, v in TINY.items() if k != "model_type"}
    check_forward_matmul_flops(cls, {"model_type": "modernbert", **fields}, s=11)


def test_refusals_name_the_field() -> None:
    with pytest.raises(SpecError, match="attention_dropout"):
        import_config({**TINY, "attention_dropout": 0.1})
    with pytest.raises(SpecError, match="layer_types"):
        import_config({**TINY, "layer_types": ["full_attention"]})
    with pytest.raises(SpecError, match="pooled sequence") as caught:
        import_config({**TINY, "architectures": ["ModernBertForSequenceClassification"]})
    assert "--architecture ModernBertModel" in (caught.value.hint or "")


@pytest.mark.long
def test_a_classifier_checkpoint_loads_as_its_encoder(tmp_path: Path) -> None:
    """The refusal's advice works: a ModernBertForSequenceClassification checkpoint, imported
    as ModernBertModel with its head's weights skipped, gives transformers' hidden states."""
    from tests.test_hf_weights import cli, load_generated

    hf = tiny_model("ModernBertForSequenceClassification", TINY)
    hf.save_pretrained(tmp_path / "checkpoint")
    spec, code = tmp_path / "spec.yaml", tmp_path / "model.py"
    config = str(tmp_path / "checkpoint" / "config.json")
    cli("import-hf", config, "--architecture", "ModernBertModel", "-o", str(spec))
    cli("build", str(spec), "-o", str(code))
    module = load_generated(code.read_text(), tmp_path)
    ignore = ["head.*", "classifier.*"]
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint", spec, ignore=ignore)
    ids, mask = batch(0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf.model(input_ids=ids, attention_mask=mask).last_hidden_state
        got = model(ids, mask)
    assert_close(got[real], ref[real])


@pytest.mark.long
@pytest.mark.parametrize("name", list(PUBLISHED))
def test_published_configs_count_like_transformers(name: str) -> None:
    """The real files as they are, counted against transformers' class on the meta device;
    the fields no ModernBERT code reads (layer_norm_eps, position_embedding_type) reported."""
    ours, theirs = real_total_equals_transformers(PUBLISHED[name])
    assert ours == theirs
    notes = import_config(PUBLISHED[name]).notes
    assert any("position_embedding_type" in note for note in notes)
