"""`plan --mode serve --plot FILE`: time per output token and to first token against
throughput, over the batches continuous batching reaches (serve_batching.py's sweep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from archspec.backends.compare.plot import _formatter, _pyplot, _save, check_path


def plot_serving(title: str, sweep: list[dict[str, Any]], path: Path, force: bool) -> None:
    check_path(path)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    tokens = [p["tokens_per_s"] for p in sweep]
    for ax, key, label in ((axes[0], "tpot_s", "time per output token (ms)"),
                           (axes[1], "ttft_s", "time to first token (ms)")):  # fmt: skip
        ax.plot(tokens, [p[key] * 1e3 for p in sweep], marker="o", color="#4C72B0")
        for p, x in zip(sweep, tokens, strict=True):
            ax.annotate(f"{p['batch']}", (x, p[key] * 1e3), textcoords="offset points",
                        xytext=(4, 4), fontsize=8)  # fmt: skip
        ax.set_xlabel("output tokens/s (labels: sequences decoding together)")
        ax.set_ylabel(label)
        ax.xaxis.set_major_formatter(_formatter())
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    _save(fig, path, force)
