"""Router kinds: how a mixture of experts turns its router's logits into each token's top_k
experts and their weights, with everything a backend needs to know about it in one object.

`softmax` (Mixtral, Qwen-MoE, DeepSeek-V2): a float32 softmax over the experts; with groups,
only the experts of the `top_groups` groups whose best expert scores highest compete.
`sigmoid` (transformers' DeepseekV3TopkRouter, shared by DeepSeek-V3, GLM-4-MoE and dots1):
float32 sigmoid scores; a per-expert bias, `e_score_correction_bias` (DeepSeek-V3's
auxiliary-loss-free balancing, set by a rule during training, not by gradients: a buffer), is
added to them for choosing only, the weights being the unbiased scores of the chosen; with
groups, a group ranks by the sum of its two best biased scores; renormalised weights are
divided by their sum plus 1e-20.
`topk_softmax` (transformers' GptOssTopKRouter): the top_k of the raw logits, then a softmax
over those k values in the logits' own dtype (not float32): the weights sum to 1 already, so
no renormalisation applies, and every expert competes (no groups).
`softmax_bias` (transformers' Ernie4_5_MoeTopKRouter): a float32 softmax over the experts; a
per-expert `e_score_correction_bias` (kept as one row, (1, n_experts), as ERNIE 4.5 stores it)
is added to the probabilities for choosing only, the weights being the unbiased probabilities
of the chosen; renormalised weights are divided by their sum clamped to at least 1e-12
(`moe_norm_min`); every expert competes (no groups).
`softmax_in_dtype` (transformers' DbrxFFN.route_tokens_to_experts): Mixtral's softmax over
all the experts and its top_k, but in the logits' own dtype (not float32), renormalised by
the chosen weights' 1-norm (`torch.norm(..., p=1)`, DBRX's moe_normalize_expert_weights 1) in
that dtype; every expert competes (no groups). In float32 it is the softmax router.

A kind owns the tensors of its router beyond the Linear's: `buffers`, named and stored as
transformers names and stores them (float32, one per expert), which the generated router
class (`module`, in archspec.runtime.routing) registers. A buffer is no parameter: counts
leave it out, as transformers' do. The FLOPs and the bytes autograd keeps are those of the
code the generator writes for the kind (checked on the generated model).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import sympy as sp

FP32, INT64, BOOL = 4, 8, 1
SOFTMAX_FLOPS = 5  # per element: max, subtract, exp, sum, divide (count/flops.py's SOFTMAX)
SIGMOID_FLOPS = 1  # the activation catalogue's sigmoid


@dataclass(frozen=True)
class Routing:
    """The sizes and settings of one router, as the FLOP and memory formulas read them."""

    tokens: sp.Expr
    n_experts: sp.Expr
    top_k: sp.Expr
    normalize: bool
    scale: float
    groups: int
    top_groups: int
    # Bytes of an element of the logits (the compute dtype): what a kind that keeps tensors
    # in the logits' dtype counts them in. The FLOP formulas do not read it.
    compute: sp.Expr | int = FP32


def _softmax_flops(r: Routing) -> sp.Expr:
    n, e = r.tokens, r.n_experts
    return SOFTMAX_FLOPS * n * e + (n * e if r.groups > 1 else 0)  # groups: a comparison each


def _softmax_kept(r: Routing) -> sp.Expr:
    n, e, k = r.tokens, r.n_experts, r.top_k
    # the float32 probabilities, the top_k indices and values, their sum (renormalised)
    total = n * e * FP32 + n * k * (INT64 + FP32) + (n * FP32 if r.normalize else 0)
    if r.groups > 1:
        # each group's best (amax keeps its result), the top groups' indices, and
        # masked_fill's mask over the experts
        total += n * r.groups * FP32 + n * r.top_groups * INT64 + n * e * BOOL
    return total


def _sigmoid_flops(r: Routing) -> sp.Expr:
    n, e, k = r.tokens, r.n_experts, r.top_k
    total = (SIGMOID_FLOPS + 1) * n * e  # the scores, and the bias added to them
    # each group's two best: a comparison per score, and their sum
    total += n * e + n * r.groups if r.groups > 1 else 0
    return total + (2 * n * k if r.normalize else 0)  # the sum (plus 1e-20), the division


def _sigmoid_kept(r: Routing) -> sp.Expr:
    n, e, k = r.tokens, r.n_experts, r.top_k
    # The float32 scores (sigmoid keeps its output, gather its input) and the top_k indices
    # (gather's index): the choice among the groups and the biased scores feed no weight,
    # so autograd frees what their ops saved as soon as the routing returns.
    total = n * e * FP32 + n * k * INT64
    if r.normalize:
        total += n * k * FP32 + n * FP32  # the division keeps the weights and their sum
    return total


def _softmax_bias_flops(r: Routing) -> sp.Expr:
    n, e, k = r.tokens, r.n_experts, r.top_k
    total = (SOFTMAX_FLOPS + 1) * n * e  # the probabilities, and the bias added to them
    return total + (2 * n * k if r.normalize else 0)  # the sum (clamped), the division


def _softmax_bias_kept(r: Routing) -> sp.Expr:
    n, e, k = r.tokens, r.n_experts, r.top_k
    # The float32 probabilities (softmax keeps its output, gather its input) and the top_k
    # indices (gather's index); the biased probabilities only choose, feeding no weight.
    total = n * e * FP32 + n * k * INT64
    if r.normalize:
        # the clamp keeps the sum, the division the weights and the clamped sum
        total += n * k * FP32 + 2 * n * FP32
    return total


def _softmax_in_dtype_flops(r: Routing) -> sp.Expr:
    n, e, k = r.tokens, r.n_experts, r.top_k
    # the softmax over the experts; renormalised, the 1-norm (an abs and a sum per weight)
    # and the division
    return SOFTMAX_FLOPS * n * e + (3 * n * k if r.normalize else 0)


def _softmax_in_dtype_kept(r: Routing) -> sp.Expr:
    n, e, k = r.tokens, r.n_experts, r.top_k
    # In the logits' dtype: the probabilities (softmax keeps its output) and the top_k
    # indices (topk's backward scatters by them).
    total = n * e * r.compute + n * k * INT64
    if r.normalize:
        # the 1-norm keeps its input and its result, the division both operands (the same
        # chosen weights and norm)
        total += n * k * r.compute + n * r.compute
    return total


def _topk_softmax_flops(r: Routing) -> sp.Expr:
    return SOFTMAX_FLOPS * r.tokens * r.top_k  # the softmax over the k chosen logits


def _topk_softmax_kept(r: Routing) -> sp.Expr:
    # topk keeps its int64 indices (to scatter the values' gradient back), the softmax its
    # output, in the logits' dtype; a routed_scale multiplies by a Python number, keeping none.
    return r.tokens * r.top_k * (INT64 + r.compute)


@dataclass(frozen=True)
class RouterKind:
    name: str  # the spec's word for it (schema literal)
    label: str  # in tables and diagrams
    description: str
    group_rank: str  # what ranks a group, in words
    # The router module of the generated file: a class of archspec.runtime.routing extending
    # nn.Linear with the kind's buffers; None: a plain nn.Linear.
    module: str | None
    # The routing function of archspec.runtime.routing the generated forward calls; None:
    # the forward writes the kind's lines itself (softmax's, as they always were).
    function: str | None
    buffers: tuple[str, ...]  # float32 tensors of one value per expert, owned by the router
    # The settings `function` takes after the logits and the buffers, by the MoE's names
    # (top_k, groups, top_groups, normalize, scale).
    settings: tuple[str, ...]
    # Whether moe.normalize says anything: topk_softmax's weights sum to 1 as they are.
    renormalises: bool
    # The routing weights' dtype: "stats" (float32) or "compute" (the logits').
    weights_dtype: Literal["stats", "compute"]
    # Elementwise FLOPs from the logits to the weights, before routed_scaling_factor.
    routing_flops: Callable[[Routing], sp.Expr]
    # What autograd keeps of the routing for its backward, in bytes.
    kept_bytes: Callable[[Routing], sp.Expr]
    # Each buffer's shape: "experts" one value per expert, (n_experts,) as DeepSeek-V3 keeps
    # it; "row" the same as one row, (1, n_experts), as ERNIE 4.5 keeps it.
    buffer_shape: Literal["experts", "row"] = "experts"

    def flops(self, r: Routing) -> sp.Expr:
        """Elementwise FLOPs from the logits to the weights, routed_scaling_factor's too."""
        return self.routing_flops(r) + (r.tokens * r.top_k if r.scale != 1.0 else 0)


ROUTERS: dict[str, RouterKind] = {
    kind.name: kind
    for kind in (
        RouterKind(
            "softmax",
            "softmax",
            "float32 softmax over the experts, the top_k kept (Mixtral, DeepSeek-V2)",
            "its best expert",
            module=None,
            function=None,
            buffers=(),
            settings=(),
            renormalises=True,
            weights_dtype="stats",
            routing_flops=_softmax_flops,
            kept_bytes=_softmax_kept,
        ),
        RouterKind(
            "sigmoid",
            "sigmoid + bias",
            "float32 sigmoid scores; e_score_correction_bias added for choosing only (DeepSeek-V3)",
            "the sum of its two best experts",
            module="BiasCorrectedRouter",
            function="sigmoid_route",
            buffers=("e_score_correction_bias",),
            settings=("top_k", "groups", "top_groups", "normalize", "scale"),
            renormalises=True,
            weights_dtype="stats",
            routing_flops=_sigmoid_flops,
            kept_bytes=_sigmoid_kept,
        ),
        RouterKind(
            "topk_softmax",
            "top-k, softmax",
            "the top_k logits, then a softmax over those k in their dtype, as gpt-oss",
            "no group: every expert competes",
            module=None,
            function="topk_softmax_route",
            buffers=(),
            settings=("top_k", "scale"),
            renormalises=False,
            weights_dtype="compute",
            routing_flops=_topk_softmax_flops,
            kept_bytes=_topk_softmax_kept,
        ),
        RouterKind(
            "softmax_bias",
            "softmax + bias",
            "float32 softmax; e_score_correction_bias added for choosing only (ERNIE 4.5)",
            "no group: every expert competes",
            module="RowBiasCorrectedRouter",
            function="softmax_bias_route",
            buffers=("e_score_correction_bias",),
            settings=("top_k", "normalize", "scale"),
            renormalises=True,
            weights_dtype="stats",
            routing_flops=_softmax_bias_flops,
            kept_bytes=_softmax_bias_kept,
            buffer_shape="row",
        ),
        RouterKind(
            "softmax_in_dtype",
            "softmax (logits' dtype)",
            "softmax over the experts in the logits' dtype, the top_k renormalised by their "
            "1-norm (DBRX)",
            "no group: every expert competes",
            module=None,
            function="softmax_in_dtype_route",
            buffers=(),
            settings=("top_k", "normalize", "scale"),
            renormalises=True,
            weights_dtype="compute",
            routing_flops=_softmax_in_dtype_flops,
            kept_bytes=_softmax_in_dtype_kept,
        ),
    )
}
