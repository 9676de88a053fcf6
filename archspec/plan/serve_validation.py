"""`plan --mode serve` against published inference measurements (published_serving.yaml).

Each figure becomes a time the model predicts: a generate call's wall time (prefill, then
new_tokens - 1 decode steps: the prefill gives the first token), a static batch's, a time to
first token, or one decode step. Each engine's profile (serve_engine.py) is fitted on its own
figures: the achieved bandwidth per precision on a grid (and, where the figures show them,
the routed experts' share of it and how much of a grouped-query cache each query head loads
again), then the per-layer, per-all-reduce and
per-request overheads by non-negative least squares, alternately, minimising the squared
relative error of the times. Only the parameters its figures can tell apart are fitted (an
all-reduce latency needs figures at two tensor-parallel degrees, a request overhead times to
first token, an eager engine's layer cost, on the device or its host, figures of two depths);
the others stay 0. A figure whose unstated lengths decide it is bracketed instead (Bracket).

Cross-validation: every figure is predicted by the profile fitted on the other figures of its
engine (leave one out), and, for the engines with more than one source, by the profile fitted
without its whole source (leave one source out). Error = published time / predicted time - 1,
so positive means predicted faster, as in the training table.

`python -m archspec.plan.serve_validation` prints the table; `--write` stores the fitted
profiles in serve_engines.yaml.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

import yaml

from archspec.plan.least_squares import nnls
from archspec.plan.serve import Precision, ServeParts, serve_parts, serving_prediction
from archspec.plan.serve_engine import (
    EAGER,
    IDEAL,
    PRECISION_CLASSES,
    ServeEngine,
    serving_system,
)
from archspec.plan.serve_profiles import (
    ENGINE_NAMES,
    FP16_ACCUMULATION,
    GEMV_PASS_CHANNELS,
    HEAD_16BIT,
    NO_LAYER_OVERHEAD,
    PER_SEQUENCE,
    TYPICAL,
    engine_settings,
)

# A figure whose source leaves its lengths open (the prompt a user typed into a chat demo)
# declares the range its code allows; where the roofline alone moves across that range by more
# than the largest error the validation holds itself to (25%), the figure cannot test the model
# to it: it is checked to lie within the range predicted, and left out of the fit and the means.
UNSTATED_SPREAD = 0.25
# A run of `requests` requests queued at once and served by continuous batching (trtllm-bench
# throughput): its output tokens a second, all replicas (serve_batching's steady state).
OFFLINE = "offline_tokens_per_s"
# The engine's matmuls against the training-calibrated efficiency: half to 1.3 times.
COMPUTE_GRID = [x / 100 for x in range(50, 131)]
DECODE_ONLY = ("decode_token_ms", "generate_decode_tokens_per_s")
# The metrics that are times (the others are rates).
TIMES = ("ttft_ms", "decode_token_ms", "batch_latency_s")
# What an engine's expert kernels reach of its dense kernels' bandwidth: a fifth to all of it.
EXPERT_GRID = [x / 100 for x in range(20, 101)]
# The share of a grouped-query cache each further query head loads again: none to all of it.
REREAD_GRID = [x / 100 for x in range(0, 101)]
# Achieved bandwidth from 20% to 90% of the peak: streaming copies reach 80-90% on A100 and
# H100 (efficiency.py's sources), and no kernel that also computes does better.
EFFICIENCY_GRID = [x / 200 for x in range(40, 181)]


@dataclass(frozen=True)
class Figure:
    source: str
    engine: str
    table: str
    model: str
    gpu: str
    gpus: int
    tp: int
    precision: str
    batch: int
    prompt: int
    new_tokens: int
    metric: str
    value: float
    group: int | None = None
    kv: str | None = None
    assumed: str = ""
    # False where the source's code ran generate without handing the model its cache
    # (serve.serve_parts): every step a forward over the whole sequence.
    kv_cache: bool = True
    # Where the source leaves a length open: the (least, most) its code allows (UNSTATED_SPREAD).
    prompt_range: tuple[int, int] | None = None
    new_tokens_range: tuple[int, int] | None = None
    # An offline run's requests, all queued at once (OFFLINE); its `batch` is then the
    # sequences each tensor-parallel group decodes together, as its engine's profile sizes it.
    requests: int | None = None
    # Its prompts' keys and values already in the engine's prefix cache (a benchmark that
    # repeats one batch to an engine that keeps them): the first token costs a decode step.
    prompt_cached: bool = False

    @property
    def stored(self) -> Precision:
        return Precision(self.precision, self.group, self.kv)

    @property
    def published_s(self) -> float:
        """The figure as seconds of the thing the model times (a static batch's throughput
        counts every replica's batch: `batch` is one tensor-parallel group's)."""
        if self.metric == "generate_tokens_per_s":
            return self.new_tokens / self.value
        tokens = self.gpus // self.tp * self.batch * self.new_tokens
        if self.metric == "static_tokens_per_s":
            return tokens / self.value
        if self.metric == "static_tokens_per_s_per_gpu":
            return tokens / (self.value * self.gpus)
        if self.metric in ("ttft_ms", "decode_token_ms"):
            return self.value / 1e3
        if self.metric == "generate_decode_tokens_per_s":
            return 1 / self.value
        if self.metric == "batch_latency_s":
            return self.value
        if self.metric == OFFLINE:
            return self.requests * self.new_tokens / self.value
        raise ValueError(f"unknown metric {self.metric}")

    @property
    def steps(self) -> float:
        """An offline run's decode steps: its output tokens over those a step makes."""
        return self.requests * self.new_tokens / (self.gpus // self.tp * self.batch)

    def predicted_s(self, parts: ServeParts, engine: ServeEngine) -> float:
        """The time `plan --mode serve` gives for the figure's metric (one code path:
        tests/test_plan_serve_published_cli.py gives every figure to the command)."""
        if self.metric == OFFLINE:
            return self.steps * parts.mixed_step_s(engine, self.stored, self.new_tokens)
        p = serving_prediction(parts, engine, self.stored, self.batch, self.new_tokens,
                               self.gpus // self.tp, self.prompt_cached)  # fmt: skip
        if self.metric == "ttft_ms":
            return p.prefill_s
        if self.metric in DECODE_ONLY:
            return p.decode_token_s
        return p.generate_s


def load_dataset() -> tuple[dict[str, dict], list[Figure]]:
    text = (resources.files("archspec") / "plan" / "published_serving.yaml").read_text()
    data = yaml.safe_load(text)
    sources = data["sources"]
    figures = []
    for f in data["figures"]:
        ranges = {k: tuple(f.pop(k)) for k in ("prompt_range", "new_tokens_range") if k in f}
        figure = Figure(engine=sources[f["source"]]["engine"], **{"batch": 1, **f}, **ranges)
        figures.append(_offline_batch(figure) if figure.metric == OFFLINE else figure)
    return sources, figures


def _offline_batch(f: Figure) -> Figure:
    """The figure with the batch its engine decodes: as many of its requests as the cache
    holds (serve_batching.most_sequences, what `--concurrency` gives)."""
    from archspec.cli.common import compile_spec
    from archspec.plan.serve_batching import most_sequences

    settings = ServeEngine(f.engine, "", {}, **engine_settings(f.engine))
    most = most_sequences(compile_spec(f.model, None), parts_of(f), settings, f.prompt,
                          f.new_tokens)  # fmt: skip
    return replace(f, batch=min(-(-f.requests // (f.gpus // f.tp)), most))


def predicted_range(f: Figure, engine: ServeEngine) -> tuple[float, float]:
    """The least and most time predicted over the lengths the figure's source leaves open."""
    prompts = f.prompt_range or (f.prompt,)
    news = f.new_tokens_range or (f.new_tokens,)
    lengths = [(p, n) for p in prompts for n in news]
    times = [g.predicted_s(parts_of(g), engine)
             for g in (replace(f, prompt=p, new_tokens=n) for p, n in lengths)]  # fmt: skip
    return min(times), max(times)


def unstated(f: Figure) -> bool:
    """Whether the lengths its source leaves open move the roofline's time by more than
    UNSTATED_SPREAD: such a figure is checked to lie within its predicted range only."""
    if f.prompt_range is None and f.new_tokens_range is None:
        return False
    low, high = predicted_range(f, IDEAL)
    return high / low - 1 > UNSTATED_SPREAD


@cache
def parts_of(f: Figure) -> ServeParts:
    from archspec.cli.common import compile_spec

    ir = compile_spec(f.model, None)
    # Whether its matmuls accumulate in fp16 is its engine's (every profile fitted to the
    # figure, the typical one too, times it so).
    return serve_parts(ir, serving_system(f.gpu), f.batch, f.prompt, f.new_tokens, f.tp,
                       f.stored, kv_cache=f.kv_cache,
                       fp16_accumulation=f.engine in FP16_ACCUMULATION)  # fmt: skip


def _errors(figures: list[Figure], engine: ServeEngine) -> list[float]:
    return [f.predicted_s(parts_of(f), engine) / f.published_s - 1 for f in figures]


def _free_overheads(key: str, figures: list[Figure]) -> list[str]:
    """The overheads this engine's figures can tell apart."""
    free = []
    deep = len({parts_of(f).decode.layers for f in figures}) > 1
    if key not in NO_LAYER_OVERHEAD and (key not in EAGER or deep):
        free.append("layer_overhead_us")
    if any(f.tp > 1 for f in figures) and len({f.tp for f in figures}) > 1:
        free.append("allreduce_us")
    # A request's fixed overhead shows in a time to first token (milliseconds); in a static
    # batch of seconds to minutes it is lost in the decode steps, which then fit it at will.
    if any(f.metric in ("ttft_ms", OFFLINE) for f in figures):
        free.append("request_overhead_ms")
    if key in EAGER and deep:
        free.append("host_layer_us")
    if key in PER_SEQUENCE and len({f.batch for f in figures}) > 1:
        free.append("sequence_us")
    return free


def _overhead_counts(f: Figure, field: str) -> float:
    """Seconds one unit of an overhead adds to the figure's predicted time."""
    parts = parts_of(f)
    if f.metric == OFFLINE:  # each step a decode of the batch, with batch / new_tokens joining
        counts = {"layer_overhead_us": 1e-6 * parts.decode.layers,
                  "allreduce_us": 1e-6 * parts.decode.allreduces,
                  "sequence_us": 1e-6 * f.batch,
                  "request_overhead_ms": 1e-3 * f.batch / f.new_tokens}  # fmt: skip
        return f.steps * counts[field]
    steps = 0 if f.metric == "ttft_ms" else (1 if f.metric in DECODE_ONLY else f.new_tokens - 1)
    prefill = 0 if f.metric in DECODE_ONLY else 1
    if field == "layer_overhead_us":
        return 1e-6 * (prefill * parts.prefill.layers + steps * parts.decode.layers)
    if field == "allreduce_us":
        return 1e-6 * (prefill * parts.prefill.allreduces + steps * parts.decode.allreduces)
    if field == "sequence_us":
        return 1e-6 * f.batch * (prefill + steps)
    return 1e-3 * prefill  # request_overhead_ms


def _with_overheads(engine: ServeEngine, figures: list[Figure], free: list[str]
                    ) -> tuple[ServeEngine, float]:  # fmt: skip
    """The engine with its free overheads fitted (the relative residuals are linear in them:
    non-negative least squares), and the squared error left. An eager engine's layers cost
    either the device (added) or the host (overlapped), whichever predicts its figures better:
    fitting both at once lets each stand in for the bandwidth."""
    if "layer_overhead_us" in free and "host_layer_us" in free:
        device = _with_overheads(engine, figures, [n for n in free if n != "host_layer_us"])
        host = _with_overheads(engine, figures, [n for n in free if n != "layer_overhead_us"])
        return min(device, host, key=lambda fit: fit[1])
    zero = replace(engine, layer_overhead_us=0.0, allreduce_us=0.0, request_overhead_ms=0.0,
                   host_layer_us=0.0, sequence_us=0.0)  # fmt: skip
    linear = [name for name in free if name != "host_layer_us"]
    if linear:
        base = [f.predicted_s(parts_of(f), zero) for f in figures]
        target = [1 - b / f.published_s for f, b in zip(figures, base, strict=True)]
        cols = [[_overhead_counts(f, name) / f.published_s for f in figures]
                for name in linear]  # fmt: skip
        zero = replace(zero, **dict(zip(linear, nnls(cols, target), strict=True)))
    if "host_layer_us" in free:
        return _with_host(zero, figures)
    return zero, sum(e * e for e in _errors(figures, zero))


def _with_host(engine: ServeEngine, figures: list[Figure]) -> tuple[ServeEngine, float]:
    """The eager engine's host time a layer that best predicts the figures, and the squared
    error left. A figure is bound by its host once that time exceeds its device's time a layer
    (d); among the figures so bound (those of the k smallest d) the relative errors are linear
    in it, so the optimum is that set's least-squares value or one of the boundaries d."""
    per_layer = [_overhead_counts(f, "layer_overhead_us") / f.published_s for f in figures]
    device = [f.predicted_s(parts_of(f), engine) / f.published_s / c
              for f, c in zip(figures, per_layer, strict=True)]  # µs a layer  # fmt: skip
    order = sorted(range(len(figures)), key=lambda i: device[i])
    candidates = {0.0, *device}
    for k in range(1, len(order) + 1):
        bound = [per_layer[i] for i in order[:k]]
        candidates.add(sum(bound) / sum(c * c for c in bound))
    fits = [(e, sum(x * x for x in _errors(figures, e)))
            for e in (replace(engine, host_layer_us=h) for h in sorted(candidates))]  # fmt: skip
    return min(fits, key=lambda fit: fit[1])


def _computes(figures: list[Figure]) -> bool:
    """Whether the figures time compute-bound work: prefills of long prompts, large batches."""
    return any(f.metric.startswith(("ttft", "static", "batch", "offline"))
               and f.batch * f.prompt >= 2048 for f in figures)  # fmt: skip


def _has_experts(figures: list[Figure]) -> bool:
    return any(op.part == "expert" for f in figures for op in parts_of(f).decode.ops)


def _reads_grouped_cache(figures: list[Figure]) -> bool:
    """Whether some figure's decode steps spend a tenth of their bytes on a grouped-query cache
    (large batches, long sequences): batch-1 decoding reads too little cache to tell how much
    of it is loaded again from the weights' bandwidth."""
    for f in figures:
        if f.metric == "ttft_ms":
            continue
        ops = parts_of(f).decode.ops
        grouped = sum(op.n * op.moved for op in ops if op.rereads)
        if grouped >= 0.1 * sum(op.n * op.moved for op in ops):
            return True
    return False


def fit_engine(key: str, figures: list[Figure], rounds: int = 3,
               start: ServeEngine | None = None) -> ServeEngine:  # fmt: skip
    """The profile that best predicts `figures` (all of one engine): each precision's
    bandwidth (and, where the figures time compute, its matmuls' efficiency) on a grid in turn,
    every candidate with the overheads fitted to all figures. `start`: a fit to begin from (a
    cross-validation's refit on one figure fewer), one round."""
    classes = sorted({PRECISION_CLASSES[f.precision] for f in figures})
    name = ENGINE_NAMES.get(key, "one profile fitted on every engine's figures")
    engine = ServeEngine(key, name, dict.fromkeys(classes, 0.8),
                         allreduce_us=0.0, **engine_settings(key),
                         quantizes_head=key not in HEAD_16BIT,
                         fp16_accumulation=key in FP16_ACCUMULATION,
                         gemv_pass_channels=GEMV_PASS_CHANNELS.get(key, 0),
                         calibrated_on=sorted({f.source for f in figures}))  # fmt: skip
    free = _free_overheads(key, figures)
    of = {c: [f for f in figures if PRECISION_CLASSES[f.precision] == c] for c in classes}
    computes = {c for c in classes if _computes(of[c])}
    experts = _has_experts(figures)
    grouped = _reads_grouped_cache(figures)
    if start is not None:  # its values as the starting point, only where these figures fit them
        rounds = 1
        engine = replace(engine, memory_efficiency={c: start.memory_efficiency.get(c, 0.8)
                                                    for c in classes},
                         compute_efficiency={c: v for c, v in start.compute_efficiency.items()
                                             if c in computes},
                         expert_efficiency=start.expert_efficiency if experts else 1.0,
                         grouped_cache_reread=start.grouped_cache_reread if grouped
                         else 0.0)  # fmt: skip
    for _ in range(rounds if len(classes) > 1 or computes or experts or grouped else 1):
        for cls in classes:
            trials = [replace(engine, memory_efficiency={**engine.memory_efficiency, cls: eta})
                      for eta in EFFICIENCY_GRID]  # fmt: skip
            if cls in computes:
                trials += [replace(engine, compute_efficiency={**engine.compute_efficiency,
                                                               cls: scale})
                           for scale in COMPUTE_GRID]  # fmt: skip
            # Figures all bound by an eager engine's host say nothing of its bandwidth: of the
            # bandwidths that predict them equally well, the one nearest the roofline's default.
            near = IDEAL.memory_efficiency.get(cls, 0.8)
            engine = min((_with_overheads(t, figures, free) for t in trials),
                         key=lambda fit: (fit[1], abs(fit[0].memory_efficiency[cls] - near))
                         )[0]  # fmt: skip
        if experts:  # the experts' share of the bandwidth, where the figures route tokens
            trials = [replace(engine, expert_efficiency=x) for x in EXPERT_GRID]
            engine = min((_with_overheads(t, figures, free) for t in trials),
                         key=lambda fit: fit[1])[0]  # fmt: skip
        if grouped:  # how much of a grouped cache its decode attention loads again
            trials = [replace(engine, grouped_cache_reread=x) for x in REREAD_GRID]
            engine = min((_with_overheads(t, figures, free) for t in trials),
                         key=lambda fit: fit[1])[0]  # fmt: skip
    return engine


@dataclass(frozen=True)
class Row:
    figure: Figure
    fitted: float  # error of the profile fitted on all the engine's figures
    held_out: float | None  # error of the profile fitted without this figure
    source_out: float | None  # error of the profile fitted without this figure's source
    engine_out: float | None  # error of the typical profile fitted without this engine


def _engine_out(figures: list[Figure], typical: ServeEngine) -> dict[Figure, float]:
    """Each figure predicted by the typical profile fitted on the other engines' figures."""
    out = {}
    for key in ENGINE_NAMES:
        others = [f for f in figures if f.engine != key]
        covered = {PRECISION_CLASSES[f.precision] for f in others}
        mine = [f for f in figures if f.engine == key and PRECISION_CLASSES[f.precision] in covered]
        if mine:
            fit = fit_engine(TYPICAL, others, start=typical)
            out.update(zip(mine, _errors(mine, fit), strict=True))
    return out


@dataclass(frozen=True)
class Bracket:
    """A figure whose unstated lengths decide it (UNSTATED_SPREAD): the time its engine's
    profile predicts over those lengths, which the published one should lie within."""

    figure: Figure
    low_s: float
    high_s: float

    @property
    def within(self) -> bool:
        return self.low_s <= self.figure.published_s <= self.high_s


def validate() -> tuple[dict[str, ServeEngine], list[Row], list[Bracket]]:
    """The fitted profiles, every figure's error fitted and left out (the figure, its source,
    its engine), and the figures whose unstated lengths decide them, bracketed."""
    _, every = load_dataset()
    figures = [f for f in every if not unstated(f)]
    engines, rows = {}, []
    typical = fit_engine(TYPICAL, figures)
    engine_out = _engine_out(figures, typical)
    for key in ENGINE_NAMES:
        mine = [f for f in figures if f.engine == key]
        if not mine:
            continue
        engines[key] = fit_engine(key, mine)
        sources = {f.source for f in mine}
        for i, f in enumerate(mine):
            rest = mine[:i] + mine[i + 1 :]
            held = None
            if rest and {PRECISION_CLASSES[g.precision] for g in rest} >= {
                    PRECISION_CLASSES[f.precision]}:  # fmt: skip
                held = _errors([f], fit_engine(key, rest, start=engines[key]))[0]
            out = None
            others = [g for g in mine if g.source != f.source]
            if len(sources) > 1 and {PRECISION_CLASSES[g.precision] for g in others} >= {
                    PRECISION_CLASSES[f.precision]}:  # fmt: skip
                out = _errors([f], fit_engine(key, others, start=engines[key]))[0]
            fitted = _errors([f], engines[key])[0]
            rows.append(Row(f, -fitted / (1 + fitted), _flip(held), _flip(out),
                            _flip(engine_out.get(f))))  # fmt: skip
    engines[TYPICAL] = typical
    brackets = [Bracket(f, *predicted_range(f, engines.get(f.engine, typical)))
                for f in every if unstated(f)]  # fmt: skip
    return engines, rows, brackets


def _flip(e: float | None) -> float | None:
    """predicted/published time − 1 → published/predicted − 1 (positive: predicted faster)."""
    return None if e is None else -e / (1 + e)


def summary(rows: list[Row]) -> dict[str, float]:
    held = [abs(r.held_out) for r in rows if r.held_out is not None]
    out = [abs(r.source_out) for r in rows if r.source_out is not None]
    other = [abs(r.engine_out) for r in rows if r.engine_out is not None]
    fitted = [abs(r.fitted) for r in rows]
    return {
        "engine_out": len(other),
        "engine_out_mean": sum(other) / len(other),
        "engine_out_max": max(other),
        "figures": len(rows),
        "fitted_mean": sum(fitted) / len(fitted),
        "fitted_max": max(fitted),
        "held_out": len(held),
        "held_out_mean": sum(held) / len(held),
        "held_out_max": max(held),
        "source_out": len(out),
        "source_out_mean": sum(out) / len(out) if out else float("nan"),
        "source_out_max": max(out) if out else float("nan"),
    }


def main(argv: list[str]) -> None:
    from archspec.plan import track_record
    from archspec.plan.serve_validation_table import stored, table, track_record_rows

    engines, rows, brackets = validate()
    print(table(engines, rows, brackets))
    if "--write" in argv:
        path = resources.files("archspec") / "plan" / "serve_engines.yaml"
        with resources.as_file(path) as p:
            p.write_text(stored(engines))
        track_record.write(track_record_rows(rows), track_record.SERVING,
                           "python -m archspec.plan.serve_validation --write")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
