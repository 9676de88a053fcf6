"""Attention sinks (`attention.sinks`, gpt-oss): one learned logit per query head, softmaxed
beside each query's scores as a key whose value is zero.

Checked against what we did not write: the runtime core against transformers' gpt-oss
`eager_attention_forward`, the generated attention layers against `GptOssAttention` (the
windowed and the full one), decoding with the KV cache (a window's ring included) against
the full forward, the parameter count against the generated model's parameters, FLOPs
against FlopCounterMode and the saved tensors against saved_tensors_hooks. print(model) and
the parallel layouts are in tests/test_printer.py and tests/test_distributed_cp_ep.py.
"""

from __future__ import annotations

import types

import pytest
import torch
import torch.nn.functional as F

from archspec import build_ir, load_spec
from archspec.backends.count.activations import activation_parts
from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import flop_figures
from archspec.backends.count.params import parameter_count, parameter_rows
from archspec.errors import SpecError
from archspec.ir import ops
from archspec.runtime.attention import sink_attention
from archspec.runtime.masks import hidden_keys, mask_out, sliding_window
from tests.test_flops import at, counted, inputs, values
from tests.test_memory import saved_bytes
from tests.test_ops_meaning import all_ops
from tests.tiny import generated_module, tiny_sizes

gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
GptOssConfig = pytest.importorskip("transformers").GptOssConfig

WINDOW = 4
# A llama-like decoder with gpt-oss's attention: biases on every projection, grouped-query
# heads (4 query heads on 2 kv heads, 8 wide), sinks, windowed and full layers alternating.
SINKS = tiny_sizes(
    "n_kv_heads=2",
    "attention.bias=true",
    "attention.sinks=true",
    f"attention.sliding_window={WINDOW}",
    "attention.window_pattern=LG",
    vocab_size=100,
    max_seq_len=32,
)


def sink_ir(*more: str):
    return build_ir(load_spec("llama-2-7b", [*SINKS, *more]))


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    return generated_module(sink_ir(), folder=tmp_path_factory.mktemp("sinks"))


def model_of(module, seed: int = 0):
    torch.manual_seed(seed)
    return module.Model().eval()


# --- the runtime core against transformers' eager gpt-oss attention -------------------------


def _theirs(q, k, v, mask, sinks):
    """transformers' gpt-oss eager attention, (B, heads, S, D) in and out."""
    module = types.SimpleNamespace(
        sinks=sinks, num_key_value_groups=q.size(1) // k.size(1), training=False
    )
    out, _ = gpt_oss.eager_attention_forward(module, q, k, v, mask, q.size(-1) ** -0.5)
    return out.transpose(1, 2)


def _causal(s: int, dtype) -> torch.Tensor:
    return mask_out(hidden_keys(None, torch.arange(s), s), torch.zeros((), dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("heads, kv_heads", [(4, 4), (6, 2), (4, 1)])
@pytest.mark.parametrize("masking", ["causal", "none given", "window", "padded"])
def test_sink_attention_is_gpt_oss_eager_attention(dtype, heads, kv_heads, masking) -> None:
    """Bit for bit: the same ops in the same order, the softmax in the scores' dtype."""
    torch.manual_seed(1)
    b, s, d = 2, 9, 8
    q = torch.randn(b, heads, s, d, dtype=dtype)
    k, v = (torch.randn(b, kv_heads, s, d, dtype=dtype) for _ in range(2))
    sinks = torch.randn(heads, dtype=dtype) * 3
    causal = _causal(s, dtype)
    if masking == "window":
        mask = sliding_window(causal, torch.arange(s), torch.arange(s), 3, dtype)
    elif masking == "padded":
        attention_mask = torch.ones(b, s, dtype=torch.long)
        attention_mask[0, :3] = 0  # left padding: a padded query sees nothing but its sink
        hidden = hidden_keys(attention_mask, torch.arange(s), s)
        mask = mask_out(hidden, torch.zeros((), dtype=dtype))
    else:
        mask = causal[None, None]
    ours = sink_attention(q, k, v, None if masking == "none given" else mask, d**-0.5, sinks)
    assert torch.equal(ours, _theirs(q, k, v, mask, sinks))


def test_a_sink_takes_probability_from_every_key() -> None:
    """A very negative sink changes nothing (causal SDPA); a very positive one takes all of
    every row's probability, leaving zeros."""
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(sink_attention(q, k, v, None, 0.5, torch.full((2,), -1e4)), sdpa)
    assert sink_attention(q, k, v, None, 0.5, torch.full((2,), 1e4)).abs().max() == 0


# --- the generated layers against transformers' GptOssAttention ------------------------------


def _hf_attention(layer: int):
    config = GptOssConfig(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_hidden_layers=2,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"],
        attention_bias=True,
        attention_dropout=0.0,
    )
    config._attn_implementation = "eager"
    return gpt_oss.GptOssAttention(config, layer).eval()


def _rope(s: int, d: int):
    """cos and sin of RoPE's angles at positions 0..s-1: ours (the halves repeated, an axis
    for the heads) and transformers' gpt-oss (the halves once)."""
    inv_freq = 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d)
    angles = torch.arange(s).float()[:, None] * inv_freq
    ours = torch.cat([angles, angles], -1)
    return (ours.cos()[None], ours.sin()[None]), (angles.cos()[None], angles.sin()[None])


@pytest.mark.parametrize("layer", [0, 1], ids=["windowed", "full"])
def test_generated_attention_is_gpt_oss_attention(module, layer: int) -> None:
    model = model_of(module)
    ours = model.decoder.blocks[layer].attn
    theirs = _hf_attention(layer)
    with torch.no_grad():
        for a, b in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
            getattr(theirs, b).weight.copy_(getattr(ours, a).weight)
            getattr(theirs, b).bias.copy_(getattr(ours, a).bias)
        theirs.sinks.copy_(ours.sinks)
    assert ours.sinks.abs().sum() > 0  # drawn by init_weights, as gpt-oss draws them
    s = 11
    x = torch.randn(2, s, 32)
    our_rope, their_rope = _rope(s, 8)
    # transformers hands an eager layer its mask made: causal, and windowed where it is.
    visible = torch.arange(s)[None, :] <= torch.arange(s)[:, None]
    if layer == 0:
        visible &= torch.arange(s)[:, None] - torch.arange(s)[None, :] < WINDOW
    mask = torch.zeros(s, s).masked_fill(~visible, torch.finfo(torch.float32).min)
    with torch.no_grad():
        expected, _ = theirs(x, their_rope, mask[None, None])
        torch.testing.assert_close(ours(x, None, our_rope), expected, rtol=1e-5, atol=1e-6)


# --- decoding with the KV cache -------------------------------------------------------------


def test_cached_decoding_equals_the_full_forward(module) -> None:
    """A prompt of 3, then 9 steps one token at a time: the windowed layer's ring of 4 wraps
    twice; every step's logits are the full forward's at that position."""
    model = model_of(module)
    tokens = torch.randint(100, (2, 12))
    with torch.no_grad():
        full = model(tokens)
        cache = [module.KVCache(tokens.size(1)) for _ in model.decoder.blocks]
        steps = [model(tokens[:, :3], cache=cache)]
        steps += [model(tokens[:, i : i + 1], cache=cache) for i in range(3, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_generation_runs_and_checkpointing_gives_the_same_gradients(module) -> None:
    """checkpoint='selective' and 'full' replay sink_attention: same gradients, the sinks'
    included."""
    tokens = torch.randint(100, (2, 10))
    grads = {}
    for policy in (None, "selective", "full"):
        torch.manual_seed(0)
        model = module.Model(checkpoint=policy)
        model(tokens).float().logsumexp(-1).sum().backward()
        grads[policy] = {n: p.grad for n, p in model.named_parameters()}
        assert grads[policy]["decoder.blocks.0.attn.sinks"].abs().sum() > 0
    for policy in ("selective", "full"):
        for name, grad in grads[None].items():
            torch.testing.assert_close(grads[policy][name], grad, msg=name)
    out = model_of(module).generate(tokens[:, :4], 6)
    assert out.shape == (2, 10)


# --- counts against the generated model -------------------------------------------------------


def test_parameters_are_the_generated_models(module) -> None:
    ir = sink_ir()
    model = model_of(module)
    assert ir.value(parameter_count(ir.root)) == sum(p.numel() for p in model.parameters())
    rows = {row.name: row for row in parameter_rows(ir)}
    sinks = [row for name, row in rows.items() if name.endswith("attn.sinks")]
    assert sum(ir.value(row.count) for row in sinks) == 2 * 4  # two layers, four heads
    assert {row.group for row in sinks} == {"attention"}


def test_flops_are_flop_counter_modes() -> None:
    """Written out, QKᵀ and AV are two matmuls each way, as SDPA's math path: what
    FlopCounterMode counts forward, and with the backward."""
    executed = CONVENTIONS["executed"]
    for layers in (2, 3):
        ir = sink_ir(f"n_layers={layers}")
        f = flop_figures(ir, executed)
        module = generated_module(ir)
        with torch.device("meta"):
            model = module.Model()
        for b, s in ((1, 16), (3, 7)):
            forward, total = counted(model, inputs(ir, b, s, s))
            vals = values(ir, b, s)
            assert at(f.forward_matmul, vals) == forward
            assert at(f.train_step_matmul, vals) == total
            model.zero_grad(set_to_none=True)


def test_elementwise_flops_count_the_sink_column() -> None:
    """Under the `executed` convention's elementwise work, each row's sink is one more
    softmax logit and every logit is shifted by the row's maximum."""
    ir = sink_ir()
    plain = build_ir(load_spec("llama-2-7b", [*SINKS, "attention.sinks=false"]))
    executed = CONVENTIONS["executed"]
    b, s = 2, 16
    vals = values(ir, b, s)
    extra = at(flop_figures(ir, executed).forward, vals)
    extra -= at(flop_figures(plain, executed).forward, values(plain, b, s))
    rows, pairs = b * 4 * s, b * 4 * s * s  # every query-key pair, under `executed`
    # Layer 0's window, layer 1's full: the counter costs every pair of both.
    assert extra == 2 * (5 * rows + 2 * (pairs + rows))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("policy", ["none", "selective"])
def test_saved_tensors_are_the_counted_ones(dtype, policy) -> None:
    """What autograd saves of the written-out core (q, and k and v repeated per query head,
    the shift's indices, the softmax's output with its sink column) is what count keeps;
    under checkpoint='selective' the core keeps only what it starts from. The loss is
    cross-entropy over float32 logits, as torch's engine counts it."""
    ir = sink_ir()
    module = generated_module(ir)
    torch.manual_seed(0)
    model = module.Model(checkpoint=None if policy == "none" else policy).to(dtype)
    b, s = 2, 16
    args = inputs(ir, b, s, s, "cpu")
    targets = torch.randint(0, 100, (b, s))

    def loss(out):
        return F.cross_entropy(out.float().flatten(0, 1), targets.flatten())

    saved = saved_bytes(model, args, loss)
    itemsize = torch.finfo(dtype).bits // 8
    parts = activation_parts(ir, itemsize, "eager", policy, device="cpu", engine="torch")
    assert saved == at(parts.total - parts.rebuilt, values(ir, b, s))


def test_the_attend_ops_carry_the_sinks() -> None:
    """Readers read the op, not the layer: the FLOP and activation counters, the plan and
    the renderer see `Attend.sinks`, on the windowed layer and the full one."""
    attends = [op for op in all_ops(sink_ir().root) if isinstance(op, ops.Attend)]
    assert {(a.sinks, a.masking.window) for a in attends} == {(True, WINDOW), (True, None)}


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, overrides, message",
    [
        ("t5-small", ["attention.sinks=true"], "need layout: decoder"),
        ("bert-base", ["attention.sinks=true"], "need layout: decoder"),
        ("llama-2-7b", ["attention.sinks=true", "dropout.attention=0.1"], "dropout"),
        ("gemma-2-2b", ["attention.sinks=true"], "attention.softcap"),
        ("deepseek-v2-lite", ["attention.sinks=true"], "not supported with latent"),
    ],
)
def test_what_does_not_combine_is_refused_naming_the_field(spec, overrides, message) -> None:
    with pytest.raises(SpecError, match=message) as error:
        load_spec(spec, overrides)
    assert "attention.sinks" in str(error.value) or "sinks" in str(error.value)


def test_sinks_have_no_counterpart_in_a_family_without_them() -> None:
    """Named in a transformers class without sinks, the parameter is refused by name."""
    from archspec.hf.names import hf_module_names

    with pytest.raises(SpecError, match="attn.sinks' has no counterpart"):
        hf_module_names(sink_ir())


def test_zero_sinks_sum_to_one_less_than_sdpa() -> None:
    """A sink of 0 is a key with score 0 and value 0: the real keys' weights sum to
    1 - 1 / (1 + sum(exp(scores))) of SDPA's."""
    q, k = torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 3, 4)
    v = torch.ones(1, 1, 3, 4)
    mask = torch.zeros(1, 3)
    out = sink_attention(q, k, v, mask, 1.0, torch.zeros(1))
    torch.testing.assert_close(out, torch.full_like(out, 3 / 4))
