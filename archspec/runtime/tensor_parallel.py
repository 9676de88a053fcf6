"""Parallel styles the generated `parallelize` builds its plan from, beyond torch's own.

`parallelize` imports torch.distributed inside itself (a single-device user never loads
it), so the generator copies these into its body, after those imports, at the depth
where the plan uses them: each fits in 88 columns at that depth (`kv_heads`,
`CopiedKVHeads`, `SharedKeyGradient`, `InSequence`, `OwnRows`, `SequenceRows` and
`keep_own_rows` two levels in, `gather` and `whole_moe` three), as the ruff check of
generated files confirms.
"""

import torch
from torch import Tensor, nn
from torch.distributed.tensor import (
    DTensor,
    Placement,
    Replicate,
    Shard,
    distribute_module,
    distribute_tensor,
)
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    RowwiseParallel,
)


# k and v over more ranks than kv heads. Megatron-LM's layout (and vLLM's): each rank
# computes the kv head its query heads read, from the whole k or v weight. The weight is
# a Replicate DTensor; the projection's output, repeated tp / n_kv_heads times per head,
# is split by heads (Replicate -> Shard: each rank keeps its slice). In backward the
# split gathers the slices' gradients and the repeat sums the copies, so every rank gets
# the weight's whole gradient.
class CopiedKVHeads(ParallelStyle):
    # k or v when tp exceeds the kv heads (Megatron-LM's layout): the weight
    # whole on every rank, each rank computing the kv head its query heads read.
    def __init__(self, copies: int, head_dim: int) -> None:
        self.copies, self.head_dim = copies, head_dim

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        # No partition_fn: every parameter a Replicate DTensor.
        return distribute_module(module, mesh, None, self.whole, self.own_head)

    @staticmethod
    def whole(module: nn.Module, inputs: tuple, mesh) -> tuple:
        (x,) = inputs
        if isinstance(x, DTensor):  # gathered by a sequence-parallel sublayer
            return (x,)
        return (DTensor.from_local(x, mesh, [Replicate()], run_check=False),)

    def own_head(self, module: nn.Module, y: DTensor, mesh) -> Tensor:
        # (B, S, kv heads * head_dim), whole; each head `copies` times; the
        # rank's slice. Backward: gather the slices' gradients, sum the copies.
        heads = y.unflatten(-1, (-1, 1, self.head_dim))
        shape = (*heads.shape[:-2], self.copies, self.head_dim)
        copied = heads.expand(shape).flatten(-3)
        return copied.redistribute(mesh, [Shard(-1)]).to_local()


# The stacked experts of a mixture (archspec.runtime.experts): each expert's hidden
# units over the ranks, as ColwiseParallel and RowwiseParallel split an MLP. gate and
# up (and their biases) keep their rank's rows, down its columns (its bias whole, added
# to the summed output, as RowwiseParallel adds a Linear's). The routed rows come
# in whole on every rank and their gradient is summed over the ranks (Megatron-LM's
# f); each rank's output is a partial sum, all-reduced (its g).
class SumGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, group) -> Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor):
        grad = grad.contiguous()
        torch.distributed.all_reduce(grad, group=ctx.group)
        return grad, None


class SumOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y: Tensor, group) -> Tensor:
        y = y.contiguous()
        torch.distributed.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad, None


class StackedExperts(ParallelStyle):
    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        for name, param in list(module.named_parameters(recurse=False)):
            # (n_experts, out, in); down's bias whole on every rank, as its
            # output is
            split = Shard(2 if name == "down" else 1)
            split = Replicate() if name == "down_bias" else split
            whole = distribute_tensor(param.data, mesh, [split])
            module.register_parameter(name, nn.Parameter(whole))
        group = mesh.get_group()

        def enter(module: nn.Module, args: tuple) -> tuple:
            rows, *rest = args
            return (SumGradient.apply(rows, group), *rest)

        def leave(module: nn.Module, args: tuple, y: Tensor) -> Tensor:
            y = SumOutput.apply(y, group)
            bias = getattr(module, "down_bias", None)
            if bias is None:
                return y
            # Added once, to the summed rows (grouped_linear leaves it out):
            # each rank's gradient is then the whole one.
            counts, rows = args[1], y.size(0)
            bias = bias.to_local()
            return y + bias.repeat_interleave(counts, 0, output_size=rows)

        module.register_forward_pre_hook(enter)
        module.register_forward_hook(leave)
        return module


def kv_heads(n_kv_heads: int, head_dim: int, tp_size: int) -> ParallelStyle:
    # Whole kv heads on each rank where tp divides them, else copies.
    if n_kv_heads % tp_size:
        return CopiedKVHeads(tp_size // n_kv_heads, head_dim)
    return ColwiseParallel()


# Latent attention's kv_down under tp (torchtitan's DeepSeek-V3 plan, vLLM): whole on
# every rank. Its output's last `width` channels, the rotated key all heads share, are
# read by the rank's own heads only, so their gradient is summed over the ranks; the
# latent's gradient arrives whole, summed by the column-parallel kv_up.
class SharedKeyGradient(ParallelStyle):
    def __init__(self, width: int) -> None:
        self.width = width

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        group, width = mesh.get_group(), self.width

        def summed(grad: Tensor) -> Tensor:
            key = grad[..., -width:].contiguous()
            torch.distributed.all_reduce(key, group=group)
            return torch.cat([grad[..., :-width], key], dim=-1)

        def on_output(module: nn.Module, inputs: tuple, y: Tensor) -> Tensor:
            if y.requires_grad:
                y.register_hook(summed)
            return y

        module.register_forward_hook(on_output)
        return module


# Sequence parallelism: a sublayer gathers the sequence on entry. Kept a
# DTensor (local=False, torchtitan's plan), the gathered input's gradients from
# the column-parallel projections add up as one Partial, reduce-scattered once
# to the ranks' shares; a plain tensor has each projection all-reduce its own.
def gather(n: int, split: Placement, whole: Placement, local: bool):
    # A module's first input from `split` to `whole`; its n - 1 others
    # (masks, angles) pass as they are.
    rest = (None,) * (n - 1)
    return PrepareModuleInput(
        input_layouts=(split, *rest),
        desired_input_layouts=(whole, *rest),
        use_local_output=local,
    )


# An MoE routes every token of the sequence and hands back the rank's share of it.
def whole_moe() -> ParallelStyle:
    return PrepareModuleInputOutput(
        input_layouts=Shard(1),
        desired_input_layouts=Replicate(),
        use_local_input=True,
        output_layouts=Replicate(),
        desired_output_layouts=Shard(1),
    )


# Sequence parallelism from the embedding on (torchtitan's plan): its sums reduce-
# scattered over the sequence, not all-reduced. The stack reads the whole sequence's
# length off the embedding's output (positions, masks), so the rank's rows come back in
# a tensor of the whole sequence's shape, zeros elsewhere; between it and the first
# block, which keeps the rank's rows (`OwnRows`), only elementwise steps without
# parameters run (`embeddings_split`), so the zeros never mix in.
class InSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, share: Tensor, start: int, length: int) -> Tensor:
        ctx.rows = slice(start, start + share.size(1))
        whole = share.new_zeros(share.size(0), length, *share.shape[2:])
        whole[:, ctx.rows] = share
        return whole

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad[:, ctx.rows], None, None


class OwnRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, whole: Tensor, start: int, n: int) -> Tensor:
        ctx.length, ctx.rows = whole.size(1), slice(start, start + n)
        return whole[:, ctx.rows].contiguous()

    @staticmethod
    def backward(ctx, grad: Tensor):
        whole = grad.new_zeros(grad.size(0), ctx.length, *grad.shape[2:])
        whole[:, ctx.rows] = grad
        return whole, None, None


class SequenceRows(RowwiseParallel):
    # The embedding: rows split, its sums reduce-scattered over the sequence.
    def __init__(self) -> None:
        super().__init__(
            input_layouts=Replicate(),
            output_layouts=Shard(1),
            use_local_output=False,
        )

    def _apply(self, module: nn.Module, mesh) -> nn.Module:
        module = super()._apply(module, mesh)
        module.register_forward_hook(self.in_sequence)
        return module

    @staticmethod
    def in_sequence(module: nn.Module, inputs: tuple, y: DTensor) -> Tensor:
        share = y.to_local()
        start = y.device_mesh.get_local_rank() * share.size(1)
        return InSequence.apply(share, start, y.size(1))


def keep_own_rows(block: nn.Module, mesh) -> None:
    # A stack's first block, after SequenceRows: the rank's rows of its input.
    def own(block: nn.Module, args: tuple) -> tuple:
        x, *rest = args
        n = x.size(1) // mesh.size()
        return (OwnRows.apply(x, mesh.get_local_rank() * n, n), *rest)

    block.register_forward_pre_hook(own)
