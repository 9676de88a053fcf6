"""How far plan has landed from published measurements like the one asked for.

A prediction is only as good as its errors on measurements nobody fitted it to. The two
validations time every published figure with it left out of the fit: a training run with its
source left out (`published.py`, docs/plan.md "Published runs, cross-validated"), a serving
figure with itself left out of its engine's profile, or with its engine left out of the typical
profile (`serve_validation.py`, docs/plan.md "Serving validation"). Both take many minutes, so
their `--write` stores each figure's left-out error here (track_record.yaml,
serve_track_record.yaml) beside the tables they print, and `archspec plan` quotes them.

Figures "like" a plan share its engine (the stack or serving profile whose constants were
fitted; for the typical serving profile, every engine's figures, each predicted with its own
engine left out), then, where any remain, its accelerator (parts with another's tensor cores
pool with it, as the fits pool them), for training whether it has experts and whether its
projections run in fp8, for serving its weights' precision. Each narrowing is kept only while a
figure is left, and the record says which held: a plan on a part no figure of its engine came
from says so instead of quoting another part's errors as its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from statistics import mean
from typing import Any

import yaml

TRAINING = Path(__file__).with_name("track_record.yaml")
SERVING = Path(__file__).with_name("serve_track_record.yaml")

# The narrowings, in order, of each mode.
TRAINING_NARROWINGS = ("accelerator", "moe", "fp8")
SERVING_NARROWINGS = ("accelerator", "precision")


@cache
def stored(path: Path = TRAINING) -> tuple[dict[str, Any], ...]:
    """Every published figure's left-out error, as the last validation wrote them."""
    with path.open() as f:
        return tuple(yaml.safe_load(f)["figures"])


def write(rows: list[dict[str, Any]], path: Path, command: str) -> None:
    header = (f"# Written by `{command}`, not by hand:\n"
              "# each published figure's error (published time over predicted, minus one)\n"
              "# with it left out of the fit, as docs/plan.md's table shows it.\n")  # fmt: skip
    body = yaml.safe_dump({"figures": rows}, sort_keys=False, width=100, allow_unicode=True)
    path.write_text(header + body)


@dataclass(frozen=True)
class Record:
    engine: str
    wanted: dict[str, Any]  # the plan's accelerator (tensor-core twin) and what else narrows
    matched: tuple[str, ...]  # which narrowings held
    names: tuple[str, ...]  # the figures quoted
    errors: tuple[float, ...]  # published time over predicted, minus one, left out

    def report(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            **self.wanted,
            "matched": list(self.matched),
            "figures": list(self.names),
            "published_over_predicted": [1 + min(self.errors), 1 + max(self.errors)],
            "mean_abs_error": mean(abs(e) for e in self.errors),
        }


def nearest(rows: list[dict[str, Any]], engine: str, wanted: dict[str, Any],
            narrowings: tuple[str, ...], error: str) -> Record | None:  # fmt: skip
    """The figures of `rows` most like `wanted` (each narrowing kept while a figure is left),
    and their errors under the key `error`; None where `rows` is empty."""
    like = [r for r in rows if r.get(error) is not None]
    if not like:
        return None
    matched: list[str] = []
    for field in narrowings:
        narrower = [r for r in like if r[field] == wanted[field]]
        if narrower:
            like, matched = narrower, [*matched, field]
    return Record(engine, wanted, tuple(matched), tuple(r["name"] for r in like),
                  tuple(r[error] for r in like))  # fmt: skip


def training(engine: str, accelerator: str, moe: bool, fp8: bool) -> Record | None:
    """The published training runs most like a plan of `engine` on `accelerator`, with or
    without experts and fp8, each timed with its source left out."""
    rows = [r for r in stored(TRAINING) if r["engine"] == engine]
    wanted = {"accelerator": accelerator, "moe": moe, "fp8": fp8}
    return nearest(rows, engine, wanted, TRAINING_NARROWINGS, "left_out")


def serving(engine: str, typical: str, accelerator: str, precision: str) -> Record | None:
    """The published serving figures most like a plan under the profile `engine` on
    `accelerator` in `precision`'s class: the engine's own, each left out of its profile, or
    for the typical profile every engine's, each with its engine left out. None for a profile
    fitted on no figure (the ideal one)."""
    wanted = {"accelerator": accelerator, "precision": precision}
    if engine == typical:
        return nearest(list(stored(SERVING)), engine, wanted, SERVING_NARROWINGS,
                       "typical_left_out")  # fmt: skip
    rows = [r for r in stored(SERVING) if r["engine"] == engine]
    return nearest(rows, engine, wanted, SERVING_NARROWINGS, "left_out")


def _kind(field: str, value: Any) -> str:
    """How a narrowing names the plan's value of `field`."""
    if field == "moe":
        return "MoE" if value else "dense"
    if field == "fp8":
        return "fp8" if value else "non-fp8"
    return str(value)  # a serving precision class


def _none(field: str, value: Any) -> str:
    """How the line says a narrowing found no figure."""
    if field == "moe":
        return "none MoE" if value else "none dense"
    if field == "fp8":
        return "none in fp8" if value else "none without fp8"
    return f"none in {value}"


def summary(rec: dict[str, Any], serving: bool = False) -> str:
    """One line for plan's table (`rec`: Record.report()): which figures, and how far their
    published times were from what plan predicted with them left out; a narrowing that found
    nothing is named ("none on mi300x")."""
    n = len(rec["figures"])
    matched = rec["matched"]
    engine = rec["engine"]
    fields = SERVING_NARROWINGS if serving else TRAINING_NARROWINGS
    kinds = [_kind(f, rec[f]) for f in fields[1:] if f in matched]
    missing = [_none(f, rec[f]) for f in fields[1:] if f not in matched]
    if serving:
        noun, out = "figure", "each left out of its profile"
        if engine == "typical":  # every engine's figures, each predicted without its engine
            engine, out = "", "each with its engine left out of the typical profile"
        if n == 1:
            out = out.replace("each ", "", 1)
    else:
        noun, out = "run", "each source left out" if n > 1 else "its source left out"
    if "accelerator" in matched:
        where = f"on {rec['accelerator']}"
    else:
        where, missing = "on other accelerators", [f"none on {rec['accelerator']}", *missing]
    if missing:
        where += f" ({', '.join(missing)})"
    plural = noun + ("s" if n > 1 else "")
    what = " ".join(x for x in (str(n), "published", engine, *kinds, plural) if x)
    lo, hi = rec["published_over_predicted"]
    span = f"{lo:.2f}×" if n == 1 else f"{lo:.2f}-{hi:.2f}×"
    mean_error = f"mean error {rec['mean_abs_error']:.1%}"
    return f"{what} {where}: {span} the predicted time, {out} ({mean_error})"
