"""What a block diagram shows, before any geometry: the stacks as columns of boxes.

One `Diagram` is read by every renderer (SVG, PNG, Mermaid) and by `draw --json`, so the three
pictures and the JSON cannot disagree. A column lists its items in data-flow order, inputs
first. A repeated block is one `Group` per distinct block variant (the IR's `Repeat` runs), with
its sublayers in the order the residual kind wires them and the residual skips as index pairs:
the stream entering item `source` is added back at the `Add` at index `add`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Role = str  # embedding | position | norm | attention | mlp | router | experts | head | pooler


@dataclass
class Box:
    id: str
    role: Role
    title: str
    detail: str = ""
    params: int | None = None  # filled only with --params
    path: str = ""  # the module's attribute path in the generated model
    copies: int = 1  # drawn as a stack of boxes when > 1 (experts)


@dataclass
class Add:
    """The residual sum ⊕."""

    id: str


@dataclass
class Parallel:
    """Sublayers that read the same input side by side (a parallel block)."""

    id: str
    boxes: list[Box]


Item = Box | Add | Parallel


@dataclass
class Group:
    """One block variant, repeated `repeat` times at the layers `layers` describes."""

    id: str
    title: str  # the generated class and the residual kind: "DecoderBlock · pre-norm"
    repeat: int
    layers: str  # "layers 0–31", or "layers 1, 3, 5, …" for interleaved variants
    items: list[Item]
    skips: list[tuple[int, int]]  # (index the skipped stream enters, index of its Add)
    params: int | None = None  # of one block; the group holds modules × params
    # Blocks holding their own weights: `repeat`, or fewer when layers share a block's
    # weights (ALBERT's one block serves all 12 layers).
    modules: int = 1

    def boxes(self):
        """The block's boxes, a parallel pair's included."""
        return _boxes(self)


@dataclass
class Column:
    role: str  # encoder | decoder
    title: str
    input: str  # what enters at the bottom
    output: str  # what leaves at the top
    items: list[Box | Group] = field(default_factory=list)


@dataclass
class Cross:
    """Cross-attention: the encoder column's output feeds these decoder boxes."""

    source: int  # column index
    targets: list[str]  # Box ids


@dataclass
class Diagram:
    name: str
    subtitle: str
    columns: list[Column]
    cross: list[Cross] = field(default_factory=list)
    params: int | None = None

    def boxes(self):
        """Every box, in column order (for tests and the JSON view)."""
        for column in self.columns:
            for item in column.items:
                yield from _boxes(item)


def _boxes(item):
    if isinstance(item, Box):
        yield item
    elif isinstance(item, Parallel):
        yield from item.boxes
    elif isinstance(item, Group):
        for inner in item.items:
            yield from _boxes(inner)


def to_json(diagram: Diagram) -> dict:
    """The diagram as plain data: `draw --json`."""
    from dataclasses import asdict

    data = asdict(diagram)
    for column in data["columns"]:
        for item in column["items"]:
            item["type"] = "group" if "skips" in item else "box"
            for inner in item.get("items", ()):
                inner["type"] = (
                    "parallel" if "boxes" in inner else "box" if "role" in inner else "add"
                )
            if "skips" in item:
                item["skips"] = [list(s) for s in item["skips"]]
    return data
