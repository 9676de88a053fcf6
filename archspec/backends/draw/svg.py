"""A laid-out diagram as a standalone SVG document, written by hand: no fonts, scripts, links
or network references, so it opens anywhere and can be inlined in the HTML report."""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from archspec.backends.draw.shapes import FONT, Canvas, Circle, Line, Rect, Text
from archspec.safety.text import visible


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _text(t: Text) -> str:
    style = ' font-style="italic"' if t.italic else ""
    weight = ' font-weight="bold"' if t.weight == "bold" else ""
    return (
        f'<text x="{_num(t.x)}" y="{_num(t.y)}" font-size="{_num(t.size)}" '
        f'text-anchor="{t.anchor}" dominant-baseline="central" fill="{t.color}"{weight}{style}>'
        f"{escape(visible(t.text))}</text>"
    )


def _shape(shape, prefix: str) -> str:
    if isinstance(shape, Rect):
        return (
            f'<rect x="{_num(shape.x)}" y="{_num(shape.y)}" width="{_num(shape.w)}" '
            f'height="{_num(shape.h)}" rx="{_num(shape.rx)}" fill="{shape.fill}" '
            f'stroke="{shape.stroke}" stroke-width="{_num(shape.width)}"/>'
        )
    if isinstance(shape, Text):
        return _text(shape)
    if isinstance(shape, Circle):
        out = (
            f'<circle cx="{_num(shape.x)}" cy="{_num(shape.y)}" r="{_num(shape.r)}" '
            f'fill="{shape.fill}" stroke="{shape.stroke}" stroke-width="1.3"/>'
        )
        if shape.plus:
            a = shape.r * 0.55
            out += (
                f'<path d="M{_num(shape.x - a)} {_num(shape.y)}H{_num(shape.x + a)}'
                f'M{_num(shape.x)} {_num(shape.y - a)}V{_num(shape.y + a)}" '
                f'stroke="{shape.stroke}" stroke-width="1.5"/>'
            )
        return out
    if isinstance(shape, Line):
        points = " ".join(f"{_num(x)},{_num(y)}" for x, y in shape.points)
        marker = f' marker-end="url(#{prefix}{_marker_id(shape.color)})"' if shape.arrow else ""
        dash = ' stroke-dasharray="4 3"' if shape.dashed else ""
        return (
            f'<polyline points="{points}" style="fill:none" stroke="{shape.color}" '
            f'stroke-width="{_num(shape.width)}" stroke-linejoin="round"{dash}{marker}/>'
        )
    raise TypeError(f"no SVG for {type(shape).__name__}")


def _marker_id(color: str) -> str:
    return "arrow-" + color.lstrip("#")


def render(canvas: Canvas, standalone: bool = True, prefix: str = "") -> str:
    """The SVG text; `standalone=False` leaves out the XML declaration, and `prefix` keeps the
    arrowheads' ids apart when several diagrams are inlined in one page."""
    colors = sorted({s.color for s in canvas.shapes if isinstance(s, Line) and s.arrow})
    markers = "".join(
        f'<marker id="{prefix}{_marker_id(c)}" viewBox="0 0 10 10" refX="9" refY="5" '
        f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        f'<path d="M0,0L10,5L0,10z" fill="{c}"/>'
        "</marker>"
        for c in colors
    )
    width, height = _num(canvas.width), _num(canvas.height)
    head = '<?xml version="1.0" encoding="UTF-8"?>\n' if standalone else ""
    body = "\n".join(_shape(s, prefix) for s in canvas.shapes)
    return (
        f'{head}<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family={quoteattr(FONT)} role="img">\n'
        f"<title>{escape(visible(canvas.title))}</title>\n"
        f'<defs>{markers}</defs>\n<rect width="100%" height="100%" fill="#ffffff"/>\n'
        f"{body}\n</svg>\n"
    )
