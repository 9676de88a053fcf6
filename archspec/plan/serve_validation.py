"""`plan --mode serve` against published inference measurements (published_serving.yaml).

Each figure becomes a time the model predicts: a generate call's wall time (prefill, then
new_tokens - 1 decode steps: the prefill gives the first token), a static batch's, a time to
first token, or one decode step. Each engine's profile (serve_engine.py) is fitted on its own
figures: the achieved bandwidth per precision on a grid (and, where the figures show them,
the routed experts' and a grouped-query cache's share of it), then the per-layer, per-all-reduce and
per-request overheads by non-negative least squares, alternately, minimising the squared
relative error of the times. Only the parameters its figures can tell apart are fitted (an
all-reduce latency needs figures at two tensor-parallel degrees, a request overhead times to
first token, a layer overhead an eager engine with enough figures); the others stay 0.

Cross-validation: every figure is predicted by the profile fitted on the other figures of its
engine (leave one out), and, for the engines with more than one source, by the profile fitted
without its whole source (leave one source out). Error = published time / predicted time - 1,
so positive means predicted faster, as in the training table.

`python -m archspec.plan.serve_validation` prints the table; `--write` stores the fitted
profiles in serve_engines.yaml.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

import yaml

from archspec.plan.serve import Precision, ServeParts, serve_parts, serving_prediction
from archspec.plan.serve_engine import PRECISION_CLASSES, ServeEngine, serving_system

# Engines whose per-layer overhead is not fitted: TensorRT-LLM's figures are mostly compute-
# bound prefills and large batches, where a per-layer term would stand in for the matmuls'
# efficiency; TinyChat and ExLlama have too few figures (two or three, all at batch 1 on one
# GPU) to tell it from the bandwidth, which absorbs it. gpt-fast decodes in CUDA graphs, so its
# per-layer term is what each kernel still costs on the device (start and drain).
NO_LAYER_OVERHEAD = {"tensorrt-llm", "tinychat", "exllama"}
ENGINE_NAMES = {
    "gpt-fast": "compiled PyTorch, static KV cache, CUDA graphs (gpt-fast)",
    "tensorrt-llm": "TensorRT-LLM (static batches, fused kernels)",
    "transformers": "Hugging Face transformers generate, eager (GPTQ-for-LLaMa's kernels at int4)",
    "tinychat": "TinyChat (AWQ W4A16 kernels)",
    "exllama": "ExLlama (GPTQ 4-bit kernels, its own Llama)",
}
# One profile over every engine's figures: for an engine the dataset does not hold.
TYPICAL = "typical"
# The fraction of the device an engine fills with weights and cache. TensorRT-LLM's published
# runs used GptSession, which sizes the cache to the batch: its largest (Llama-2-7B, batch 60
# over 2,176 positions, FP16 on A100-80GB) holds 95.5% of the device, so 0.96. Its newer
# executor takes 90% of what the weights leave (KvCacheConfig.free_gpu_memory_fraction,
# docs/source/examples/kvcacheconfig.md). The others state none: 0.9 assumed.
USABLE = {
    "gpt-fast": (0.9, "assumed: gpt-fast allocates its static cache up front, no fraction"),
    "tensorrt-llm": (0.96, "its largest published run holds 95.5% of the device (GptSession "
                     "sizes the cache to the batch)"),
    "transformers": (0.9, "assumed: transformers allocates as it goes"),
    "tinychat": (0.9, "assumed: TinyChat pre-allocates its cache and states no fraction"),
    "exllama": (0.9, "assumed: the README advises about 20 GB of a 24 GB GPU for the model"),
    TYPICAL: (0.9, "assumed, as most engines"),
}  # fmt: skip
# Engines whose quantized checkpoints keep the head 16-bit (every other quantizes it: gpt-fast's
# quantize.py swaps every nn.Linear, the output's included): AWQ quantizes the linears of
# get_blocks(model) only (mit-han-lab/llm-awq awq/quantize/quantizer.py,
# real_quantize_model_weight); ExLlama loads lm_head.weight of a GPTQ checkpoint into a plain
# nn.Linear (turboderp/exllama model.py), as GPTQ-for-LLaMa quantizes the decoder layers' only.
HEAD_16BIT = {"tinychat", "exllama", "transformers"}
# The engine's matmuls against the training-calibrated efficiency: half to 1.3 times.
COMPUTE_GRID = [x / 100 for x in range(50, 131)]
DECODE_ONLY = ("decode_token_ms", "generate_decode_tokens_per_s")
# What an engine's expert kernels (or its decode attention over a grouped-query cache) reach of
# its dense kernels' bandwidth: a fifth to all of it.
EXPERT_GRID = [x / 100 for x in range(20, 101)]
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
        raise ValueError(f"unknown metric {self.metric}")

    def predicted_s(self, parts: ServeParts, engine: ServeEngine) -> float:
        """The time `plan --mode serve` gives for the figure's metric (one code path:
        tests/test_plan_serve_published_cli.py gives every figure to the command)."""
        p = serving_prediction(parts, engine, self.stored, self.batch, self.new_tokens,
                               self.gpus // self.tp)  # fmt: skip
        if self.metric == "ttft_ms":
            return p.prefill_s
        if self.metric in DECODE_ONLY:
            return p.decode_token_s
        return p.generate_s


def load_dataset() -> tuple[dict[str, dict], list[Figure]]:
    text = (resources.files("archspec") / "plan" / "published_serving.yaml").read_text()
    data = yaml.safe_load(text)
    sources = data["sources"]
    figures = [Figure(engine=sources[f["source"]]["engine"], **f) for f in data["figures"]]
    return sources, figures


@cache
def parts_of(f: Figure) -> ServeParts:
    from archspec.cli.common import compile_spec

    ir = compile_spec(f.model, None)
    return serve_parts(ir, serving_system(f.gpu), f.batch, f.prompt, f.new_tokens, f.tp,
                       f.stored, kv_cache=f.kv_cache)  # fmt: skip


def _errors(figures: list[Figure], engine: ServeEngine) -> list[float]:
    return [f.predicted_s(parts_of(f), engine) / f.published_s - 1 for f in figures]


def _free_overheads(key: str, figures: list[Figure]) -> list[str]:
    """The overheads this engine's figures can tell apart."""
    free = []
    if key not in NO_LAYER_OVERHEAD:
        free.append("layer_overhead_us")
    if any(f.tp > 1 for f in figures) and len({f.tp for f in figures}) > 1:
        free.append("allreduce_us")
    # A request's fixed overhead shows in a time to first token (milliseconds); in a static
    # batch of seconds to minutes it is lost in the decode steps, which then fit it at will.
    if any(f.metric == "ttft_ms" for f in figures):
        free.append("request_overhead_ms")
    return free


def _overhead_counts(f: Figure, field: str) -> float:
    """Seconds one unit of an overhead adds to the figure's predicted time."""
    parts = parts_of(f)
    steps = 0 if f.metric == "ttft_ms" else (1 if f.metric in DECODE_ONLY else f.new_tokens - 1)
    prefill = 0 if f.metric in DECODE_ONLY else 1
    if field == "layer_overhead_us":
        return 1e-6 * (prefill * parts.prefill.layers + steps * parts.decode.layers)
    if field == "allreduce_us":
        return 1e-6 * (prefill * parts.prefill.allreduces + steps * parts.decode.allreduces)
    return 1e-3 * prefill  # request_overhead_ms


def _nnls(columns: list[list[float]], target: list[float]) -> list[float]:
    """min ||Σ x_j col_j − target||² over x ≥ 0, for a handful of columns: every active set."""
    k = len(columns)
    best, best_x = float("inf"), [0.0] * k
    for active in itertools.product((False, True), repeat=k):
        idx = [j for j in range(k) if active[j]]
        x = [0.0] * k
        if idx:
            solved = _least_squares([columns[j] for j in idx], target)
            if solved is None or min(solved) < 0:
                continue
            for j, v in zip(idx, solved, strict=True):
                x[j] = v
        r = sum((sum(x[j] * columns[j][i] for j in range(k)) - t) ** 2
                for i, t in enumerate(target))  # fmt: skip
        if r < best:
            best, best_x = r, x
    return best_x


def _least_squares(columns: list[list[float]], target: list[float]) -> list[float] | None:
    """Normal equations by Gaussian elimination (a few unknowns)."""
    k = len(columns)
    a = [[sum(ci * cj for ci, cj in zip(columns[r], columns[c], strict=True)) for c in range(k)]
         + [sum(ci * t for ci, t in zip(columns[r], target, strict=True))]
         for r in range(k)]  # fmt: skip
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-30:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(k):
            if r != col:
                factor = a[r][col] / a[col][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[r][k] / a[r][r] for r in range(k)]


def _with_overheads(engine: ServeEngine, figures: list[Figure], free: list[str]
                    ) -> tuple[ServeEngine, float]:  # fmt: skip
    """The engine with its free overheads fitted (the relative residuals are linear in them:
    non-negative least squares), and the squared error left."""
    zero = replace(engine, layer_overhead_us=0.0, allreduce_us=0.0, request_overhead_ms=0.0)
    if free:
        base = [f.predicted_s(parts_of(f), zero) for f in figures]
        target = [1 - b / f.published_s for f, b in zip(figures, base, strict=True)]
        cols = [[_overhead_counts(f, name) / f.published_s for f in figures]
                for name in free]  # fmt: skip
        zero = replace(zero, **dict(zip(free, _nnls(cols, target), strict=True)))
    return zero, sum(e * e for e in _errors(figures, zero))


def _computes(figures: list[Figure]) -> bool:
    """Whether the figures time compute-bound work: prefills of long prompts, large batches."""
    return any(f.metric.startswith(("ttft", "static")) and f.batch * f.prompt >= 2048
               for f in figures)  # fmt: skip


def _has_experts(figures: list[Figure]) -> bool:
    return any(part == "expert" for f in figures for *_, part in parts_of(f).decode.ops)


def _reads_grouped_cache(figures: list[Figure]) -> bool:
    """Whether some figure's decode steps spend a tenth of their bytes on a grouped-query cache
    (large batches, long sequences): batch-1 decoding reads too little cache to tell its
    kernel's bandwidth from the weights'."""
    for f in figures:
        if f.metric == "ttft_ms":
            continue
        ops = parts_of(f).decode.ops
        grouped = sum(n * moved for n, _, moved, *_, part in ops if part == "grouped")
        if grouped >= 0.1 * sum(n * moved for n, _, moved, *_ in ops):
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
                         allreduce_us=0.0, usable_memory=USABLE[key][0],
                         quantizes_head=key not in HEAD_16BIT,
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
                         grouped_cache_efficiency=start.grouped_cache_efficiency if grouped
                         else 1.0)  # fmt: skip
    for _ in range(rounds if len(classes) > 1 or computes or experts or grouped else 1):
        for cls in classes:
            trials = [replace(engine, memory_efficiency={**engine.memory_efficiency, cls: eta})
                      for eta in EFFICIENCY_GRID]  # fmt: skip
            if cls in computes:
                trials += [replace(engine, compute_efficiency={**engine.compute_efficiency,
                                                               cls: scale})
                           for scale in COMPUTE_GRID]  # fmt: skip
            engine = min((_with_overheads(t, figures, free) for t in trials),
                         key=lambda fit: fit[1])[0]  # fmt: skip
        if experts:  # the experts' share of the bandwidth, where the figures route tokens
            trials = [replace(engine, expert_efficiency=x) for x in EXPERT_GRID]
            engine = min((_with_overheads(t, figures, free) for t in trials),
                         key=lambda fit: fit[1])[0]  # fmt: skip
        if grouped:  # its decode attention's share of the bandwidth over a grouped cache
            trials = [replace(engine, grouped_cache_efficiency=x) for x in EXPERT_GRID]
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


def validate() -> tuple[dict[str, ServeEngine], list[Row]]:
    """The fitted profiles, and every figure's error fitted, left out (the figure, its source,
    its engine)."""
    _, figures = load_dataset()
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
    return engines, rows


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


def _pct(e: float | None) -> str:
    return "—" if e is None else f"{e:+.1%}"


def table(engines: dict[str, ServeEngine], rows: list[Row]) -> str:
    lines = ["| engine | model | gpu × n | precision | batch | prompt → new | metric | published "
             "| fitted | left out | source left out | typical, engine left out |",
             "|---|---|---|---|---:|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        f = r.figure
        precision = f.precision + (f" g{f.group}" if f.group else "") + (
            f", {f.kv} cache" if f.kv else "")  # fmt: skip
        lines.append(
            f"| {f.engine} | {f.model} | {f.gpu} × {f.gpus} | {precision} | {f.batch} "
            f"| {f.prompt} → {f.new_tokens} | {f.metric} | {f.value:g} | {_pct(r.fitted)} "
            f"| {_pct(r.held_out)} | {_pct(r.source_out)} | {_pct(r.engine_out)} |"
        )
    s = summary(rows)
    lines.append("")
    lines.append(
        f"{s['figures']} figures. Fitted: mean {s['fitted_mean']:.1%}, largest "
        f"{s['fitted_max']:.1%}. Left out one at a time ({s['held_out']} figures): mean "
        f"{s['held_out_mean']:.1%}, largest {s['held_out_max']:.1%}. Source left out "
        f"({s['source_out']} figures): mean {s['source_out_mean']:.1%}, largest "
        f"{s['source_out_max']:.1%}. The typical profile, each engine left out "
        f"({s['engine_out']} figures): mean {s['engine_out_mean']:.1%}, largest "
        f"{s['engine_out_max']:.1%}."
    )
    lines.append("")
    lines.append("| engine | bandwidth reached | experts (× dense) | grouped cache (× dense) "
                 "| matmuls (× calibrated) | per layer | per all-reduce | per request "
                 "| head quantized |")  # fmt: skip
    lines.append("|---|---|---:|---:|---|---:|---:|---:|---|")
    for key, e in engines.items():
        eff = ", ".join(f"{c} {v:.0%}" for c, v in e.memory_efficiency.items())
        eff += f" | {e.expert_efficiency:.2f}" if e.expert_efficiency != 1 else " | —"
        eff += (f" | {e.grouped_cache_efficiency:.2f}" if e.grouped_cache_efficiency != 1
                else " | —")  # fmt: skip
        eff += " | " + (", ".join(f"{c} {v:.2f}" for c, v in e.compute_efficiency.items())
                        or "—")  # fmt: skip
        lines.append(
            f"| {key} | {eff} | {e.layer_overhead_us:.1f} µs "
            f"| {e.allreduce_us or 0:.1f} µs | {e.request_overhead_ms:.2f} ms "
            f"| {'yes' if e.quantizes_head else 'no'} |"
        )
    return "\n".join(lines)


def stored(engines: dict[str, ServeEngine]) -> str:
    out = {}
    for key, e in engines.items():
        out[key] = {
            "name": e.name,
            "memory_efficiency": {c: round(v, 3) for c, v in e.memory_efficiency.items()},
            "compute_efficiency": {c: round(v, 3) for c, v in e.compute_efficiency.items()},
            "layer_overhead_us": round(e.layer_overhead_us, 2),
            "allreduce_us": round(e.allreduce_us or 0.0, 2),
            "request_overhead_ms": round(e.request_overhead_ms, 3),
            "usable_memory": e.usable_memory,
            "quantizes_head": e.quantizes_head,
            "expert_efficiency": round(e.expert_efficiency, 3),
            "grouped_cache_efficiency": round(e.grouped_cache_efficiency, 3),
            "calibrated_on": e.calibrated_on,
            "note": USABLE[key][1],
        }
    header = (
        "# Serving engine profiles, fitted on published_serving.yaml by\n"
        "# `python -m archspec.plan.serve_validation --write` (not edited by hand).\n"
    )
    return header + yaml.safe_dump(out, sort_keys=False, allow_unicode=True)


def main(argv: list[str]) -> None:
    engines, rows = validate()
    print(table(engines, rows))
    if "--write" in argv:
        path = resources.files("archspec") / "plan" / "serve_engines.yaml"
        with resources.as_file(path) as p:
            p.write_text(stored(engines))


if __name__ == "__main__":
    main(sys.argv[1:])
