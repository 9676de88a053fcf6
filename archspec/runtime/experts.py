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
        weight = weight.to_local()
        bias = bias.to_local() if bias is not None else None
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
    rows = x.split(counts.tolist())
    if bias is None:
        return torch.cat([F.linear(r, w) for r, w in zip(rows, weight, strict=True)])
    parts = zip(rows, weight, bias, strict=True)
    return torch.cat([F.linear(r, w, b) for r, w, b in parts])


def mix_experts(experts, tokens: Tensor, weights: Tensor, chosen: Tensor) -> Tensor:
    """Each token through the top_k experts it chose (chosen: (tokens, top_k)), their
    outputs summed by the routing weights. experts: the MoE's stacked experts, called
    with the routed rows sorted by expert and each expert's number of rows."""
    if hasattr(experts, "mix"):  # laid out over ranks by parallelize (expert parallel)
        return experts.mix(tokens, weights, chosen)
    # The (token, slot) pairs sorted by expert (stably: each expert's in token order).
    flat = chosen.flatten()
    order = flat.argsort(stable=True)
    counts = torch.bincount(flat, minlength=experts.n_experts)
    token = order // chosen.size(-1)
    y = experts(tokens[token], counts) * weights.flatten()[order, None]
    out = torch.zeros_like(tokens)
    out.index_add_(0, token, y.to(out.dtype))
    return out
