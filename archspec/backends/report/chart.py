"""Line charts as inline SVG for the HTML report: no script, no library, no network.

The axes always cover the data: the y ticks are chosen from the lowest and highest values,
rounded outwards to a readable step, so no line sits below the lowest label or above the top
one. A linear axis starts at zero, so heights compare; values spanning more than a factor of
30 (gpt2 beside Mixtral) get a log axis, said in the title, where both stay readable. The
legend sits below the plot, where it cannot cover a line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

from archspec.backends.compare.plot import seq_label
from archspec.backends.compare.ticks import linear_ticks, log_ticks
from archspec.safety.text import visible

WIDTH, HEIGHT = 520.0, 280.0  # the plot and its axes; a legend row below for each line
LEGEND_ROW = 15.0
LEFT, RIGHT, TOP, BOTTOM = 72.0, 16.0, 34.0, 44.0
COLORS = ("#3f7fbf", "#d9782d", "#4f9a4f", "#8e5fa8", "#c2557a", "#b8952a", "#52606d")

Series = tuple[str, Sequence[tuple[int, float]], bool]  # label, points, dashed


def line_chart(
    title: str, series: Sequence[Series], fmt: Callable[[float], str], unit: float = 1000
) -> str:
    """An SVG line chart of `series` against the sequence length (log₂ axis); `unit` is the
    step between prefixes (1024 for bytes), so that linear ticks fall on round values of
    the unit the labels use (512 MiB, 1 GiB, not 477 MiB)."""
    xs = sorted({x for _, points, _ in series for x, _ in points})
    ys = [y for _, points, _ in series for _, y in points]
    log = min(ys) > 0 and max(ys) / min(ys) > 30
    if log:
        ticks = log_ticks(min(ys), max(ys))
    else:
        scale = unit ** max(0, math.floor(math.log(max(abs(y) for y in ys) or 1, unit)))
        ticks = [t * scale for t in linear_ticks(min(0, min(ys)) / scale, max(ys) / scale)]
    y0, y1 = ticks[0], ticks[-1]
    x0, x1 = math.log2(xs[0]), math.log2(xs[-1]) if len(xs) > 1 else math.log2(xs[0]) + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (math.log2(x) - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        a, b, v = (math.log10(y0), math.log10(y1), math.log10(y)) if log else (y0, y1, y)
        return TOP + plot_h - (v - a) / ((b - a) or 1) * plot_h

    height = HEIGHT + LEGEND_ROW * len(series)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH:.0f} '
        f'{height:.0f}" role="img"><title>{escape(visible(title))}</title>',
        f'<text x="{LEFT}" y="18" class="chart-title">{escape(visible(title))}'
        f"{' (log scale)' if log else ''}</text>",
    ]
    for t in ticks:
        y = py(t)
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{y:.1f}" class="tick" text-anchor="end" '
                   f'dominant-baseline="central">{escape(fmt(t))}</text>')  # fmt: skip
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" class="tick" '
                   f'text-anchor="middle">{seq_label(x)}</text>')  # fmt: skip
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" class="axis" '
               'text-anchor="middle">sequence length S (positions)</text>')  # fmt: skip
    for i, (label, points, dashed) in enumerate(series):
        color = COLORS[(i // 2 if _paired(series) else i) % len(COLORS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        out.append(
            f'<polyline points="{path}" style="fill:none" stroke="{color}" stroke-width="2"{dash}/>'
        )
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.6" fill="{color}"/>'
                for x, y in points]  # fmt: skip
        ly = HEIGHT + LEGEND_ROW * (i + 0.5)
        out.append(f'<line x1="{LEFT + 10}" x2="{LEFT + 30}" y1="{ly}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"{dash}/>')  # fmt: skip
        out.append(f'<text x="{LEFT + 36}" y="{ly}" class="legend" dominant-baseline="central">'
                   f"{escape(visible(label))}</text>")  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


def _paired(series: Sequence[Series]) -> bool:
    """Solid and dashed lines of one model alternate: they share its colour."""
    return len(series) > 1 and all(
        dashed == (i % 2 == 1) for i, (_, _, dashed) in enumerate(series)
    )
