"""The routed experts of a mixture, run on the tokens that chose them: Mixtral's loop.

Apart from the MoE's forward so that `parallelize` can lay the experts out over ranks
(expert parallelism: `archspec.runtime.expert_parallel`) with the routing untouched.
"""

import torch
from torch import Tensor


def mix_experts(experts, tokens: Tensor, weights: Tensor, chosen: Tensor) -> Tensor:
    """Each token through the top_k experts it chose (chosen: (tokens, top_k)), their
    outputs summed by the routing weights. experts: the MoE's nn.ModuleList."""
    if hasattr(experts, "mix"):  # laid out over ranks by parallelize (expert parallel)
        return experts.mix(tokens, weights, chosen)
    out = torch.zeros_like(tokens)
    # Inference runs only the experts some token chose (top_k of them at one token per
    # step). Training runs every expert, so that each gets a gradient (zero if no token
    # chose it) on every rank; a compiled graph cannot loop over data, so it runs them
    # all too.
    if torch.is_grad_enabled() or torch.compiler.is_compiling():
        hit = range(len(experts))
    else:
        hit = chosen.unique().tolist()
    for i in hit:
        # The tokens routed to expert i, and which of their top_k slots chose it.
        token, slot = torch.where(chosen == i)
        y = experts[i](tokens[token]) * weights[token, slot, None]
        out.index_add_(0, token, y.to(out.dtype))
    return out
