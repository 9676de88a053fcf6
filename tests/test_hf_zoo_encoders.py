"""Issue 18, encoders, heads and MoE: import fixes, DistilBERT, ALBERT, ELECTRA, masked-LM heads
and Qwen2-MoE against transformers' own classes (meta device for full sizes, tiny random models
for numerics, fp32)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from tests.test_hf_weights import assert_close, generated

transformers = pytest.importorskip("transformers")

SMALL_OPT = dict(
    vocab_size=99, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
    max_position_embeddings=32, word_embed_proj_dim=64,
)  # fmt: skip


def tiny(cls: str, config_cls: str, seed: int = 0, **fields):
    config = getattr(transformers, config_cls)(**fields)
    config.architectures = [cls]
    torch.manual_seed(seed)
    return getattr(transformers, cls)(config).eval()


def checkpoint_and_model(hf, tmp_path: Path):
    hf.save_pretrained(tmp_path / "checkpoint")
    module, spec = generated(tmp_path / "checkpoint", tmp_path)
    return load_weights(module.Model().eval(), tmp_path / "checkpoint"), spec


# --- import-hf: hints, legacy fields ---------------------------------------------------------


@pytest.mark.parametrize(
    ("model_type", "offered"),
    [("esm", None), ("nezha", None), ("splinter", None),
     ("xlm_roberta", "'xlm-roberta'"), ("GPT2", "'gpt2'")],
)  # fmt: skip
def test_a_hint_offers_only_the_same_architecture(model_type: str, offered: str | None) -> None:
    with pytest.raises(SpecError) as caught:
        import_config({"model_type": model_type, "hidden_size": 64})
    hint = caught.value.hint or ""
    if offered is None:
        assert "did you mean" not in hint and "architecture of" not in hint
        assert hint.startswith("supported:")
    else:
        assert offered in hint


def test_legacy_fields_transformers_ignores_are_accepted() -> None:
    # distilgpt2's config.json (transformers 2.x): _num_labels and GPT-2's summary fields.
    distilgpt2 = {
        "_num_labels": 1, "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}, "layer_norm_epsilon": 1e-05,
        "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 6,
        "n_positions": 1024, "summary_activation": None, "summary_first_dropout": 0.1,
        "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
        "vocab_size": 50257,
    }  # fmt: skip
    assert import_config(distilgpt2).spec.n_layers == 6
    # distilbart-cnn-12-6: _num_labels, old fairseq fields at BART's values, the distillation
    # script's settings.
    distilbart = {
        "_num_labels": 3, "add_bias_logits": False, "add_final_layer_norm": False,
        "architectures": ["BartForConditionalGeneration"], "d_model": 1024,
        "decoder_attention_heads": 16, "decoder_ffn_dim": 4096, "decoder_layers": 6,
        "encoder_attention_heads": 16, "encoder_ffn_dim": 4096, "encoder_layers": 12,
        "extra_pos_embeddings": 2, "force_bos_token_to_be_generated": True,
        "max_position_embeddings": 1024, "model_type": "bart", "normalize_before": False,
        "normalize_embedding": True, "num_hidden_layers": 12, "replacing_rate": 0,
        "static_position_embeddings": False, "student_decoder_layers": None,
        "student_encoder_layers": None, "vocab_size": 50264,
    }  # fmt: skip
    spec = import_config(distilbart).spec
    assert (spec.n_layers, spec.decoder.n_layers) == (12, 6)
    # A legacy field at a value transformers' class no longer computes is still refused.
    with pytest.raises(SpecError, match="normalize_before"):
        import_config({**distilbart, "normalize_before": True})


# --- OPT --------------------------------------------------------------------------------------


def test_opt_left_padded_batch_equals_transformers(tmp_path: Path) -> None:
    """transformers numbers OPT's positions from the attention mask: a left-padded row starts
    at position 0 at its first real token."""
    hf = tiny("OPTForCausalLM", "OPTConfig", **SMALL_OPT)
    model, _ = checkpoint_and_model(hf, tmp_path)
    torch.manual_seed(1)
    ids = torch.randint(3, 99, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, :4] = 0
    ids[1, :4] = hf.config.pad_token_id
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        got = model(ids, mask)
        assert_close(got[real], ref[real])
        # without a mask, positions are 0..S-1 as before
        assert_close(model(ids[:1]), hf(input_ids=ids[:1]).logits)


OPT_350M = {
    "model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": 1024,
    "word_embed_proj_dim": 512, "ffn_dim": 4096, "num_hidden_layers": 24,
    "num_attention_heads": 16, "do_layer_norm_before": False, "vocab_size": 50272,
    "max_position_embeddings": 2048, "activation_function": "relu", "dropout": 0.1,
    "attention_dropout": 0.0, "enable_bias": True, "layer_norm_elementwise_affine": True,
    "_remove_final_layer_norm": False, "pad_token_id": 1, "bos_token_id": 2, "eos_token_id": 2,
    "init_std": 0.02, "layerdrop": 0.0,
}  # fmt: skip


def test_opt_350m_counts_like_transformers() -> None:
    """OPT-350m's project_in / project_out (word_embed_proj_dim 512 < hidden_size 1024):
    imported, not refused, and counted like OPTForCausalLM on the meta device."""
    from archspec.backends.count.params import parameter_count
    from archspec.ir.build import build_ir
    from tests.test_hf_import import meta_reference

    spec = import_config(OPT_350M).spec
    assert (spec.embedding.dim, spec.embedding.projection) == (512, "around_stack")
    ir = build_ir(spec)
    reference = meta_reference(OPT_350M, "OPTForCausalLM")
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in reference.parameters())


@pytest.mark.parametrize("pre", [False, True])
def test_opt_projected_embeddings_equal_transformers(pre: bool, tmp_path: Path) -> None:
    """A tiny OPT-350m (post-norm, embeddings 16 wide around a 64-wide decoder), and its
    pre-norm variant (project_out after the final norm): logits on a left-padded batch and
    greedy tokens equal transformers'."""
    fields = {**SMALL_OPT, "word_embed_proj_dim": 16, "do_layer_norm_before": pre}
    hf = tiny("OPTForCausalLM", "OPTConfig", **fields)
    model, _ = checkpoint_and_model(hf, tmp_path)
    torch.manual_seed(1)
    ids = torch.randint(3, 99, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, :4] = 0
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(model(ids, mask)[real], ref[real])
        prompt = torch.randint(3, 99, (2, 5))
        expected = hf.generate(
            prompt, max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0,
            eos_token_id=None,
        )  # fmt: skip
        assert torch.equal(model.generate(prompt, 6), expected)


# --- Encoders -------------------------------------------------------------------------------


def right_padded(pad: int, length: int = 10):
    torch.manual_seed(1)
    ids = torch.randint(3, 99, (2, length))
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, length - 3 :] = 0
    ids[1, length - 3 :] = pad
    return ids, mask


def assert_encoder_equal(hf, model) -> None:
    ids, mask = right_padded(hf.config.pad_token_id or 0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).last_hidden_state
        got = model(ids, mask)
    got = got[0] if isinstance(got, tuple) else got
    assert_close(got[real], ref[real])


SMALL_DISTILBERT = dict(
    vocab_size=99, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=32
)


def test_distilbert_equals_transformers(tmp_path: Path) -> None:
    hf = tiny("DistilBertModel", "DistilBertConfig", **SMALL_DISTILBERT)
    with torch.no_grad():  # biases and norms away from their init, so a misplaced one shows
        for name, param in hf.named_parameters():
            if name.endswith("bias") or "layer_norm" in name or "LayerNorm" in name:
                param.normal_(0.0, 0.5)
    model, _ = checkpoint_and_model(hf, tmp_path)
    assert_encoder_equal(hf, model)


def test_distilbert_refuses_what_it_cannot_express() -> None:
    base = {"model_type": "distilbert", **SMALL_DISTILBERT}
    with pytest.raises(SpecError, match="sinusoidal_pos_embds"):
        import_config({**base, "sinusoidal_pos_embds": True})


# --- Factorised embeddings and layers sharing weights ----------------------------------------

SMALL_ALBERT = dict(
    vocab_size=99, hidden_size=64, num_hidden_layers=4, num_hidden_groups=2,
    num_attention_heads=4, intermediate_size=128, max_position_embeddings=32, embedding_size=16,
)  # fmt: skip
SMALL_ELECTRA = dict(
    vocab_size=99, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=128, max_position_embeddings=32, embedding_size=16,
)  # fmt: skip


def randomise_biases_and_norms(hf) -> None:
    """Biases and norms away from their init, so that a misplaced one shows."""
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name:
                param.normal_(0.0, 0.5)


@pytest.mark.parametrize("groups", [1, 2])
def test_albert_equals_transformers(groups: int, tmp_path: Path) -> None:
    hf = tiny("AlbertModel", "AlbertConfig", **{**SMALL_ALBERT, "num_hidden_groups": groups})
    randomise_biases_and_norms(hf)
    model, _ = checkpoint_and_model(hf, tmp_path)
    # Parameters counted once per group, not per layer.
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hf.parameters())
    assert len(model.encoder.blocks) == groups
    assert_encoder_equal(hf, model)
    ids, mask = right_padded(0)
    with torch.no_grad():
        assert_close(model(ids, mask)[1], hf(input_ids=ids, attention_mask=mask).pooler_output)


def test_electra_equals_transformers(tmp_path: Path) -> None:
    hf = tiny("ElectraModel", "ElectraConfig", **SMALL_ELECTRA)
    randomise_biases_and_norms(hf)
    model, _ = checkpoint_and_model(hf, tmp_path)
    assert_encoder_equal(hf, model)


@pytest.mark.parametrize(
    "cls", ["AlbertModel", "AlbertForMaskedLM", "ElectraForPreTraining", "OPTForCausalLM"]
)
def test_shared_layers_flops_equal_flop_counter(cls: str, tmp_path: Path) -> None:
    """Executed forward FLOPs of a tiny ALBERT (4 layers from 2 groups, embeddings projected;
    with the masked-LM head: its transform and projection) equal FlopCounterMode on
    transformers' class: sharing multiplies the work, not the parameters. Likewise ELECTRA's
    discriminator (projected embeddings, the score head) and OPT-350m's project_in/out."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from archspec.backends.count.flops import flop_figures
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec
    from tests.test_flops import EXECUTED, at, values

    config_cls, fields = {
        "ElectraForPreTraining": ("ElectraConfig", SMALL_ELECTRA),
        "OPTForCausalLM": ("OPTConfig", {**SMALL_OPT, "word_embed_proj_dim": 16}),
    }.get(cls, ("AlbertConfig", SMALL_ALBERT))
    hf = tiny(cls, config_cls, **fields)
    hf.save_pretrained(tmp_path / "checkpoint")
    _, spec = generated(tmp_path / "checkpoint", tmp_path)
    ir = build_ir(load_spec(spec))
    ids = torch.randint(0, 99, (2, 12))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        with torch.no_grad():  # the math kernel is the one FlopCounterMode sees on CPU
            hf(input_ids=ids)
    assert at(flop_figures(ir, EXECUTED).forward_matmul, values(ir, 2, 12)) == (
        counter.get_total_flops()
    )


# --- Masked-LM heads -------------------------------------------------------------------------

SMALL_BERT = dict(
    vocab_size=99, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=128, max_position_embeddings=34,
)  # fmt: skip
MLM_CASES = {
    "bert": ("BertForMaskedLM", "BertConfig", SMALL_BERT),
    "roberta": ("RobertaForMaskedLM", "RobertaConfig",
                {**SMALL_BERT, "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5}),
    "roberta-relu": ("RobertaForMaskedLM", "RobertaConfig",
                     {**SMALL_BERT, "type_vocab_size": 1, "pad_token_id": 1, "hidden_act": "relu"}),
    "xlm-roberta": ("XLMRobertaForMaskedLM", "XLMRobertaConfig",
                    {**SMALL_BERT, "type_vocab_size": 1, "pad_token_id": 1}),
    "distilbert": ("DistilBertForMaskedLM", "DistilBertConfig", SMALL_DISTILBERT),
    "albert": ("AlbertForMaskedLM", "AlbertConfig", SMALL_ALBERT),
    "electra-generator": ("ElectraForMaskedLM", "ElectraConfig",
                          {**SMALL_ELECTRA, "hidden_act": "relu"}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MLM_CASES))
def test_masked_lm_head_equals_transformers(case: str, tmp_path: Path) -> None:
    """Logits of the masked-LM classes after load_weights: the transform, the tied decoder and
    the output bias (`cls.predictions.bias` / `lm_head.bias`), at random values."""
    cls, config_cls, fields = MLM_CASES[case]
    hf = tiny(cls, config_cls, **fields)
    randomise_biases_and_norms(hf)
    with torch.no_grad():  # the output bias, wherever the class keeps it
        for name, param in hf.named_parameters():
            if name.endswith("bias") and param.numel() == 99:
                param.normal_(0.0, 0.5)
    model, _ = checkpoint_and_model(hf, tmp_path)
    ids, mask = right_padded(hf.config.pad_token_id or 0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(model(ids, mask)[real], ref[real])


@pytest.mark.parametrize("width", [16, 64])
def test_electra_discriminator_equals_transformers(width: int, tmp_path: Path) -> None:
    """ElectraForPreTraining: one score per token from discriminator_predictions.*, with and
    without a factorised embedding."""
    hf = tiny(
        "ElectraForPreTraining", "ElectraConfig", **{**SMALL_ELECTRA, "embedding_size": width}
    )
    randomise_biases_and_norms(hf)
    model, _ = checkpoint_and_model(hf, tmp_path)
    ids, mask = right_padded(0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        got = model(ids, mask)
    assert got.shape == ref.shape == (2, 10)
    assert_close(got[real], ref[real])


@pytest.mark.parametrize("name", ["bert-base-uncased", "roberta-base"])
def test_published_masked_lm_configs_count_like_transformers(name: str) -> None:
    """The hub's own bert-base-uncased and roberta-base files name their masked-LM class; they
    import as it, and count like it on the meta device."""
    from archspec.backends.count.params import parameter_count
    from archspec.ir.build import build_ir
    from tests.test_hf_import import PUBLISHED, meta_reference

    data = PUBLISHED[name][0]
    imported = import_config(data)
    assert imported.hf_class == data["architectures"][0]
    ir = build_ir(imported.spec)
    reference = meta_reference(data, data["architectures"][0])
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in reference.parameters())


# --- Qwen2-MoE: shared expert, sigmoid gate, top-k without renormalisation --------------------

SMALL_QWEN_MOE = dict(
    vocab_size=99, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, intermediate_size=128, max_position_embeddings=32, num_experts=6,
    num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=80,
    mlp_only_layers=[0], tie_word_embeddings=False,
)  # fmt: skip


def qwen_moe(seed: int = 0, **fields):
    hf = tiny("Qwen2MoeForCausalLM", "Qwen2MoeConfig", seed, **{**SMALL_QWEN_MOE, **fields})
    with torch.no_grad():  # routers, gates and biases away from their init
        for name, param in hf.named_parameters():
            if name.endswith(("gate.weight", "shared_expert_gate.weight", "bias")):
                param.normal_(0.0, 0.5)
    return hf


@pytest.mark.parametrize("normalize", [False, True])
def test_qwen2_moe_equals_transformers(normalize: bool, tmp_path: Path) -> None:
    hf = qwen_moe(norm_topk_prob=normalize)
    model, spec = checkpoint_and_model(hf, tmp_path)
    from archspec.spec.resolve import load_spec

    loaded = load_spec(spec)
    assert loaded.moe is not None and loaded.moe.normalize is normalize
    assert loaded.moe.dense_layers == 1
    torch.manual_seed(1)
    ids = torch.randint(3, 99, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(model(ids, mask)[real], ref[real])
        if normalize:
            return  # greedy decoding once is enough: it is slow in transformers' MoE
        prompt = torch.randint(3, 99, (2, 5))
        expected = hf.generate(
            prompt, max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0,
            eos_token_id=None,
        )  # fmt: skip
        assert torch.equal(model.generate(prompt, 6), expected)


def test_qwen2_moe_flops_equal_flop_counter(tmp_path: Path) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from archspec.backends.count.flops import flop_figures
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec
    from tests.test_flops import EXECUTED, at, values

    hf = qwen_moe()
    hf.set_experts_implementation("eager")  # the loop over experts FlopCounterMode counts
    hf.save_pretrained(tmp_path / "checkpoint")
    _, spec = generated(tmp_path / "checkpoint", tmp_path)
    ir = build_ir(load_spec(spec))
    ids = torch.randint(0, 99, (2, 12))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        with torch.no_grad():
            hf(input_ids=ids)
    assert at(flop_figures(ir, EXECUTED).forward_matmul, values(ir, 2, 12)) == (
        counter.get_total_flops()
    )


def test_qwen2_moe_refuses_sparse_steps() -> None:
    base = {"model_type": "qwen2_moe", **SMALL_QWEN_MOE, "mlp_only_layers": []}
    with pytest.raises(SpecError, match="decoder_sparse_step"):
        import_config({**base, "decoder_sparse_step": 2})
    with pytest.raises(SpecError, match="mlp_only_layers"):
        import_config({**base, "mlp_only_layers": [1]})
    with pytest.raises(SpecError, match="use_sliding_window"):
        import_config({**base, "use_sliding_window": True})


def test_qwen_moe_active_parameters() -> None:
    """A token touches the router, 4 of 60 experts, the shared expert and its gate (and all
    the rest): the total less 56 experts per MoE layer, measured on transformers' modules."""
    from archspec.backends.count.params import parameter_count
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec
    from tests.hf_reference import build_meta

    hf = build_meta("qwen1.5-moe-a2.7b")
    experts = hf.model.layers[0].mlp.experts
    per_expert = sum(p.numel() for p in experts.parameters()) // 60
    expected = sum(p.numel() for p in hf.parameters()) - 24 * 56 * per_expert
    ir = build_ir(load_spec("qwen1.5-moe-a2.7b"))
    assert ir.value(parameter_count(ir.root, active=True)) == expected
