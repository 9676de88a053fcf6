"""Context parallelism, copied into the generated `parallelize` (one level in): the
blocks of a causal decoder split the sequence over the ranks of "cp", and each attention
gathers every rank's keys and values, as Llama 3's training did (Grattafiori et al.
2024, section 3.3.2: an all-gather of keys and values, then attention for the local
queries). The stack computes positions, masks and rotary angles for the whole sequence
as on one device; each block gets the rows of its rank's positions, so every shard
rotates by its own positions. Causal load balancing: the sequence is cut into 2·cp
chunks and rank r holds chunks r and 2·cp - 1 - r, so every rank attends over as many
keys. The last block gathers the sequence back: what follows the blocks (final norm,
head, loss) sees it whole, on every rank.
"""

import torch
from torch import Tensor, nn


def balanced_positions(length: int, rank: int, ranks: int, device) -> Tensor:
    # Chunks r and 2·ranks - 1 - r of the sequence's 2·ranks chunks.
    size = length // (2 * ranks)
    last = 2 * ranks - 1 - rank
    first = torch.arange(rank * size, (rank + 1) * size, device=device)
    second = torch.arange(last * size, (last + 1) * size, device=device)
    return torch.cat([first, second])


def gathered(x: Tensor, dim: int, group) -> Tensor:
    # Every rank's x, side by side along dim, in rank order (no gradient).
    ranks = torch.distributed.get_world_size(group)
    parts = [torch.empty_like(x) for _ in range(ranks)]
    torch.distributed.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim)


class GatherKeys(torch.autograd.Function):
    # Keys or values (B, heads, S / cp, D) of every rank, along dim 2. Every rank's
    # queries read them: the gradient of this rank's rows sums over the ranks.
    @staticmethod
    def forward(ctx, x: Tensor, group) -> Tensor:
        ctx.group = group
        return gathered(x, 2, group)

    @staticmethod
    def backward(ctx, grad: Tensor):
        grad = grad.contiguous()
        torch.distributed.all_reduce(grad, group=ctx.group)
        rank = torch.distributed.get_rank(ctx.group)
        ranks = torch.distributed.get_world_size(ctx.group)
        return grad.chunk(ranks, 2)[rank], None


class ShareRows(torch.autograd.Function):
    # The first block's input (B, S, d), alike on every rank: the rank's positions.
    # What precedes the blocks is computed on every rank alike, so it gets the
    # gradient of every position, gathered from the ranks.
    @staticmethod
    def forward(ctx, x: Tensor, own: Tensor, order: Tensor, group) -> Tensor:
        ctx.order, ctx.group = order, group
        return x[:, own]

    @staticmethod
    def backward(ctx, grad: Tensor):
        return gathered(grad, 1, ctx.group)[:, ctx.order], None, None, None


class WholeRows(torch.autograd.Function):
    # The last block's output: every rank's positions, in order. What follows is
    # computed on every rank alike: this rank's rows of its gradient.
    @staticmethod
    def forward(ctx, x: Tensor, own: Tensor, order: Tensor, group) -> Tensor:
        ctx.own = own
        return gathered(x, 1, group)[:, order]

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad[:, ctx.own], None, None, None


class ContextKeys:
    # In place of a block's KV cache: attention's keys and values (or a latent
    # attention's latent and rotated key) at every rank's positions.
    def __init__(self, group) -> None:
        self.group = group

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        return GatherKeys.apply(k, self.group), GatherKeys.apply(v, self.group)


def split_context(blocks: list, mesh, angles: bool, summed: bool) -> None:
    # Hooks on a stack's blocks (x, mask, [angles,] cache): the first splits x,
    # every one reads its rank's rows of the mask and the angles and gathers the
    # keys, the last gathers x back. Each block's parameter gradients sum over the
    # ranks (here if `summed`, else by FSDP2).
    group, rank, ranks = mesh.get_group(), mesh.get_local_rank(), mesh.size()
    keys, shard = ContextKeys(group), {}

    def enter(block: nn.Module, args: tuple) -> tuple:
        x, mask, *rest = args
        if block is blocks[0]:
            length = x.size(1)
            if length % (2 * ranks):
                message = f"{2 * ranks} chunks (cp={ranks}) do not divide {length}"
                raise ValueError(f"context parallelism: {message} positions")
            own = balanced_positions(length, rank, ranks, x.device)
            # Whose positions the gathered keys hold, and where each position is.
            held = gathered(own, 0, group)
            shard.update(own=own, held=held, order=held.argsort())
            if mask is None:  # causal: a key at or before the query
                hidden = held[None, :] > own[:, None]
                mask = x.new_zeros(hidden.shape).masked_fill(hidden, float("-inf"))
            else:
                mask = mask[..., own, :][..., held]
            shard["mask"] = mask
            if angles:
                shard["angles"] = tuple(t[..., own, :] for t in rest[0])
            x = ShareRows.apply(x, own, shard["order"], group)
        table = (shard["angles"],) if angles else ()
        return (x, shard["mask"], *table, keys)

    def leave(block: nn.Module, args: tuple, out: Tensor) -> Tensor:
        return WholeRows.apply(out, shard["own"], shard["order"], group)

    def sum_over_ranks(p: nn.Parameter) -> None:
        grad = p.grad._local_tensor if hasattr(p.grad, "_local_tensor") else p.grad
        torch.distributed.all_reduce(grad, group=group)

    for block in blocks:
        block.register_forward_pre_hook(enter)
        for p in block.parameters() if summed else ():
            p.register_post_accumulate_grad_hook(sum_over_ranks)
    blocks[-1].register_forward_hook(leave)
