"""What differs between two compiled specs, at two levels.

- Spec fields: the resolved spec (after `extends` and `--set`), field by field. Fields whose
  default is derived (`n_kv_heads` = n_heads, `head_dim` = d_model / n_heads, a layernorm's
  bias, the final norm) are compared by their effective value, so `n_kv_heads: 32 -> 8` reads
  as what the model does, not as `null -> 8`.
- Modules: the two IR trees matched by attribute path (`decoder.blocks.i.attn.k`). A module is
  added or removed (reported once, at the top of the subtree that is new or gone, with all the
  parameters under it), or changed: its shape, copies or settings (heads, activation, norm
  kind, ...) differ. Every entry carries both parameter counts and the delta, and the group
  totals of the parameter report say where the parameters went.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

import sympy as sp

from archspec.backends.count.params import group_totals, parameter_count, parameter_rows
from archspec.backends.count.report import shape_text
from archspec.ir.nodes import IR, Embedding, Linear, Node, Norm, Position, Repeat, Sinks
from archspec.ir.visit import walk

# Node fields that are structure, not settings: children (any field holding nodes) are matched
# by path instead, and a block's width is its leaves' shapes.
STRUCTURAL = ("name", "runs", "width")
CHILD_TYPES = re.compile(
    r"\b(Embedding|Linear|Norm|Sinks|Repeat|Attention|MLP|MoE|Sublayer|Block|Stack)\b"
)
LEAVES = (Embedding, Linear, Norm, Sinks)
# A leaf's sizes, shown together as its shape.
SHAPE_FIELDS = ("num", "dim", "in_features", "out_features", "heads")


def diff_report(a: IR, b: IR, spec_changes: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole difference between `a` and `b`, as JSON-ready data. `spec_changes`: the
    fields of their specs that differ (`archspec.spec.diff.spec_diff`)."""
    total_a, total_b = a.value(parameter_count(a.root)), b.value(parameter_count(b.root))
    groups_a, groups_b = _groups(a), _groups(b)
    names = [g for g in groups_b if g in groups_a] + [
        g for g in (*groups_a, *groups_b) if not (g in groups_a and g in groups_b)
    ]
    report: dict[str, Any] = {
        "a": a.name,
        "b": b.name,
        "spec": spec_changes,
        "modules": module_diff(a, b),
        "groups": [_delta({"group": g}, groups_a.get(g, 0), groups_b.get(g, 0)) for g in names],
        "total": _delta({}, total_a, total_b),
    }
    active_a = a.value(parameter_count(a.root, active=True))
    active_b = b.value(parameter_count(b.root, active=True))
    if (active_a, active_b) != (total_a, total_b):
        report["active"] = _delta({}, active_a, active_b)
    return report


def _groups(ir: IR) -> dict[str, int]:
    return {g: ir.value(t) for g, t in group_totals(parameter_rows(ir)).items()}


def _delta(entry: dict[str, Any], a: int, b: int) -> dict[str, Any]:
    return {**entry, "a": a, "b": b, "delta": b - a}


# Module level ----------------------------------------------------------------------------------


@dataclasses.dataclass
class _Module:
    """A node at one attribute path (`blocks.i` for any block), merged over the runs of a
    Repeat that share the path (T5's block 0 and blocks 1..n-1), with its parameters over all
    copies."""

    path: str
    parent: str | None
    node: Node
    copies: sp.Expr
    params: sp.Expr
    placements: list[str]  # concrete paths

    @property
    def name(self) -> str:
        """The name `archspec count` gives the module: a leaf that exists once (T5's
        relative bias in block 0, or any block of a one-layer model) keeps its index."""
        if len(self.placements) == 1 and self.copies == 1:
            return self.placements[0]
        return self.path


def _modules(ir: IR) -> dict[str, _Module]:
    found: dict[str, _Module] = {}
    for placed in walk(ir.root):
        params = placed.copies * parameter_count(placed.node)
        if placed.path in found:
            module = found[placed.path]
            module.copies += placed.copies
            module.params += params
            module.placements.append(placed.concrete_path)
        else:
            parent = placed.path.rpartition(".")[0] if placed.path else None
            found[placed.path] = _Module(
                placed.path, parent, placed.node, placed.copies, params, [placed.concrete_path]
            )
    return found


def _settings(ir: IR, module: _Module, shapes: dict[str, str]) -> dict[str, Any]:
    """A module's own settings (not its children's), sizes as numbers. A leaf shows its shape
    as `archspec count` writes it and its copies; a Repeat its length. Other composites do not
    list copies: their leaves already say how many there are."""
    out: dict[str, Any] = {}

    def add(prefix: str, obj: Any) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if f.name in STRUCTURAL or CHILD_TYPES.search(str(f.type)):
                continue
            if isinstance(obj, LEAVES) and f.name in SHAPE_FIELDS:
                continue
            if isinstance(value, Position):
                # Only the settings the position kind uses: a learned table has no theta.
                values = value.values()
                out[f"{prefix}{f.name}.kind"] = value.entry.name
                used = (field for field, _ in value.entry.parameters)
                out.update({f"{prefix}{f.name}.{k}": values[k] for k in used})
            elif dataclasses.is_dataclass(value):
                add(f"{prefix}{f.name}.", value)
            else:
                out[f"{prefix}{f.name}"] = ir.value(value) if isinstance(value, sp.Basic) else value

    if isinstance(module.node, LEAVES):
        # A norm without parameters (OLMo) has no row in the count, nor a shape.
        out["shape"] = shapes.get(module.name, "no parameters")
    add("", module.node)
    if isinstance(module.node, LEAVES):
        out["copies"] = ir.value(module.copies)
    if isinstance(module.node, Repeat):
        # The length of the ModuleList: 32 blocks, 8 experts.
        out["length"] = sum(ir.value(run.count) for run in module.node.runs)
    return out


def _described(ir: IR, module: _Module, shapes: dict[str, str]) -> dict[str, Any]:
    """The settings that describe an added or removed module: the ones that are set."""
    settings = _settings(ir, module, shapes)
    return {k: v for k, v in settings.items() if v not in (None, False) and (k, v) != ("copies", 1)}


def _shapes(ir: IR) -> dict[str, str]:
    return {row.name: shape_text(ir, row) for row in parameter_rows(ir)}


def module_diff(a: IR, b: IR) -> list[dict[str, Any]]:
    """Added, removed and changed modules in tree order (a removed one where it was)."""
    ma, mb = _modules(a), _modules(b)
    shapes_a, shapes_b = _shapes(a), _shapes(b)
    out = []
    for path in _merged_order(list(ma), list(mb)):
        old, new = ma.get(path), mb.get(path)
        if old is not None and new is not None:
            sa, sb = _settings(a, old, shapes_a), _settings(b, new, shapes_b)
            # A position setting the other kind lacks (theta for rope, not for learned) is
            # implied by the change of kind and would only repeat it.
            changed = {
                k: [sa.get(k), sb.get(k)]
                for k in {**sa, **sb}
                if sa.get(k) != sb.get(k) and (".position." not in f".{k}" or k in sa and k in sb)
            }
            if changed:
                params = a.value(old.params), b.value(new.params)
                out.append(_entry("changed", new, changed, *params))
        elif new is not None and new.parent in ma:
            # Only the top of a new subtree is reported; its parameters include everything under it.
            settings = {k: [None, v] for k, v in _described(b, new, shapes_b).items()}
            out.append(_entry("added", new, settings, 0, b.value(new.params)))
        elif old is not None and old.parent in mb:
            settings = {k: [v, None] for k, v in _described(a, old, shapes_a).items()}
            out.append(_entry("removed", old, settings, a.value(old.params), 0))
    return out


def _entry(change: str, module: _Module, settings: dict, a: int, b: int) -> dict[str, Any]:
    entry = {"module": module.name, "kind": type(module.node).__name__, "change": change}
    return _delta({**entry, "settings": settings}, a, b)


def _merged_order(a: list[str], b: list[str]) -> list[str]:
    """Both path lists in one tree order: b's order, with a's paths that b lacks where a had
    them (so a removed `mlp` sits next to the `moe` that replaced it)."""
    merged: list[str] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            merged += a[i1:i2]
        if op in ("equal", "insert", "replace"):
            merged += b[j1:j2]
    # A path in both lists can land twice when the order around it changed (post-norm puts
    # each norm after its sublayer): keep its first place.
    return list(dict.fromkeys(merged))
