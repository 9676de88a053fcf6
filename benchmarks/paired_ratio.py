"""How sure a speedup over transformers is, from the step times `archspec bench --vs-hf` keeps.

    python benchmarks/paired_ratio.py benchmarks/cpu-small-generate/run4/results.json

bench alternates the two implementations step by step (ours then transformers', then the
other way round), so step i of each side ran at nearly the same moment, under the same load
from whatever else the machine was doing. The ratio of a pair, transformers' time over ours,
cancels most of that load; this script reports, per run:

- the speedup bench prints: the ratio of the two medians;
- the median of the paired ratios, and a 95% bootstrap interval for it (10,000 resamples of
  the pairs, seeded, percentile method);
- how many pairs the generated model won.

An interval that lies above 1.0 says the generated model is faster on that machine; one that
contains 1.0 says the run cannot tell the two apart.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

RESAMPLES = 10_000


def paired(run: dict) -> dict:
    ours, hf = run["step_times_s"], run["hf_step_times_s"]
    ratios = [h / o for o, h in zip(ours, hf, strict=True)]
    rng = random.Random(0)
    medians = sorted(
        statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES)
    )
    low, high = medians[int(0.025 * RESAMPLES)], medians[int(0.975 * RESAMPLES) - 1]
    return {
        "label": run.get("label", run["name"]),
        "compile": run["compile"],
        "pairs": len(ratios),
        "speedup": statistics.median(hf) / statistics.median(ours),
        "paired_median": statistics.median(ratios),
        "interval": (low, high),
        "won": sum(r > 1.0 for r in ratios),
        "load": run.get("load_average"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="results.json of run_standard.py")
    args = parser.parse_args()
    print("| model | compile | pairs | speedup (medians) | paired median | 95% interval | won |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for path in args.results:
        for run in json.loads(path.read_text()):
            if "hf_step_times_s" not in run:
                continue
            p = paired(run)
            low, high = p["interval"]
            print(
                f"| {p['label']} | {'yes' if p['compile'] else 'no'} | {p['pairs']} "
                f"| {p['speedup']:.3f}× | {p['paired_median']:.3f}× | {low:.3f} – {high:.3f} "
                f"| {p['won']} of {p['pairs']} |"
            )


if __name__ == "__main__":
    main()
