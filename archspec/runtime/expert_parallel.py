"""Expert parallelism, copied into the generated `parallelize` (two levels in) for a
mixture of experts: each rank of "ep" keeps n_experts / ep of the experts and trains on
its own rows of the batch; the tokens go to their experts' ranks and back with
all_to_all_single (gloo and NCCL both have it), as in GShard (Lepikhin et al. 2020) and
torchtitan. The routing is the model's own, run on each rank's tokens.
"""

import torch
from torch import Tensor, nn


# all_to_all_single with a backward: the gradients go back the way the rows came.
class AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, sent: list, received: list, group) -> Tensor:
        ctx.sent, ctx.received, ctx.group = sent, received, group
        out = x.new_empty((sum(received), *x.shape[1:]))
        x = x.contiguous()
        torch.distributed.all_to_all_single(out, x, received, sent, group)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        back = AllToAll.apply(grad, ctx.received, ctx.sent, ctx.group)
        return back, None, None, None


class ExpertParallel(nn.Module):
    # The rank's n_experts / ep experts: the model's stacked experts cut to their
    # rows (`first` is the first one's index in the model), and the way to the
    # others.
    def __init__(self, experts: nn.Module, mesh, data_ranks: int) -> None:
        super().__init__()
        per_rank = experts.n_experts // mesh.size()
        first = mesh.get_local_rank() * per_rank
        for name, param in list(experts.named_parameters(recurse=False)):
            own = param.detach()[first : first + per_rank].clone()
            experts.register_parameter(name, nn.Parameter(own))
        experts.n_experts = per_rank
        self.local, self.first, self.ranks = experts, first, mesh.size()
        self.group = mesh.get_group()
        # Each expert's gradient sums over every rank's tokens, where the loss is
        # each rank's own mean: divided by the data ranks, the whole batch's mean.
        for p in self.parameters():
            p.register_hook(lambda grad: grad / data_ranks)

    def mix(self, tokens: Tensor, weights: Tensor, chosen: Tensor) -> Tensor:
        per_rank, top_k = self.local.n_experts, chosen.size(-1)
        # The (token, slot) pairs sorted by expert: a rank's share is contiguous.
        flat = chosen.flatten()
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=per_rank * self.ranks)
        # What comes in: per source rank, per expert of mine.
        arriving = torch.empty_like(counts)
        torch.distributed.all_to_all_single(arriving, counts, group=self.group)
        sent = counts.view(self.ranks, per_rank).sum(1).tolist()
        received = arriving.view(self.ranks, per_rank).sum(1).tolist()
        # Each pair's token, made once: the gather of the sent rows and the
        # index_add that sums them back both keep it for backward.
        token = order // top_k
        rows = AllToAll.apply(tokens[token], sent, received, self.group)
        # Rows come by source rank, each source's by expert: sorted by expert for
        # the experts' grouped matmuls, and back.
        expert = torch.arange(per_rank, device=rows.device).repeat(self.ranks)
        by_expert = expert.repeat_interleave(arriving).argsort(stable=True)
        mine = arriving.view(self.ranks, per_rank).sum(0)
        y = self.local(rows[by_expert], mine)[by_expert.argsort()]
        back = AllToAll.apply(y, received, sent, self.group)
        out = torch.zeros_like(tokens)
        y = back * weights.flatten()[order, None]
        return out.index_add(0, token, y.to(out.dtype))
