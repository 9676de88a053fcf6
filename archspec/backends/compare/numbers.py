"""`n / size` to three significant digits, for any size of n.

Figures are exact Python integers; dividing one of 10^308 or more by a unit overflows a float
(OverflowError), so such a quotient is formatted through Decimal instead. Spec sizes are capped
far below this (archspec/safety/limits.py), but tables, compare, diff and sweeps must not
depend on that to print.
"""

from __future__ import annotations

import math
from decimal import Decimal


def three_digits(n: float, size: float = 1) -> str:
    if isinstance(n, float) and not math.isfinite(n):
        return str(n)
    if isinstance(n, int) and abs(n) >= 10**300:
        return f"{Decimal(n) / Decimal(size):.3g}"
    text = f"{n / size:.3g}"
    # 999.5 to 1023.x of a unit (bytes come in 1024s) would print as 1e+03 or 1.02e+03:
    # write the whole number instead (1000, 1020).
    if "e" in text and abs(n / size) < 10**6:
        return f"{round(n / size)}"
    return text
