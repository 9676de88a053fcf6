"""The generated classes: one per distinct composite node, with a readable name.

Nodes are frozen and hashable, so two modules with the same structure are equal nodes. The code
generator writes one class per distinct node (ignoring the node's own attribute name, which is
its parent's business) and the printer shows the same class names, so a model whose layers
differ (a dense first layer, alternating attention) is generated like any other. A kind of
module with one variant keeps its plain name (`Block`, `Attention`); variants are named by what
tells them apart (`EncoderBlock`, `CrossAttention`, `DenseBlock`), falling back to a number.
"""

from __future__ import annotations

from dataclasses import replace

from archspec.ir.nodes import MLP, Attention, Block, Composite, Model, MoE, Node, Repeat, Stack
from archspec.ir.visit import walk

BASE_NAMES = {
    Model: "Model",
    Stack: "Stack",
    Block: "Block",
    Attention: "Attention",
    MLP: "MLP",
    MoE: "MoE",
}


def anonymous(node: Node) -> Node:
    """The node without its own attribute name: the class it needs."""
    return replace(node, name="")


def _traits(node: Node, stack: Stack | None, parent: Node | None = None) -> tuple[str, ...]:
    """What may tell variants of one kind of module apart, as class-name prefixes."""
    role = stack.role.capitalize() if stack is not None else ""
    if isinstance(node, MLP):  # a routed expert, Qwen2-MoE's shared expert or a dense MLP
        kind = "Expert" if isinstance(parent, Repeat) else "Shared" if node.name == "shared" else ""
        return (role, kind or "Dense")
    if isinstance(node, Attention):
        kind = "Cross" if node.cross else "Causal" if node.causal else "Bidirectional"
        return (kind, _reach(node))
    if isinstance(node, Block):
        # ModernBERT's first block, without an attention norm: `First` where others differ.
        first = "First" if node.bare_first else ""
        return (role, "MoE" if isinstance(node.ff, MoE) else "Dense", first, _reach(node.attn))
    return (role,)


def _reach(attention: Attention) -> str:
    """Sliding-window layers and full ones (Gemma 2 alternates them)."""
    return "Sliding" if attention.window is not None else "Full"


def _names(base: str, found: list[tuple[Node, tuple[str, ...]]]) -> list[str]:
    """Prefix each variant with the fewest traits that tell all of them apart."""
    if len(found) == 1:
        return [base]
    width = len(found[0][1])
    for chosen in ([i] for i in range(width)):
        labels = ["".join(traits[i] for i in chosen) for _, traits in found]
        if all(labels) and len(set(labels)) == len(labels):
            return [label + base for label in labels]
    # Several traits together, leaving out those every variant shares.
    varying = [i for i in range(width) if len({traits[i] for _, traits in found}) > 1]
    labels = ["".join(traits[i] for i in varying) for _, traits in found]
    if all(labels) and len(set(labels)) == len(labels):
        return [label + base for label in labels]
    return [f"{base}{i + 1}" for i in range(len(found))]


def class_names(model: Model) -> dict[Node, str]:
    """The generated class of every composite node, keyed by `anonymous(node)`, in order of
    first appearance (the order the classes are written in, leaves of the tree first)."""
    variants: dict[type, list[tuple[Node, tuple[str, ...]]]] = {}
    for placed in walk(model):
        node = placed.node
        if not isinstance(node, Composite):
            continue
        stack = node if isinstance(node, Stack) else None
        stack = stack or next((a for a in placed.ancestors if isinstance(a, Stack)), None)
        key = anonymous(node)
        seen = variants.setdefault(type(node), [])
        if all(key != k for k, _ in seen):
            parent = placed.ancestors[-1] if placed.ancestors else None
            seen.append((key, _traits(node, stack, parent)))
    names: dict[Node, str] = {}
    for cls, found in variants.items():
        for (key, _), name in zip(found, _names(BASE_NAMES[cls], found), strict=True):
            names[key] = name
    return names


def class_name(names: dict[Node, str], node: Node) -> str:
    return names[anonymous(node)]
