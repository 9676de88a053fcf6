"""The questions asked of a plan beyond one step: how long a whole run takes (`--tokens`, with
`--price` its cost), and what-ifs that replace the model's efficiency (`--mfu`)."""

from __future__ import annotations

import math
from typing import Any

from archspec.errors import SpecError

SUFFIXES = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
# Bounds that keep a whole run's days and cost finite and meaningful: a quintillion tokens is
# a hundred thousand times a 10T-token corpus; a million per accelerator-hour is beyond any
# price; a what-if MFU or efficiency under 0.1% describes no run (and at 1e-300 turned a step
# into 10^300 seconds).
MAX_TOKENS = 1e18
MAX_PRICE = 1e6
LEAST_FRACTION = 1e-3


def parse_tokens(text: str) -> float:
    """`15T`, `300B`, `2.5e12` or `1000000`: a finite number of tokens, one or more (a run
    trains on whole tokens; below one the steps, days and cost round to nothing)."""
    raw = text.strip()
    scale = SUFFIXES.get(raw[-1:].upper(), 1.0) if raw else 1.0
    number = raw[:-1] if scale != 1.0 else raw
    try:
        value = float(number) * scale
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 1:
        raise SpecError(
            f"--tokens takes a number of tokens, 1 or more, e.g. 15T or 300B (got '{text}')"
        )
    if value > MAX_TOKENS:
        raise SpecError(f"--tokens {text} is over the limit of {MAX_TOKENS:g} tokens")
    return value


def check_fraction(name: str, value: float | None) -> None:
    if value is not None and not (LEAST_FRACTION <= value <= 1):
        raise SpecError(f"{name} takes a fraction from {LEAST_FRACTION:g} to 1 (got {value:g})")


def check_price(price: float | None, tokens: str | None) -> None:
    if price is None:
        return
    if not math.isfinite(price) or price < 0 or price > MAX_PRICE:
        raise SpecError(
            f"--price takes a price per accelerator-hour from 0 to {MAX_PRICE:g} (got {price:g})"
        )
    if tokens is None:
        raise SpecError("--price costs a whole run: give --tokens too")


def with_mfu(report: dict[str, Any], mfu: float) -> dict[str, Any]:
    """The report at the step time an MFU of `mfu` gives (the layout and memory the search
    found; every part of the step scaled alike)."""
    factor = report["mfu"] / mfu
    out = dict(report)
    out["step_time_s"] = report["step_time_s"] * factor
    out["tokens_per_s"] = report["tokens_per_s"] / factor
    out["mfu"] = mfu
    out["hfu"] = report["hfu"] / factor
    out["breakdown"] = {k: v * factor for k, v in report["breakdown"].items()}
    out["what_if"] = {"mfu": mfu, "predicted_mfu": report["mfu"]}
    return out


def training_time(report: dict[str, Any], tokens: float, price: float | None) -> dict[str, Any]:
    """Steps, days and accelerator-hours to train on `tokens` at the report's step time."""
    per_step = report["global_batch"] * report["seq"]
    steps = math.ceil(tokens / per_step)
    seconds = steps * report["step_time_s"]
    hours = seconds / 3600 * report["gpus"]
    out = {"tokens": tokens, "steps": steps, "days": seconds / 86400,
           "accelerator_hours": hours}  # fmt: skip
    if price is not None:
        out["price_per_accelerator_hour"] = price
        out["cost"] = hours * price
    return out
