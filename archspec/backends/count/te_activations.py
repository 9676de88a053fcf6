"""What a Megatron-Core model built from Transformer Engine's layers keeps for its backward,
where it keeps less than the generated PyTorch code (activations.py counts the latter, and
tests/test_memory.py measures it). NeMo's runs (the `nemo` plan engine) are built so:

- A norm keeps its input and its per-row statistics, not the normalised input: Transformer
  Engine's LayerNormLinear, the norm fused with the projections it feeds, saves `inputmat`,
  `ln_out` (the GEMM's input, which the projection keeps anyway), `mu` and `rsigma`
  (transformer_engine/pytorch/module/layernorm_linear.py, its `save_for_backward`, at
  TransformerEngine d0067d0), and its RMSNorm computes the scale's gradient from the input
  and 1/rms (transformer_engine/pytorch/ops/basic/rmsnorm.py).
- A gated MLP's activation and product are one fused kernel (Megatron-Core's
  `bias_swiglu_impl`, on under `bias_activation_fusion`, which NeMo's recipes set), whose
  autograd function saves only its input, the gate and the up projection side by side
  (megatron/core/fusions/fused_bias_swiglu.py, `SwiGLUFunction.forward`:
  `ctx.save_for_backward(input_for_backward)`): the activation's output is not kept.
- Under fp8 each of the blocks' projections keeps its input quantized, one byte an element
  (LayerNormLinear's `ln_out_to_save` and Linear's saved input are Transformer Engine's
  quantized tensors, the column-wise copy the weight gradient reads); the 16-bit tensor is
  kept only where another op keeps it (the fused attention keeps its output, which the
  output projection reads). The LM head is Megatron-Core's own ColumnParallelLinear, outside
  fp8: it keeps its input as it is.
- Selective recomputation by module (recompute_modules.py): a norm that stands apart from a
  projection, under `layernorm`, keeps only its input (its statistics and output are
  recomputed, the output freed from its readers' saved tensors); under `moe_act` the experts'
  fused gated product is freed from the second projection's saved input (under fp8 that
  projection's quantized copy stays: the checkpoint frees the tensor it returned, not TE's copy).
  Under `mla_up_proj` and `mlp` a checkpoint covers a run of ops (`CheckpointedRegions`): it
  keeps the 16-bit inputs it takes from outside, and nothing inside (its ops run without
  autograd: no quantized copies either); `mla_up_proj`'s queries, keys and values are freed
  from the attention core's saved tensors as well.
- gpt-oss's clamped SwiGLU is Megatron-Core's fused weighted quick-GEGLU (the bridge sets
  quick_gelu with activation_func_clamp_value and glu_linear_offset under
  bias_activation_fusion; megatron/core/fusions/fused_bias_geglu.py,
  `WeightedQuickGeGLUFunction.forward` saves its input, the weights and the offset, at
  Megatron-LM d98e8a6): its input, gate and up side by side, not the clamps' and products'.
- Attention with sinks (gpt-oss's learned logit per head) runs in Transformer Engine's fused
  attention, `softmax_type="learnable"`, which keeps what the fused kernel keeps for any
  attention (FusedAttention serves learnable softmax, FlashAttention not: the backend filter
  of transformer_engine/pytorch/attention/dot_product_attention/utils.py at d0067d0); the
  generated code writes the core out (`sink_attention`) and keeps its probabilities.
- Latent attention's values reach the core as a contiguous copy (multi_latent_attention.py),
  so the core keeps heads × v_dim a position, not kv_up's whole output.
- A mixture's routing weights are applied inside the experts, by their fused activation
  (`weighted_bias_swiglu_impl`, `weighted_bias_quick_geglu_impl` in megatron/core/transformer/
  moe/experts.py, which keep their input and the weights), and the unpermute only scatters
  the expert outputs back (token_dispatcher.py, `unpermute` without probs): the rows' places
  and weights are kept, not the expert output, which the generated code's index_add_ keeps
  scaled. So since Megatron-LM 2659630721 ("Memory efficient token permutation", in
  core_v0.13.0 and later: every Megatron-Bridge release); NeMo 25.04's Megatron-Core 0.12
  still multiplied in the unpermute and kept the expert output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import sympy as sp

from archspec.backends.count.activations import INDEX, ActivationCounter
from archspec.backends.count.recompute_modules import (
    LAYERNORM,
    MLA_UP_PROJ,
    MOE_ACT,
    REGIONS,
    CheckpointedRegions,
    separate_norms,
)
from archspec.ir import ops
from archspec.kinds import NORMS

FLOAT8 = 1  # bytes an element of a quantized (fp8) tensor


@dataclass(frozen=True)
class Float8Copy:
    """The quantized copy of a value a Transformer Engine projection keeps under fp8: a
    storage of its own beside the value's."""

    value: ops.Value


class TransformerEngineCounter(ActivationCounter):
    """Bytes kept for backward by one forward of the stack as Megatron-Core runs it with
    Transformer Engine's layers; `fp8`: the projections run in fp8."""

    discards_outputs = True

    def __init__(self, *args, fp8: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fp8 = fp8
        self.activation_input: dict[ops.Value, ops.Value] = {}  # output storage -> input
        # Storages an output-discarding checkpoint frees after the forward: no reader keeps them.
        self.discarded: set[ops.Value] = set()
        self.regions: CheckpointedRegions | None = None  # the block's, under mla_up_proj, mlp
        self.regions_of = None

    def run(self, op_list) -> None:
        if self.block is None or not self.modules & set(REGIONS):
            super().run(op_list)
            return
        if self.regions_of is not self.block:
            self.regions, self.regions_of = CheckpointedRegions(self.block), self.block
        assert self.regions is not None
        for op in op_list:
            module = self.regions.module(op)
            if module in self.modules:
                self.made(op.out)
                self.checkpointed(op, module)
            else:
                super().run([op])

    def checkpointed(self, op: ops.Op, module: str) -> None:
        """An op inside a checkpoint: the checkpoint keeps what it reads from outside."""
        assert self.regions is not None
        for value in op.inputs:
            if value is not None and value.storage not in self.regions.inside:
                self.keep(value)
        if module == MLA_UP_PROJ and op.out is not None:
            self.discarded.add(op.out.storage)

    def keep(self, value: ops.Value) -> None:
        if value.storage not in self.discarded:
            super().keep(value)

    def op_normop(self, op: ops.NormOp) -> None:
        separate = self.block is not None and id(op.module) in separate_norms(self.block)
        if LAYERNORM in self.modules and separate:
            assert op.out is not None
            self.keep(op.x)  # the checkpoint's input; statistics and output are recomputed
            self.discarded.add(op.out.storage)
            return
        super().op_normop(op)

    def norm_parts(self, norm, x: ops.Value, rows: sp.Expr) -> list:
        """The input and the statistics, without the normalised copy."""
        parts = super().norm_parts(norm, x, rows)
        if NORMS[norm.kind].keeps_normalised:  # (input, statistics, normalised, ...)
            del parts[2]
        return parts

    def op_clampedswiglu(self, op: ops.ClampedSwiGLU) -> None:
        self.keep(op.gate)
        self.keep(op.up)
        assert op.out is not None
        if MOE_ACT in self.modules and op.out.copies != 1:
            self.discarded.add(op.out.storage)

    def op_attend(self, op: ops.Attend) -> None:
        if op.sinks and self.attn == "flash":
            op = replace(op, sinks=False)  # the fused kernel takes the sinks
        v = op.v
        if v.base is not None and v.width != v.storage.width and v.storage not in self.discarded:
            # Latent attention's values are a part of kv_up's output (beside the keys without
            # positions); Megatron-Core hands the core a contiguous copy (`value.contiguous()`
            # in multi_latent_attention.py, or the fused rotation's own output), which is what
            # the core keeps, not kv_up's whole output.
            v = ops.Value(v.name, v.rows, v.width, v.dtype, split=v.split,
                          split_limit=v.split_limit)  # fmt: skip
            self.made(v)
            op = replace(op, v=v)
        super().op_attend(op)

    def op_activationop(self, op: ops.ActivationOp) -> None:
        super().op_activationop(op)
        assert op.out is not None
        self.activation_input[op.out.storage] = op.x

    def op_mul(self, op: ops.Mul) -> None:
        """A gated MLP's product, fused with its activation: the activation's input and the
        other factor, not the activation's output."""
        for gated, other in ((op.a, op.b), (op.b, op.a)):
            source = self.activation_input.get(gated.storage)
            if source is not None:
                for scope in self.scopes:
                    scope.kept.pop(gated.storage, None)
                self.keep(source)
                self.keep(other)
                if MOE_ACT in self.modules and op.a.copies != 1:  # the experts' activation
                    assert op.out is not None
                    self.discarded.add(op.out.storage)
                return
        super().op_mul(op)

    def op_linearop(self, op: ops.LinearOp) -> None:
        if not (self.fp8 and len(self.scopes) > 1):  # outside fp8, or not in a block
            super().op_linearop(op)
            return
        storage = op.x.storage
        owner = next((s for s in reversed(self.scopes) if storage in s.made), self.scopes[0])
        copy = Float8Copy(storage)
        owner.kept.setdefault(copy, self.bytes(storage) * FLOAT8 / self.c)  # type: ignore[index]

    def op_combine(self, op: ops.Combine) -> None:
        """Each routed copy's place (int64) and its weight, which the experts' fused
        activation applied and keeps; not the expert output."""
        routed = self.lengths.rows(op.expert_out)
        self.keep_new(routed, INDEX)
        self.keep_new(routed, self.per_element(op.weights))


def transformer_engine_counter(fp8: bool):
    """The counter class activation_parts builds for a run in fp8 or not."""
    return partial(TransformerEngineCounter, fp8=fp8)
