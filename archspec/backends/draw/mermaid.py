"""A diagram as Mermaid flowchart text, for Markdown that GitHub and GitLab render.

The same `Diagram` as the SVG: a subgraph per stack, a nested subgraph per block variant with
"× N" in its title, dotted edges for the residual skips, and cross-attention edges from the
encoder's last box. Labels are sanitised and quoted so that no spec text can break the syntax.
"""

from __future__ import annotations

from archspec.backends.draw.diagram import Add, Box, Diagram, Parallel
from archspec.safety.text import visible

_ESCAPES = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "#": "#35;"}


def _quote(text: str) -> str:
    safe = "".join(_ESCAPES.get(c, c) for c in visible(text))
    return f'"{safe}"'


def _label(box: Box) -> str:
    parts = [box.title, box.detail]
    if box.params is not None:
        parts.append(f"{box.params:,} parameters" if box.params else "no parameters of its own")
    return "<br/>".join(_quote(p)[1:-1] for p in parts if p)


def render(diagram: Diagram) -> str:
    lines = ["flowchart BT"]
    classes: dict[str, list[str]] = {}
    last_of_column: list[str] = []

    def node(box: Box, indent: str) -> str:
        classes.setdefault(box.role.replace("-", "_"), []).append(box.id)
        lines.append(f'{indent}{box.id}["{_label(box)}"]')
        return box.id

    for c, column in enumerate(diagram.columns):
        lines.append(f"  subgraph col{c}[{_quote(column.title)}]")
        lines.append("    direction BT")
        source = f"in{c}"
        lines.append(f"    {source}([{_quote(column.input)}])")
        edges: list[str] = []
        previous = [source]
        for item in column.items:
            if isinstance(item, Box):
                current = node(item, "    ")
                edges += [f"{p} --> {current}" for p in previous]
                previous = [current]
                continue
            title = f"{item.title} × {item.repeat} ({item.layers})"
            lines.append(f"    subgraph {item.id}[{_quote(title)}]")
            lines.append("      direction BT")
            entered: list[list[str]] = []
            for inner in item.items:
                entered.append(previous)
                if isinstance(inner, Box):
                    current = [node(inner, "      ")]
                elif isinstance(inner, Add):
                    lines.append(f'      {inner.id}(("+"))')
                    current = [inner.id]
                else:
                    assert isinstance(inner, Parallel)
                    current = [node(b, "      ") for b in inner.boxes]
                edges += [f"{p} --> {n}" for p in previous for n in current]
                previous = current
            lines.append("    end")
            for start, add in item.skips:
                edges += [f"{p} -.-> {item.items[add].id}" for p in entered[start]]
        out = f"out{c}"
        lines.append(f"    {out}([{_quote(column.output)}])")
        edges += [f"{p} --> {out}" for p in previous]
        lines.append("  end")
        lines += [f"  {e}" for e in edges]
        last_of_column.append(previous[-1])
    for cross in diagram.cross:
        lines += [
            f"  {last_of_column[cross.source]} == cross-attention ==> {t}" for t in cross.targets
        ]
    styles = {
        "embedding": "#fadbe6,#c2557a", "position": "#efe3f6,#8e5fa8", "norm": "#fff3bf,#b8952a",
        "attention": "#ffe1c4,#d9782d", "cross_attention": "#ffd2ae,#c4621c",
        "mlp": "#d3e7fa,#3f7fbf", "experts": "#d3e7fa,#3f7fbf", "router": "#e3dbf7,#7d5fc4",
        "head": "#d6efd2,#4f9a4f", "pooler": "#d6efd2,#4f9a4f",
    }  # fmt: skip
    for role, ids in classes.items():
        fill, stroke = styles.get(role, "#f4f5f7,#9aa5b1").split(",")
        lines.append(f"  classDef {role} fill:{fill},stroke:{stroke},color:#1f2933")
        lines.append(f"  class {','.join(ids)} {role}")
    return "\n".join(lines) + "\n"
