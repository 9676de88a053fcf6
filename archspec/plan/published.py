"""`archspec plan` over every published run of published.yaml, each with its published layout
pinned, and the fit of the stacks' matmul plateaus with its leave-one-source-out error.

A run's prediction is the step the planner times for the layout its source reports: what the
source leaves open (Narayanan et al.'s micro-batch and interleaving) is searched, the fastest
that fits in memory taken, as the authors tuned it. Error is the published step time over the
predicted one, minus one (positive: archspec predicts faster than was measured).

The fitted constants (`fit`) are one matmul plateau per engine and accelerator, one per engine
(engines.py), the matmul half-size d½ and the fp8 factor (efficiency.py). Cross-validation
leaves each source out in turn: the constants are fitted on the other sources (an engine and
accelerator none of them ran takes the engine's plateau carried over by another engine's ratio
between the accelerators, `transferred`, else the engine's; an engine none of them ran the
plateau fitted on all) and the left-out source's runs predicted with them. `python -m
archspec.plan.published` prints the table of docs/plan.md (with `--write` it also stores each
run's left-out error in track_record.yaml, which `archspec plan` quotes); tests/
test_plan_published.py checks the dataset and the errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from itertools import product
from statistics import mean
from typing import Any

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.layout import Parallelism, check_layout
from archspec.errors import SpecError
from archspec.ir.build import build_ir
from archspec.ir.nodes import MLP, Attention, MoE
from archspec.ir.visit import walk
from archspec.plan.efficiency import CALIBRATED, Efficiency
from archspec.plan.engines import ENGINES
from archspec.plan.fit import MemoryModel
from archspec.plan.hardware import get_system, tensor_core_twin, with_node_size
from archspec.plan.search import MAX_INTERLEAVE, MICRO_BATCHES, usable_memory
from archspec.plan.step import Layout, StepModel, Training, expert_parallel_ranks
from archspec.spec.yaml_loader import load_yaml_text

FIGURES = ("tokens_per_s_per_gpu", "step_s", "tflops_per_gpu")


@dataclass(frozen=True)
class Run:
    name: str
    source: str
    where: str
    engine: str
    system: str
    model: str
    sets: tuple[str, ...]
    dtype: str
    seq: int
    gpus: int
    global_batch: int
    figure: tuple[str, float]
    flops: str | None = None
    grad_dtype: str = "fp32"
    attn: str = "flash"
    micro_batch: int | None = None
    interleave: int | None = None
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    sp: bool = False
    async_tp: bool = False  # torchtitan's async TP (engines.with_async_tp)
    fp8_all_gather: bool = False  # torchtitan's FSDP float8 all-gather (fp8_comm.py)
    recompute: str = NO_RECOMPUTE
    # The stack's activation checkpoint where it is not the engine's (replay.py): Composer's
    # and metaseq's FSDP runs are reentrant, torchtitan's (the fsdp engine's) is not.
    checkpoint: str | None = None
    zero: int = 0
    dp_replicate: int = 1  # hybrid sharding: replicas of the ZeRO shard group
    node_size: int | None = None  # accelerators sharing the fast interconnect, where fewer
    stage_layers: tuple[int, ...] | None = None
    offload_layers: int = 0  # activation offloading (Megatron-Core's cpu_offloading_num_layers)
    ep_dispatch: str = "fused"  # or "alltoall": Megatron-Core's dispatcher (dispatch.py)
    etp: int | None = None  # expert tensor parallelism (step.Layout.etp); None: the tp
    mtp_layers: int = 0  # multi-token prediction's depths (mtp.py)
    needs: tuple[str, ...] = ()
    assumed: str | None = None  # what the source leaves unstated and the row takes

    def not_expressible(self) -> str | None:
        """Why archspec cannot time this run as published, or None."""
        return "; ".join(self.needs) or None


@dataclass
class Dataset:
    sources: dict[str, dict[str, str]]
    models: dict[str, dict[str, Any]]
    runs: list[Run] = field(default_factory=list)


@cache
def dataset() -> Dataset:
    text = resources.files("archspec.plan").joinpath("published.yaml").read_text()
    data, _ = load_yaml_text(text, "published.yaml")
    out = Dataset(data["sources"], data["models"])
    for r in data["runs"]:
        (kind, value), *_ = [(k, v) for k, v in r["figure"].items() if k in FIGURES]
        fields = {k: v for k, v in r.items() if k not in ("figure", "set", "needs",
                                                           "stage_layers")}  # fmt: skip
        out.runs.append(Run(
            **fields,
            sets=tuple(r.get("set", ())),
            figure=(kind, float(value)),
            flops=r["figure"].get("flops"),
            stage_layers=tuple(r["stage_layers"]) if "stage_layers" in r else None,
            needs=tuple(r.get("needs", ())),
        ))  # fmt: skip
    return out


@cache
def run_ir(model: str, sets: tuple[str, ...], seq: int):
    from archspec.spec.resolve import load_spec

    entry = dataset().models[model]
    overrides = [*entry["set"], *sets, f"max_seq_len={seq}"]
    return build_ir(load_spec(entry["spec"], overrides))


def training(run: Run) -> Training:
    return Training(run.gpus, run.global_batch, run.seq, run.dtype, run.grad_dtype, run.attn,
                    run.engine, run.async_tp, run.fp8_all_gather, run.checkpoint,
                    run.ep_dispatch, mtp_layers=run.mtp_layers)  # fmt: skip


def published_step(run: Run, ir) -> float:
    """The published figure as seconds per step."""
    kind, value = run.figure
    if kind == "step_s":
        return value
    if kind == "tokens_per_s_per_gpu":
        return run.global_batch * run.seq / (value * run.gpus)
    b, s = run.global_batch, run.seq
    layers = model_layers(ir)
    if run.flops in ("palm", "maxtext"):
        # Chowdhery et al. 2022 (PaLM)'s model FLOPs: 6N + 12·L·H·Q·T a token, N every
        # parameter, H·Q the query heads' width, T the sequence, no recomputation; the
        # attention term counts every query-key pair (no causal half): it is what turns PaLM
        # Appendix B's 45.7% "without self-attention" (6 × 540B) into its 46.2% "with it".
        # MaxText counts the same with the attention term halved for causality
        # (calculate_training_tflops in MaxText/train.py at 76bd53b0f).
        from archspec.backends.count.params import parameter_count

        attn = next(p.node for p in walk(ir.root) if isinstance(p.node, Attention))
        width = ir.value(attn.n_heads) * ir.value(attn.head_dim)
        n = ir.value(parameter_count(ir.root))
        pairs = 12 if run.flops == "palm" else 6
        flops = b * s * (6 * n + pairs * layers * width * s)
        return flops / (value * 1e12 * run.gpus)
    h, v = ir.value(ir.root.d_model), ir.value(ir.root.vocab_size)
    if run.flops == "megatron-core":
        return megatron_core_flops(ir, b, s, layers) / (value * 1e12 * run.gpus)
    # Narayanan et al. 2021, Equation 3 (recomputation counted): 96·B·s·l·h²·(1 + s/6h + V/16lh).
    flops = 96 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    return flops / (value * 1e12 * run.gpus)


def megatron_core_flops(ir, b: int, s: int, layers: int) -> float:
    """The FLOPs a step of `b` sequences of `s` tokens counts in Megatron-LM's own log at
    Megatron-Core r0.8 (num_floating_point_operations in megatron/training/training.py at
    f2e5db402c, the commit of the README's H100 table): forward and backward, no
    recomputation, every query-key pair (no causal half):
    12·b·s·l·h²·((1 + g/a + s/h)·(a·d/h) + f/h + V/(2·l·h)), with a query heads of width d, g
    key-value groups, f the MLP's width (× 3/2 gated) and V the vocabulary. A mixture's
    experts are refused: that formula's top-k term is not built here."""
    attn = next(p.node for p in walk(ir.root) if isinstance(p.node, Attention))
    mlp = next((p.node for p in walk(ir.root) if isinstance(p.node, MLP)), None)
    if mlp is None or any(isinstance(p.node, MoE) for p in walk(ir.root)):
        raise SpecError(f"'flops: megatron-core' is built for dense MLPs; '{ir.name}' has none")
    h, v = ir.value(ir.root.d_model), ir.value(ir.root.vocab_size)
    heads, groups = ir.value(attn.n_heads), ir.value(attn.n_kv_heads)
    query = heads * ir.value(attn.head_dim) / h
    width = ir.value(mlp.up.out_features) * (3 / 2 if mlp.gate is not None else 1)
    per_layer = (1 + groups / heads + s / h) * query + width / h + v / (2 * layers * h)
    return 12 * b * s * layers * h * h * per_layer


def model_layers(ir) -> int:
    from archspec.backends.count.layout import layer_count

    return sum(layer_count(s, ir) for s in ir.root.stacks)


def check_stages(ir, run: Run) -> None:
    """The published layout, refused with the values when archspec cannot split the model so."""
    if run.stage_layers is None:
        check_layout(ir, Parallelism(run.tp * run.pp, run.tp, run.pp, 0, run.sp))
        return
    layers = model_layers(ir)
    if len(run.stage_layers) != run.pp or sum(run.stage_layers) != layers:
        raise SpecError(
            f"stage_layers {list(run.stage_layers)} are not --pp {run.pp} stages of the "
            f"{layers} layers"
        )
    check_layout(ir, Parallelism(run.tp, run.tp, 1, 0, run.sp))


@dataclass
class Candidates:
    model: StepModel
    layouts: list[Layout]
    memory_gib: float  # the leanest candidate's busiest device
    fits: bool


@cache
def candidates(run: Run) -> Candidates:
    """The layouts the published one leaves open, those that fit in memory (or all, when none
    does: the run is still timed, and flagged)."""
    ir = run_ir(run.model, run.sets, run.seq)
    check_stages(ir, run)
    system = with_node_size(get_system(run.system), run.node_size, run.gpus)
    layers = model_layers(ir)
    dp = run.gpus // (run.tp * run.pp * run.cp)
    if expert_parallel_ranks(run.tp, run.cp, dp, run.ep, run.etp) % run.ep:
        raise SpecError(f"--ep {run.ep} does not divide the {dp} data-parallel ranks")
    micro = [run.micro_batch] if run.micro_batch else [
        b for b in MICRO_BATCHES if run.global_batch % (b * dp) == 0]  # fmt: skip
    memory = MemoryModel(ir, run.seq // run.cp, run.dtype, run.grad_dtype, run.attn,
                         kernels=ENGINES[run.engine].kernels,
                         mtp_layers=run.mtp_layers)  # fmt: skip
    capacity = usable_memory(system.accelerator.memory_bytes)
    model = StepModel(ir, system, training(run), CALIBRATED)
    fitting, everything, leanest = [], [], float("inf")
    for mb in micro:
        m = run.global_batch // (mb * dp)
        if run.interleave:
            vs = [run.interleave]
        elif run.pp == 1 or run.stage_layers or not ENGINES[run.engine].interleave:
            vs = [1]
        else:
            per = layers // run.pp
            vs = [v for v in range(1, MAX_INTERLEAVE + 1)
                  if per % v == 0 and (v == 1 or m % run.pp == 0)]  # fmt: skip
        for v in vs:
            layout = Layout(run.tp, run.pp, v, mb, run.sp, run.recompute, run.zero, run.cp,
                            run.stage_layers, run.ep, run.dp_replicate,
                            run.offload_layers, run.etp)  # fmt: skip
            par = Parallelism(run.gpus, run.tp, run.pp, run.zero, run.sp, v, m, cp=run.cp,
                              dp_replicate=run.dp_replicate)  # fmt: skip
            need = memory.busiest(par, mb, run.recompute, run.stage_layers, run.ep,
                                  run.offload_layers, run.etp,
                                  model.routing(layout)[0]).total  # fmt: skip
            leanest = min(leanest, need)
            everything.append(layout)
            if need <= capacity:
                fitting.append(layout)
    return Candidates(model, fitting or everything, leanest / 2**30, bool(fitting))


def predict(run: Run, eff: Efficiency) -> tuple[float, Layout]:
    cands = candidates(run)
    model = cands.model.with_efficiency(eff)
    times = [(model.step(lay).seconds, lay) for lay in cands.layouts]
    return min(times, key=lambda t: t[0])


def error(run: Run, eff: Efficiency) -> float:
    seconds, _ = predict(run, eff)
    return published_step(run, cands_ir(run)) / seconds - 1


def cands_ir(run: Run):
    return run_ir(run.model, run.sets, run.seq)


def expressible() -> list[Run]:
    return [r for r in dataset().runs if r.not_expressible() is None]


# The fit.

PEAKS = tuple(round(0.40 + 0.02 * i, 2) for i in range(26))  # 0.40 .. 0.90 (MAX_PLATEAU)
HALVES = (0.0, 32.0, 64.0, 128.0, 256.0)  # at an A100's balance (roofline.half_size)
FP8 = tuple(round(0.40 + 0.05 * i, 2) for i in range(13))  # 0.40 .. 1.00


# A fused attention kernel is costed as a GEMM of its shape (queries, keys, head width) at the
# plateau: a factor of its own, fitted, moved the cross-validated error by under a point and
# swung with the long-context runs, the only ones it changes much. The grid keeps the factor
# for a what-if (`--efficiency`), fitted at 1.0 only.
ATTENTION = (1.0,)
# What overlapped communication still costs (efficiency.py, engines.exposed): from a perfect
# overlap to none.
INTERFERENCE = (0.0, 0.25, 0.5, 0.75, 1.0)
# The host's seconds for a MoE layer's forward per expert a rank holds (dispatch.py): 0 to
# 0.8 ms.
HOSTS = tuple(round(0.00005 * i, 5) for i in range(17))


def _factors(run: Run) -> tuple[float, ...]:
    return FP8 if run.dtype == "fp8" else (1.0,)


def _attention(run: Run) -> tuple[float, ...]:
    return ATTENTION if run.attn == "flash" else (1.0,)


def _overlaps(run: Run) -> bool:
    """Whether any of the run's communication is overlapped (else the interference changes
    nothing): its engine overlaps some, or context parallelism's ring passes hide behind
    attention."""
    engine = ENGINES[run.engine]
    return engine.overlap_dp or engine.overlap_zero3 or engine.overlap_tp or run.cp > 1


def _interference(run: Run) -> tuple[float, ...]:
    return INTERFERENCE if _overlaps(run) else (0.0,)


@cache
def _waits_on_host(run: Run) -> bool:
    """Whether the run has MoE layers, which wait on the host (else the host's time changes
    nothing)."""
    return any(isinstance(p.node, MoE) for p in walk(cands_ir(run).root))


def _hosts(run: Run) -> tuple[float, ...]:
    return HOSTS if _waits_on_host(run) else (0.0,)


@cache
def error_grid() -> dict[tuple[str, float, float, float, float, float, float], float]:
    """Each expressible run's error at every (half-size, plateau, fp8 factor, attention
    factor, interference, host time) of the grid."""
    return {
        (run.name, half, peak, f, a, i, h): error(run, replace(
            CALIBRATED, matmul_peak=peak, matmul_half=half, fp8_matmul=f, attention=a,
            overlap_interference=i, host_moe_expert=h))
        for run in expressible() for half in HALVES for peak in PEAKS for f in _factors(run)
        for a in _attention(run) for i in _interference(run) for h in _hosts(run)
    }  # fmt: skip


@cache
def accelerator(run: Run) -> str:
    """The accelerator whose plateau a run fits: parts with another's tensor cores pool with it."""
    key = get_system(run.system).accelerator.key
    return tensor_core_twin(key)


@dataclass(frozen=True)
class Fit:
    half: float
    fp8: float
    attention: float
    interference: dict[str, float]  # engine -> what its overlapped communication still costs
    host: dict[str, float]  # engine -> the host's time a MoE layer's forward, per expert held
    peaks: dict[str, float]  # engine -> matmul plateau
    on: dict[tuple[str, str], float]  # (engine, accelerator) -> matmul plateau

    def peak(self, run: Run) -> float:
        return self.on.get((run.engine, accelerator(run)), self.peaks[run.engine])

    def efficiency(self, run: Run) -> Efficiency:
        return replace(CALIBRATED, matmul_peak=self.peak(run), matmul_half=self.half,
                       fp8_matmul=self.fp8, attention=self.attention,
                       overlap_interference=self.interference[run.engine],
                       host_moe_expert=self.host[run.engine])  # fmt: skip

    def error(self, run: Run) -> float:
        factors = _key(run, self.fp8, self.attention, self.interference[run.engine],
                       self.host[run.engine])  # fmt: skip
        return error_grid()[(run.name, self.half, self.peak(run), *factors)]


def _key(run: Run, fp8: float, attention: float, interference: float,
         host: float) -> tuple[float, ...]:  # fmt: skip
    """The fp8 and attention factors, the interference and the host time a run's grid entry is
    under (1.0, 1.0, 0.0 and 0.0 where they change nothing: bf16 runs, materialised
    attention, nothing overlapped, no dispatch waiting on the host)."""
    return (fp8 if run.dtype == "fp8" else 1.0, attention if run.attn == "flash" else 1.0,
            interference if _overlaps(run) else 0.0,
            host if _waits_on_host(run) else 0.0)  # fmt: skip


def fit(runs: list[Run]) -> Fit:
    """The half-size, fp8 and attention factors, each engine's interference and the plateaus
    minimising the mean absolute error over `runs`: one plateau per engine and accelerator,
    fitted on that engine's runs there, with one interference per engine (how much its
    overlapped collectives slow the kernels beside them is its communication's, NCCL's or
    Transformer Engine's userbuffers'); an engine and accelerator none of `runs` used takes the
    engine's plateau (fitted on its runs anywhere), an engine none used the plateau fitted on
    all of them, and an engine none of whose runs overlaps anything the interference that fits
    all of them as one; and for an engine with MoE runs, the host's time for a MoE layer's
    forward per expert a rank holds (one per engine, as the interference). An engine and
    accelerator only MoE runs reached takes the engine's plateau as one with no runs does:
    those runs' errors move with the host time as much as with the plateau."""
    grid = error_grid()
    pairs = sorted({(r.engine, accelerator(r)) for r in expressible()})
    # A pair seen only through MoE runs does not pin its plateau: their errors move with the
    # host time as much (one per engine, fitted beside it), so it takes the plateau carried
    # over from the engine's other accelerators, as a pair with no runs does.
    moe_only = {pair for pair in pairs
                if all(_waits_on_host(r) for r in runs
                       if (r.engine, accelerator(r)) == pair)}  # fmt: skip
    best: tuple[float, Fit] | None = None
    for half, f, a in product(HALVES, FP8, ATTENTION):

        def err(r: Run, peak: float, i: float, h: float, half=half, f=f, a=a) -> float:
            return abs(grid[(r.name, half, peak, *_key(r, f, a, i, h))])

        def best_peak(rs: list[Run], i_of, h_of, fallback: float, err=err) -> float:
            if not rs:
                return fallback
            return min(PEAKS, key=lambda p: sum(err(r, p, i_of(r), h_of(r)) for r in rs))

        # Each engine's interference and host time decide its own runs' errors only: for
        # each, the summed error of its runs at every pair of them, each accelerator at its
        # best plateau.
        # (The dense runs' sums, which no host time moves, are taken once for all of them.)
        options: dict[str, dict[tuple[float, float], tuple[float, dict]]] = {}
        for e in ENGINES:
            options[e] = {}
            hosts = HOSTS if any(_waits_on_host(r) for r in runs if r.engine == e) else (0.0,)
            for i in INTERFERENCE:
                sums = {}
                for pair in (pr for pr in pairs if pr[0] == e):
                    own = [r for r in runs if (r.engine, accelerator(r)) == pair]
                    if own:
                        moe = [r for r in own if _waits_on_host(r)]
                        dense = {peak: sum(err(r, peak, i, 0.0) for r in own if r not in moe)
                                 for peak in PEAKS}  # fmt: skip
                        sums[pair] = (dense, moe)
                for h in hosts:
                    fitted, total = {}, 0.0
                    for pair, (dense, moe) in sums.items():
                        score = {peak: dense[peak] + sum(err(r, peak, i, h) for r in moe)
                                 for peak in PEAKS}  # fmt: skip
                        fitted[pair] = min(PEAKS, key=score.__getitem__)
                        total += score[fitted[pair]]
                    options[e][(i, h)] = (total, fitted)

        def at(o: dict, i: float) -> tuple[float, float]:
            """The least summed error at interference i, and the host time giving it."""
            return min((o[k][0], k[1]) for k in o if k[0] == i)

        shared = min(INTERFERENCE, key=lambda i: sum(at(o, i)[0] for o in options.values()))
        # Ties (an engine whose runs overlap nothing) go to the interference shared by all.
        interference = {e: min(INTERFERENCE, key=lambda i, o=o: (at(o, i)[0], abs(i - shared)))
                        for e, o in options.items()}  # fmt: skip
        host = {e: at(o, interference[e])[1] for e, o in options.items()}
        fitted = {pair: plateau for e, o in options.items()
                  for pair, plateau in o[(interference[e], host[e])][1].items()
                  if pair not in moe_only}  # fmt: skip

        def i_of(r: Run, interference=interference) -> float:
            return interference[r.engine]

        def h_of(r: Run, host=host) -> float:
            return host[r.engine]

        everyone = best_peak(runs, i_of, h_of, 0.0)
        peaks = {e: best_peak([r for r in runs if r.engine == e], i_of, h_of, everyone)
                 for e in ENGINES}  # fmt: skip
        on = {pair: fitted.get(pair) or transferred(pair, fitted, peaks[pair[0]])
              for pair in pairs}  # fmt: skip
        candidate = Fit(half, f, a, interference, host, peaks, on)
        total = mean(abs(candidate.error(r)) for r in runs)
        if best is None or total < best[0]:
            best = (total, candidate)
    assert best is not None
    return best[1]


def transferred(
    pair: tuple[str, str], fitted: dict[tuple[str, str], float], fallback: float
) -> float:
    """The plateau of an engine on an accelerator none of its fitted runs used: its plateau on
    an accelerator it was fitted on, times how another engine fitted on both accelerators
    gains or loses between them (so an H100 is not taken to run like an A100); else the
    engine's plateau. On the grid of PEAKS."""
    engine, acc = pair
    for (e, b), peak in sorted(fitted.items()):
        if e != engine:
            continue
        for (e2, a2), there in sorted(fitted.items()):
            if a2 == acc and (e2, b) in fitted and e2 != engine:
                ratio = there / fitted[(e2, b)]
                return min(PEAKS, key=lambda p: abs(p - peak * ratio))
    return fallback


def cross_validated() -> dict[str, tuple[float, Fit]]:
    """Each run's error with the constants fitted leaving its source out."""
    runs = expressible()
    out = {}
    for source in dict.fromkeys(r.source for r in runs):
        fold = fit([r for r in runs if r.source != source])
        for r in runs:
            if r.source == source:
                out[r.name] = (fold.error(r), fold)
    return out


def table() -> list[dict[str, Any]]:
    """One row per published run: the error fitted on everything, the cross-validated one, or
    why it is not expressible."""
    data = dataset()
    full = fit(expressible())
    cv = cross_validated()
    rows = []
    for run in data.runs:
        row: dict[str, Any] = {"run": run.name, "key": run.source,
                               "source": data.sources[run.source]["cite"],
                               "where": run.where, "engine": run.engine,
                               "figure": run.figure}  # fmt: skip
        reason = run.not_expressible()
        if reason:
            row["not_expressible"] = reason
        else:
            seconds, layout = predict(run, full.efficiency(run))
            row.update(published_s=published_step(run, cands_ir(run)), predicted_s=seconds,
                       fitted_error=full.error(run),
                       cv_error=cv[run.name][0], layout=layout,
                       fits=candidates(run).fits,
                       memory_gib=candidates(run).memory_gib)  # fmt: skip
        rows.append(row)
    return rows


def _figure(kind: str, value: float) -> str:
    return {"tokens_per_s_per_gpu": f"{value:g} tok/s/GPU", "step_s": f"{value:g} s",
            "tflops_per_gpu": f"{value:g} TFLOP/s"}[kind]  # fmt: skip


def markdown(rows: list[dict[str, Any]] | None = None) -> str:
    rows = rows if rows is not None else table()
    full = fit(expressible())
    lines = [
        "| run | source | engine | published | predicted step | error (fit on all) | "
        "error (source left out) |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        published = _figure(*r["figure"])
        if "not_expressible" in r:
            lines.append(f"| {r['run']} | {r['key']}, {r['where']} | {r['engine']} | {published} | "
                         f"not expressible: {r['not_expressible']} | | |")  # fmt: skip
            continue
        flag = "" if r["fits"] else f" (needs {r['memory_gib']:.0f} GiB)"
        lines.append(
            f"| {r['run']} | {r['key']}, {r['where']} | {r['engine']} | {published} | "
            f"{r['predicted_s']:.4g} s{flag} | {r['fitted_error']:+.1%} | {r['cv_error']:+.1%} |"
        )
    timed = [r for r in rows if "cv_error" in r]
    cv = [abs(r["cv_error"]) for r in timed]
    fitted = [abs(r["fitted_error"]) for r in timed]
    worst = sorted(timed, key=lambda r: -abs(r["cv_error"]))[:3]
    lines += [
        "",
        f"{len(timed)} runs timed from {len({r['source'] for r in timed})} sources "
        f"({len(rows) - len(timed)} not expressible). Fitted on all: mean absolute error "
        f"{mean(fitted):.1%}, largest {max(fitted):.1%}. Leaving each source out: mean "
        f"{mean(cv):.1%}, largest {max(cv):.1%} ("
        + "; ".join(f"{w['run']} {w['cv_error']:+.1%}" for w in worst)
        + f"). Constants fitted on all: d½ = {full.half:g}, fp8 factor {full.fp8:.2f}, attention "
        + f"factor {full.attention:.2f}, overlap interference "
        + ", ".join(f"{e} {i:.2f}" for e, i in full.interference.items())
        + "".join(
            f", {e}'s host time for a MoE layer's forward {h * 1e6:g} µs an expert held"
            for e, h in full.host.items()
            if h
        )
        + ", plateaus "
        + ", ".join(f"{e} {p:.2f}" for e, p in full.peaks.items())
        + "; on one accelerator: "
        + ", ".join(f"{e} on {a} {p:.2f}" for (e, a), p in full.on.items())
        + ".",
    ]
    return "\n".join(lines)


def track_record_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each timed run's left-out error, filed as track_record.py narrows them."""
    runs = {r.name: r for r in dataset().runs}
    return [{"name": r["run"], "source": r["key"], "engine": r["engine"],
             "accelerator": accelerator(runs[r["run"]]),
             "moe": _waits_on_host(runs[r["run"]]), "fp8": runs[r["run"]].dtype == "fp8",
             "published_s": round(r["published_s"], 6),
             "predicted_s": round(r["predicted_s"], 6), "left_out": round(r["cv_error"], 6)}
            for r in rows if "cv_error" in r]  # fmt: skip


if __name__ == "__main__":
    import sys

    rows = table()
    print(markdown(rows))
    if "--write" in sys.argv[1:]:  # each run's left-out error, quoted by `archspec plan`
        from archspec.plan import track_record

        track_record.write(track_record_rows(rows), track_record.TRAINING,
                           "python -m archspec.plan.published --write")  # fmt: skip
