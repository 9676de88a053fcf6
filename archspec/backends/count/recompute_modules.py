"""Megatron-Core's selective recomputation by module (`recompute_modules`, with
`recompute_granularity: selective`): the parts of each layer whose activations the backward
recomputes, as NeMo's recipes name them.

Which modules, from megatron/core/transformer/transformer_config.py at Megatron-LM d98e8a6
(`recompute_modules`, default ["core_attn"]):

- `core_attn`: the attention core (scores, softmax, AV) under a normal checkpoint: its inputs
  kept, nothing of its own (what `selective` always meant here).
- `layernorm`: the norms Megatron-Core builds apart from a projection, under an
  output-discarding checkpoint (`CheckpointWithoutOutput`): the input kept, the statistics and
  the output not (each reader's saved input is freed after the forward and recomputed before
  its backward). With Transformer Engine's layers a dense attention's input norm is fused into
  its q/k/v projection (`TELayerNormColumnParallelLinear`, the layer's `input_layernorm` an
  IdentityOp) and a dense MLP's into its first projection; a MoE layer's `pre_mlp_layernorm`
  and a latent attention's input norm stand apart (megatron/core/models/gpt/gpt_layer_specs.py;
  transformer_layer.py sets `recompute_pre_mlp_layernorm` only for a norm that is not an
  IdentityOp).
- `moe_act`: the experts' activation (the fused gated product), output-discarding: the
  experts' second projection does not keep its input. Under fp8 that projection keeps its own
  quantized copy, which the checkpoint does not free (te_activations.py).
- `mla_up_proj`: a latent attention's up projections and rotations, output-discarding
  (multi_latent_attention.py, `qkv_up_proj_and_rope_apply` under `CheckpointWithoutOutput`):
  the query and key/value latents' norms (Transformer Engine fuses them into the up
  projections, `TELayerNormColumnParallelLinear`), both up projections, the rotation of the
  queries and of the one shared key, and the heads' keys and queries put together. The
  checkpoint keeps its inputs (the two latents before their norms and the shared key before
  its rotation, 16-bit) and nothing inside; the queries, keys and values it returns are freed
  once the attention core has run, from the core's saved tensors too, and rebuilt before its
  backward. Megatron-Core refuses it for a model without latent attention, and so does plan.
- `mlp`: a dense layer's MLP under a normal checkpoint (transformer_layer.py,
  `recompute_mlp`, on only where the layer is not a MoE layer): with Transformer Engine's
  layers the MLP's norm is fused into its first projection, so the checkpoint keeps the
  MLP's input, the residual stream, and nothing of the norm, the projections or the
  activation. A MoE layer's MLP is untouched (`moe`, not modelled).

The other modules (`moe`, `shared_experts`, the linear-attention ones) are refused: their
costs are not modelled.

A selective layout is written `selective` (the attention core) or `selective:` and the modules,
comma-separated (`selective:layernorm,moe_act`): one string, as every recompute setting is.
"""

from __future__ import annotations

from archspec.errors import SpecError, did_you_mean
from archspec.ir import ops
from archspec.ir.nodes import MLP, MoE, Norm

SELECTIVE = "selective"
CORE_ATTN = "core_attn"
LAYERNORM = "layernorm"
MOE_ACT = "moe_act"
MLA_UP_PROJ = "mla_up_proj"
MLP_MODULE = "mlp"
MODULES = (CORE_ATTN, LAYERNORM, MOE_ACT, MLA_UP_PROJ, MLP_MODULE)
# Checkpoints over a run of ops, found by following the data from the modules that open them.
REGIONS = (MLA_UP_PROJ, MLP_MODULE)
NOT_MODELLED = ("moe", "shared_experts", "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc")


def selective_modules(recompute: str) -> frozenset[str]:
    """The modules a recompute setting recomputes selectively (none unless selective)."""
    if recompute == SELECTIVE:
        return frozenset({CORE_ATTN})
    if recompute.startswith(SELECTIVE + ":"):
        return frozenset(recompute.split(":", 1)[1].split(","))
    return frozenset()


def is_selective(recompute: str) -> bool:
    return recompute == SELECTIVE or recompute.startswith(SELECTIVE + ":")


def selective(modules: list[str]) -> str:
    """The recompute setting for `modules` (Megatron-Core's names), checked: `selective` for
    the attention core alone."""
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        modelled = ", ".join(MODULES)
        why = "not modelled" if set(unknown) <= set(NOT_MODELLED) else "not a module"
        raise SpecError(
            f"--recompute-modules {','.join(unknown)}: {why} (archspec times {modelled})",
            hint=did_you_mean(unknown[0], MODULES),
        )
    if not modules:
        raise SpecError("--recompute-modules needs at least one module", hint=", ".join(MODULES))
    ordered = [m for m in MODULES if m in modules]
    return SELECTIVE if ordered == [CORE_ATTN] else f"{SELECTIVE}:{','.join(ordered)}"


def separate_norms(block) -> set[int]:
    """The ids of the norms of `block` that Megatron-Core with Transformer Engine's layers
    builds apart from a projection: a MoE sublayer's and a latent attention's."""
    out = set()
    for sub in block.sublayers:
        latent = getattr(sub.layer, "latent", None) is not None
        if isinstance(sub.norm, Norm) and (isinstance(sub.layer, MoE) or latent):
            out.add(id(sub.norm))
    return out


def check_modules(ir, recompute: str) -> None:
    """Refuse `mla_up_proj` for a model without latent attention, as Megatron-Core's
    TransformerConfig does ("mla_up_proj in recompute_modules is only supported with
    multi_latent_attention")."""
    from archspec.ir.nodes import Attention
    from archspec.ir.visit import walk

    if MLA_UP_PROJ not in selective_modules(recompute):
        return
    if not any(isinstance(p.node, Attention) and p.node.latent is not None
               for p in walk(ir.root)):  # fmt: skip
        raise SpecError(
            "--recompute-modules mla_up_proj: the model has no latent attention, whose up "
            "projections it recomputes (Megatron-Core refuses it too)",
            hint="layernorm, moe_act or core_attn",
        )


class CheckpointedRegions:
    """Which of one block's ops, visited in forward order (sublayers included), run inside
    the checkpoint of `mla_up_proj` or `mlp`: the ops the modules open (a latent attention's
    two latent norms and two up projections; a dense MLP's norm) and every op reading what
    one of them made, up to the attention core (which reads the queries, keys and values but
    is not recomputed) and the MLP's last projection (whose output leaves the checkpoint).
    The one shared key's rotation reads the key/value down projection's output, outside, and
    is inside too."""

    def __init__(self, block) -> None:
        self.opens: dict[int, str] = {}  # module id -> the region it opens
        self.closes: set[int] = set()  # module ids whose output leaves the region
        self.down: set[int] = set()  # latent attentions' key/value down projections
        for sub in block.sublayers:
            layer, latent = sub.layer, getattr(sub.layer, "latent", None)
            if latent is not None:
                parts = (latent.q_norm, latent.kv_norm, layer.q, layer.v)
                self.opens.update({id(m): MLA_UP_PROJ for m in parts if m is not None})
                self.down.add(id(layer.k))
            elif isinstance(layer, MLP) and sub.norm is not None:
                self.opens[id(sub.norm)] = MLP_MODULE
                self.closes.add(id(layer.down))
        self.inside: dict[ops.Value, str] = {}  # storages made in a region -> its module
        self.rotated: set[ops.Value] = set()  # the down projections' outputs

    def module(self, op: ops.Op) -> str:
        """The region `op` runs in ("" outside), noting what it makes."""
        owner = getattr(op, "module", None)
        name = ""
        if isinstance(op, (ops.LinearOp, ops.NormOp)):
            name = self.opens.get(id(owner), "")
        if not name and not isinstance(op, (ops.Attend, ops.Call, ops.Blocks)):
            for value in op.inputs:
                if value is None:
                    continue
                if value.storage in self.inside:
                    name = self.inside[value.storage]
                    break
                if isinstance(op, ops.Rope) and value.storage in self.rotated:
                    name = MLA_UP_PROJ
                    break
        if op.out is not None:
            if isinstance(op, ops.LinearOp) and id(owner) in self.down:
                self.rotated.add(op.out.storage)
            if name and id(owner) not in self.closes:
                self.inside[op.out.storage] = name
        return name
