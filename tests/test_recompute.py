"""Activation recomputation in the generated code (`Model(config, checkpoint=...)`) against what
archspec's count assumes for `--recompute selective|full`.

What "kept for backward" means here: the bytes of every tensor storage the training forward
(and its loss) leaves alive once it returns, measured by archspec's CPU tensor tracker
(`archspec.bench.memory.LiveTensors`, a dispatch mode that follows each storage an ATen op makes
until it is freed). saved_tensors_hooks alone would not do under checkpointing: it sees the
tensors checkpoint saves as its positional inputs, but not what a checkpoint holds by reference
(RoPE's (cos, sin) tuple, keyword arguments) nor the tensors the backward pass rebuilds. The
tracker sees everything alive; the weights are resident (left out, with their views), the token
ids (which the embedding keeps) and the targets (which cross-entropy keeps, with its total weight)
are made inside it. Besides the activations it sees the loss itself (4 bytes), which count
leaves out.

Full recomputation also rebuilds one block at a time in the backward pass: that transient is
`ActivationParts.rebuilt`, checked with the peak of a whole training step (test_train_peak.py).
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.flops import S_DEC, B, S
from archspec.bench.memory import LiveTensors, resident_tensors
from archspec.cli import app
from archspec.spec.resolve import load_spec
from tests.test_memory import NO_FUSED_CPU_KERNEL, small_ir
from tests.tiny import built_model, generated_module

# One small model per family: learned positions, GQA with RoPE, T5's relative bias, a
# bidirectional encoder with a pooler, ALiBi, a mixture of experts, an encoder-decoder.
FAMILIES = ["gpt2", "llama-2-70b", "flan-t5-base", "bert-base", "bloom-176b", "mixtral-8x7b"]
POLICIES = ["none", "selective", "full"]
DROPOUT = ("dropout.hidden=0.1",)


def cpu_kernel(name: str, attention_dropout: bool) -> str:
    """What PyTorch's default SDPA dispatch runs on the CPU: its fused kernel, except with
    dropout on the probabilities or a mask it cannot take (T5's learned bias, ALiBi's shared
    one), where it falls back to the math path."""
    fused = not attention_dropout and load_spec(name).position.kind not in NO_FUSED_CPU_KERNEL
    return "flash" if fused else "eager"


def run_forward(
    name: str, policy: str, attention_dropout: bool, b=2, s=32, s_dec=16, extra: tuple = ()
):
    p = "0.1" if attention_dropout else "0"
    ir = small_ir(name, (*DROPOUT, f"dropout.attention={p}", *extra))
    model = built_model(ir, checkpoint=None if policy == "none" else policy)
    has_head = ir.root.part("lm_head") is not None

    def loss(out, targets):
        if has_head:
            return F.cross_entropy(out.flatten(0, 1), targets.flatten())
        return sum(o.sum() for o in out) if isinstance(out, tuple) else out.sum()

    with LiveTensors(resident_tensors(model)) as tracker:
        args = (torch.randint(0, 100, (b, s)),)
        if ir.root.layout == "encoder-decoder":
            args = (*args, torch.randint(0, 100, (b, s_dec)))
        # Targets of their own (as in training: shifted labels), which the loss keeps.
        targets = torch.randint(0, 100, args[-1].shape) if has_head else None
        out = loss(model(*args), targets)
        kept = tracker.live - tracker.baseline
    out.backward()
    loss_bytes = 4  # the loss itself
    values = {**ir.env, B: b, S: s, S_DEC: s_dec}
    return ir, model, kept - loss_bytes, values


# Attention dropout on (the CPU then runs SDPA's math path) and off (its fused kernel where it
# has one): the kernel matters only when nothing is recomputed, since recomputation keeps
# nothing of the attention core.
CASES = [
    (name, policy, dropout)
    for name in FAMILIES
    for policy in POLICIES
    for dropout in ((True, False) if policy == "none" else (True,))
]


@pytest.mark.parametrize("name, policy, attention_dropout", CASES)
def test_kept_activations_equal_count(name: str, policy: str, attention_dropout: bool) -> None:
    """With the hidden dropouts on, attention dropout on (the CPU then runs SDPA's math path)
    and off (its fused kernel where it has one), the default kernel either way."""
    if name == "flan-t5-base" and policy == "none" and not attention_dropout:
        pytest.skip(
            "the CPU runs T5's cross-attention (no mask) fused and its self-attention (a "
            "learned bias) with the math path; count assumes one kernel for the whole model"
        )
    ir, _, kept, values = run_forward(name, policy, attention_dropout)
    parts = activation_parts(ir, 4, cpu_kernel(name, attention_dropout), policy, device="cpu")
    predicted = (parts.total - parts.rebuilt).xreplace(values)
    assert kept == predicted, (name, policy, kept, predicted)


@pytest.mark.parametrize("name", ["gemma-2-2b", "mistral-7b"])
@pytest.mark.parametrize("policy", POLICIES)
def test_windows_and_soft_capped_attention_keep_what_count_says(name: str, policy: str) -> None:
    """Gemma 2's soft-capped attention (its scores written out: no kernel caps them) runs
    under the selective checkpoint like SDPA, keeping q, k, v; its norms keep their 1 + w and
    its embeddings' product the rounded sqrt(d_model). A sliding window (Gemma 2's every other
    layer, Mistral's every layer) builds each layer's own mask, which the fused kernel and the
    selective checkpoint keep. Attention dropout off (Gemma 2 has none)."""
    ir, _, kept, values = run_forward(name, policy, attention_dropout=False)
    parts = activation_parts(ir, 4, cpu_kernel(name, False), policy, device="cpu")
    assert kept == (parts.total - parts.rebuilt).xreplace(values), (name, policy)


@pytest.mark.parametrize("policy", ["selective", "full"])
def test_recomputation_gives_the_same_gradients(policy: str) -> None:
    """The checkpoint restores the RNG state, so dropout draws the same masks in the rebuilt
    forward: gradients equal those of the model that keeps everything."""
    grads = {}
    for p in ("none", policy):
        _, model, _, _ = run_forward("llama-2-70b", p, attention_dropout=True)
        grads[p] = {n: t.grad for n, t in model.named_parameters() if t.grad is not None}
    assert grads["none"].keys() == grads[policy].keys()
    for n, g in grads["none"].items():
        torch.testing.assert_close(grads[policy][n], g, msg=n)


def test_checkpoint_policy_is_checked() -> None:
    model_class = generated_module(small_ir("gpt2")).Model
    with pytest.raises(ValueError, match="selective"):
        model_class(checkpoint="attention")
    model = model_class()
    model.set_checkpoint("full")
    assert model.decoder.checkpoint == "full" and model.decoder.blocks[0].attn.checkpoint == "full"


def test_megatron_gpt3_run_whichever_kernel() -> None:
    """The issue's command: GPT-3 175B as Korthikanti et al. 2022 ran it. Selective
    recomputation keeps the attention core's inputs whichever kernel runs the core, so the
    default kernel gives the paper's first-stage activations, L·34·s·b·h/t·(1 + (p−1)/(p·V))
    (Section 4.2.3, Table 2), within 0.5% (archspec also counts the norms' statistics and the
    embeddings' dropout mask)."""
    args = ["count", "gpt3-175b", "--seq", "2048", "--batch", "1", "--global-batch", "64"]
    args += ["--gpus", "64", "--tp", "8", "--pp", "8", "--interleave", "3", "--sp"]
    args += ["--recompute", "selective", "--dtype", "fp16", "--grad-dtype", "fp32"]
    args += ["--set", "dropout.attention=0.1", "--set", "dropout.hidden=0.1"]
    memory = {}
    for attn in ("flash", "eager"):
        result = CliRunner().invoke(app, [*args, "--attn", attn, "--json"])
        assert result.exit_code == 0, result.output
        memory[attn] = json.loads(result.output)["memory"]
    assert memory["flash"]["activations"] == memory["eager"]["activations"]
    L, s, b, h, t, p, v = 96, 2048, 1, 12288, 8, 8, 3
    paper = L * 34 * s * b * h / t * (1 + (p - 1) / (p * v))
    assert memory["flash"]["activations"] == pytest.approx(paper, rel=0.005)
    table = CliRunner().invoke(app, args).output
    assert "activations (selective recomp.)" in table and "gradients (fp32)" in table
