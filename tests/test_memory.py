"""Memory: activations against the tensors autograd keeps, the KV cache, and the bookkeeping of
weights, gradients, optimizer states and parallelism.

Activations are measured on the generated model with torch.autograd.graph.saved_tensors_hooks:
every tensor saved for backward, each storage once, parameters and buffers left out (they are
the weights). The models run in fp32 on the CPU at a small size, one spec per family; `eager`
forces SDPA's math path, `flash` its fused CPU kernel. The CPU has no fused kernel for an
additive mask that needs a gradient (T5's bias) or is shared across the batch (ALiBi), so those
families are checked with the math path only.
"""

from __future__ import annotations

import json

import pytest
import sympy as sp
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from typer.testing import CliRunner

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.flops import KV_LEN, S_DEC, B, S
from archspec.backends.count.flops_report import (
    Workload,
    flops_report,
    kv_cache_bytes_per_token,
    weight_bytes,
)
from archspec.backends.count.memory import (
    Parallelism,
    activation_bytes,
    kv_cache_bytes,
    memory_figures,
)
from archspec.backends.count.params import parameter_count
from archspec.cli import app
from archspec.errors import SpecError
from archspec.ir.build import build_ir
from archspec.spec.resolve import builtin_names, load_spec
from tests.tiny import built_model, scaled_down, tiny_sizes

SMALL = tiny_sizes(d_model=64, d_ff=96, vocab_size=100, max_seq_len=64)
NO_FUSED_CPU_KERNEL = {"relative_bias", "alibi"}


def one_spec_per_family() -> list[str]:
    families: dict[str, str] = {}
    for name in builtin_names():
        families.setdefault(load_spec(name).family, name)
    return sorted(families.values())


def small_ir(name: str, extra: tuple[str, ...] = ()):
    return build_ir(load_spec(name, scaled_down(name, SMALL, extra)))


def saved_bytes(model, args, loss) -> int:
    """Bytes of the distinct storages autograd keeps for backward, weights left out."""
    weights = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = loss(model(*args))
    out.backward()
    return sum(kept.values())


def fused_on_cpu(name: str) -> bool:
    """Whether the CPU has a fused SDPA kernel for the spec: none for a score bias, nor for
    values narrower than queries and keys (latent attention: 192 against 128)."""
    spec = load_spec(name)
    return spec.position.kind not in NO_FUSED_CPU_KERNEL and spec.attention.latent is None


CASES = [
    (name, attn)
    for name in one_spec_per_family()
    for attn in ("eager", "flash")
    if attn == "eager" or fused_on_cpu(name)
]


@pytest.mark.parametrize("name, attn", CASES)
def test_activations_match_saved_tensors(name: str, attn: str) -> None:
    """In training mode, so with each spec's dropout. The CPU's fused kernel has no dropout
    (SDPA refuses it), so the fused case turns attention dropout off; the other dropouts
    stay."""
    ir = small_ir(name, ("dropout.attention=0",) if attn == "flash" else ())
    model = built_model(ir)
    has_head = ir.root.part("lm_head") is not None
    backend = SDPBackend.MATH if attn == "eager" else SDPBackend.FLASH_ATTENTION
    for b, s, s_dec in [(2, 32, 16), (1, 48, 24)]:
        ids = torch.randint(0, 100, (b, s))
        args = (ids,)
        if ir.root.layout == "encoder-decoder":
            args = (ids, torch.randint(0, 100, (b, s_dec)))

        def loss(out, targets=args[-1]):
            # A language model's loss is part of its training step: cross-entropy keeps the
            # log-softmax over the logits. Other outputs are summed, which keeps nothing.
            if has_head:
                return F.cross_entropy(out.flatten(0, 1), targets.flatten())
            return sum(o.sum() for o in out) if isinstance(out, tuple) else out.sum()

        with sdpa_kernel(backend):
            measured = saved_bytes(model, args, loss)
        values = {**ir.env, B: b, S: s, S_DEC: s_dec}
        predicted = activation_bytes(ir, 4, attn, device="cpu").xreplace(values)
        assert int(predicted) == pytest.approx(measured, rel=0.05), (name, attn, b, s)


def test_recomputation_keeps_less() -> None:
    ir = build_ir(load_spec("llama-2-7b"))
    values = {**ir.env, B: 1, S: 4096}
    kept = {
        (attn, policy): activation_bytes(ir, 2, attn, policy).xreplace(values)
        for attn in ("eager", "flash")
        for policy in ("none", "selective", "full")
    }
    assert kept["eager", "full"] < kept["eager", "selective"] < kept["eager", "none"]
    assert kept["flash", "none"] < kept["eager", "none"]
    # Without the B·h·S² probabilities, memory grows linearly in S.
    flash = sp.Poly(sp.expand(activation_bytes(ir, 2, "flash")), S)
    eager = sp.Poly(sp.expand(activation_bytes(ir, 2, "eager")), S)
    assert flash.degree() == 1 and eager.degree() == 2


def test_kv_cache_of_llama_2_70b() -> None:
    """80 layers × (k, v) × 8 key/value heads × 128 × 4096 positions × 2 bytes."""
    ir = build_ir(load_spec("llama-2-70b"))
    report = flops_report(ir, Workload(batch=1, seq=4096, dtype="bf16"))
    assert report["memory"]["kv_cache"] == 1_342_177_280
    assert kv_cache_bytes_per_token(ir, "bf16") == 1_342_177_280 // 4096
    # Grouped-query attention: 8 times smaller than with 64 key/value heads.
    mha = build_ir(load_spec("llama-2-70b", ["n_kv_heads=64"]))
    assert kv_cache_bytes_per_token(mha, "bf16") == 8 * kv_cache_bytes_per_token(ir, "bf16")


def test_kv_cache_of_encoder_decoder_holds_both_attentions() -> None:
    ir = build_ir(load_spec("t5-small"))
    # Per decoder layer: self-attention over kv_len positions, cross-attention over S.
    expected = 6 * 2 * 8 * 64 * 2 * B * (KV_LEN + S)
    assert sp.expand(kv_cache_bytes(ir, 2).xreplace(ir.env) - expected) == 0
    assert kv_cache_bytes(build_ir(load_spec("bert-base")), 2) == 0


@pytest.mark.parametrize(
    "dtype, optimizer, weights, grads, states",
    [
        ("fp32", "adamw", 4, 4, 8),
        ("bf16", "adamw", 2, 2, 12),  # fp32 master weights beside the two moments
        ("fp16", "adamw8bit", 2, 2, 6),
        ("bf16", "sgd", 2, 2, 8),
        ("int4", "adamw", sp.Rational(1, 2), 2, 12),  # weight-only quantisation
    ],
)
def test_bytes_per_parameter(dtype, optimizer, weights, grads, states) -> None:
    ir = build_ir(load_spec("llama-2-7b"))
    n = ir.value(parameter_count(ir.root))
    m = memory_figures(ir, dtype, optimizer)
    assert m.weights.xreplace(ir.env) == weights * n
    assert m.gradients.xreplace(ir.env) == grads * n
    assert m.optimizer_states.xreplace(ir.env) == states * n
    assert weight_bytes(ir, dtype) == int(sp.ceiling(weights * n))


def test_parallelism_and_zero_split_per_device() -> None:
    """llama-2-70b over 64 GPUs: tp=8 splits heads, hidden units and the vocabulary; pp=2 gives
    each stage 40 of the 80 layers; 4 data-parallel replicas each run whole sequences, and
    ZeRO-1 shards the optimizer states over them."""
    ir = build_ir(load_spec("llama-2-70b"))
    values = {**ir.env, B: 16, S: 4096, KV_LEN: 4096}
    at = lambda e: e.xreplace(values)  # noqa: E731
    par = Parallelism(gpus=64, tp=8, pp=2, zero=1, micro_batches=4)
    split = memory_figures(ir, "bf16", attn="flash", parallel=par)
    assert par.dp == 4
    # Width, MLP hidden units, kv heads × 128, and the vocabulary as Megatron-LM pads it (to a
    # multiple of 128 rows per tensor-parallel rank: 32,000 -> 32,768).
    h, f, kv, v = 8192, 28672, 1024, 32768
    layer = 2 * h + (h * h + 2 * h * kv + h * h) // 8 + 3 * h * f // 8
    first, last = split.stages
    assert first.params == 40 * layer + v // 8 * h  # and the embeddings
    assert last.params == 40 * layer + h + v // 8 * h  # the final norm and the head
    assert at(first.weights) == 2 * first.params
    assert at(first.gradients) == 2 * first.params
    assert at(first.optimizer_states) == 12 * first.params / 4
    # Under 1F1B the first of 2 stages runs 2 micro-batches (B sequences of S each) through its
    # 40 layers before its first backward; each layer keeps what one tensor-parallel rank does.
    one = activation_parts(ir, 2, "flash", "none", tp=8)
    assert at(first.activations) == at(2 * 40 * one.layers[0][1] + 2 * one.before)
    zero3 = memory_figures(ir, "bf16", parallel=Parallelism(gpus=8, zero=3))
    whole = memory_figures(ir, "bf16")
    assert at(zero3.weights) == at(whole.weights) / 8
    assert at(zero3.gradients) == at(whole.gradients) / 8
    with pytest.raises(SpecError):
        Parallelism(gpus=6, tp=4)
    for bad in (Parallelism(gpus=7, tp=7), Parallelism(gpus=64, tp=64), Parallelism(gpus=3, pp=3)):
        with pytest.raises(SpecError):
            memory_figures(build_ir(load_spec("llama-2-7b")), "bf16", parallel=bad)


def test_count_prints_memory_in_bytes() -> None:
    args = ["count", "llama-2-70b", "--seq", "4096", "--dtype", "bf16", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    memory = json.loads(result.output)["memory"]
    assert memory["kv_cache"] == 1_342_177_280
    parts = ("weights", "gradients", "optimizer", "activations")
    assert memory["total"] == sum(memory[k] for k in parts)
    assert memory["inference_total"] == memory["weights"] + memory["kv_cache"]


def test_pipeline_layout_costs_nothing_in_depth() -> None:
    """Stages are worked out from index ranges, never one entry per layer: a billion layers
    over 8 stages costs what twelve do."""
    ir = build_ir(load_spec("gpt2", ["n_layers=1000000000"]), symbolic=True)
    par = Parallelism(gpus=16, tp=2, pp=8, micro_batches=8)
    m = memory_figures(ir, "bf16", parallel=par)
    layers = 1_000_000_000 // 8
    assert [s.layers for s in m.stages][:2] == [(0, layers), (layers, 2 * layers)]
    assert m.stages[3].params == m.stages[4].params  # middle stages: blocks only
