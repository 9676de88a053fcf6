"""Charts of a comparison, drawn with matplotlib (an optional extra: `archspec[plot]`).

matplotlib is imported only when a chart is drawn, so the rest of archspec never pays for it
and works without it; a missing install is a user-facing message that says what to install.
The Agg backend renders off-screen, so charts draw the same on a headless CI machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from archspec.backends.compare.numbers import three_digits
from archspec.backends.compare.ticks import binary_ticks, decimal_ticks
from archspec.errors import SpecError

FORMATS = (".png", ".svg")
# The parameter report's groups, in stacking order, with the names the legend uses.
GROUP_LABELS = {
    "embeddings": "embeddings",
    "attention": "attention",
    "mlp": "MLP / MoE experts",
    "norms": "norms",
    "pooler": "pooler",
    "head": "LM head (untied)",
}
GROUP_COLORS = {
    "embeddings": "#4C72B0",
    "attention": "#DD8452",
    "mlp": "#55A868",
    "norms": "#8172B3",
    "pooler": "#937860",
    "head": "#C44E52",
}


def human(n: float) -> str:
    """Axis and label numbers for people: 1.2B, 350M, 64K, 0."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{three_digits(n, size)}{unit}"
    return f"{three_digits(n)}"


def si(n: float) -> str:
    """FLOP axis numbers: decimal prefixes, 143G, 1.5T."""
    for unit, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{three_digits(n, size)}{unit}"
    return f"{three_digits(n)}"


def binary(n: float) -> str:
    """Byte axis numbers: binary prefixes, 12.8 GiB."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{three_digits(n, size)} {unit}"
    return f"{three_digits(n)} B"


def seq_label(n: int) -> str:
    """Sequence lengths the way contexts are named: 512, 4K (4,096), 32K."""
    return f"{n // 1024}K" if n >= 1024 and n % 1024 == 0 else f"{n:,}"


def check_path(path: Path) -> None:
    """Refuse an output the chart cannot be written to, or a missing matplotlib, before any
    work is done."""
    if path.suffix.lower() not in FORMATS:
        raise SpecError(
            f"cannot draw a chart to '{path}': the file name must end in .png or .svg",
            hint="for example --plot compare.png",
        )
    if not path.parent.is_dir():
        raise SpecError(f"cannot write '{path}': the folder {path.parent} does not exist")
    _pyplot()


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SpecError(
            "drawing charts needs matplotlib, which is not installed",
            hint="install the plot extra: pip install 'archspec[plot]' (or pip install matplotlib)",
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _formatter(style=human):
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: style(value))


def _parameter_bars(axes: Any, specs: Sequence[dict[str, Any]], share: bool) -> list[Any]:
    """Horizontal stacked bars, one per spec (first spec on top), one segment per group."""
    names = [e["name"] for e in specs]
    y = list(range(len(specs)))[::-1]
    groups = [g for g in GROUP_LABELS if any(e["params"]["groups"].get(g) for e in specs)]
    left = [0.0] * len(specs)
    handles = []
    totals = [e["params"]["total"] for e in specs]
    # gpt2 beside Mixtral on a linear axis is a bar too short to see: past a factor of 20,
    # totals go on a log axis (stacked segments would mislead there; the share panel shows
    # the composition).
    log = not share and min(totals) > 0 and max(totals) / min(totals) > 20
    if log:
        groups = []
        axes.barh(y, totals, color="#9aa5b1", height=0.6)
        axes.set_xscale("log")
        axes.set_xlim(min(totals) / 3, max(totals) * 8)
    for group in groups:
        values = [e["params"]["groups"].get(group, 0) for e in specs]
        if share:
            values = [100 * v / e["params"]["total"] for v, e in zip(values, specs, strict=True)]
        bars = axes.barh(
            y, values, left=left, color=GROUP_COLORS[group], label=GROUP_LABELS[group], height=0.6
        )
        handles.append(bars)
        left = [a + b for a, b in zip(left, values, strict=True)]
    axes.set_yticks(y, names)
    axes.grid(axis="x", alpha=0.3)
    axes.set_axisbelow(True)
    if share:
        axes.set_xlim(0, 100)
        axes.set_xlabel("share of the spec's parameters (%)")
        axes.set_title("Where the parameters are (share)")
    else:
        axes.xaxis.set_major_formatter(_formatter())
        axes.set_xlabel("parameters (log scale)" if log else "parameters")
        axes.set_title("Parameters (total, log scale)" if log else "Parameters by component")
        # The total at the end of each bar; the axis leaves room for the label.
        for yi, e in zip(y, specs, strict=True):
            total = e["params"]["total"]
            axes.text(total, yi, f"  {human(total)}", va="center", fontsize=9)
        # A mixture of experts: mark how many of those parameters one token uses.
        moe = [
            (yi, e["params"]["active"])
            for yi, e in zip(y, specs, strict=True)
            if e["params"]["active"] != e["params"]["total"]
        ]
        if moe:
            from matplotlib.lines import Line2D

            ys, active = zip(*moe, strict=True)
            axes.scatter(active, ys, marker="|", s=900, color="black", linewidths=2, zorder=3)
            handles.append(
                Line2D(
                    [],
                    [],
                    color="black",
                    marker="|",
                    linestyle="None",
                    markersize=12,
                    markeredgewidth=2,
                    label="active per token (MoE)",
                )
            )
    return handles


def _flops_lines(
    axes: Any, curves: dict[str, list[tuple[int, int]]], context: dict[str, int], seq: int | None
) -> None:
    """Forward FLOPs per token against sequence length, log-log: solid up to each model's
    context window, dotted beyond it (the formula goes on; the trained model does not)."""
    for i, (name, points) in enumerate(curves.items()):
        color = f"C{i % 10}"
        inside = [(s, f) for s, f in points if s <= context[name]]
        beyond = [(s, f) for s, f in points if s >= context[name]]
        if inside:
            axes.plot(*zip(*inside, strict=True), color=color, marker="o", ms=3, label=name)
        if len(beyond) > 1:
            axes.plot(*zip(*beyond, strict=True), color=color, linestyle=":", marker=None)
    # Ticks at the doublings only; a context window that is not one is still plotted.
    lengths = {s for points in curves.values() for s, _ in points}
    _seq_axis(axes, sorted(s for s in lengths if s & (s - 1) == 0))
    axes.set_yscale("log")
    # Whole decades at both ends, so every curve sits between two labelled ticks.
    values = [f for points in curves.values() for _, f in points]
    axes.set_ylim(
        10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values)))
    )
    axes.yaxis.set_major_formatter(_formatter(si))
    if seq is not None:
        axes.axvline(seq, color="grey", linewidth=0.8, linestyle="--")
        axes.annotate(
            f"S = {seq:,}",
            (seq, 1),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            fontsize=9,
            color="grey",
        )
    axes.set_ylabel("forward FLOPs per token (log scale)")
    axes.set_title("Forward FLOPs per token vs sequence length (dotted: beyond the context window)")
    axes.grid(alpha=0.3)
    _legend_beside(axes, ncols=2 if len(curves) > 8 else 1)


def _legend_beside(axes: Any, **kw) -> None:
    """The legend right of the axes, where it cannot cover a line (the constrained layout
    makes room for it)."""
    axes.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0, **kw)


def plot_compare(
    report: dict[str, Any],
    path: Path,
    flops: dict[str, list[tuple[int, int]]] | None = None,
    seq: int | None = None,
    force: bool = False,
) -> None:
    """The comparison chart: parameters by component (absolute and share) and, given
    `flops` ({spec: [(S, forward FLOPs per token)]}), FLOPs per token against S."""
    check_path(path)
    _save(compare_figure(report, flops, seq), path, force)


def compare_figure(
    report: dict[str, Any], flops: dict[str, list[tuple[int, int]]] | None, seq: int | None
) -> Any:
    """The matplotlib figure `plot_compare` writes."""
    plt = _pyplot()
    specs = report["specs"]
    bar_height = max(3.0, 0.45 * len(specs) + 1.5)
    rows = 2 if flops else 1
    fig = plt.figure(figsize=(14, bar_height + (5.5 if flops else 0)), layout="constrained")
    grid = fig.add_gridspec(rows, 2, height_ratios=[bar_height, 5.5] if flops else [1])
    absolute = fig.add_subplot(grid[0, 0])
    marks = _parameter_bars(absolute, specs, share=False)
    share = fig.add_subplot(grid[0, 1], sharey=absolute)
    # The groups' colours from the share panel (the absolute one may be totals on a log axis).
    handles = _parameter_bars(share, specs, share=True)
    handles += [h for h in marks if not hasattr(h, "patches")]
    share.tick_params(labelleft=False)
    fig.legend(handles=handles, loc="outside upper center", ncols=len(handles), frameon=False)
    if flops:
        context = {e["name"]: e["structure"]["max_seq_len"] for e in specs}
        _flops_lines(fig.add_subplot(grid[1, :]), flops, context, seq)
    return fig


def _save(fig: Any, path: Path, force: bool) -> None:
    """Render the chart in memory, then write it through archspec's one writer (atomic, no
    symbolic links or devices, an existing different file kept unless `force`)."""
    import io

    from archspec.safety.writing import Output, write_files

    buffer = io.BytesIO()
    try:
        kind = path.suffix.lower().lstrip(".")
        # No date in an SVG: the same chart gives the same bytes, and a rerun is "unchanged".
        metadata = {"Date": None} if kind == "svg" else None
        fig.savefig(buffer, format=kind, dpi=120, metadata=metadata)
    finally:
        _pyplot().close(fig)
    write_files([Output(path, buffer.getvalue(), "the chart")], force=force)


def plot_sweep(name: str, sweep: list[dict[str, Any]], path: Path, force: bool = False) -> None:
    """`count --seq a,b,c --plot`: FLOPs per token and memory against S, from the FLOP and
    memory reports at each length (`count --json`'s `workload`, `flops`, `memory`)."""
    check_path(path)
    _save(sweep_figure(name, sweep), path, force)


def sweep_figure(name: str, sweep: list[dict[str, Any]]) -> Any:
    """The matplotlib figure `plot_sweep` writes."""
    plt = _pyplot()
    seqs = [e["workload"]["seq"] for e in sweep]
    w = sweep[0]["workload"]
    fig, (flops, memory) = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
    fig.suptitle(
        f"{name}: batch {w['batch']}, {w['dtype']}, {w['convention']} FLOPs", fontweight="bold"
    )
    forward = [e["flops"]["forward_per_token"] for e in sweep]
    train = [e["flops"]["train_step"] / e["flops"]["tokens"] for e in sweep]
    flops.plot(seqs, forward, marker="o", label="forward")
    flops.plot(seqs, train, marker="s", label="training step (forward + backward)")
    flops.set_ylabel("FLOPs per token (log scale)")
    flops.set_title("FLOPs per token")
    flops.set_yscale("log")
    # Over a narrow range a log axis labels its minor ticks too: both in the same style.
    flops.yaxis.set_major_formatter(_formatter(si))
    _cover(flops, [*forward, *train], decimal_ticks)
    series = {
        "weights": "weights",
        "activations": "activations (training)",
        "kv_cache": "KV cache (inference)",
        "total": "training total",
    }
    drawn: list[int] = []
    for key, label in series.items():
        values = [e["memory"][key] for e in sweep]
        if any(values):
            memory.plot(seqs, values, marker="o", label=label)
            drawn += [v for v in values if v > 0]
    memory.set_ylabel("bytes (log scale)")
    memory.set_title(f"Memory at batch {w['batch']}")
    # Doublings of bytes land on round binary sizes: 8 GiB, 16 GiB, ...
    memory.set_yscale("log", base=2)
    memory.yaxis.set_major_formatter(_formatter(binary))
    _cover(memory, drawn, binary_ticks)
    for ax in (flops, memory):
        _seq_axis(ax, seqs)
        ax.grid(alpha=0.3)
    # Below the panels, each under its own, where no line can be covered.
    for ax, corner in ((flops, "outside lower left"), (memory, "outside lower right")):
        fig.legend(*ax.get_legend_handles_labels(), loc=corner, ncols=2, fontsize=9)
    return fig


def _cover(axes: Any, values: Sequence[float], ticks_for) -> None:
    """Ticks from at or below the lowest value to at or above the highest, and the axis
    limits at the outer ticks: every point lies between two labels."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ticks = ticks_for(min(values), max(values))
    axes.yaxis.set_major_locator(FixedLocator(ticks))
    axes.yaxis.set_minor_locator(NullLocator())
    axes.set_ylim(ticks[0], ticks[-1])


def _seq_axis(axes: Any, seqs: Sequence[int]) -> None:
    from matplotlib.ticker import NullLocator

    axes.set_xscale("log", base=2)
    axes.set_xticks(list(seqs), [seq_label(s) for s in seqs])
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xlabel("sequence length S (tokens, log scale)")
