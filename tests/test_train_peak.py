"""The peak memory of a whole training step (forward, loss, backward, AdamW step) against the
generated model on the CPU, fp32.

Measured as `archspec bench` measures a CPU step (archspec/bench/memory.py): `LiveTensors`
follows every storage an ATen op makes until it is freed, on top of the tensors the step starts
with (weights, AdamW's moments, the inputs). The second step is measured, when the moments
exist; gradients are set to None after each step, as `zero_grad` does by default. The loss is
the bench's: cross-entropy over the logits, or the mean square of the hidden states.

The prediction (archspec/backends/count/step_peak.py) is within 2% for every case below, and
within 0.25% for all but two: bert, whose prediction counts the pooler's gradient and AdamW
state although this loss (over the hidden states) never makes them (1.6% above what is
measured; without them it is exact), and t5 without recomputation at B=4, S=64, where count
assumes one kernel for the whole model but the CPU runs the cross-attention (no mask) fused and
the self-attention (a learned bias) with the math path (1.1% above). Full recomputation peaks
in the backward of the first block's MLP, once every other block's gradients exist
(archspec/backends/count/block_backward.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archspec.backends.count.flops import S_DEC, B, S
from archspec.backends.count.memory import memory_figures
from archspec.backends.count.step_peak import step_peak
from archspec.bench.memory import LiveTensors, resident_tensors
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.test_recompute import cpu_kernel
from tests.tiny import built_model, tiny_sizes

SMALL = tiny_sizes("dropout.attention=0", d_model=128, d_ff=512, vocab_size=1000, max_seq_len=128)
KV = {"llama-2-7b": ["n_kv_heads=2"], "mixtral-8x7b": ["n_kv_heads=2"], "flan-t5-base": []}

# (spec, optimizer implementation, batch, length, recompute): a small batch peaks when the
# gradients are all made, a larger one while the activations are alive.
CASES = [
    ("gpt2", "fused", 1, 16, "none"),  # tied head: the shared matrix's second gradient
    ("gpt2", "fused", 4, 64, "none"),  # the loss's backward: logits' gradients
    ("gpt2", "foreach", 1, 16, "none"),  # foreach AdamW's temporary
    ("gpt2", "fused", 4, 64, "full"),  # the first block's backward, rebuilt
    ("llama-2-7b", "fused", 4, 64, "none"),
    ("llama-2-7b", "fused", 4, 64, "full"),
    ("flan-t5-base", "fused", 1, 16, "none"),  # embeddings shared by encoder and decoder
    ("flan-t5-base", "fused", 4, 64, "none"),
    ("bert-base", "fused", 4, 64, "none"),  # no head: the last block's backward
    ("mixtral-8x7b", "fused", 4, 64, "none"),
    # Recomputation: selective (the attention core) and full (each block, through
    # torch.utils.checkpoint), pre-norm, post-norm and an encoder-decoder with a gated MLP.
    ("bert-base", "fused", 4, 64, "full"),  # post-norm: the first block's MLP
    ("bert-base", "fused", 4, 64, "selective"),
    ("flan-t5-base", "fused", 4, 64, "full"),  # with the shared bias's gradient
    ("flan-t5-base", "fused", 4, 64, "selective"),
    ("gpt2", "fused", 4, 64, "selective"),
    ("llama-2-7b", "fused", 4, 64, "selective"),  # gated: the product's backward peaks
]


def measured_peak(ir, optimizer_impl: str, b: int, s: int, recompute: str) -> int:
    policy = None if recompute == "none" else recompute
    model = built_model(ir, checkpoint=policy)
    model.train()
    fused = optimizer_impl == "fused"
    optimizer = torch.optim.AdamW(model.parameters(), fused=fused, foreach=not fused or None)
    vocab = ir.value(ir.root.vocab_size)
    ids, targets = torch.randint(0, vocab, (b, s)), torch.randint(0, vocab, (b, s))
    args = (ids, targets) if ir.root.layout == "encoder-decoder" else (ids,)
    has_head = ir.root.lm_head is not None

    def step() -> None:
        out = model(*args)
        out = out[0] if isinstance(out, tuple) else out
        if has_head:
            loss = F.cross_entropy(out.flatten(0, 1), targets.flatten())
        else:
            loss = out.square().mean()
        del out  # the bench's step holds no reference to the logits either
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # AdamW's moments now exist
    with LiveTensors(resident_tensors(model, optimizer, ids, targets)) as tracker:
        step()
    return tracker.peak


@pytest.mark.parametrize("name, optimizer_impl, b, s, recompute", CASES)
def test_training_step_peak(name, optimizer_impl, b, s, recompute) -> None:
    ir = build_ir(load_spec(name, [*SMALL, *KV.get(name, [])]))
    measured = measured_peak(ir, optimizer_impl, b, s, recompute)
    # The kernel the CPU runs the self-attention with: the math path under a learned bias.
    m = memory_figures(ir, "fp32", "adamw", recompute, attn=cpu_kernel(name, False))
    predicted, moment = step_peak(ir, m, optimizer_impl).at({**ir.env, B: b, S: s, S_DEC: s})
    assert measured == pytest.approx(predicted, rel=0.02), (moment, measured, predicted)
