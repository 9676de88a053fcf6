"""How sure a speedup over transformers is, from the step times `archspec bench --vs-hf` keeps.

    python benchmarks/paired_ratio.py benchmarks/cpu-small-generate/run4/results.json
    python benchmarks/paired_ratio.py run1/results.json run2/results.json run3/results.json

bench alternates the two implementations step by step (ours then transformers', then the
other way round), so step i of each side ran at nearly the same moment, under the same load
from whatever else the machine was doing. The ratio of a pair, transformers' time over ours,
cancels most of that load; this script reports, per run:

- the speedup bench prints: the ratio of the two medians;
- the median of the paired ratios, and a 95% bootstrap interval for it (10,000 resamples of
  the pairs, seeded, percentile method);
- how many pairs the generated model won.

An interval that lies above 1.0 says the generated model is faster in that process; one that
contains 1.0 says the run cannot tell the two apart.

Pairing cannot cancel what stays the same for a whole process, such as where each model's
weights landed in memory (`benchmarks/same_model.py` measures how far apart that puts two
identical models). So when a row was run in several processes (several results.json files),
a second table pools them: the mean of the runs' paired medians, with a 95% interval from a
two-level bootstrap (resample the runs, then the pairs within each), which counts the spread
between processes as well as within them.

Records of `benchmarks/same_model.py` (the generated model against a copy of itself) are read
the same way, the copy in transformers' place.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import defaultdict
from pathlib import Path

RESAMPLES = 10_000


def other_times(run: dict) -> list[float] | None:
    """The other side's step times: transformers', or the copy's; None if the run had none."""
    return run.get("hf_step_times_s", run.get("copy_step_times_s"))


def ratios_of(run: dict) -> list[float] | None:
    """The paired ratios of a run, the other side's time over ours; None without another side."""
    other = other_times(run)
    if other is None:
        return None
    return [h / o for o, h in zip(run["step_times_s"], other, strict=True)]


def interval(estimates: list[float]) -> tuple[float, float]:
    ordered = sorted(estimates)
    return ordered[int(0.025 * len(ordered))], ordered[int(0.975 * len(ordered)) - 1]


def paired(run: dict, ratios: list[float]) -> dict:
    rng = random.Random(0)
    medians = [statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES)]
    return {
        "pairs": len(ratios),
        "speedup": statistics.median(other_times(run)) / statistics.median(run["step_times_s"]),
        "paired_median": statistics.median(ratios),
        "interval": interval(medians),
        "won": sum(r > 1.0 for r in ratios),
    }


def pooled(runs: list[list[float]]) -> dict:
    """The mean of the runs' paired medians, and its two-level bootstrap interval."""
    rng = random.Random(0)
    means = []
    for _ in range(RESAMPLES):
        picked = rng.choices(runs, k=len(runs))
        means.append(statistics.fmean(
            statistics.median(rng.choices(r, k=len(r))) for r in picked))  # fmt: skip
    medians = [statistics.median(r) for r in runs]
    return {"runs": len(runs), "medians": medians, "mean": statistics.fmean(medians),
            "interval": interval(means)}  # fmt: skip


def row_name(run: dict) -> tuple[str, str]:
    label = run.get("label", run["name"])
    if "copy_step_times_s" in run:
        label += " (against a copy of itself)"
    return label, "yes" if run["compile"] else "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="results.json files")
    args = parser.parse_args()
    groups: dict[tuple[str, str], list[list[float]]] = defaultdict(list)
    print("| model | compile | pairs | speedup (medians) | paired median | 95% interval | won |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for path in args.results:
        for run in json.loads(path.read_text()):
            ratios = ratios_of(run)
            if ratios is None:
                continue
            name = row_name(run)
            groups[name].append(ratios)
            p = paired(run, ratios)
            low, high = p["interval"]
            print(
                f"| {name[0]} | {name[1]} | {p['pairs']} | {p['speedup']:.3f}× "
                f"| {p['paired_median']:.3f}× | {low:.3f} – {high:.3f} "
                f"| {p['won']} of {p['pairs']} |"
            )
    pooled_rows = {name: runs for name, runs in groups.items() if len(runs) > 1}
    if not pooled_rows:
        return
    print("\n| model | compile | runs | paired medians | mean | 95% interval (runs and pairs) |")
    print("| --- | --- | ---: | --- | ---: | ---: |")
    for (label, compiled), runs in pooled_rows.items():
        p = pooled(runs)
        low, high = p["interval"]
        medians = ", ".join(f"{m:.3f}" for m in p["medians"])
        print(f"| {label} | {compiled} | {p['runs']} | {medians} | {p['mean']:.3f}× "
              f"| {low:.3f} – {high:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
