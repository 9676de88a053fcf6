"""Issue 18, OLMo, OLMo-2 and Granite: each family against transformers' own classes.

Per family: the public config.json of a real size imports to a spec whose total equals the
transformers class on the meta device; a tiny random transformers model, saved and loaded into
the generated model with `load_weights`, gives the same logits (fp32) on a right-padded batch
and the same greedy tokens; the executed forward FLOPs equal FlopCounterMode on the
transformers model; `print(model)` of the generated model equals archspec's printer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sympy as sp
import torch

from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import B, S, flop_figures
from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr
from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from archspec.hf.weights import load_weights
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.test_hf_weights import assert_close, batch, generated, greedy_hf

transformers = pytest.importorskip("transformers")

VOCAB = 99

# Public config.json files (huggingface.co/<repo>/blob/main/config.json), tokenizer and
# generation fields left out.
# fmt: off
OLMO_1B = {  # allenai/OLMo-1B-hf
    "architectures": ["OlmoForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "clip_qkv": None, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 2048, "model_type": "olmo",
    "num_attention_heads": 16, "num_hidden_layers": 16, "num_key_value_heads": 16,
    "pretraining_tp": 1, "rope_scaling": None, "rope_theta": 10000.0,
    "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True,
    "vocab_size": 50304,
}
OLMO_2_7B = {  # allenai/OLMo-2-1124-7B
    "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 11008, "max_position_embeddings": 4096, "model_type": "olmo2",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 500000,
    "tie_word_embeddings": False, "torch_dtype": "float32", "use_cache": True,
    "vocab_size": 100352,
}
GRANITE_3_2B = {  # ibm-granite/granite-3.0-2b-instruct
    "architectures": ["GraniteForCausalLM"], "attention_bias": False, "attention_dropout": 0.1,
    "attention_multiplier": 0.015625, "bos_token_id": 0, "embedding_multiplier": 12.0,
    "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 8192, "logits_scaling": 8.0, "max_position_embeddings": 4096,
    "mlp_bias": False, "model_type": "granite", "num_attention_heads": 32,
    "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
    "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 49155,
}
REAL = {"olmo": OLMO_1B, "olmo2": OLMO_2_7B, "granite": GRANITE_3_2B}

# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # grouped keys and values, biases on the four projections (drawn at random)
    "olmo": ("OlmoForCausalLM", dict(
        model_type="olmo", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=32,
        attention_bias=True, pad_token_id=0)),
    # clip_qkv small enough (0.5) to clamp many of these random projections' values
    "olmo-clip": ("OlmoForCausalLM", dict(
        model_type="olmo", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=32,
        clip_qkv=0.5, pad_token_id=0)),
    # norms on the sublayers' outputs, q/k norms over all heads (weights drawn at random)
    "olmo2": ("Olmo2ForCausalLM", dict(
        model_type="olmo2", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=32,
        rms_norm_eps=1e-6, pad_token_id=0)),
    # granite-3.0-2b's multipliers, the attention's a quarter of 1/sqrt(head_dim 16)
    "granite": ("GraniteForCausalLM", dict(
        model_type="granite", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=32,
        embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0625,
        logits_scaling=8.0, attention_bias=True, mlp_bias=True, pad_token_id=0)),
    # Qwen2's window (4, shorter than the batch's 10 and the generated 13 tokens) on the
    # layers from max_window_layers (1) on: window_pattern GLL
    "qwen2-window": ("Qwen2ForCausalLM", dict(
        model_type="qwen2", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=32,
        use_sliding_window=True, sliding_window=4, max_window_layers=1, pad_token_id=0)),
    # Qwen3's, from an explicit layer_types (as transformers 5 saves it): window_pattern LG
    "qwen3-window": ("Qwen3ForCausalLM", dict(
        model_type="qwen3", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, intermediate_size=128, max_position_embeddings=32,
        use_sliding_window=True, sliding_window=4, pad_token_id=0,
        layer_types=["sliding_attention", "full_attention"])),
}
# fmt: on


def hf_class(name: str):
    cls, fields = TINY[name]
    config = transformers.AutoConfig.for_model(**{"vocab_size": VOCAB, **fields})
    config.architectures = [cls]
    return getattr(transformers, cls), config


def tiny_model(name: str):
    cls, config = hf_class(name)
    torch.manual_seed(0)
    model = cls(config).eval()
    with torch.no_grad():
        # transformers starts biases at zero and norm weights at one, where a tensor loaded
        # into the wrong place (or not at all) would go unseen: draw them at random.
        for key, param in model.named_parameters():
            if key.endswith(".bias") or "norm" in key:
                param.normal_(0.0, 0.5)
    return model


def our_total(config: dict[str, Any]) -> int:
    ir = build_ir(import_config(config).spec)
    return ir.value(parameter_count(ir.root))


@pytest.mark.parametrize("name", list(REAL))
def test_real_size_total_equals_the_transformers_class(name: str) -> None:
    config = REAL[name]
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**config)
        )
    assert our_total(config) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("name", "builtin"), [("olmo", "olmo-1b"), ("olmo2", "olmo-2-7b"), ("granite", "granite-3-2b")]
)
def test_real_config_imports_to_the_builtin(name: str, builtin: str) -> None:
    from tests.test_rotary_families import architecture

    assert architecture(import_config(REAL[name]).spec) == architecture(load_spec(builtin))


@pytest.mark.parametrize("name", list(TINY))
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    hf = tiny_model(name)
    hf.save_pretrained(tmp_path / "checkpoint")
    module, spec = generated(tmp_path / "checkpoint", tmp_path)
    model = load_weights(module.Model().eval(), tmp_path / "checkpoint")
    assert repr(model) == module_repr(build_ir(load_spec(spec)))
    ids, mask = batch(0)
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=ids, attention_mask=mask).logits
        assert_close(model(ids, mask)[real], ref[real])
        prompt = torch.randint(3, VOCAB, (2, 5))
        assert torch.equal(model.generate(prompt, 8), greedy_hf(hf, prompt, 8))


@pytest.mark.parametrize("name", list(TINY))
def test_executed_flops_equal_flop_counter_on_the_transformers_class(name: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    cls, config = hf_class(name)
    with torch.device("meta"):
        model = cls(config)
    ir = build_ir(import_config({**config.to_dict(), "architectures": [cls.__name__]}).spec)
    figures = flop_figures(ir, CONVENTIONS["executed"])
    b, s = 2, 24
    with FlopCounterMode(display=False) as counter:
        model(torch.zeros(b, s, dtype=torch.long, device="meta"))
    expected = sp.sympify(figures.forward_matmul).xreplace({**ir.env, B: b, S: s})
    assert int(expected) == counter.get_total_flops()


# --- OLMo ------------------------------------------------------------------------------------


def test_olmo_norms_have_no_parameters_and_compute_in_float32(tmp_path: Path) -> None:
    from transformers.models.olmo.modeling_olmo import OlmoLayerNorm

    from archspec.backends.count.params import parameter_rows
    from archspec.backends.torchgen import generate_source, load_generated

    ir = build_ir(import_config({**TINY["olmo"][1], "architectures": ["OlmoForCausalLM"]}).spec)
    assert not [row.name for row in parameter_rows(ir) if "norm" in row.name]
    module = load_generated(generate_source(ir), tmp_path)
    ours = module.NonParametricLayerNorm(80, eps=1e-5, elementwise_affine=False)
    assert list(ours.parameters()) == []
    # in bfloat16, where computing in float32 (as OlmoLayerNorm does) makes a difference
    torch.manual_seed(0)
    x = torch.randn(3, 5, 80).to(torch.bfloat16) * 4 + 1
    assert torch.equal(ours(x), OlmoLayerNorm(80)(x))


def test_olmo_clip_qkv_clamps_q_k_and_v(tmp_path: Path) -> None:
    """clip_qkv becomes attention.clip_qkv; it changes transformers' own logits here (so the
    equality above is not that of two unclamped models); the generated model keeps what its
    counter says (saved_tensors_hooks, in training); each clamp costs 2 FLOPs per element."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from archspec.backends.count.memory import activation_bytes
    from archspec.backends.torchgen import generate_source, load_generated
    from tests.test_memory import saved_bytes

    assert import_config({**OLMO_1B, "clip_qkv": 8.0}).spec.attention.clip_qkv == 8.0
    cls, config = hf_class("olmo-clip")
    clamped = tiny_model("olmo-clip")
    config.clip_qkv = None
    free = cls(config).eval()
    free.load_state_dict(clamped.state_dict())
    ids, _ = batch(0)
    with torch.no_grad():
        assert (clamped(input_ids=ids).logits - free(input_ids=ids).logits).abs().max() > 1e-3

    b, s = 2, 12
    tokens = torch.randint(0, VOCAB, (b, s))

    def loss(logits):
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())

    def kept(clip: float | None):
        """(predicted, measured) bytes kept for backward, SDPA's math path."""
        fields = {**config.to_dict(), "clip_qkv": clip, "architectures": [cls.__name__]}
        ir = build_ir(import_config(fields).spec)
        folder = tmp_path / f"clip-{clip}"
        folder.mkdir()
        model = load_generated(generate_source(ir), folder).Model().train()
        with sdpa_kernel(SDPBackend.MATH):
            measured = saved_bytes(model, (tokens,), loss)
        predicted = activation_bytes(ir, 4, "eager", device="cpu").xreplace({**ir.env, B: b, S: s})
        return int(predicted), measured, ir

    predicted, measured, ir = kept(0.5)
    predicted_free, measured_free, plain = kept(None)
    # The clamps keep their inputs, q, k and v as projected: exactly what the counter adds.
    assert predicted - predicted_free == measured - measured_free > 0
    assert predicted == pytest.approx(measured, rel=0.01)

    def forward(ir) -> int:
        figures = flop_figures(ir, CONVENTIONS["executed"])
        return int(sp.sympify(figures.forward).xreplace({**ir.env, B: b, S: s}))

    q, kv = 4 * 16, 2 * 16  # the projections' widths: 4 heads of 16, 2 key/value heads
    assert forward(ir) - forward(plain) == 2 * 2 * b * s * (q + 2 * kv)  # 2 layers


# --- OLMo 2 ----------------------------------------------------------------------------------


def test_olmo2_blocks_norm_the_outputs_and_all_heads_at_once() -> None:
    spec = import_config(REAL["olmo2"]).spec
    assert spec.residual == "output_norm" and spec.attention.qk_norm_scope == "all"
    ir = build_ir(spec)
    block = ir.root.part("decoder").block_variants[0]
    attn = block.attn
    assert (ir.value(attn.q_norm.dim), ir.value(attn.k_norm.dim)) == (4096, 4096)
    assert [c.name for c in block.children] == ["attn", "attn_post_norm", "mlp", "mlp_post_norm"]


def test_olmo2_refuses_tensor_parallelism_over_its_whole_projection_norms() -> None:
    from archspec.backends.torchgen import generate_source

    spec = import_config({**TINY["olmo2"][1], "architectures": ["Olmo2ForCausalLM"]}).spec
    source = generate_source(build_ir(spec))
    assert "tensor parallelism does not split q/k norms over all heads" in source


# --- Granite ---------------------------------------------------------------------------------


def test_granite_multipliers_become_spec_fields() -> None:
    spec = import_config(GRANITE_3_2B).spec
    assert spec.embedding.multiplier == 12.0 and spec.residual_multiplier == 0.22
    assert spec.attention.scale == 0.015625 and spec.head.logits_divisor == 8.0
    # GraniteConfig's default attention_multiplier (1.0) is no scaling, not 1/sqrt(head_dim)
    bare = {k: v for k, v in GRANITE_3_2B.items() if not k.endswith(("multiplier", "scaling"))}
    spec = import_config(bare).spec
    assert (spec.attention.scale, spec.residual_multiplier, spec.head.logits_divisor) == (1, 1, 1)


def test_granite_multiplies_count_as_elementwise_flops() -> None:
    """Under a convention counting elementwise work (executed), the four multipliers add one
    FLOP per element they scale: the embeddings (B·S·d), each block's two branches
    (2·n_layers·B·S·d) and the logits (B·S·vocab); the attention's replaces 1/sqrt(head_dim)."""
    with_multipliers = build_ir(import_config(GRANITE_3_2B).spec)
    bare = {k: v for k, v in GRANITE_3_2B.items() if not k.endswith(("multiplier", "scaling"))}
    plain = build_ir(import_config({**bare, "attention_multiplier": 0.015625}).spec)
    b, s, d, layers, vocab = 2, 24, 2048, 40, 49155

    def forward(ir) -> int:
        figures = flop_figures(ir, CONVENTIONS["executed"])
        return int(sp.sympify(figures.forward).xreplace({**ir.env, B: b, S: s}))

    expected = b * s * d + 2 * layers * b * s * d + b * s * vocab
    assert forward(with_multipliers) - forward(plain) == expected
    kaplan = CONVENTIONS["kaplan"]  # no elementwise work at all
    figures = [flop_figures(ir, kaplan).forward for ir in (with_multipliers, plain)]
    assert sp.simplify(figures[0] - figures[1]) == 0


def test_granite_refuses_a_multiplier_that_is_not_a_number() -> None:
    with pytest.raises(SpecError) as err:
        import_config({**GRANITE_3_2B, "residual_multiplier": "0.22"})
    assert err.value.path == "residual_multiplier"


# --- Qwen2 / Qwen3 windows -------------------------------------------------------------------


@pytest.mark.parametrize(("name", "pattern"), [("qwen2-window", "GLL"), ("qwen3-window", "LG")])
def test_qwen_windows_mask_what_transformers_masks(name: str, pattern: str) -> None:
    """The imported pattern, and that the window changes transformers' own logits on this
    batch (so the equality above is not that of two unwindowed models)."""
    cls, config = hf_class(name)
    spec = import_config({**config.to_dict(), "architectures": [cls.__name__]}).spec
    assert (spec.attention.sliding_window, spec.attention.window_pattern) == (4, pattern)
    windowed = tiny_model(name)
    config.use_sliding_window, config.sliding_window = False, None
    config.layer_types = ["full_attention"] * config.num_hidden_layers
    torch.manual_seed(0)
    full = cls(config).eval()
    full.load_state_dict(windowed.state_dict())
    ids, _ = batch(0)
    with torch.no_grad():
        assert (windowed(input_ids=ids).logits - full(input_ids=ids).logits).abs().max() > 1e-3
