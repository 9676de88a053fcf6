"""The drawing primitives a laid-out diagram is made of, shared by the SVG and PNG renderers.

Coordinates are pixels with y growing downwards (SVG's convention); text is anchored at its
vertical centre, so both renderers place it alike. Colours are the paper-figure palette: one
pastel fill and a darker stroke per role, so attention, MLPs and norms read at a glance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FONT = "Helvetica, Arial, 'DejaVu Sans', sans-serif"
INK = "#1f2933"
MUTED = "#52606d"
LINE = "#3e4c59"

# role -> (fill, stroke)
PALETTE = {
    "embedding": ("#fadbe6", "#c2557a"),
    "position": ("#efe3f6", "#8e5fa8"),
    "norm": ("#fff3bf", "#b8952a"),
    "attention": ("#ffe1c4", "#d9782d"),
    "cross-attention": ("#ffd2ae", "#c4621c"),
    "mlp": ("#d3e7fa", "#3f7fbf"),
    "router": ("#e3dbf7", "#7d5fc4"),
    "experts": ("#d3e7fa", "#3f7fbf"),
    "head": ("#d6efd2", "#4f9a4f"),
    "pooler": ("#d6efd2", "#4f9a4f"),
    "group": ("#f4f5f7", "#9aa5b1"),
}


@dataclass
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str
    stroke: str
    rx: float = 6.0
    width: float = 1.3


@dataclass
class Text:
    x: float
    y: float  # vertical centre
    text: str
    size: float = 12.0
    weight: str = "normal"  # normal | bold
    anchor: str = "middle"  # start | middle | end
    color: str = INK
    italic: bool = False


@dataclass
class Line:
    points: list[tuple[float, float]]
    arrow: bool = True  # an arrowhead at the last point
    color: str = LINE
    width: float = 1.3
    dashed: bool = False


@dataclass
class Circle:
    x: float
    y: float
    r: float
    fill: str = "#ffffff"
    stroke: str = LINE
    plus: bool = False  # draw ⊕ (a residual sum)


Shape = Rect | Text | Line | Circle


@dataclass
class Canvas:
    width: float
    height: float
    shapes: list[Shape] = field(default_factory=list)
    title: str = ""  # for the SVG <title> (accessibility, and the report's figure)


def text_width(text: str, size: float) -> float:
    """An estimate of rendered width: wide enough for DejaVu Sans, the widest fallback, so a
    label never overflows its box whichever font the viewer has."""
    return len(text) * size * 0.6
