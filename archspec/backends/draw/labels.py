"""The words in a diagram's boxes: each module's kind and shape, from the IR and the catalogue.

Kinds are described by their catalogue entries (`label`, `description`, `glu_name`), never by
comparing their names, so a kind added to the catalogue is drawn without an edit here.
"""

from __future__ import annotations

import itertools

from archspec.ir.nodes import IR, MLP, Attention, Embedding, Linear, MoE, Norm, Stack


def n(value: int) -> str:
    return f"{value:,}"


def attention(ir: IR, node: Attention, stack: Stack) -> tuple[str, str]:
    if node.cross:
        title = "Cross-attention (keys, values: encoder)"
    elif node.causal:
        title = "Causal self-attention"
    else:
        title = "Self-attention"
    heads, kv = ir.value(node.n_heads), ir.value(node.n_kv_heads)
    detail = f"{heads} heads × {ir.value(node.head_dim)}"
    if kv != heads:
        detail += f", {kv} kv head" + ("s" if kv > 1 else "") + (" (MQA)" if kv == 1 else " (GQA)")
    position = node.position.entry
    # Positions that act inside attention belong in its box; those added to the embeddings
    # have a box of their own.
    if position.rotary:
        theta = node.position.theta
        detail += f", {position.label} θ=" + (
            f"{theta:.0f}" if theta == int(theta) else f"{theta:g}"
        )
    elif position.score_bias:
        detail += f", {position.label}"
        if stack.rel_bias is not None:
            detail += f", {node.position.num_buckets} buckets"
    return title, detail


def mlp(ir: IR, node: MLP) -> tuple[str, str]:
    entry = node.entry
    d_in, hidden = ir.value(node.up.in_features), ir.value(node.hidden)
    d_out = ir.value(node.down.out_features)
    title = f"{entry.glu_name} MLP" if node.gated and entry.glu_name else f"MLP, {entry.label}"
    return title, f"{n(d_in)} → {n(hidden)} → {n(d_out)}"


def router(ir: IR, node: MoE) -> tuple[str, str]:
    experts, top_k = ir.value(node.n_experts), ir.value(node.top_k)
    return (
        "Router",
        f"top-{top_k} of {experts} experts, {n(ir.value(node.router.in_features))} → {experts}",
    )


def experts(ir: IR, node: MoE) -> tuple[str, str]:
    title, detail = mlp(ir, node.expert)
    return f"{ir.value(node.n_experts)} experts: {title}", detail


def norm(node: Norm, where: str = "") -> tuple[str, str]:
    title = node.entry.label + (f" ({where})" if where else "")
    return title, ""


def embedding(ir: IR, node: Embedding, title: str) -> tuple[str, str]:
    return title, f"{n(ir.value(node.num))} × {n(ir.value(node.dim))}"


def linear(
    ir: IR, node: Linear, title: str, tied_note: str = "tied to the embedding"
) -> tuple[str, str]:
    detail = f"{n(ir.value(node.in_features))} → {n(ir.value(node.out_features))}"
    if node.tied_to:
        detail += f", {tied_note}"
    return title, detail


def layers(runs: list[range]) -> str:
    """Where a block variant sits, from the layers of its runs: "layers 0–31", "layer 0",
    "layers 1, 3, 5, …, 31"."""
    # Arithmetic on the runs, never a list of every layer: a run may hold a billion.
    runs = [run for run in runs if run]
    total = sum(len(run) for run in runs)
    first, last = min(run[0] for run in runs), max(run[-1] for run in runs)
    if total == 1:
        return f"layer {first}"
    if last - first + 1 == total:
        return f"layers {first}–{last}"
    shown = sorted(itertools.chain.from_iterable(run[:4] for run in runs))[:4]
    if total <= 4:
        return "layers " + ", ".join(map(str, shown))
    return "layers " + ", ".join(map(str, shown[:3])) + f", …, {last}"
