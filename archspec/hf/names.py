"""Our module names beside transformers', derived from the IR.

Walking the IR gives every parameter-owning module (`leaves`); a family's name rules
(`Family.names`, in `archspec.hf.families`) say what transformers calls each, in the spec's
class (`Naming`).
`count --names hf` shows the result (`hf_module_names`); `tensor_rules.py` builds the rules
that `weights.py` converts checkpoints with. This module must not import torch: `count` never
does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from archspec.errors import SpecError
from archspec.hf.classes import HFClass, hf_class
from archspec.hf.families import family_of
from archspec.hf.family import Family, Target, Where
from archspec.ir.nodes import IR, MLP, Block, Embedding, Linear, Node, Norm, Repeat, Sinks
from archspec.ir.visit import walk
from archspec.safety.limits import MAX_NAMED_COPIES

# --- Walking the IR ----------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """A parameter-owning module of ours, at one concrete place."""

    node: Node
    path: str  # concrete: decoder.blocks.3.attn.q
    symbolic: str  # with index letters: decoder.blocks.i.attn.q
    where: Where


def _ancestry(ancestors: tuple[Node, ...]) -> dict:
    """What a module's ancestors say of it, the same for every copy of it (computed once per
    module, not per copy: DeepSeek-V3 has some 15,000 expert linears below one node)."""
    return dict(
        cross=any(isinstance(a, Block) and a.part("cross_attn") is not None for a in ancestors),
        gated=any(isinstance(a, MLP) and a.gated for a in ancestors),
        residual=next((a.residual for a in ancestors if isinstance(a, Block)), None),
    )


def _where(segments: list[str], indexed: list[bool], ancestry: dict, roles: tuple[str, ...]
           ) -> Where:  # fmt: skip
    """`indexed[k]`: segment k is the index of a repeated module (a block, an expert);
    `ancestry`: _ancestry of the module's ancestors."""
    role = segments[0] if segments[0] in roles and len(segments) > 1 else None
    index = None
    start = 1 if role else 0
    if role and segments[1] == "blocks" and indexed[2]:
        index, start = segments[2], 3
    rest = list(zip(segments[start:], indexed[start:], strict=True))
    return Where(
        role=role,
        index=index,
        local=".".join("*" if is_index else seg for seg, is_index in rest),
        experts=tuple(seg for seg, is_index in rest if is_index),
        roles=roles,
        **ancestry,
    )


def leaves(ir: IR, concrete: bool = True, symbolic_names: bool = True) -> Iterator[Leaf]:
    """Every parameter-owning module; with `concrete`, once per copy with real indices, else
    once per row of the count table, named with index letters (`symbolic_names`) or as the
    table names it (a run of one keeps its index: a lone dense first block, `blocks.0`)."""
    roles = tuple(p.name for p in ir.root.parts if p.name in ("encoder", "decoder"))
    named = 0  # concrete places so far
    for placed in walk(ir.root):
        node = placed.node
        if not isinstance(node, (Embedding, Linear, Norm, Sinks)):
            continue
        if isinstance(node, Norm) and not node.entry.affine:
            continue  # a norm without parameters (OLMo) has no tensor to name
        # One path segment per node below the root: its name, or its index under a Repeat.
        chain = (*placed.ancestors, node)
        indexed = [isinstance(parent, Repeat) for parent in chain[:-1]]
        symbolic = placed.path.split(".")
        ancestry = _ancestry(placed.ancestors)
        if not concrete:
            segments = symbolic if symbolic_names else placed.concrete_path.split(".")
            yield Leaf(
                node,
                ".".join(segments),
                placed.path,
                _where(segments, indexed, ancestry, roles),
            )
            continue
        ranges = []
        for parent, child in zip(chain, chain[1:], strict=False):
            if isinstance(parent, Repeat):
                run = next(r for r in parent.runs if r.node is child)
                ranges.append(run.indices(ir.value))
        named += math.prod(map(len, ranges))
        if named > MAX_NAMED_COPIES:
            raise SpecError(
                f"{ir.name} has more than {MAX_NAMED_COPIES:,} parameter-owning modules to name "
                "one by one",
                hint="a spec this deep or wide is beyond any real checkpoint; count it without "
                "naming its modules",
            )
        positions = [k for k, is_index in enumerate(indexed) if is_index]
        for combo in itertools.product(*ranges):
            segments = list(symbolic)
            for k, value in zip(positions, combo, strict=True):
                segments[k] = str(value)
            yield Leaf(
                node,
                ".".join(segments),
                placed.path,
                _where(segments, indexed, ancestry, roles),
            )


# --- Naming ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Naming:
    """The names of one spec's tensors in one transformers class."""

    cls: HFClass
    family: Family
    base: bool  # names without the base-model prefix
    variant: str = "checkpoint"

    def full(self, name: str, outside: bool = False) -> str:
        if name.startswith("@"):  # outside the base model by construction
            return name[1:]
        prefix = self.family.names.in_variant(self.variant).prefix
        return name if (outside or self.base) else prefix + name

    def target(self, leaf: Leaf) -> Target:
        w = leaf.where
        rules = self.family.names.in_variant(self.variant)
        if w.role is None:
            found = rules.model_in(self.variant)(w)
        elif w.index is None:
            found = rules.stack(w)
        else:
            found = rules.block_in(self.variant)(w)
            if found is not None:
                found = found if isinstance(found, Target) else Target(found)
                found = replace(found, module=f"{rules.blocks(w.role)}.{w.index}.{found.module}")
        if found is None:
            raise SpecError(
                f"'{leaf.symbolic}' has no counterpart in transformers' {self.cls.name}",
                hint="the spec differs from the transformers architecture here; "
                "`archspec import-hf` writes a spec that matches",
            )
        target = found if isinstance(found, Target) else Target(found)
        if not w.experts:
            return target
        module = target.module
        for index in w.experts:
            module = module.replace("*", index, 1)
        return replace(target, module=module)

    def display(self, leaf: Leaf) -> str:
        """The transformers module name for a row of `count --names hf`."""
        t = self.target(leaf)
        text = self.full(t.module, t.outside)
        if t.params:
            text += "." + "/".join(sorted(set(t.params.values())))
        if isinstance(leaf.node, Linear) and leaf.node.tied_to:
            text += f" (tied to {self.full(self.target(_tok_emb_leaf(leaf)).module)})"
        elif t.note:
            text += f" ({t.note})"
        return text


def _tok_emb_leaf(leaf: Leaf) -> Leaf:
    where = Where(None, None, "tok_emb", (), False, False, leaf.where.roles)
    return Leaf(leaf.node, "tok_emb", "tok_emb", where)


def naming(ir: IR, base: bool | None = None, variant: str = "checkpoint") -> Naming:
    """The naming of `ir`'s spec in its transformers class (`hf_class`)."""
    who = ir.identity
    if not who.hf_class:
        raise SpecError(
            f"'{who.name}' has no transformers counterpart (hf_class is null)",
            hint="transformers names exist for specs with an hf_class; see `archspec list`",
        )
    cls = hf_class(who.hf_class)
    return Naming(cls, family_of(cls), cls.base if base is None else base, variant)


def hf_module_names(ir: IR) -> dict[str, str]:
    """Our module path (symbolic and concrete) -> transformers module name, for display."""
    n = naming(ir)
    names: dict[str, str] = {}
    for symbolic_names in (True, False):
        for leaf in leaves(ir, concrete=False, symbolic_names=symbolic_names):
            names.setdefault(leaf.path, n.display(leaf))
    return names
