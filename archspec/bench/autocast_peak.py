"""The peak of bench's training step: fp32 weights under `torch.autocast` (bf16 or fp16).

count's bf16 figures describe a model whose weights and activations are all bf16. bench trains
as `torch.amp` recommends instead: fp32 weights, gradients and AdamW moments, and autocast
running the matmuls in the low dtype. What a step then holds, read from autocast's op lists
(ATen's autocast_mode.h) and measured with bench's tensor tracker
(tests/test_bench_autocast_peak.py):

- the residual stream is fp32: the embedding reads an fp32 table, and fp32 + bf16 is fp32;
  so are a norm's output and what it keeps (CUDA's autocast runs layer_norm and rms_norm in
  fp32; the CPU's passes them through, the same for an fp32 input) and RoPE's rotated q and
  k (the angles are in the stream's dtype);
- a Linear (and SDPA) casts each fp32 input to the low dtype and keeps that copy: a copy per
  consumer, so q, k and v projections reading one normed input keep three; a low-dtype input
  (the attention output, the MLP's hidden units) is kept as it is;
- autocast caches one low-dtype copy of each weight a Linear reads, and the Linear keeps it
  for its backward: 2 bytes per matmul weight, alive from the forward until that Linear's
  backward (biases are cast too but not kept: addmm's backward does not read them);
- a mixture's experts as a Linear: the generated `grouped_linear` casts its input and the
  stacked weight to autocast's dtype itself (neither torch._grouped_mm nor the loop's
  mm(out=...) is on autocast's lists) and keeps both copies, each call its own;
- the loss runs over `logits.float()`: the log-probabilities and both gradients of the loss's
  backward are fp32 (B·S·vocab·4 each), which is the step's peak at bench's sizes.

The weights, their gradients and AdamW's moments are fp32 (16 bytes per parameter); bench's
AdamW is the fused one, which updates in place (`steps.adamw`), so the optimizer step holds
nothing beyond the gradients.

On a GPU, rms_norm with an fp32 input and weight runs `_fused_rms_norm`, whose backward keeps
the input and 1/rms only (FusedRmsNormBackward0's saved input, weight and result1 in torch's
autograd/generated/Functions.h); the CPU runs the composite, which also keeps the normalised
input. The counter follows the device.

Exact, against the tracker, for decoders with fused attention (llama, gpt2 and mixtral
shapes, tests/test_bench_autocast_peak.py) at the moment the step peaks at bench's sizes, the
loss's backward (with a vocabulary much wider than the model, no later moment comes near it).
Not exact, and not claimed: the later moments (the head's, the final norm's or a block's
backward, the end of the backward), which reuse count's formulas with fp32 gradients. Where
the vocabulary is narrow they can matter: llama at vocab 500, d_model 384, S 512 peaked in
the final RMSNorm's backward, 0.06% above the prediction; gpt2 at vocab 1000, d_model 512
peaked in the loss's backward, 0.5% below count's last-block formula. Nor T5's biased
attention, which the CPU's math kernel computes in fp32 (7% below), nor fp16, whose grad
scaler adds a few scalars (12 bytes).
"""

from __future__ import annotations

import sympy as sp

from archspec.backends.count.activations import STATS, ActivationCounter
from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.memory import MemoryFigures
from archspec.backends.count.params import parameter_count
from archspec.backends.count.passes import B
from archspec.backends.count.rank_peak import leaf_tensors
from archspec.backends.count.step_peak import RankTerms, StepPeak, step_peak
from archspec.bench.mesh_layout import mesh_dims
from archspec.ir import ops
from archspec.ir.nodes import IR
from archspec.kinds import NORMS

FP32 = 4
LOW = 2  # bf16 and fp16: the dtype autocast runs matmuls in


class AutocastCounter(ActivationCounter):
    """What one training forward keeps under autocast with fp32 weights: each value in the
    dtype autocast gives it (the module docstring), tracked by storage."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.c = LOW  # what count's ops keep "in the compute dtype" inside a low-dtype op
        self.sdpa_mask_bytes = 1 if self.device != "cpu" else LOW
        self.widths: dict[ops.Value, int] = {}  # storage -> bytes per element
        self.routed: set[ops.Value] = set()  # the rows a mixture dispatched to its experts
        self.in_experts = False
        self.n_experts: sp.Expr = sp.Integer(1)  # the last router's, read inside its experts

    def width(self, value: ops.Value) -> int:
        """Bytes per element of a compute value: what made it says; fp32 where nothing did
        (a block's input: the residual stream; the angles and masks the stack made)."""
        return self.widths.get(value.storage, FP32)

    def bytes(self, value: ops.Value) -> sp.Expr:
        if value.dtype != "compute":
            return super().bytes(value)
        return self.lengths.elements(value) * self.width(value)

    def run(self, op_list) -> None:
        for op in op_list:
            # Known before the op runs (an op may keep its own output); a sublayer's or the
            # blocks' output is made by the ops inside, which set it.
            out = op.out
            structural = isinstance(op, (ops.Call, ops.Blocks))
            if out is not None and out.dtype == "compute" and not structural:
                self.widths.setdefault(out.storage, self.out_width(op))
            super().run([op])

    def out_width(self, op: ops.Op) -> int:
        if isinstance(op, (ops.LinearOp, ops.Attend)):
            return LOW
        if isinstance(op, ops.Combine):
            return FP32  # the expert outputs scaled by fp32 routing weights
        if isinstance(op, ops.Lookup):
            return FP32  # the fp32 table's rows
        if isinstance(op, ops.NormOp):
            return FP32 if self.device != "cpu" else self.width(op.x)
        if isinstance(op, (ops.Mul, ops.Add)):
            return max(self.width(op.a), self.width(op.b))  # type promotion
        if isinstance(op, ops.ClampedSwiGLU):
            return max(self.width(op.gate), self.width(op.up))
        if isinstance(op, ops.Rope):
            return max(self.width(op.x), self.width(op.angles))
        if isinstance(op, ops.Concat):
            return max(self.width(p) for p in op.parts)
        x = getattr(op, "x", None)
        return self.width(x) if isinstance(x, ops.Value) else FP32

    def keep_low(self, value: ops.Value) -> None:
        """An autocast op keeps its input in the low dtype: the input itself when it is, else
        the cast copy it made (one per op: autocast caches casts of weights only)."""
        if self.width(value) == LOW:
            self.keep(value)
        else:
            self.keep_new(self.lengths.elements(value), LOW, split=value.split, rows=value.rows)

    def op_call(self, op: ops.Call) -> None:
        # A mixture's experts: one Linear of the IR stands for n_experts stacked weights.
        experts = bool(op.args) and op.args[0].storage in self.routed
        outer, self.in_experts = self.in_experts, self.in_experts or experts
        try:
            super().op_call(op)
        finally:
            self.in_experts = outer
        if experts:  # their output is their last projection's, in autocast's dtype
            self.widths[op.out.storage] = LOW

    def op_route(self, op: ops.Route) -> None:
        super().op_route(op)
        self.n_experts = op.n_experts

    def op_dispatch(self, op: ops.Dispatch) -> None:
        super().op_dispatch(op)
        self.routed.add(op.out.storage)

    def op_combine(self, op: ops.Combine) -> None:
        # As count's, with the scaled expert outputs index_add_ keeps in fp32.
        saved, self.c = self.c, FP32
        try:
            super().op_combine(op)
        finally:
            self.c = saved

    def op_linearop(self, op: ops.LinearOp) -> None:
        self.keep_low(op.x)
        # The weight's low-dtype copy (autocast's cached one, or grouped_linear's of the
        # stacked experts), kept by the Linear for its backward.
        weight = op.module.in_features * op.module.out_features * LOW
        if self.in_experts:
            weight *= self.n_experts
        self.scopes[-1].kept.setdefault(("weight copy", id(op.module)), weight)  # type: ignore[index]

    def op_attend(self, op: ops.Attend) -> None:
        written_out = op.softcap is not None or op.sinks  # no fused kernel: count's figures
        if self.attn != "flash" or self.recompute != NO_RECOMPUTE or written_out:
            super().op_attend(op)  # kept in the low dtype (self.c), as count keeps it
            return
        # The fused kernel keeps q, k and v as it got them (RoPE's fp32 q and k cast), its
        # output, and an fp32 log-sum-exp per row.
        for value in (op.q, op.k, op.v):
            self.keep_low(value)
        self.keep(op.out)
        self.keep_new(B * op.heads * self.lengths.queries, STATS, split=True)
        if op.mask in self.built_masks:
            self.keep_low(op.mask)  # autocast casts SDPA's mask with q, k and v
        self.keep_window_mask(op)

    def norm_parts(self, norm, x: ops.Value, rows: sp.Expr) -> list:
        width = self.width(x)
        work = FP32 if self.device != "cpu" else width  # CUDA's autocast: norms in fp32
        saved, self.c = self.c, work
        try:
            parts = super().norm_parts(norm, x, rows)
        finally:
            self.c = saved
        if parts[0] is None and work != width:  # the fp32 copy autocast made is kept
            parts[0] = (self.lengths.elements(x), work, x.split, x.rows)
        entry = NORMS[norm.kind]
        if self.device != "cpu" and entry.keeps_normalised and entry.torch_class == "RMSNorm":
            parts.pop(2)  # _fused_rms_norm keeps the input and 1/rms alone
        return parts

    def op_loss(self, op: ops.Loss) -> None:
        # bench's loss: cross_entropy over `logits.float()`: fp32 log-probabilities, the
        # targets (int64) and the weight sum (one fp32 scalar).
        self.keep_new(self.lengths.elements(op.logits), FP32)
        self.keep_new(self.lengths.rows(op.logits), 8, rows="targets")
        self.keep_new(sp.Integer(1), FP32, rows="targets")


def autocast_step_peak(ir: IR, m: MemoryFigures) -> StepPeak:
    """The peak of bench's training step under autocast; `m`: count's fp32 figures (fp32
    weights, gradients and AdamW moments) with the attention kernel and device of the run."""
    gradients = m.gradients
    total = parameter_count(ir.root)

    def block_moment(moment, name: str) -> sp.Expr:
        return moment.activations + gradients * moment.made_params / total

    # step_peak's terms for one device's own layout (made for a rank of `parallelize`, which
    # also trains fp32 parameters with an fp32 loss): the counter, fp32 gradients, and what
    # the step holds besides.
    terms = RankTerms(
        counter_class=AutocastCounter,
        gradients=gradients,
        block_moment=block_moment,
        # At the loss's backward, the loss step() holds and backward's gradient seed (one
        # fp32 scalar each); nll_loss's weight sum, counted as kept, is freed by then.
        held=lambda name: FP32 if name == "loss backward" else 0,
        optimizer_temporaries=sp.Integer(0),  # fused AdamW updates in place
        param_bytes=FP32,
    )
    return step_peak(ir, m, "fused", rank=terms)


def adamw_step_counters(ir: IR) -> int:
    """Bytes of fused AdamW's step counts: one fp32 scalar per parameter tensor, on the
    parameters' device (torch.optim.AdamW keeps `state["step"]` a tensor when fused). A
    mixture's experts are stacked, one tensor per projection for all of them."""
    tensors, experts = 0, set()
    for node, layer, expert, shapes in leaf_tensors(ir, mesh_dims(1), 0):
        if expert and (layer, id(node)) in experts:
            continue  # another expert's slice of the same stacked tensor
        experts.add((layer, id(node)))
        tensors += len(shapes)
    return FP32 * tensors
