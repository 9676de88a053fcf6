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

The other modules (`mlp`, `moe`, `shared_experts`, `mla_up_proj`, the linear-attention ones)
are refused: their costs are not modelled.

A selective layout is written `selective` (the attention core) or `selective:` and the modules,
comma-separated (`selective:layernorm,moe_act`): one string, as every recompute setting is.
"""

from __future__ import annotations

from archspec.errors import SpecError, did_you_mean
from archspec.ir.nodes import MoE, Norm

SELECTIVE = "selective"
CORE_ATTN = "core_attn"
LAYERNORM = "layernorm"
MOE_ACT = "moe_act"
MODULES = (CORE_ATTN, LAYERNORM, MOE_ACT)
NOT_MODELLED = ("mlp", "moe", "shared_experts", "mla_up_proj", "gdn_norm_out", "gdp_in_proj",
                "gdp_qkv", "mhc")  # fmt: skip


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
