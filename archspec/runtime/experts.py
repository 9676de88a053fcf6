"""The routed experts of a mixture, stored stacked: one weight per projection with an
expert dimension (n_experts, out_features, in_features), as gpt-fast, torchtitan and
transformers 5 hold them. The routed copies of the tokens are sorted by expert and each
projection is one grouped matmul over the sorted rows.

Apart from the MoE's forward so that `parallelize` can lay the experts out over ranks
(expert parallelism: `archspec.runtime.expert_parallel`) with the routing untouched.
"""

import torch
import torch.nn.functional as F
from torch import Tensor


def grouped_linear(x: Tensor, weight: Tensor, counts: Tensor, bias=None) -> Tensor:
    """Expert i's Linear on its counts[i] rows of x (rows sorted by expert); weight:
    (n_experts, out, in), bias: (n_experts, out) or None."""
    if hasattr(weight, "to_local"):  # tensor parallel: the rank's share of each expert
        # Split by its inputs (down), each rank's product is a partial sum: its bias is
        # added once they are summed (StackedExperts), not on every rank.
        row_parallel = weight.placements[0].is_shard(2)
        weight = weight.to_local()
        bias = bias.to_local() if bias is not None and not row_parallel else None
    if torch.is_autocast_enabled(x.device.type):
        # As autocast runs a Linear, in its dtype: neither torch._grouped_mm nor the
        # loop's mm(out=...) is on autocast's lists, so fp32 weights and an fp32 input
        # would otherwise multiply in fp32 (and never take the grouped kernel).
        dtype = torch.get_autocast_dtype(x.device.type)
        x, weight = x.to(dtype), weight.to(dtype)
        bias = bias.to(dtype) if bias is not None else None
    # torch._grouped_mm, one kernel for every expert, where torch documents it (bf16 on
    # CUDA devices of compute capability 8.0 or more, widths in whole 16 bytes). Else a
    # loop over the experts' slices of the rows: torch 2.13's CPU kernel runs, but
    # FlopCounterMode counts none of its FLOPs.
    grouped = x.is_cuda and x.dtype == torch.bfloat16 and hasattr(torch, "_grouped_mm")
    aligned = x.size(-1) % 8 == 0 and weight.size(-2) % 8 == 0
    if grouped and aligned and torch.cuda.get_device_capability(x.device) >= (8, 0):
        offsets = counts.cumsum(0, dtype=torch.int32)
        y = torch._grouped_mm(x, weight.transpose(-2, -1), offs=offsets)
        if bias is not None:
            y = y + bias.repeat_interleave(counts, dim=0, output_size=x.size(0))
        return y
    if not torch.compiler.is_compiling():
        return ExpertRows.apply(x, weight, bias, counts.tolist())
    # Traced by torch.compile (which plans the memory itself): split, then concatenate.
    rows = x.split(counts.tolist())
    biases = bias if bias is not None else [None] * len(rows)
    parts = zip(rows, weight, biases, strict=True)
    return torch.cat([F.linear(r, w, b) for r, w, b in parts])


# The loop: expert i's rows through its weights, written into one output (in backward
# one gradient for the rows, one for the stacked weight), so that no per-expert piece
# is concatenated or stacked beside the whole.
class ExpertRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias, sizes: list) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.sizes, ctx.bias = sizes, bias is not None
        out = x.new_empty(x.size(0), weight.size(1))
        start = 0
        for i, n in enumerate(sizes):
            rows = slice(start, start + n)
            if bias is None:
                torch.mm(x[rows], weight[i].t(), out=out[rows])
            else:
                torch.addmm(bias[i], x[rows], weight[i].t(), out=out[rows])
            start += n
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        dx = torch.empty_like(x) if ctx.needs_input_grad[0] else None
        dw = torch.empty_like(weight) if ctx.needs_input_grad[1] else None
        db = grad.new_empty(weight.shape[:2]) if ctx.bias else None
        start = 0
        for i, n in enumerate(ctx.sizes):
            rows = slice(start, start + n)
            if dx is not None:
                torch.mm(grad[rows], weight[i], out=dx[rows])
            if dw is not None:
                torch.mm(grad[rows].t(), x[rows], out=dw[i])
            if db is not None:
                torch.sum(grad[rows], 0, out=db[i])
            start += n
        return dx, dw, db, None


def clamped_swiglu(gate: Tensor, up: Tensor, limit: float, alpha: float) -> Tensor:
    """gpt-oss's experts' hidden units as transformers' GptOssExperts._apply_gate
    computes them, op for op (so that they round alike): the gate clamped to at most
    limit, up to [-limit, limit], then (up + 1) * gate * sigmoid(alpha * gate)."""
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


def mix_experts(experts, tokens: Tensor, weights: Tensor, chosen: Tensor) -> Tensor:
    """Each token through the top_k experts it chose (chosen: (tokens, top_k)), their
    outputs summed by the routing weights. experts: the MoE's stacked experts, called
    with the routed rows sorted by expert and each expert's number of rows."""
    if hasattr(experts, "mix"):  # laid out over ranks by parallelize (expert parallel)
        return experts.mix(tokens, weights, chosen)
    # The (token, slot) pairs sorted by expert (stably: each expert's in token order).
    flat = chosen.flatten()
    order = flat.argsort(stable=True)
    # Rows per expert, n_experts of them whatever was chosen (bincount's length is the
    # largest choice's, which a compiled graph cannot know).
    ones = torch.ones_like(flat)
    counts = flat.new_zeros(experts.n_experts).scatter_add_(0, flat, ones)
    token = order // chosen.size(-1)
    y = experts(tokens[token], counts) * weights.flatten()[order, None]
    out = torch.zeros_like(tokens)
    out.index_add_(0, token, y.to(out.dtype))
    return out
