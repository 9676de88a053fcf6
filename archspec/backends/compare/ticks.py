"""Axis ticks that always cover the data, for the matplotlib charts and the report's SVG.

A chart whose line sits below its lowest label or above its top one (the sweep chart once
labelled 20G-40G under a 13.5-15.4G line, and 64 GiB under a 104-154 GiB total) cannot be
read. Each function here returns ticks from at or below the lowest value to at or above the
highest; the caller sets the axis limits to the first and last tick.
"""

from __future__ import annotations

import math


def linear_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Ticks at a 1-2-2.5-5 step from at or below `lo` to at or above `hi`."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(lo / step) * step
    ticks = [first]
    while ticks[-1] < hi - 1e-9 * step:
        ticks.append(ticks[-1] + step)
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Decades (with 2 and 5 between when few) from at or below `lo` to at or above `hi`."""
    start, end = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    marks = (1,) if end - start > 3 else (1, 2, 5)
    ticks = [m * 10.0**e for e in range(start, end + 1) for m in marks]
    below = [t for t in ticks if t <= lo][-1]
    above = next(t for t in ticks if t >= hi)
    return [t for t in ticks if below <= t <= above]


def binary_ticks(lo: float, hi: float, most: int = 8) -> list[float]:
    """Byte ticks: powers of two (every second or fourth one when many) covering the data;
    over less than a factor of 3, round steps of the binary unit instead (96, 112, 128 GiB)."""
    if hi / lo < 3:
        unit = 1024.0 ** max(0, math.floor(math.log(hi, 1024)))
        return [t * unit for t in linear_ticks(lo / unit, hi / unit)]
    start, end = math.floor(math.log2(lo)), math.ceil(math.log2(hi))
    stride = max(1, math.ceil((end - start) / most))
    start -= start % stride  # aligned strides: 1, 4, 16 GiB rather than 2, 8, 32
    ticks = [2.0**e for e in range(start, end + stride, stride)]
    return [t for t in ticks if t <= 2.0 ** (math.ceil(math.log2(hi)) + stride - 1)]


def decimal_ticks(lo: float, hi: float) -> list[float]:
    """FLOP ticks on a log axis: 1-2-5 decades, or round linear steps over a narrow range."""
    return linear_ticks(lo, hi) if hi / lo < 3 else log_ticks(lo, hi)
