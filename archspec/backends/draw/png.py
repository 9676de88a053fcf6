"""A laid-out diagram as a PNG, drawn with matplotlib from the same shapes as the SVG.

matplotlib is the optional `plot` extra and is imported only here. The figure is sized in the
canvas's pixels at 2× so that a PNG pasted into a slide stays sharp.
"""

from __future__ import annotations

from archspec.backends.draw.shapes import Canvas, Circle, Line, Rect, Text

SCALE = 2  # device pixels per canvas pixel
DPI = 100


def render(canvas: Canvas) -> bytes:
    """The PNG bytes of `canvas`."""
    import io

    from matplotlib.patches import Circle as CirclePatch
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from archspec.backends.compare.plot import _pyplot

    plt = _pyplot()
    # Points are 1/72 inch; canvas pixels become 1/DPI inch, so a font size in pixels is
    # size * 72 / DPI points and lines scale alike.
    pt = 72 / DPI * SCALE
    fig = plt.figure(figsize=(canvas.width * SCALE / DPI, canvas.height * SCALE / DPI), dpi=DPI)
    try:
        axes = fig.add_axes((0, 0, 1, 1))
        axes.set_xlim(0, canvas.width)
        axes.set_ylim(canvas.height, 0)
        axes.set_axis_off()
        for z, shape in enumerate(canvas.shapes):
            if isinstance(shape, Rect):
                axes.add_patch(
                    FancyBboxPatch(
                        (shape.x, shape.y),
                        shape.w,
                        shape.h,
                        boxstyle=f"round,pad=0,rounding_size={shape.rx}",
                        facecolor=shape.fill,
                        edgecolor=shape.stroke,
                        linewidth=shape.width * pt,
                        zorder=z,
                    )
                )
            elif isinstance(shape, Text):
                axes.text(
                    shape.x,
                    shape.y,
                    shape.text,
                    fontsize=shape.size * pt,
                    color=shape.color,
                    ha={"start": "left", "middle": "center", "end": "right"}[shape.anchor],
                    va="center",
                    fontweight=shape.weight,
                    fontstyle="italic" if shape.italic else "normal",
                    zorder=z,
                )
            elif isinstance(shape, Circle):
                axes.add_patch(
                    CirclePatch(
                        (shape.x, shape.y),
                        shape.r,
                        facecolor=shape.fill,
                        edgecolor=shape.stroke,
                        linewidth=1.3 * pt,
                        zorder=z,
                    )
                )
                if shape.plus:
                    a = shape.r * 0.55
                    kw = {"color": shape.stroke, "linewidth": 1.5 * pt, "zorder": z}
                    axes.plot([shape.x - a, shape.x + a], [shape.y, shape.y], **kw)
                    axes.plot([shape.x, shape.x], [shape.y - a, shape.y + a], **kw)
            elif isinstance(shape, Line):
                xs, ys = zip(*shape.points, strict=True)
                style = "--" if shape.dashed else "-"
                kw = {"color": shape.color, "linewidth": shape.width * pt, "zorder": z}
                axes.plot(
                    xs[:-1] if shape.arrow else xs,
                    ys[:-1] if shape.arrow else ys,
                    linestyle=style,
                    solid_joinstyle="round",
                    **kw,
                )
                if shape.arrow:
                    axes.add_patch(
                        FancyArrowPatch(
                            shape.points[-2],
                            shape.points[-1],
                            arrowstyle="-|>",
                            mutation_scale=10 * pt,
                            shrinkA=0,
                            shrinkB=0,
                            **kw,
                        )
                    )
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    finally:
        plt.close(fig)
    return buffer.getvalue()
