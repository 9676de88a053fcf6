"""Stacked experts as gpt-oss stores them: each expert's gate and up alternating channel by
channel in one (in, out) matrix, x @ gate_up_proj[e] + gate_up_proj_bias[e], gate the even
channels and up the odd ones (transformers' GptOssExperts._apply_gate)."""

import torch
import torch.nn.functional as F_

from archspec.hf.tensor_rules import TensorRule

E, D, F = 3, 5, 4


def _rule(hf: str, group: int, shapes, interleaved: bool) -> TensorRule:
    ours = tuple(f"moe.experts.{e}.{p}" for e in range(E) for p in ("gate", "up")[:group])
    return TensorRule(hf, ours, tuple(shapes) * E, kind="experts", group=group,
                      interleaved=interleaved, transposed=True)  # fmt: skip


def test_gate_up_interleaved_and_transposed_as_gpt_oss_reads_them():
    torch.manual_seed(0)
    ours = [torch.randn(F, D) for _ in range(2 * E)]  # expert e's gate, then its up
    biases = [torch.randn(F) for _ in range(2 * E)]
    weight = _rule("gate_up_proj", 2, [(F, D), (F, D)], True)
    bias = _rule("gate_up_proj_bias", 2, [(F,), (F,)], True)
    w, b = weight.join(ours), bias.join(biases)
    assert w.shape == (E, D, 2 * F) and b.shape == (E, 2 * F)
    assert weight.hf_shape() == (E, D, 2 * F) and bias.hf_shape() == (E, 2 * F)
    x = torch.randn(7, D)
    for e in range(E):
        gate_up = x @ w[e] + b[e]  # as GptOssExperts.forward
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        torch.testing.assert_close(gate, F_.linear(x, ours[2 * e], biases[2 * e]))
        torch.testing.assert_close(up, F_.linear(x, ours[2 * e + 1], biases[2 * e + 1]))
    for back, given in zip(weight.split(w), ours, strict=True):
        assert torch.equal(back, given)
    for back, given in zip(bias.split(b), biases, strict=True):
        assert torch.equal(back, given)


def test_down_transposed():
    ours = [torch.randn(D, F) for _ in range(E)]
    rule = _rule("down_proj", 1, [(D, F)], False)
    w = rule.join(ours)
    assert w.shape == (E, F, D)
    x = torch.randn(2, F)
    for e in range(E):
        torch.testing.assert_close(x @ w[e], F_.linear(x, ours[e]))
    assert all(torch.equal(a, b) for a, b in zip(rule.split(w), ours, strict=True))
