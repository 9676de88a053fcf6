"""Published large-scale training runs, and how far `archspec plan` lands from each.

Every case is a run someone else measured, with the layout its paper reports: Megatron-LM's
weak-scaling table (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", Table 1: GPT models of 1.7B to 1T parameters on Selene's DGX A100
80GB nodes, teraFLOP/s per GPU by the paper's formula, Section 5.1), and the end-to-end
iteration times of Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", Table 5, with the configurations of its Table 3), both with full
recomputation and with sequence parallelism and selective recomputation.

The models are Megatron's GPT (GPT-2's layer, 51,200-token vocabulary, 2048 positions, dropout
0.1), mixed precision fp16 with fp32 gradients, attention as Megatron-LM ran it then (the fused
softmax kernel over materialised scores, not flash attention). What a paper does not report
(the micro-batch of Table 1, the interleaving) is what its authors tuned: the planner searches
it, as they did.

Calibration fits the two matmul constants of efficiency.py on CALIBRATION and reports the error
on every other case (docs/plan.md; tests/test_plan_validation.py checks them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from archspec.ir.build import build_ir
from archspec.plan.efficiency import CALIBRATED, Efficiency
from archspec.plan.hardware import get_system
from archspec.plan.search import search
from archspec.plan.step import Layout, Training

SEQ = 2048
VOCAB = 51200
NARAYANAN = "Narayanan et al. 2021, Table 1"
KORTHIKANTI = "Korthikanti et al. 2022, Table 5"


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    heads: int
    hidden: int
    layers: int
    tp: int
    pp: int
    gpus: int
    global_batch: int
    recompute: str
    sp: bool
    published: float  # the paper's figure: TFLOP/s per GPU, or seconds per iteration
    unit: str  # "tflops" or "s"
    micro_batch: int | None = None  # None: not reported, searched

    def paper_flops(self) -> float:
        """The paper's FLOPs per iteration (Narayanan et al. 2021, Equation 3, with full
        recomputation): 96·B·s·l·h²·(1 + s/6h + V/16lh)."""
        b, s, h, n = self.global_batch, SEQ, self.hidden, self.layers
        return 96 * b * s * n * h * h * (1 + s / (6 * h) + VOCAB / (16 * n * h))

    def published_step(self) -> float:
        if self.unit == "s":
            return self.published
        return self.paper_flops() / (self.published * 1e12 * self.gpus)


def _narayanan(params, heads, hidden, layers, tp, pp, gpus, batch, tflops) -> Case:
    return Case(f"GPT {params} (Megatron-LM)", NARAYANAN, heads, hidden, layers, tp, pp, gpus,
                batch, "full", False, tflops, "tflops")  # fmt: skip


def _korthikanti(size, heads, hidden, layers, pp, gpus, batch, micro, full_s, present_s):
    common = dict(source=KORTHIKANTI, heads=heads, hidden=hidden, layers=layers, tp=8, pp=pp,
                  gpus=gpus, global_batch=batch, unit="s", micro_batch=micro)  # fmt: skip
    return [
        Case(f"GPT {size}, full recompute", recompute="full", sp=False, published=full_s,
             **common),
        Case(f"GPT {size}, sp + selective", recompute="selective", sp=True,
             published=present_s, **common),
    ]  # fmt: skip


CASES: list[Case] = [
    # params, heads, hidden, layers, tp, pp, GPUs, batch, TFLOP/s per GPU (Table 1)
    _narayanan("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    _narayanan("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    _narayanan("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
    _narayanan("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    _narayanan("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    _narayanan("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    _narayanan("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    _narayanan("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    _narayanan("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    _narayanan("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
    # size, heads, hidden, layers, pp, GPUs, batch, micro-batch (Table 3); seconds per
    # iteration with full recomputation, and with sequence parallelism + selective (Table 5)
    *_korthikanti("22B", 64, 6144, 48, 1, 8, 4, 4, 1.42, 1.10),
    *_korthikanti("175B", 96, 12288, 96, 8, 64, 64, 1, 18.13, 13.75),
    *_korthikanti("530B", 128, 20480, 105, 35, 280, 280, 1, 49.05, 37.83),
    *_korthikanti("1T", 160, 25600, 128, 64, 512, 512, 1, 94.42, 71.49),
]

# The cases the constants are fitted on: a third, spread over sizes and both papers.
CALIBRATION = (
    "GPT 1.7B (Megatron-LM)",
    "GPT 18.4B (Megatron-LM)",
    "GPT 145.6B (Megatron-LM)",
    "GPT 1008.0B (Megatron-LM)",
    "GPT 22B, full recompute",
    "GPT 530B, sp + selective",
)


@cache
def case_ir(heads: int, hidden: int, layers: int):
    from archspec.spec.resolve import load_spec

    overrides = [
        f"d_model={hidden}",
        f"n_heads={heads}",
        f"head_dim={hidden // heads}",
        f"d_ff={4 * hidden}",
        f"n_layers={layers}",
        f"vocab_size={VOCAB}",
        f"max_seq_len={SEQ}",
        "dropout.attention=0.1",
        "dropout.hidden=0.1",
    ]
    return build_ir(load_spec("gpt3-175b", overrides))


def training(case: Case) -> Training:
    return Training(case.gpus, case.global_batch, SEQ, "fp16", "fp32", "eager")


def predict(case: Case, eff: Efficiency = CALIBRATED) -> tuple[float, Layout]:
    """Predicted seconds per iteration, with the fastest of the layouts the paper leaves open
    (micro-batch, interleaving) that fits in memory."""
    ir = case_ir(case.heads, case.hidden, case.layers)
    fixed = dict(tp=[case.tp], pp=[case.pp], sp=[case.sp], recompute=[case.recompute],
                 zero=[0])  # fmt: skip
    if case.micro_batch is not None:
        fixed["micro_batch"] = [case.micro_batch]
    result = search(ir, get_system("a100-80g"), training(case), eff=eff, only=fixed)
    if not result.ranked:
        raise AssertionError(f"{case.name}: no layout fits ({result.dropped})")
    best = result.ranked[0]
    return best.time.seconds, best.time.layout


def error(case: Case, eff: Efficiency = CALIBRATED) -> float:
    """Relative error of the predicted throughput (TFLOP/s, or iterations per second)."""
    seconds, _ = predict(case, eff)
    return case.published_step() / seconds - 1


def table(eff: Efficiency = CALIBRATED) -> list[dict]:
    rows = []
    for case in CASES:
        seconds, layout = predict(case, eff)
        if case.unit == "tflops":
            predicted = case.paper_flops() / (seconds * case.gpus) / 1e12
        else:
            predicted = seconds
        rows.append(
            {
                "case": case.name,
                "source": case.source,
                "split": "calibration" if case.name in CALIBRATION else "held out",
                "unit": "TFLOP/s per GPU" if case.unit == "tflops" else "s per iteration",
                "published": case.published,
                "predicted": predicted,
                "error": case.published_step() / seconds - 1,
                "layout": layout,
            }
        )
    return rows


def calibrate(
    peaks=tuple(x / 100 for x in range(60, 96)), halves=tuple(range(0, 257, 16))
) -> Efficiency:
    """The (matmul_peak, matmul_half) that minimise the largest error on CALIBRATION."""
    cases = [c for c in CASES if c.name in CALIBRATION]
    best, best_err = CALIBRATED, float("inf")
    for half in halves:
        for peak in peaks:
            eff = replace(CALIBRATED, matmul_peak=peak, matmul_half=float(half))
            worst = max(abs(error(c, eff)) for c in cases)
            if worst < best_err:
                best, best_err = eff, worst
    return best


def markdown(eff: Efficiency = CALIBRATED) -> str:
    """The validation table of docs/plan.md (`python -m archspec.plan.validation`)."""
    lines = [
        "| case | source | split | published | predicted | error | layout searched |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    held = []
    for r in table(eff):
        lay = r["layout"]
        unit = " TFLOP/s" if r["unit"].startswith("TFLOP") else " s"
        searched = f"mb {lay.micro_batch}" + (f", V {lay.interleave}" if lay.pp > 1 else "")
        lines.append(
            f"| {r['case']} | {r['source']} | {r['split']} | {r['published']:g}{unit} "
            f"| {r['predicted']:.4g}{unit} | {r['error']:+.1%} | {searched} |"
        )
        if r["split"] == "held out":
            held.append(abs(r["error"]))
    lines.append("")
    lines.append(
        f"Held out: {len(held)} cases, mean absolute error {sum(held) / len(held):.1%}, "
        f"largest {max(held):.1%}."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
