"""Placing a `Diagram` on a canvas: columns side by side, data flowing upwards as in papers.

Positions are computed in flow coordinates (f grows with the data flow, from the inputs at the
bottom) and flipped to SVG's downward y once at the end, so each step reads in the order the
data moves: place an item above the last one, draw the arrow between them.
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.backends.draw.diagram import Add, Box, Column, Diagram, Group, Parallel
from archspec.backends.draw.shapes import (
    INK,
    MUTED,
    PALETTE,
    Canvas,
    Circle,
    Line,
    Rect,
    Shape,
    Text,
    text_width,
)

TITLE, DETAIL, SMALL = 13.0, 11.0, 10.0
GAP = 18.0  # between items, room for an arrow
PAD_IN, PAD_BELOW, PAD_ABOVE, LANE = 14.0, 12.0, 30.0, 22.0  # inside a group
SIDE = 78.0  # right of a group: "× N" and the layers it covers
COLUMN_GAP = 56.0
MARGIN = 24.0
HEADER = 56.0


def _params(box: Box) -> str:
    # Exact figures, so the boxes visibly add up to the total in the subtitle.
    if box.params is None:
        return ""
    if box.params == 0:
        return "no parameters of its own"
    return f"{box.params:,} parameters"


def _lines(box: Box) -> list[tuple[str, float]]:
    return [
        (t, s) for t, s in ((box.title, TITLE), (box.detail, DETAIL), (_params(box), SMALL)) if t
    ]


def _box_size(box: Box) -> tuple[float, float]:
    lines = _lines(box)
    width = max(text_width(t, s) for t, s in lines) + 24
    return width, 12 + sum(s + 4 for _, s in lines)


def _column_width(column: Column) -> float:
    """The width of the column's boxes: the widest label, a parallel pair side by side."""
    widest = 240.0
    for item in column.items:
        for inner in item.items if isinstance(item, Group) else [item]:
            if isinstance(inner, Box):
                widest = max(widest, _box_size(inner)[0])
            elif isinstance(inner, Parallel):
                pair = max(_box_size(b)[0] for b in inner.boxes)
                widest = max(widest, pair * len(inner.boxes) + 10 * (len(inner.boxes) - 1))
    return widest


@dataclass
class _Column:
    """One column being placed: x of its boxes, the stream's last point, the shapes so far."""

    x: float
    width: float
    shapes: list[Shape]
    top: float = 0.0  # f of the stream's last point
    boxes: dict | None = None

    @property
    def cx(self) -> float:
        return self.x + self.width / 2

    def arrow_to(self, f: float, x: float | None = None) -> None:
        cx = self.cx if x is None else x
        self.shapes.append(Line([(cx, self.top), (cx, f)]))

    def box(self, box: Box, x: float, width: float, f: float) -> float:
        """Draw `box` with its bottom at f; its height."""
        _, height = _box_size(box)
        fill, stroke = PALETTE.get(box.role, PALETTE["group"])
        for shift in (8, 4) if box.copies > 1 else ():  # experts: a stack of cards
            self.shapes.append(Rect(x + shift, f + shift, width, height, fill, stroke))
        self.shapes.append(Rect(x, f, width, height, fill, stroke))
        lines = _lines(box)
        y = f + height - 8
        for text, size in lines:
            y -= size / 2 + 2
            weight = "bold" if size == TITLE else "normal"
            color = MUTED if size == SMALL else INK
            self.shapes.append(Text(x + width / 2, y, text, size, weight, color=color))
            y -= size / 2 + 2
        assert self.boxes is not None
        self.boxes[box.id] = (x, f, width, height)
        return height


def _place_item(col: _Column, item, entries: list[float]) -> float | None:
    """Place a box, a ⊕ or a parallel pair above the stream's last point; a ⊕'s centre."""
    f = col.top + GAP
    entries.append(col.top + 5)  # below the arrowhead of the arrow into the item
    if isinstance(item, Box):
        col.arrow_to(f)
        col.top = f + col.box(item, col.x, col.width, f)
    elif isinstance(item, Add):
        r = 9.0
        col.arrow_to(f)
        col.shapes.append(Circle(col.cx, f + r, r, plus=True))
        col.top = f + 2 * r
        return f + r
    elif isinstance(item, Parallel):
        n = len(item.boxes)
        width = (col.width - 10 * (n - 1)) / n
        split, tops = col.top + GAP / 2, []
        height = max(_box_size(b)[1] for b in item.boxes)
        for i, box in enumerate(item.boxes):
            x = col.x + i * (width + 10)
            bx = x + width / 2
            col.shapes.append(Line([(col.cx, col.top), (col.cx, split), (bx, split), (bx, f)]))
            col.box(box, x, width, f)
            tops.append((bx, f + height))
        join = f + height + GAP / 2
        for bx, top in tops:
            col.shapes.append(Line([(bx, top), (bx, join), (col.cx, join)], arrow=False))
        col.top = join
    return None


def _place_group(col: _Column, group: Group) -> None:
    bottom = col.top + GAP / 2
    col.top = bottom + PAD_BELOW - GAP / 2
    entries: list[float] = []
    start = len(col.shapes)
    centres = [_place_item(col, inner, entries) for inner in group.items]
    lane = col.x + col.width + LANE
    for source, add in group.skips:
        fs, fa = entries[source], centres[add]
        col.shapes.append(Circle(col.cx, fs, 2.5, fill="#3e4c59"))
        col.shapes.append(Line([(col.cx, fs), (lane, fs), (lane, fa), (col.cx + 9, fa)]))
    top = col.top + PAD_ABOVE
    fill, stroke = PALETTE["group"]
    x0 = col.x - PAD_IN
    rect = Rect(x0, bottom, col.width + PAD_IN + LANE + 12, top - bottom, fill, stroke, rx=10)
    col.shapes.insert(start, rect)
    col.shapes.append(Text(x0 + 10, top - 14, group.title, 12, "bold", "start", MUTED))
    right = x0 + rect.w + 10
    middle = (bottom + top) / 2
    col.shapes.append(Text(right, middle + 10, f"× {group.repeat}", 22, "bold", "start"))
    col.shapes.append(Text(right, middle - 14, group.layers, 10, anchor="start", color=MUTED))
    if group.params is not None:
        each = f"{group.params:,} each"
        if group.modules != group.repeat:  # layers sharing a block's weights (ALBERT)
            each = f"{group.params:,} × {group.modules}, shared by the layers"
        col.shapes.append(Text(right, middle - 28, each, 10, anchor="start", color=MUTED))
    col.top = top


def layout(diagram: Diagram) -> Canvas:
    """The diagram placed on a canvas, ready for `svg.render` or `png.render`."""
    shapes: list[Shape] = []
    columns: list[_Column] = []
    boxes: dict = {}
    x = MARGIN + PAD_IN + 8
    for column in diagram.columns:
        width = _column_width(column)
        col = _Column(x, width, [], 0.0, boxes)
        col.shapes.append(Text(col.cx, 8, column.input, 11, italic=True, color=MUTED))
        col.top = 18
        for item in column.items:
            if isinstance(item, Group):
                _place_group(col, item)
            else:
                _place_item(col, item, [])
        f = col.top + GAP
        col.arrow_to(f)
        col.shapes.append(Text(col.cx, f + 10, column.output, 11, italic=True, color=MUTED))
        col.top = f + 20
        col.shapes.append(Text(col.cx, col.top + 16, column.title, 15, "bold"))
        col.top += 26
        columns.append(col)
        x += width + LANE + 12 + SIDE + COLUMN_GAP + PAD_IN
    for cross in diagram.cross:
        source, target_col = columns[cross.source], columns[-1]
        # Leave the encoder's output arrow halfway and run down the gap to each target.
        f_out = _output_point(source)
        lane = target_col.x - PAD_IN - COLUMN_GAP / 2
        for target in cross.targets:
            bx, bf, _, bh = boxes[target]
            shapes.append(Circle(source.cx, f_out, 2.5, fill="#c4621c", stroke="#c4621c"))
            shapes.append(
                Line(
                    [(source.cx, f_out), (lane, f_out), (lane, bf + bh / 2), (bx, bf + bh / 2)],
                    color="#c4621c",
                    width=1.6,
                )
            )
    for col in columns:
        shapes.extend(col.shapes)
    width = x - COLUMN_GAP - PAD_IN + MARGIN - 8
    body = max(col.top for col in columns)
    height = body + HEADER + MARGIN
    shapes.append(Text(MARGIN, body + HEADER - 18, diagram.name, 20, "bold", "start"))
    shapes.append(
        Text(MARGIN, body + HEADER - 40, diagram.subtitle, 12, anchor="start", color=MUTED)
    )
    canvas = Canvas(max(width, text_width(diagram.subtitle, 12) + 2 * MARGIN), height + 8)
    canvas.title = f"{diagram.name}: {diagram.subtitle}"
    canvas.shapes = [_flip(s, height) for s in shapes]
    return canvas


def _output_point(col: _Column) -> float:
    """The f where a column's output arrow is halfway (the arrow ends at the output label)."""
    arrows = [s for s in col.shapes if isinstance(s, Line) and s.arrow]
    start, end = arrows[-1].points[0][1], arrows[-1].points[-1][1]
    return (start + end) / 2


def _flip(shape: Shape, height: float) -> Shape:
    if isinstance(shape, Rect):
        shape.y = height - shape.y - shape.h
    elif isinstance(shape, (Text, Circle)):
        shape.y = height - shape.y
    elif isinstance(shape, Line):
        shape.points = [(x, height - f) for x, f in shape.points]
    return shape
