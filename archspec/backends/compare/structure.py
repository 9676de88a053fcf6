"""What kind of transformer a compiled spec is, read from the IR's nodes (never the YAML).

Each fact is a plain value for JSON (`"n_kv_heads": 8`) with a short label for people
(`GQA`, `SwiGLU`, `RMSNorm, pre-norm`) produced by `label`.
"""

from __future__ import annotations

from typing import Any

from archspec import kinds
from archspec.ir.nodes import IR, MLP, Attention, Block, MoE, Norm, Stack
from archspec.ir.visit import walk

ARCHITECTURE = {
    "encoder": "encoder-only",
    "decoder": "decoder-only",
    "encoder-decoder": "encoder-decoder",
}


def attention_variant(n_heads: int, n_kv_heads: int) -> str:
    """MHA: one key/value head per query head; MQA: one shared; GQA: groups in between."""
    if n_kv_heads == n_heads:
        return "MHA"
    return "MQA" if n_kv_heads == 1 else "GQA"


def structure(ir: IR) -> dict[str, Any]:
    """The architecture facts of the `compare` table, as JSON-ready values."""
    nodes = [placed.node for placed in walk(ir.root)]
    stacks = [n for n in nodes if isinstance(n, Stack)]
    # Self-attention describes the model; cross-attention (encoder-decoder) has the same heads.
    attn = next(n for n in nodes if isinstance(n, Attention) and not n.cross)
    mlp = next(n for n in nodes if isinstance(n, MLP))
    moe = next((n for n in nodes if isinstance(n, MoE)), None)
    block = next(n for n in nodes if isinstance(n, Block))
    norm = next(n for n in nodes if isinstance(n, Norm))
    head = ir.root.lm_head
    n_heads, n_kv_heads = ir.value(attn.n_heads), ir.value(attn.n_kv_heads)
    return {
        "architecture": ARCHITECTURE[ir.root.layout],
        "layers": {s.role: _layers(ir, s) for s in stacks},
        "d_model": ir.value(ir.root.d_model),
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "head_dim": ir.value(attn.head_dim),
        "attention": attention_variant(n_heads, n_kv_heads),
        # For a gated MLP, d_ff is the width of one branch (as in the spec language).
        "d_ff": ir.value(mlp.hidden),
        "activation": mlp.activation,
        "gated": mlp.gated,
        "norm": norm.kind,
        "residual": block.residual,
        "position": stacks[0].position.entry.name,
        "moe": None
        if moe is None
        else {"n_experts": ir.value(moe.n_experts), "top_k": ir.value(moe.top_k)},
        # None: no LM head at all (BERT's encoder), so there is nothing to tie.
        "tied_embeddings": None if head is None else head.tied_to is not None,
        "vocab_size": ir.value(ir.root.vocab_size),
        "max_seq_len": ir.value(stacks[0].max_seq_len),
    }


def _layers(ir: IR, stack: Stack) -> int:
    return sum(ir.value(run.count) for run in stack.blocks.runs)


def label(facts: dict[str, Any], key: str) -> str:
    """The text people read for one fact in the comparison table."""
    if key == "layers":
        layers = facts["layers"]
        if len(layers) == 1:
            return str(next(iter(layers.values())))
        return " + ".join(f"{n} {role[:3]}" for role, n in layers.items())
    if key == "heads":
        return f"{facts['n_heads']} / {facts['n_kv_heads']}"
    if key == "mlp":
        activation = kinds.activation(facts["activation"])
        if not facts["gated"]:
            return activation.label
        return f"{activation.glu_name or 'GLU'} (gated {activation.label})"
    if key == "norm":
        norm, residual = kinds.norm(facts["norm"]), kinds.residual(facts["residual"])
        return f"{norm.label}, {residual.label}"
    if key == "position":
        return kinds.position(facts["position"]).label
    if key == "moe":
        moe = facts["moe"]
        return "—" if moe is None else f"{moe['n_experts']} experts, top-{moe['top_k']}"
    if key == "tied_embeddings":
        tied = facts["tied_embeddings"]
        return "no LM head" if tied is None else "yes" if tied else "no"
    return f"{facts[key]:,}" if isinstance(facts[key], int) else str(facts[key])
