"""Non-negative least squares for the handful of unknowns a serving engine's fit has (its
per-layer, per-all-reduce and per-request overheads): every active set solved by the normal
equations, the best kept. Small enough to need nothing beyond the standard library."""

from __future__ import annotations

import itertools


def nnls(columns: list[list[float]], target: list[float]) -> list[float]:
    """min ||Σ x_j col_j − target||² over x ≥ 0, for a handful of columns: every active set."""
    k = len(columns)
    best, best_x = float("inf"), [0.0] * k
    for active in itertools.product((False, True), repeat=k):
        idx = [j for j in range(k) if active[j]]
        x = [0.0] * k
        if idx:
            solved = least_squares([columns[j] for j in idx], target)
            if solved is None or min(solved) < 0:
                continue
            for j, v in zip(idx, solved, strict=True):
                x[j] = v
        r = sum((sum(x[j] * columns[j][i] for j in range(k)) - t) ** 2
                for i, t in enumerate(target))  # fmt: skip
        if r < best:
            best, best_x = r, x
    return best_x


def least_squares(columns: list[list[float]], target: list[float]) -> list[float] | None:
    """Normal equations by Gaussian elimination (a few unknowns)."""
    k = len(columns)
    a = [[sum(ci * cj for ci, cj in zip(columns[r], columns[c], strict=True)) for c in range(k)]
         + [sum(ci * t for ci, t in zip(columns[r], target, strict=True))]
         for r in range(k)]  # fmt: skip
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-30:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(k):
            if r != col:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[r][k] / a[r][r] for r in range(k)]
