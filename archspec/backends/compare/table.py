"""The comparison: one entry per spec (JSON-ready), and the rows of the table people read.

No number is computed here. Structure comes from `structure`, parameters from the parameter
report via `summary`, FLOPs and memory from the FLOP and memory report of `archspec count`
(`flops_report`, at the same workload) and its one-number helpers, so `compare --json` and
`count --json` cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from archspec.backends.compare.numbers import three_digits
from archspec.backends.compare.structure import label, structure
from archspec.backends.compare.summary import param_summary
from archspec.backends.count.flops_report import (
    Workload,
    flops_report,
    kv_cache_bytes_per_token,
    train_flops_per_token,
)
from archspec.backends.count.report import param_report
from archspec.ir.nodes import IR


def compare_entry(ir: IR, workload: Workload | None = None) -> dict[str, Any]:
    """One spec's column: its name, architecture facts, parameter figures and, at `workload`
    (default: batch 1, the spec's own max_seq_len, fp32, as `archspec count`), the `workload`,
    `flops` and `memory` entries of `count --json` plus the per-token figures of the table."""
    workload = workload or Workload()
    report = param_report(ir)
    costs = flops_report(ir, workload)
    seq = costs["workload"]["seq"]
    return {
        "name": report["name"],
        "family": report["family"],
        "source": report["source"],
        "structure": structure(ir),
        "params": param_summary(report),
        **costs,
        "per_token": {
            "forward_flops": costs["flops"]["forward_per_token"],
            "train_flops": train_flops_per_token(ir, seq, workload.convention, workload.attn),
            # Decoder self-attention keys and values of one position, one sequence.
            "kv_cache_bytes": kv_cache_bytes_per_token(ir, workload.dtype),
        },
    }


def compare_report(irs: list[IR], workload: Workload | None = None) -> dict[str, Any]:
    return {"specs": [compare_entry(ir, workload) for ir in irs]}


def common_seq(irs: list[IR]) -> int:
    """One S for every column, the shortest context among them: per-token FLOPs at 1,024
    beside ones at 32,768 compare unlike things, and each model is defined there."""
    return min(ir.value(ir.root.max_seq_len) for ir in irs)


Cell = Callable[[dict[str, Any]], str]


def _fact(key: str) -> Cell:
    return lambda entry: label(entry["structure"], key)


def _param(key: str) -> Cell:
    return lambda entry: f"{entry['params'][key]:,}"


STRUCTURE_ROWS: list[tuple[str, Cell]] = [
    ("type", _fact("architecture")),
    ("layers", _fact("layers")),
    ("d_model", _fact("d_model")),
    ("heads / kv heads", _fact("heads")),
    ("head_dim", _fact("head_dim")),
    ("attention", _fact("attention")),
    ("d_ff", _fact("d_ff")),
    ("MLP", _fact("mlp")),
    ("norm", _fact("norm")),
    ("position", _fact("position")),
    ("MoE", _fact("moe")),
    ("tied embeddings", _fact("tied_embeddings")),
    ("vocabulary", _fact("vocab_size")),
    ("context", _fact("max_seq_len")),
]


def si(n: float, unit: str) -> str:
    """143 GFLOP: decimal prefixes, three significant digits."""
    for prefix, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{three_digits(n, size)} {prefix}{unit}"
    return f"{three_digits(n)} {unit}"


def binary_bytes(n: float) -> str:
    """12.8 GiB: memory in binary units, as devices report it."""
    for prefix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if abs(n) >= size:
            return f"{three_digits(n, size)} {prefix}B"
    return f"{three_digits(n)} B"


PARAM_ROWS: list[tuple[str, Cell]] = [
    ("total", _param("total")),
    ("embedding", _param("embedding")),
    ("non-embedding", _param("non_embedding")),
    ("active per token", _param("active")),
]


COST_ROWS: list[tuple[str, Cell]] = [
    ("sequence length S", lambda e: f"{e['workload']['seq']:,}"),
    ("forward FLOPs / token", lambda e: si(e["per_token"]["forward_flops"], "FLOP")),
    ("training FLOPs / token", lambda e: si(e["per_token"]["train_flops"], "FLOP")),
    ("KV cache / token", lambda e: binary_bytes(e["per_token"]["kv_cache_bytes"])),
    ("weights", lambda e: binary_bytes(e["memory"]["weights"])),
]


def sections(report: dict[str, Any]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """The table as text: (section title, [(row label, one cell per spec)])."""
    specs = report["specs"]
    w = specs[0]["workload"]
    costs = f"compute and memory ({w['dtype']}, {w['convention']} FLOPs)"
    out = []
    for title, rows in (
        ("architecture", STRUCTURE_ROWS),
        ("parameters", PARAM_ROWS),
        (costs, COST_ROWS),
    ):
        out.append((title, [(name, [cell(e) for e in specs]) for name, cell in rows]))
    return out


def markdown(report: dict[str, Any]) -> str:
    """The table as GitHub markdown: a column per spec, numbers right-aligned."""
    names = [e["name"] for e in report["specs"]]
    lines = [
        "| | " + " | ".join(f"`{n}`" for n in names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for title, rows in sections(report):
        lines.append(f"| **{title}** |" + " |" * len(names))
        for name, cells in rows:
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
