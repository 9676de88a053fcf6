"""`archspec count SPEC --seq 512,1024,2048`: FLOPs and memory across sequence lengths, in one
table (and a chart with `--plot`).

`count` parses the option and calls these helpers; every figure is the FLOP and memory report
`count --seq S` prints for one length (backends/compare/sweep.py), so a row of the sweep and
a single `count --seq S` cannot disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archspec.cli.common import asked_title, human, say
from archspec.errors import SpecError
from archspec.ir.title import titled
from archspec.safety.limits import MAX_LENGTHS, MAX_SIZE


def parse_lengths(text: str | None) -> list[int] | None:
    """`2048` -> [2048]; `512,1024,2048` -> [512, 1024, 2048]; None when not given."""
    if text is None:
        return None
    parts = text.split(",")
    if len(parts) > MAX_LENGTHS:
        raise SpecError(
            f"--seq takes at most {MAX_LENGTHS} lengths, got {len(parts):,}",
            hint="a sweep over doublings (--seq 128,256,...) covers any range in a few rows",
        )
    try:
        lengths = [int(part) for part in parts if len(part.strip()) <= 20]
        if len(lengths) != len(parts):
            raise ValueError
    except ValueError:
        raise SpecError(
            f"--seq takes a length or a comma-separated list of lengths, not {text!r}",
            hint="for example --seq 2048 or --seq 512,1024,2048,4096",
        ) from None
    if any(n < 1 for n in lengths):
        raise SpecError("--seq must be at least 1")
    if any(n > MAX_SIZE for n in lengths):
        raise SpecError(f"--seq must be at most {MAX_SIZE:,}")
    return lengths


def chart_sweep(report: dict[str, Any], ir, workload, path: Path, force: bool = False) -> None:
    """Draw the sweep to `path`; without one, sweep the doublings from 128 up to the spec's
    context window first (`count SPEC --plot f.png` alone draws the usual picture, at the
    default workload when no option gave one)."""
    from archspec.backends.compare.plot import check_path, plot_sweep
    from archspec.backends.compare.sweep import chart_lengths, seq_sweep
    from archspec.backends.count.flops_report import Workload

    workload = workload or Workload()

    check_path(path)
    sweep = report.get("sweep") or seq_sweep(
        ir, workload, chart_lengths(ir.value(ir.root.max_seq_len))
    )
    # matplotlib reads $...$ as mathematics; an override's text is the user's.
    title = titled(report["name"], report["overrides"]).replace("$", r"\$")
    plot_sweep(title, sorted(sweep, key=lambda e: e["workload"]["seq"]), path, force)
    say(f"wrote {path}")


def render_sweep(report: dict[str, Any]) -> None:
    from archspec.backends.compare.table import binary_bytes
    from archspec.cli.tables import Column, make_table, print_table

    sweep = report["sweep"]
    w = sweep[0]["workload"]
    # Two-line headers: the table's width is then set by its figures, not its words.
    headers = [
        "S", "forward", "forward\n/ token", "train\nstep", "train\n/ token", "decode\nstep",
        "KV\ncache", "activ-\nations", "training\nmemory", "inference\nmemory",
    ]  # fmt: skip
    rows = []
    for e in sweep:
        flops, memory = e["flops"], e["memory"]
        decode = human(flops["decode"]) if flops["decode"] is not None else "—"
        rows.append([
            f"{e['workload']['seq']:,}",
            human(flops["forward"]),
            human(flops["forward_per_token"]),
            human(flops["train_step"]),
            human(flops["train_step"] / flops["tokens"]),
            decode,
            binary_bytes(memory["kv_cache"]),
            binary_bytes(memory["activations"]),
            binary_bytes(memory["total"]),
            binary_bytes(memory["inference_total"]),
        ])  # fmt: skip
    table = make_table(
        f"{asked_title(report['name'], report['overrides'])} across sequence lengths: "
        f"batch {w['batch']}, {w['dtype']}, "
        f"{w['convention']} FLOPs",
        [Column(h) for h in headers],
        rows,
        caption="[dim]FLOPs: K 10³, M 10⁶, B 10⁹, T 10¹²; memory per device; exact: --json[/dim]",
    )
    print_table(table)
