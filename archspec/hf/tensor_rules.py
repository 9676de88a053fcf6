"""The rules between transformers' tensors and ours, for converting checkpoints.

For every tensor of a spec in its transformers class, a `TensorRule` names the transformers
tensor, the tensor(s) of ours it holds and the operation between them (a rename, GPT-2's Conv1D
transpose, a fused query/key/value projection, BLOOM's per-head and Falcon's per-group
interleaving, Mixtral's stacked experts or DBRX's concatenated ones, a tied copy), plus the
buffers some checkpoints carry, with a check of their values.
The names come from `names.py`; `weights.py` applies the rules. This module needs torch, so
only weight conversion imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from archspec.hf.family import BufferCheck, Shape
from archspec.hf.names import Naming, leaves
from archspec.ir.nodes import IR, Embedding, Linear, Node, Norm, Router, Sinks
from archspec.kinds.positions.sinusoidal import FUNCTIONS
from archspec.runtime import position_tables

# --- Buffers that some checkpoints store ---------------------------------------------------
#
# Each family lists its buffers (`Family.buffers`) with the name of a check; the checks are
# here, where torch is. A check says what is wrong with a stored buffer's value, or None when
# it is right.

Check = Callable[[torch.Tensor], str | None]


def _anything(t: torch.Tensor) -> str | None:
    return None


def _is_zero(t: torch.Tensor) -> str | None:
    return None if t.is_meta or not torch.any(t != 0) else "is not all zeros"


def _is_arange(t: torch.Tensor) -> str | None:
    if t.is_meta:
        return None
    expected = torch.arange(t.shape[-1]).expand_as(t)
    return None if torch.equal(t.long(), expected) else "is not 0, 1, 2, ..."


def _is_causal_mask(t: torch.Tensor) -> str | None:
    if t.is_meta or t.dim() < 2:
        return None
    n, m = t.shape[-2:]
    expected = torch.tril(torch.ones(n, m, dtype=torch.bool)).expand(t.shape)
    return None if torch.equal(t.bool(), expected) else "is not a causal (lower-triangular) mask"


def _is_inv_freq(ir: IR) -> Check:
    theta = ir.root.stacks[0].position.theta

    def check(t: torch.Tensor) -> str | None:
        if t.is_meta:
            return None
        dim = 2 * t.numel()
        expected = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        if torch.allclose(t.double().flatten(), expected, rtol=1e-4):
            return None
        return f"does not match the spec's rope theta ({theta:g})"

    return check


def _is_sinusoids(ir: IR) -> Check:
    position = ir.root.stacks[0].position
    encodings = getattr(position_tables, FUNCTIONS[position.layout])

    def check(t: torch.Tensor) -> str | None:
        if t.is_meta or t.dim() != 2:
            return None
        rows, dim = t.shape
        expected = encodings(torch.arange(rows) + position.offset, dim)
        if torch.allclose(t.float(), expected, atol=1e-6):
            return None
        return f"does not hold the spec's fixed sinusoids ({position.layout})"

    return check


def _is_rope_sinusoids(ir: IR) -> Check:
    """RoFormer's frozen rotary table: a row per position, head_dim wide, the sines of the
    angles p / theta ** (2i / head_dim) then their cosines."""
    theta = ir.root.stacks[0].position.theta

    def check(t: torch.Tensor) -> str | None:
        if t.is_meta or t.dim() != 2:
            return None
        rows, dim = t.shape
        freqs = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
        angles = torch.arange(rows, dtype=torch.float64)[:, None] * freqs
        expected = torch.cat([angles.sin(), angles.cos()], dim=-1)
        if torch.allclose(t.double(), expected, atol=1e-6):
            return None
        return f"does not hold the rotary sines and cosines of the spec's theta ({theta:g})"

    return check


# A family's check names -> the check for one spec (RoPE's frequencies depend on its theta).
CHECKS: dict[BufferCheck, Callable[[IR], Check]] = {
    "anything": lambda ir: _anything,
    "zeros": lambda ir: _is_zero,
    "arange": lambda ir: _is_arange,
    "causal_mask": lambda ir: _is_causal_mask,
    "rope_inv_freq": _is_inv_freq,
    "sinusoids": _is_sinusoids,
    "rope_sinusoids": _is_rope_sinusoids,
}


# --- Operations between a transformers tensor and ours -------------------------------------


@dataclass(frozen=True)
class TensorRule:
    """One transformers tensor and the tensors of ours it holds.

    `join` builds the transformers tensor from ours; `split` does the reverse. A rule whose
    tensor another rule also provides (tied copies) is `optional`; a rule with no tensor of
    ours is a buffer that is only checked.
    """

    hf: str
    ours: tuple[str, ...]
    shapes: tuple[Shape, ...]  # of ours, in order
    kind: str = "copy"  # copy | transpose | concat | concat_t | heads | experts | buffer
    # heads: the groups the fused projection interleaves (its key/value heads): each holds
    # its query heads' rows, then its key rows, then its value rows.
    groups: int = 0
    group: int = 1  # experts: tensors of ours per expert
    interleaved: bool = False  # experts: a fused expert's parts alternate channel by channel
    transposed: bool = False  # experts: each expert's matrix stored (in, out)
    flat: bool = False  # experts: concatenated along rows in one 2-D tensor, not stacked
    optional: bool = False
    check: Callable[[torch.Tensor], str | None] | None = None
    buffer_shape: Shape | None = None  # a buffer transformers' own state dict holds (zeros)

    def join(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        k = self.kind
        if k == "copy":
            return tensors[0]
        if k == "transpose":
            return tensors[0].t()
        if k == "concat":
            return torch.cat(tensors, 0)
        if k == "concat_t":
            return torch.cat(tensors, 0).t()
        if k == "heads":
            per_group = [t.reshape(self.groups, -1, *t.shape[1:]) for t in tensors]
            return torch.cat(per_group, 1).reshape(-1, *tensors[0].shape[1:])
        if k == "experts":
            g = self.group
            fuse = self._interleave if self.interleaved else lambda parts: torch.cat(parts, 0)
            chunks = [fuse(tensors[e : e + g]) for e in range(0, len(tensors), g)]
            if self.transposed and chunks[0].dim() == 2:  # a bias has nothing to transpose
                chunks = [c.t() for c in chunks]
            return torch.cat(chunks, 0) if self.flat else torch.stack(chunks, 0)
        raise ValueError(k)

    @staticmethod
    def _interleave(parts: list[torch.Tensor]) -> torch.Tensor:
        """Equal parts alternating row by row: part 0's row 0, part 1's row 0, ..."""
        return torch.stack(parts, 1).flatten(0, 1)

    def split(self, t: torch.Tensor) -> list[torch.Tensor]:
        k = self.kind
        if k == "copy":
            return [t]
        if k == "transpose":
            return [t.t()]
        if k in ("concat", "concat_t"):
            x = t.t() if k == "concat_t" else t
            return list(x.split([s[0] for s in self.shapes], 0))
        if k == "heads":
            rest = t.shape[1:]
            sizes = [s[0] // self.groups for s in self.shapes]
            parts = t.reshape(self.groups, -1, *rest).split(sizes, 1)
            return [p.reshape(-1, *rest) for p in parts]
        if k == "experts":
            g = self.group
            sizes = [s[0] for s in self.shapes[:g]]
            if self.flat:
                t = t.unflatten(0, (len(self.shapes) // g, -1))
            experts = t.unbind(0)
            if self.transposed and t.dim() == 3:
                experts = [e.t() for e in experts]
            if self.interleaved:
                return [p for e in experts for p in e.unflatten(0, (-1, g)).unbind(1)]
            return [piece for e in experts for piece in e.split(sizes, 0)]
        raise ValueError(k)

    def hf_shape(self) -> Shape:
        """The shape `join` gives, worked out from ours without building it (a MoE's
        expert rules join tens of thousands of tensors)."""
        if not self.ours:
            return self.buffer_shape or ()
        first = self.shapes[0]
        k = self.kind
        if k == "copy":
            return first
        if k == "transpose":
            return first[::-1]
        if k in ("concat", "heads"):
            return (sum(s[0] for s in self.shapes), *first[1:])
        if k == "concat_t":
            return (sum(s[0] for s in self.shapes), *first[1:])[::-1]
        if k == "experts":
            # Every expert's parts fused along rows (cat and interleave give the same shape),
            # each expert transposed if stored (in, out), then stacked.
            chunk = (sum(s[0] for s in self.shapes[: self.group]), *first[1:])
            if self.transposed and len(chunk) == 2:
                chunk = chunk[::-1]
            n = len(self.shapes) // self.group
            return (n * chunk[0], *chunk[1:]) if self.flat else (n, *chunk)
        raise ValueError(k)


# --- Rules ---------------------------------------------------------------------------------


def _our_params(ir: IR, node: Node) -> list[tuple[str, Shape]]:
    v = ir.value
    if isinstance(node, Embedding):
        return [("weight", (v(node.num), v(node.dim)))]
    if isinstance(node, Linear):
        params = [] if node.tied_to else [("weight", (v(node.out_features), v(node.in_features)))]
        params += [("bias", (v(node.out_features),))] if node.bias else []
        # a router's kind may own a float32 tensor per expert (buffers saved with the weights)
        owned = node.entry.buffers if isinstance(node, Router) else ()
        row = isinstance(node, Router) and node.entry.buffer_shape == "row"
        shape = (1, v(node.out_features)) if row else (v(node.out_features),)
        return params + [(name, shape) for name in owned]
    if isinstance(node, Norm):
        if not node.entry.affine:
            return []
        return [("weight", (v(node.dim),))] + ([("bias", (v(node.dim),))] if node.bias else [])
    if isinstance(node, Sinks):  # a parameter of the attention, named as the leaf itself
        return [("", (v(node.heads),))]
    raise TypeError(node)


@dataclass
class _Group:
    kind: str
    parts: int  # tensors of ours per slice (experts: gate and up share gate_up_proj)
    groups: int = 0  # heads: the target's own group count, else the key/value heads
    interleaved: bool = False  # experts: the Target's layout
    transposed: bool = False
    flat: bool = False
    members: list[tuple[int, str, Shape]] = field(default_factory=list)


def tensor_rules(n: Naming, ir: IR) -> list[TensorRule]:
    """Every transformers tensor of the spec, with the tensors of ours it holds."""
    groups: dict[str, _Group] = {}
    aliases: list[TensorRule] = []
    order: list[str] = []
    params: dict[int, list[tuple[str, Shape]]] = {}  # by node: the same for each of its copies
    for leaf in leaves(ir):
        t = n.target(leaf)
        if id(leaf.node) not in params:
            params[id(leaf.node)] = _our_params(ir, leaf.node)
        for param, shape in params[id(leaf.node)]:
            ours = f"{leaf.path}.{param}" if param else leaf.path
            name = (t.params or {}).get(param, param)
            hf = n.full(f"{t.module}.{name}" if name else t.module, t.outside)
            if t.kind == "experts":
                kind, part = "experts", int(leaf.where.experts[-1]) * t.parts + t.part
            elif t.kind == "fused":
                kind, part = ("concat_t" if param == "weight" else "concat"), t.part
            elif t.kind == "conv1d":
                kind, part = ("transpose" if param == "weight" else "copy"), 0
            else:
                kind, part = t.kind, t.part
            if hf not in groups:
                groups[hf] = _Group(kind, t.parts, t.groups, t.interleaved, t.transposed, t.flat)
                order.append(hf)
            groups[hf].members.append((part, ours, shape))
            for alias in t.aliases:
                aliases.append(
                    TensorRule(
                        n.full(f"{alias}.{name}", t.outside), (ours,), (shape,), optional=True
                    )
                )
        if isinstance(leaf.node, Linear) and leaf.node.tied_to:
            # A tied head: transformers keeps its own name for the shared matrix.
            shape = (ir.value(leaf.node.out_features), ir.value(leaf.node.in_features))
            weight = (t.params or {}).get("weight", "weight")
            aliases.append(
                TensorRule(
                    n.full(f"{t.module}.{weight}", t.outside),
                    (leaf.node.tied_to,),
                    (shape,),
                    optional=True,
                )
            )
    rules = []
    # Fused q/k/v layouts interleave by key/value head: BLOOM's and GPT-NeoX's q, k, v per
    # head, Falcon's query heads of a group then its k and v (all stacks share them).
    kv_heads = ir.value(ir.root.stacks[0].block_variants[0].attn.n_kv_heads)
    for hf in order:
        g = groups[hf]
        members = sorted(g.members)
        rules.append(
            TensorRule(
                hf,
                tuple(m[1] for m in members),
                tuple(m[2] for m in members),
                kind=g.kind,
                groups=(g.groups or kv_heads) if g.kind == "heads" else 0,
                group=g.parts if g.kind == "experts" else 1,
                interleaved=g.interleaved,
                transposed=g.transposed,
                flat=g.flat,
            )
        )
    known = {r.hf for r in rules}
    rules += [a for a in aliases if a.hf not in known]
    rules += _buffer_rules(n, ir)
    return rules


def _buffer_rules(n: Naming, ir: IR) -> list[TensorRule]:
    buffers = n.family.buffers
    rules = []
    for stack in ir.root.stacks:
        n_layers = sum(ir.value(run.count) for run in stack.blocks.runs)
        for buffer in buffers:
            pattern = buffer.name
            if pattern.startswith("@") and n.cls.head != "lm":
                continue
            names = (
                [pattern.replace("{i}", str(i)) for i in range(n_layers)]
                if "{i}" in pattern
                else [pattern]
            )
            for name in names:
                rules.append(
                    TensorRule(
                        n.full(name),
                        (),
                        (),
                        "buffer",
                        optional=True,
                        check=CHECKS[buffer.check](ir),
                        buffer_shape=buffer.shape(ir) if buffer.shape else None,
                    )
                )
    unique = {r.hf: r for r in rules}
    return list(unique.values())


def describe_shape(shape: Shape) -> str:
    return " × ".join(str(s) for s in shape) if shape else "scalar"
