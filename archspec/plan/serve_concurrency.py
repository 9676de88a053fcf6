"""`plan --mode serve --concurrency` against published concurrency sweeps: checked, not fitted.

A concurrency sweep runs C clients against one server, each sending its next request as soon as
the last one ends, every prompt and output of fixed length; the source reports the mean time to
first token, the mean time between output tokens and the output tokens a second at each C
(published_serving.yaml, `sweeps`). Continuous batching (serve_batching.py) predicts all three
from the engine's profile, which was fitted on other figures (static batches, first tokens,
batch-1 decoding): nothing here is fitted, so each error is out of sample.

Errors follow the serving table's sign: positive means predicted faster (a published time over
the predicted one, or the predicted rate over the published one, minus one).

`python -m archspec.plan.serve_concurrency` prints the check as docs/plan.md shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

from archspec.plan.serve import Precision
from archspec.plan.serve_batching import BatchingPoint, Server
from archspec.plan.serve_engine import ServeEngine, load_engines, serving_system

# The profiles the check is shown with: TensorRT-LLM 1.0's (fitted on trtllm-bench's offline
# runs, 2025) and 2023's (static batches), and the one for an engine the dataset does not hold.
SHOWN = ("tensorrt-llm-1.0", "tensorrt-llm", "typical")


@dataclass(frozen=True)
class SweepPoint:
    source: str
    engine: str
    table: str
    name: str  # the model as the source names it
    model: str
    sets: tuple[str, ...]  # spec overrides that give the model's shapes
    gpu: str
    gpus: int
    tp: int
    precision: str
    kv: str | None
    prompt: int
    new_tokens: int
    concurrency: int
    ttft_ms: float
    itl_ms: float
    tokens_per_s: float  # output tokens a second, all clients


def load_sweeps() -> list[SweepPoint]:
    text = (resources.files("archspec") / "plan" / "published_serving.yaml").read_text()
    data = yaml.safe_load(text)
    points = []
    for row in data.get("sweeps", []):
        row = dict(row)
        sets = tuple(row.pop("set", ()))
        points.append(SweepPoint(engine=data["sources"][row["source"]]["engine"], sets=sets,
                                 kv=row.pop("kv", None), **row))  # fmt: skip
    return points


def _server(point: SweepPoint, engine: ServeEngine) -> Server:
    from archspec.cli.common import compile_spec

    ir = compile_spec(point.model, list(point.sets) or None)
    precision = Precision(point.precision, None, point.kv)
    return Server(ir, serving_system(point.gpu), point.prompt, point.new_tokens, point.tp,
                  point.gpus, precision, engine)  # fmt: skip


def predicted(point: SweepPoint, engine: ServeEngine) -> BatchingPoint:
    """What `plan --mode serve --concurrency C` gives for the point (the same Server)."""
    return _server(point, engine).at_concurrency(point.concurrency)


def errors(point: SweepPoint, engine: ServeEngine) -> tuple[float, float, float]:
    """(time to first token, time between tokens, output tokens a second): positive means
    predicted faster."""
    p = predicted(point, engine)
    return (point.ttft_ms / (p.ttft_s * 1e3) - 1, point.itl_ms / (p.tpot_s * 1e3) - 1,
            p.tokens_per_s / point.tokens_per_s - 1)  # fmt: skip


def table(points: list[SweepPoint] | None = None) -> str:
    points = load_sweeps() if points is None else points
    engines = load_engines()
    head = " | ".join(f"{k}: TTFT | ITL | tokens/s" for k in SHOWN)
    lines = [f"| model | gpu × n | precision | prompt → new | C | published TTFT ms | ITL ms "
             f"| tokens/s | max batch (its profile) | {head} |",
             "|---|---|---|---|---:|---:|---:|---:|---:|" + "---:|" * 3 * len(SHOWN)]  # fmt: skip
    for s in points:
        precision = s.precision + (f", {s.kv} cache" if s.kv else "")
        cells = []
        for key in SHOWN:
            cells += [f"{e:+.1%}" for e in errors(s, engines[key])]
        batch = _server(s, engines[s.engine]).max_batch
        lines.append(
            f"| {s.name} | {s.gpu} × {s.gpus} | {precision} | {s.prompt} → {s.new_tokens} "
            f"| {s.concurrency} | {s.ttft_ms} | {s.itl_ms} | {s.tokens_per_s} | {batch} "
            f"| {' | '.join(cells)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
