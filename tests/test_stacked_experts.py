"""The stacked experts' runtime (archspec.runtime.experts) against torch itself: the CPU loop
over the stacked weights equals torch._grouped_mm (which torch 2.13 also runs on the CPU, in
fp32, forward and backward) and each expert's own F.linear; FlopCounterMode counts no FLOPs
for _grouped_mm, which is why the CPU runs the loop (FLOPs == FlopCounterMode); and
Hugging Face's per-expert checkpoint names round-trip through the stacked parameters."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from archspec import build_ir, load_spec
from archspec.hf.expert_stacks import stack, stacks, unstack
from archspec.runtime.experts import grouped_linear, mix_experts
from tests.tiny import tiny_sizes

COUNTS = torch.tensor([3, 0, 5, 2])  # expert 1 gets no rows


def _rows_and_weight():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(int(COUNTS.sum()), 8, generator=gen, requires_grad=True)
    weight = torch.randn(4, 16, 8, generator=gen, requires_grad=True)  # (experts, out, in)
    return x, weight


def test_loop_equals_each_experts_linear_and_grouped_mm() -> None:
    x, weight = _rows_and_weight()
    y = grouped_linear(x, weight, COUNTS)
    parts = x.split(COUNTS.tolist())
    each = torch.cat([F.linear(p, w) for p, w in zip(parts, weight, strict=True)])
    offsets = COUNTS.cumsum(0, dtype=torch.int32)
    grouped = torch._grouped_mm(x, weight.transpose(-2, -1), offs=offsets)
    assert torch.equal(y, each) and torch.allclose(y, grouped, atol=1e-6)
    grad = torch.randn_like(y)
    (gx, gw) = torch.autograd.grad(y, (x, weight), grad)
    (hx, hw) = torch.autograd.grad(grouped, (x, weight), grad)
    assert torch.allclose(gx, hx, atol=1e-5) and torch.allclose(gw, hw, atol=1e-5)


def test_loop_with_biases_equals_each_experts_linear() -> None:
    """gpt-oss's biased experts (moe.expert_bias): each expert's bias, and its gradient."""
    x, weight = _rows_and_weight()
    bias = torch.randn(4, 16, requires_grad=True)
    y = grouped_linear(x, weight, COUNTS, bias)
    parts = x.split(COUNTS.tolist())
    each = torch.cat([F.linear(p, w, b) for p, w, b in zip(parts, weight, bias, strict=True)])
    torch.testing.assert_close(y, each)
    grad = torch.randn_like(y)
    ours = torch.autograd.grad(y, (x, weight, bias), grad)
    theirs = torch.autograd.grad(each, (x, weight, bias), grad)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.equal(ours[2][1], torch.zeros(16))  # expert 1 got no rows


def test_flop_counter_counts_the_loop_not_grouped_mm() -> None:
    x, weight = _rows_and_weight()
    with FlopCounterMode(display=False) as loop:
        grouped_linear(x, weight, COUNTS)
    assert loop.get_total_flops() == 2 * int(COUNTS.sum()) * 8 * 16
    with FlopCounterMode(display=False) as grouped:
        torch._grouped_mm(x, weight.transpose(-2, -1), offs=COUNTS.cumsum(0, dtype=torch.int32))
    assert grouped.get_total_flops() == 0  # torch 2.13 has no formula for it


class _Experts(torch.nn.Module):
    """Two-layer experts over stacked weights, as the generated `Experts` runs them."""

    def __init__(self, n: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(1)
        self.n_experts = n
        self.up = torch.nn.Parameter(torch.randn(n, 16, 8, generator=gen))
        self.down = torch.nn.Parameter(torch.randn(n, 8, 16, generator=gen))

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        return grouped_linear(F.gelu(grouped_linear(x, self.up, counts)), self.down, counts)


def test_mix_experts_is_the_weighted_sum_over_chosen_experts() -> None:
    experts = _Experts(4)
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randn(6, 8, generator=gen)
    chosen = torch.randint(0, 4, (6, 2), generator=gen)
    weights = torch.rand(6, 2, generator=gen)
    out = mix_experts(experts, tokens, weights, chosen)
    for t in range(6):
        want = sum(
            weights[t, s] * F.linear(F.gelu(F.linear(tokens[t], experts.up[e])), experts.down[e])
            for s, e in enumerate(chosen[t].tolist())
        )
        assert torch.allclose(out[t], want, atol=1e-5)


def test_per_expert_names_stack_and_unstack() -> None:
    sizes = tiny_sizes("n_kv_heads=2", "moe.n_experts=4", "moe.top_k=2")
    ir = build_ir(load_spec("mixtral-8x7b", sizes))
    groups = stacks(ir)
    assert groups["decoder.blocks.0.moe.experts.gate"] == [
        f"decoder.blocks.0.moe.experts.{e}.gate.weight" for e in range(4)
    ]
    per_expert = {name: torch.randn(3, 2) for parts in groups.values() for name in parts}
    stacked = stack(ir, per_expert)
    assert set(stacked) == set(groups)
    assert stacked["decoder.blocks.1.moe.experts.down"].shape == (4, 3, 2)
    back = unstack(ir, stacked)
    assert (
        all(torch.equal(back[k], v) for k, v in per_expert.items())
        and back.keys() == per_expert.keys()
    )


def test_autocast_runs_the_experts_as_it_runs_a_linear() -> None:
    """Under autocast an fp32 input and fp32 stacked weights multiply in autocast's dtype,
    as F.linear's do (neither torch._grouped_mm nor the loop's mm(out=...) is on autocast's
    lists: without the cast they would stay fp32, and never take the grouped kernel on a
    GPU); the gradients reach the fp32 weights and input in fp32."""
    x, weight = _rows_and_weight()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = grouped_linear(x, weight, COUNTS)
        first = F.linear(x[:3], weight[0])
    assert y.dtype == first.dtype == torch.bfloat16
    torch.testing.assert_close(y[:3], first)
    y.float().sum().backward()
    assert x.grad.dtype == weight.grad.dtype == torch.float32
