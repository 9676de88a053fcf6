"""transformers checkpoints in generated models: numerically equal, strictly loaded.

For every family: a small random transformers model (2 layers, d_model 64) is saved with
`save_pretrained`; `archspec import-hf` turns its config.json into a spec, `archspec build`
generates the code, `archspec.hf.load_weights` fills it from the folder, and the outputs are
compared in eval mode, float32, on a right-padded batch (unpadded positions only). Decoders
also generate greedily, token for token like transformers' `generate`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from archspec.backends.torchgen import load_generated
from archspec.cli import app
from archspec.errors import SpecError
from archspec.hf.weights import convert, load_weights, read_state_dict
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

runner = CliRunner()
VOCAB = 99
SMALL = {"vocab_size": VOCAB}

# family: (transformers class, config class, config fields)
# fmt: off
FAMILIES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "bert": ("BertModel", "BertConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=32)),
    "roberta": ("RobertaModel", "RobertaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=34, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(
        n_embd=64, n_layer=2, n_head=4, n_positions=32, bos_token_id=0, eos_token_id=0)),
    "openai-gpt": ("OpenAIGPTLMHeadModel", "OpenAIGPTConfig", dict(
        n_embd=64, n_layer=2, n_head=4, n_positions=32)),
    "t5": ("T5ForConditionalGeneration", "T5Config", dict(
        d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)),
    "t5-v1.1": ("T5ForConditionalGeneration", "T5Config", dict(
        d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
    # what transformers 5 itself writes for T5 v1.1: a tied head, unscaled decoder output
    "t5-v1.1-tied": ("T5ForConditionalGeneration", "T5Config", dict(
        d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
    "bart": ("BartForConditionalGeneration", "BartConfig", dict(
        d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
        max_position_embeddings=32)),
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32)),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=64, sliding_window=64)),
    # a real window (4), shorter than the batch (10) and the generated sequences (13)
    "mistral-window": ("MistralForCausalLM", "MistralConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=64, sliding_window=4)),
    # head_dim 32 of 4 heads over d_model 64; the weights of its (1 + w) norms are drawn at
    # random (transformers starts them at zero, where 1 + w and w would agree with 1)
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
        head_dim=32, intermediate_size=128, max_position_embeddings=32, hidden_act="gelu")),
    # windowed (4) and full layers alternating, soft-capped scores and logits (caps small
    # enough to bend the values here), scores scaled by query_pre_attn_scalar, not head_dim
    "gemma2": ("Gemma2ForCausalLM", "Gemma2Config", dict(
        hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, intermediate_size=128, max_position_embeddings=32, sliding_window=4,
        query_pre_attn_scalar=24, attn_logit_softcapping=2.0, final_logit_softcapping=0.5)),
    "mixtral": ("MixtralForCausalLM", "MixtralConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32, num_local_experts=4)),
    "mixtral-window": ("MixtralForCausalLM", "MixtralConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32, num_local_experts=4,
        sliding_window=4)),
    "bloom": ("BloomForCausalLM", "BloomConfig", dict(hidden_size=64, n_layer=2, n_head=4)),
    "opt": ("OPTForCausalLM", "OPTConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
        max_position_embeddings=32, word_embed_proj_dim=64)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32)),
    # per-head q/k norms (weights drawn at random), head_dim 32 of 4 heads over d_model 64
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, intermediate_size=128, max_position_embeddings=32)),
    "xlm-roberta": ("XLMRobertaModel", "XLMRobertaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=34, type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)),
    # tied, as transformers 5 builds it: unscaled, where T5's tied head is scaled
    "mt5": ("MT5ForConditionalGeneration", "MT5Config", dict(
        d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)),
    # RoPE scaling: sequences (10, and 13 generating) past llama3's original length (8); theta
    # 100 puts the 8 wavelengths (6.3 to 353) in all three llama3 bands (< 8, 8 to 64, > 64).
    "llama-rope-linear": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32,
        rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 100.0})),
    "llama-rope-llama3": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32,
        rope_parameters={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 0.125,
                         "high_freq_factor": 1.0, "original_max_position_embeddings": 8,
                         "rope_theta": 100.0})),
    # YaRN: factor 4 over an original context of 8, past it; theta 100 puts the channels on
    # both sides of the ramp (beta_fast 4, beta_slow 1 over 8 positions).
    "llama-rope-yarn": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32,
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "beta_fast": 4.0, "beta_slow": 1.0,
                         "original_max_position_embeddings": 8, "rope_theta": 100.0})),
    # gpt-oss's YaRN (theta 150000, factor 32, betas 32 and 1, truncate false) over an original
    # context of 1024, which puts the ramp's unrounded ends inside the 8 pairs (2.2, 6.8).
    "llama-rope-yarn-unrounded": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32,
        rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "truncate": False, "original_max_position_embeddings": 1024,
                         "rope_theta": 150000.0})),
    # Dynamic NTK past an original context of 8: the batch (10) grows the base, generation's
    # prompt (5) restores it and its steps (6 to 13) grow it again, in both implementations.
    "llama-rope-dynamic": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=8,
        rope_parameters={"rope_type": "dynamic", "factor": 4.0, "rope_theta": 100.0})),
    # LongRoPE over an original context of 8, factor given (its default attention factor
    # sqrt(1 + ln 2 / ln 8)): the batch (10) takes the long factors, generation's prompt (5)
    # the short ones and its steps from 9 positions on the long ones, in both.
    "llama-rope-longrope": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32,
        rope_parameters={"rope_type": "longrope", "factor": 2.0,
                         "short_factor": [1.0 + 0.1 * i for i in range(8)],
                         "long_factor": [2.0 + 0.3 * i for i in range(8)],
                         "original_max_position_embeddings": 8, "rope_theta": 100.0})),
    # and on a partial rotation (the exponent's dim is the rotated channels, 8 of 16)
    "gpt_neox-rope-dynamic": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=8, rope_parameters={
            "rope_type": "dynamic", "factor": 2.0, "rope_theta": 100.0,
            "partial_rotary_factor": 0.5})),
    # YaRN with DeepSeek's mscale pair on GPT-NeoX's partial rotation.
    "gpt_neox-rope-yarn": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=32,
        rope_parameters={"rope_type": "yarn", "factor": 4.0, "mscale": 1.0,
                         "mscale_all_dim": 0.5, "original_max_position_embeddings": 8,
                         "rope_theta": 100.0, "partial_rotary_factor": 0.5})),
    "gpt_bigcode": ("GPTBigCodeForCausalLM", "GPTBigCodeConfig", dict(
        n_embd=64, n_layer=2, n_head=4, n_positions=32, bos_token_id=0, eos_token_id=0)),
    # Partial rotary (a quarter of head_dim 16), attention and MLP from two norms in parallel.
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=32, rotary_pct=0.25)),
    "gpt_neox-sequential": ("GPTNeoXForCausalLM", "GPTNeoXConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=32, rotary_pct=0.5, use_parallel_residual=False)),
    # Interleaved rotation of 8 of 16 channels, attention and MLP from one norm.
    "gptj": ("GPTJForCausalLM", "GPTJConfig", dict(
        n_embd=64, n_layer=2, n_head=4, n_positions=32, rotary_dim=8, bos_token_id=0,
        eos_token_id=0)),
    # A rotated fraction (0.375 of head_dim 16: 6 channels), grouped keys and values.
    "phi": ("PhiForCausalLM", "PhiConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32, partial_rotary_factor=0.375)),
    # Falcon 7B: multi-query, one norm; 40B: grouped keys and values, a norm per branch;
    # and the pre-norm block of parallel_attn false, with biases and a head per key/value.
    "falcon": ("FalconForCausalLM", "FalconConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, multi_query=True,
        new_decoder_architecture=False, parallel_attn=True)),
    "falcon-new": ("FalconForCausalLM", "FalconConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=8, num_kv_heads=2,
        new_decoder_architecture=True)),
    "falcon-sequential": ("FalconForCausalLM", "FalconConfig", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, multi_query=False,
        new_decoder_architecture=False, parallel_attn=False, bias=True)),
    # Phi-3-mini-4k's every-layer window, made short (4): shorter than the batch (10) and the
    # generated sequences (13).
    "phi3-window": ("Phi3ForCausalLM", "Phi3Config", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32, sliding_window=4, pad_token_id=0)),
    # Fused qkv_proj (grouped keys and values) and gate_up_proj; a partial rotation.
    "phi3": ("Phi3ForCausalLM", "Phi3Config", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32, sliding_window=None,
        partial_rotary_factor=0.5, pad_token_id=0)),
    # Phi-3's long-context LongRoPE as its 4.x configs write it (original context at the top
    # level, no factor: 32 / 8), on 8 rotated channels of 16 (4 pairs).
    "phi3-longrope": ("Phi3ForCausalLM", "Phi3Config", dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=32, sliding_window=None,
        partial_rotary_factor=0.5, pad_token_id=0, original_max_position_embeddings=8,
        rope_parameters={"rope_type": "longrope", "rope_theta": 100.0,
                         "short_factor": [1.0 + 0.1 * i for i in range(4)],
                         "long_factor": [2.0 + 0.3 * i for i in range(4)]})),
}
# fmt: on

ATOL = 1e-5  # and torch.allclose's default rtol (1e-5)

# Families whose biases transformers initialises to zero, where a bias loaded into the wrong
# tensor (or not at all) would go unseen: their biases are drawn at random.
RANDOM_BIASES = {"qwen2", "xlm-roberta", "gpt_bigcode", "gpt_neox", "gpt_neox-sequential", "gptj"}


def hf_model(family: str, seed: int = 0):
    cls, config_cls, fields = FAMILIES[family]
    config = getattr(transformers, config_cls)(**SMALL, **fields)
    config.architectures = [cls]
    torch.manual_seed(seed)
    model = getattr(transformers, cls)(config).eval()
    if family in RANDOM_BIASES:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith(".bias"):
                    param.normal_(0.0, 0.5)
    if family in ("gemma", "gemma2", "qwen3"):
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "norm" in name:
                    param.normal_(0.0, 0.5)
    if family == "t5-v1.1":
        # transformers 5 always ties T5's head; a T5 v1.1 / FLAN-T5 checkpoint keeps its own
        # lm_head.weight and says tie_word_embeddings: false. Build one like that.
        model.lm_head.weight = torch.nn.Parameter(torch.randn(VOCAB, 64) * 0.05)
    return model


def save(model, folder: Path, family: str) -> Path:
    model.save_pretrained(folder)
    if family == "t5-v1.1":
        config = json.loads((folder / "config.json").read_text())
        config["tie_word_embeddings"] = False
        config.pop("scale_decoder_outputs")
        (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def generated(checkpoint: Path, tmp_path: Path):
    """import-hf + build on the checkpoint's config.json: the generated module."""
    spec = tmp_path / "spec.yaml"
    code = tmp_path / "model.py"
    cli("import-hf", str(checkpoint / "config.json"), "-o", str(spec))
    cli("build", str(spec), "-o", str(code))
    return load_generated(code.read_text(), tmp_path), spec


def batch(pad: int, length: int = 10, padding: int = 3):
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB, (2, length))
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, length - padding :] = 0
    ids[1, length - padding :] = pad
    return ids, mask


def assert_close(got: torch.Tensor, ref: torch.Tensor) -> None:
    diff = (got - ref).abs().max().item()
    assert torch.allclose(got, ref, atol=ATOL), f"max abs diff {diff:.3g}"


def greedy_hf(model, ids: torch.Tensor, steps: int, **kwargs: Any) -> torch.Tensor:
    return model.generate(
        ids,
        max_new_tokens=steps,
        min_new_tokens=steps,
        do_sample=False,
        num_beams=1,
        pad_token_id=0,
        eos_token_id=None,
        forced_eos_token_id=None,
        forced_bos_token_id=None,
        **kwargs,
    )


@pytest.mark.parametrize("family", list(FAMILIES))
def test_generated_model_equals_transformers(family: str, tmp_path: Path) -> None:
    hf = hf_model(family)
    checkpoint = save(hf, tmp_path / "checkpoint", family)
    module, spec_path = generated(checkpoint, tmp_path)
    model = load_weights(module.Model(module.Config()).eval(), checkpoint)
    layout = load_spec(spec_path).layout
    pad = hf.config.pad_token_id if hf.config.pad_token_id is not None else 0
    ids, mask = batch(pad)
    real = mask.bool()
    with torch.no_grad():
        if layout == "encoder":
            out = hf(input_ids=ids, attention_mask=mask)
            hidden, pooled = model(ids, mask)
            assert_close(hidden[real], out.last_hidden_state[real])
            assert_close(pooled, out.pooler_output)
        elif layout == "decoder":
            ref = hf(input_ids=ids, attention_mask=mask).logits
            assert_close(model(ids, mask)[real], ref[real])
        else:
            decoder_ids = torch.randint(3, VOCAB, (2, 6))
            ref = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
            assert_close(model(ids, decoder_ids, mask), ref)

        steps = 8
        if layout == "decoder":
            prompt = torch.randint(3, VOCAB, (2, 5))
            assert torch.equal(model.generate(prompt, steps), greedy_hf(hf, prompt, steps))
        elif layout == "encoder-decoder":
            start = hf.generation_config.decoder_start_token_id
            start = hf.config.pad_token_id if start is None else start  # T5 starts with pad
            expected = greedy_hf(hf, ids, steps, attention_mask=mask, decoder_start_token_id=start)
            tokens = torch.full((2, 1), start)
            for _ in range(steps):
                step = model(ids, tokens, mask)[:, -1].argmax(-1, keepdim=True)
                tokens = torch.cat([tokens, step], dim=1)
            assert torch.equal(tokens, expected)


@pytest.mark.parametrize(
    ("family", "cls"),
    [("gpt2", "GPT2Model"), ("llama", "LlamaModel"), ("bart", "BartModel"),
     ("t5", "T5EncoderModel")],
)  # fmt: skip
def test_base_model_classes_give_hidden_states(family: str, cls: str, tmp_path: Path) -> None:
    """Without a head (the transformers base classes), the generated model returns the last
    hidden states; the checkpoint keys carry no base-model prefix."""
    _, config_cls, fields = FAMILIES[family]
    config = getattr(transformers, config_cls)(**SMALL, **fields)
    config.architectures = [cls]
    torch.manual_seed(0)
    hf = getattr(transformers, cls)(config).eval()
    hf.save_pretrained(tmp_path / "checkpoint")
    module, spec = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    ids, mask = batch(config.pad_token_id if config.pad_token_id is not None else 0)
    real = mask.bool()
    with torch.no_grad():
        if load_spec(spec).layout == "encoder-decoder":
            decoder_ids = torch.randint(3, VOCAB, (2, 6))
            ref = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
            assert_close(model(ids, decoder_ids, mask), ref.last_hidden_state)
        else:
            ref = hf(input_ids=ids, attention_mask=mask).last_hidden_state
            assert_close(model(ids, mask)[real], ref[real])


def test_build_writes_converted_weights_next_to_the_code(tmp_path: Path) -> None:
    hf = hf_model("gpt2")
    checkpoint = save(hf, tmp_path / "checkpoint", "gpt2")
    spec = tmp_path / "gpt2-small.yaml"
    cli("import-hf", str(checkpoint), "-o", str(spec))
    summary = json.loads(
        cli(
            "build",
            str(spec),
            "--hf-weights",
            str(checkpoint),
            "-o",
            str(tmp_path / "model.py"),
            "--json",
        )
    )
    weights = tmp_path / "model.safetensors"
    assert summary["weights"] == str(weights) and weights.is_file()
    module = load_generated((tmp_path / "model.py").read_text(), tmp_path)
    ids, mask = batch(0)
    with torch.no_grad():
        ref = hf(input_ids=ids).logits
        # plain safetensors (strict; the tied head is stored once) ...
        model = module.Model().eval()
        missing, unexpected = safetensors_torch.load_model(model, str(weights))
        assert (missing, unexpected) == (set(), [])
        assert_close(model(ids), ref)
        # ... or load_weights, which reads archspec's names as well as transformers'
        model = load_weights(module.Model().eval(), weights)
        assert_close(model(ids), ref)


def test_build_refuses_weights_of_another_model(tmp_path: Path) -> None:
    checkpoint = save(hf_model("gpt2"), tmp_path / "checkpoint", "gpt2")
    out = tmp_path / "model.py"
    result = runner.invoke(app, ["build", "gpt2", "--hf-weights", str(checkpoint), "-o", str(out)])
    assert result.exit_code == 2
    assert "'transformer.wte.weight' has shape 99 × 64" in result.stderr
    assert not out.exists()
    result = runner.invoke(app, ["build", "gpt2", "--hf-weights", str(checkpoint)])
    assert result.exit_code == 2 and "needs -o" in result.stderr


# --- Checkpoint formats ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt2_case(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpt2")
    hf = hf_model("gpt2")
    checkpoint = save(hf, tmp / "checkpoint", "gpt2")
    module, spec = generated(checkpoint, tmp)
    ids, _ = batch(0)
    with torch.no_grad():
        ref = hf(input_ids=ids).logits
    return hf, module, spec, ids, ref


def check_loads(case, source, **kwargs) -> None:
    hf, module, spec, ids, ref = case
    model = load_weights(module.Model().eval(), source, spec=spec, **kwargs)
    with torch.no_grad():
        assert_close(model(ids), ref)


def test_sharded_safetensors(gpt2_case, tmp_path: Path) -> None:
    gpt2_case[0].save_pretrained(tmp_path, max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    check_loads(gpt2_case, tmp_path)


def test_pytorch_bin_plain_and_sharded(gpt2_case, tmp_path: Path) -> None:
    state = gpt2_case[0].state_dict()
    torch.save(state, tmp_path / "pytorch_model.bin")
    check_loads(gpt2_case, tmp_path)
    check_loads(gpt2_case, tmp_path / "pytorch_model.bin")
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    keys = list(state)
    weight_map = {}
    for n, part in enumerate((keys[: len(keys) // 2], keys[len(keys) // 2 :])):
        name = f"pytorch_model-0000{n + 1}-of-00002.bin"
        torch.save({k: state[k] for k in part}, sharded / name)
        weight_map.update({k: name for k in part})
    (sharded / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
    check_loads(gpt2_case, sharded)


def test_hub_style_gpt2_checkpoint(gpt2_case) -> None:
    """The hub's GPT-2 files: saved from GPT2Model (no `transformer.` prefix, no lm_head),
    with each block's causal-mask buffers."""
    hf = gpt2_case[0]
    state = {k.removeprefix("transformer."): v for k, v in hf.state_dict().items()}
    del state["lm_head.weight"]
    for i in range(2):
        state[f"h.{i}.attn.bias"] = torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32)
        state[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    check_loads(gpt2_case, state)
    state["h.0.attn.bias"] = torch.ones(1, 1, 32, 32)
    with pytest.raises(SpecError, match="'h.0.attn.bias' is not a causal"):
        check_loads(gpt2_case, state)


def test_mixtral_in_memory_state_dict_with_fused_experts(tmp_path: Path) -> None:
    """transformers 5 holds Mixtral's experts stacked (gate_up_proj, down_proj) in memory and
    writes them per expert (w1, w2, w3) to files: both load."""
    hf = hf_model("mixtral")
    assert any(k.endswith("experts.gate_up_proj") for k in hf.state_dict())
    checkpoint = save(hf, tmp_path / "checkpoint", "mixtral")
    module, spec = generated(checkpoint, tmp_path)
    ids, _ = batch(0)
    model = load_weights(module.Model().eval(), hf.state_dict(), spec=spec)
    with torch.no_grad():
        assert_close(model(ids), hf(input_ids=ids).logits)


def test_bert_pretraining_checkpoint_into_bert_model(tmp_path: Path) -> None:
    """A BertForPreTraining checkpoint (`bert.` prefix, `cls.*` heads) loads into BertModel's
    spec once the heads are ignored on purpose."""
    _, config_cls, fields = FAMILIES["bert"]
    config = transformers.BertConfig(**SMALL, **fields)
    torch.manual_seed(0)
    pretraining = transformers.BertForPreTraining(config).eval()
    module, spec = generated(save(hf_model("bert"), tmp_path / "ckpt", "bert"), tmp_path)
    state = pretraining.state_dict()
    with pytest.raises(
        SpecError, match="tensors 'cls.predictions.bias'.* have no place in the spec"
    ):
        load_weights(module.Model().eval(), state, spec=spec)
    # the hub's bert-base-uncased files still name LayerNorm's parameters gamma and beta
    state = {
        k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        ): v
        for k, v in state.items()
    }
    model = load_weights(module.Model().eval(), state, spec=spec, ignore=["cls.*"])
    ids, mask = batch(0)
    with torch.no_grad():
        out = pretraining.bert(input_ids=ids, attention_mask=mask)
        hidden, pooled = model(ids, mask)
    real = mask.bool()
    assert_close(hidden[real], out.last_hidden_state[real])
    assert_close(pooled, out.pooler_output)
    # a masked-LM checkpoint has no pooler: the error says what to change
    no_pooler = {k: v for k, v in state.items() if not k.startswith("bert.pooler")}
    with pytest.raises(SpecError, match="no 'bert.pooler.dense.bias'") as error:
        load_weights(module.Model().eval(), no_pooler, spec=spec, ignore=["cls.*"])
    assert "pooler: false" in str(error.value)
    # the same through the command line
    pretraining.save_pretrained(tmp_path / "pretraining")
    code = str(tmp_path / "bert.py")
    args = ["build", str(spec), "--hf-weights", str(tmp_path / "pretraining"), "-o", code]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--hf-ignore" in result.stderr
    cli(*args, "--hf-ignore", "cls.*", "--force")
    model = load_weights(module.Model().eval(), tmp_path / "bert.safetensors")
    with torch.no_grad():
        assert_close(model(ids, mask)[1], out.pooler_output)


# --- Strictness ------------------------------------------------------------------------------


def ir_of(spec) -> Any:
    return build_ir(load_spec(spec))


def test_every_tensor_used_every_parameter_filled_shapes_checked(gpt2_case) -> None:
    hf, module, spec, _, _ = gpt2_case
    ir = ir_of(spec)
    state = dict(hf.state_dict())
    assert set(convert(ir, state)) == {
        k for k in module.Model().state_dict() if k != "lm_head.weight"
    }
    with pytest.raises(SpecError, match="'transformer.extra.weight' has no place"):
        convert(ir, {**state, "transformer.extra.weight": torch.zeros(1)})
    missing = {k: v for k, v in state.items() if k != "transformer.h.1.ln_2.bias"}
    with pytest.raises(
        SpecError, match="no 'transformer.h.1.ln_2.bias'.*decoder.blocks.1.mlp_norm"
    ):
        convert(ir, missing)
    bad = {**state, "transformer.h.0.attn.c_attn.weight": torch.zeros(64, 64)}
    with pytest.raises(
        SpecError, match="c_attn.weight' has shape 64 × 64, but the spec needs 64 × 192"
    ):
        convert(ir, bad)
    untied = {**state, "lm_head.weight": torch.randn(VOCAB, 64)}
    with pytest.raises(SpecError, match="should be one tied tensor"):
        convert(ir, untied)
    # a different model's parameters
    other = load_generated(cli("build", str(spec), "--set", "n_layers=3"), None).Model()
    with pytest.raises(SpecError, match="no tensor for the model's parameter 'decoder.blocks.2"):
        load_weights(other, state, spec=spec)


def test_buffers_are_checked(tmp_path: Path) -> None:
    bart = hf_model("bart")
    ir = build_ir(load_spec(cli_import(bart, tmp_path)))
    state = dict(bart.state_dict())
    convert(ir, state)
    state["final_logits_bias"] = torch.ones(1, VOCAB)
    with pytest.raises(SpecError, match="'final_logits_bias' is not all zeros"):
        convert(ir, state)
    llama = hf_model("llama")
    ir = build_ir(load_spec(cli_import(llama, tmp_path / "llama")))
    state = dict(llama.state_dict())
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 16, 2).float() / 16))
    convert(ir, {**state, "model.layers.0.self_attn.rotary_emb.inv_freq": inv_freq})
    with pytest.raises(SpecError, match="rope theta"):
        convert(ir, {**state, "model.layers.0.self_attn.rotary_emb.inv_freq": inv_freq * 2})


def cli_import(model, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.config.to_json_file(folder / "config.json")
    cli("import-hf", str(folder), "-o", str(folder / "spec.yaml"))
    return folder / "spec.yaml"


def test_unreadable_sources(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no checkpoint in"):
        read_state_dict(tmp_path)
    with pytest.raises(SpecError, match="no such checkpoint"):
        read_state_dict(tmp_path / "nope.safetensors")
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}})
    )
    with pytest.raises(SpecError, match="missing"):
        read_state_dict(tmp_path)
    small = ["n_layers=1", "d_model=64", "n_heads=4", "d_ff=128", "vocab_size=99"]
    module = load_generated(cli("build", "gpt2", *(f"--set={s}" for s in small)), tmp_path)
    with pytest.raises(SpecError, match="needs the model's spec"):
        load_weights(module.Model(), {"x": torch.zeros(1)})
