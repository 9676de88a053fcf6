"""The FLOP and memory report of `archspec count --seq ...`: plain data for `--json` and tables.

`Workload` is what the FLOPs and bytes depend on beyond the spec: the batch and lengths, the
convention, and the training and parallelism setup. The functions at the bottom are the small
public API other tools (a comparison table, say) call for one number each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import sympy as sp

from archspec.backends.count.conventions import NO_RECOMPUTE, Convention, get_convention
from archspec.backends.count.flops import (
    KV_LEN,
    S_DEC,
    B,
    FlopFigures,
    S,
    flop_figures,
)
from archspec.backends.count.layout import check_layout
from archspec.backends.count.memory import (
    COMPUTE_BYTES,
    FP8_TRAINING,
    WEIGHT_BYTES,
    MemoryFigures,
    Parallelism,
    kv_cache_bytes,
    memory_figures,
)
from archspec.backends.count.params import parameter_count
from archspec.backends.count.report import simplify
from archspec.errors import SpecError
from archspec.ir.nodes import IR
from archspec.safety.limits import check_sizes

# Weight-only quantisation is an inference format; a training figure for it has to say how the
# step would run.
QUANTISED = ("int8", "int4")
QUANTISED_TRAINING = (
    "the quantised weights, bf16 gradients and activations, and an fp32 master copy with the "
    "optimizer states for every parameter (full training of a quantised model; adapters such "
    "as LoRA are not modelled)"
)


@dataclass(frozen=True)
class Workload:
    # Sequences per optimizer step over all replicas; with `global_batch`, the micro-batch one
    # device runs at a time instead.
    batch: int = 1
    global_batch: int | None = None
    seq: int | None = None  # default: the spec's max_seq_len
    dec_seq: int | None = None  # encoder-decoders; default: seq
    kv_len: int | None = None  # positions in the KV cache in a decode step; default: seq
    convention: str = "executed"
    dtype: str = "fp32"
    optimizer: str = "adamw"
    recompute: str = NO_RECOMPUTE
    # What the generated code runs by default: PyTorch's fused SDPA kernel, which keeps no
    # B·h·S² probabilities (`eager` is the math path).
    attn: str = "flash"
    parallel: Parallelism = field(default_factory=Parallelism)
    grad_dtype: str | None = None  # default: the compute dtype

    def micro_batches(self) -> tuple[int, int]:
        """(sequences one device runs at a time, micro-batches per optimizer step). A replica
        never holds a fraction of a sequence."""
        dp = self.parallel.dp
        if self.global_batch is None:
            if self.batch % dp:
                raise SpecError(
                    f"--batch {self.batch} does not split into whole sequences over the {dp} "
                    "data-parallel replicas",
                    hint="give a multiple of gpus / (tp·pp·cp), or --global-batch with --batch "
                    "as the micro-batch per device",
                )
            return self.batch // dp, 1
        if self.global_batch < 1:
            raise SpecError(f"--global-batch must be at least 1 (got {self.global_batch})")
        per_step = self.batch * dp
        if self.global_batch % per_step:
            raise SpecError(
                f"--global-batch {self.global_batch} is not a whole number of micro-batches of "
                f"--batch {self.batch} × {dp} data-parallel replicas = {per_step} sequences"
            )
        return self.batch, self.global_batch // per_step

    def layout(self) -> Parallelism:
        """The parallel layout with the number of micro-batches filled in."""
        _, m = self.micro_batches()
        return replace(self.parallel, micro_batches=m)

    def values(self, ir: IR) -> dict[sp.Symbol, int]:
        """Every symbol's value: the spec's dimensions, B, S, S_dec and kv_len."""
        for name in ("batch", "seq", "dec_seq", "kv_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SpecError(f"--{name.replace('_', '-')} must be at least 1")
            check_sizes({f"--{name.replace('_', '-')}": value})
        if self.dec_seq is not None and ir.root.layout != "encoder-decoder":
            raise SpecError(
                f"--dec-seq applies to encoder-decoders; {ir.name} is {ir.root.layout}-only",
                hint="use --seq for the sequence length",
            )
        seq = self.seq if self.seq is not None else ir.value(ir.root.max_seq_len)
        if self.parallel.cp > 1:
            from archspec.backends.count.split_checks import check_context_split

            check_context_split(ir, self.parallel.cp, seq)
        dec_seq = self.dec_seq if self.dec_seq is not None else seq
        generated = dec_seq if ir.root.layout == "encoder-decoder" else seq
        kv_len = self.kv_len if self.kv_len is not None else generated
        step = self.global_batch if self.global_batch is not None else self.batch
        return {**ir.env, B: step, S: seq, S_DEC: dec_seq, KV_LEN: kv_len}

    def device_values(self, ir: IR) -> dict[sp.Symbol, int]:
        """As `values`, with B the micro-batch one device runs at a time (memory is per
        device)."""
        micro, _ = self.micro_batches()
        return {**self.values(ir), B: micro}


def evaluate(expr: sp.Expr | int, values: dict[sp.Symbol, int]) -> sp.Rational:
    result = sp.sympify(expr).xreplace(values)
    if not result.is_Rational:
        raise ValueError(f"{expr} does not evaluate to a number: {result}")
    return result


def whole(expr: sp.Expr | int, values: dict[sp.Symbol, int]) -> int:
    """A FLOP count as an integer (a fraction only arises from halving, e.g. Kaplan's)."""
    return int(sp.floor(evaluate(expr, values) + sp.Rational(1, 2)))


def whole_bytes(expr: sp.Expr | int, values: dict[sp.Symbol, int]) -> int:
    """Bytes round up: half a byte of int4 weights, or a share of a batch, is still stored."""
    return int(sp.ceiling(evaluate(expr, values)))


def formula(expr: sp.Expr) -> str:
    """A readable closed form: a polynomial in the lengths and the batch, each coefficient
    factored and grouped by the layer count."""
    expr = sp.expand(expr)
    lengths = [s for s in (S, S_DEC, KV_LEN) if s in expr.free_symbols]
    if not lengths:
        return str(simplify(expr))
    return str(sp.collect(expr, lengths, func=simplify))


def figures(ir: IR, w: Workload) -> tuple[FlopFigures, MemoryFigures]:
    conv: Convention = get_convention(w.convention)
    par = w.layout()
    if par.schedule is not None:  # stage by stage: the schedule decides what each rank holds
        check_layout(ir, par)  # refused as the ranks were asked for
        par = par.one_stage_a_rank()
    memory = memory_figures(ir, w.dtype, w.optimizer, w.recompute, w.attn, par, w.grad_dtype)
    return flop_figures(ir, conv, w.attn, w.recompute), memory


def flops_report(ir: IR, w: Workload, symbolic: bool = False) -> dict[str, Any]:
    """The `flops`, `memory` and `workload` entries of `archspec count --json`."""
    values = w.values(ir)
    device = w.device_values(ir)
    f, m = figures(ir, w)
    flops: dict[str, Any] = {
        "convention": f.convention.name,
        "forward": whole(f.forward, values),
        "forward_matmul": whole(f.forward_matmul, values),
        "forward_per_token": whole(f.forward_per_token, values),
        "dropout": whole(f.dropout, values),  # the training forward's, beside `forward`
        "backward": whole(f.backward, values),
        "train_step": whole(f.train_step, values),
        "train_step_matmul": whole(f.train_step_matmul, values),
        "backward_matmul": whole(f.backward_matmul, values),
        "recomputed": whole(f.recomputed, values),
        "tokens": whole(f.tokens, values),
        "prefill": whole(f.forward, values),
        "decode": whole(f.decode, values) if f.decode is not None else None,
        "decode_matmul": whole(f.decode_matmul, values) if f.decode_matmul is not None else None,
        "components": {
            name: {
                "matmul": whole(matmul, values),
                "other": whole(other, values),
                "total": whole(matmul + other, values),
            }
            for name, (matmul, other) in f.components.items()
        },
    }
    stages = [_stage_bytes(stage, device) for stage in m.stages]
    # The headline is the most loaded stage (training total): the first under 1F1B, unless the
    # head and the loss on the last weigh more.
    busiest = max(range(len(stages)), key=lambda i: stages[i]["total"])
    memory = {k: v for k, v in stages[busiest].items() if k not in ("layers",)}
    if w.dtype in QUANTISED:
        memory["training_assumes"] = QUANTISED_TRAINING
    elif w.dtype == "fp8":
        memory["training_assumes"] = FP8_TRAINING
    if w.parallel.schedule is not None:
        from archspec.backends.count.peak_report import schedule_memory

        if symbolic:
            raise SpecError(
                f"--symbolic: the order --schedule {w.parallel.schedule} runs in has no formula",
                hint="leave out --symbolic (or --schedule)",
            )
        memory = schedule_memory(ir, w, stages)
    elif len(stages) > 1:
        memory["stages"] = stages
    if m.parallel.engine == "torch" and "rank_peaks" not in memory:
        from archspec.backends.count.peak_report import workload_peaks

        peaks = workload_peaks(ir, w)
        if peaks is not None:
            memory["rank_peaks"] = peaks
    micro, micro_batches = w.micro_batches()
    par = w.layout()
    report: dict[str, Any] = {
        "workload": {
            "batch": values[B],
            "micro_batch": micro,
            "micro_batches": micro_batches,
            "seq": values[S],
            "dec_seq": values[S_DEC] if ir.root.layout == "encoder-decoder" else None,
            "kv_len": values[KV_LEN] if f.decode is not None else None,
            "convention": f.convention.name,
            "attn": w.attn,
            "recompute": f.recompute,
            "dtype": w.dtype,
            "grad_dtype": m.grad_dtype,
            "optimizer": w.optimizer,
            "gpus": par.gpus,
            "tp": par.tp,
            "pp": par.pp,
            "cp": par.cp,
            "ep": par.ep,
            "dp": par.dp,
            "dp_replicate": par.dp_replicate,
            "sp": par.sp,
            "interleave": par.interleave,
            "zero": par.zero,
            "engine": par.engine,
            **({"schedule": par.schedule} if par.schedule is not None else {}),
            **(
                {"mixed_precision": par.mixed_precision, "loss_parallel": par.loss_parallel}
                if par.engine == "torch"
                else {}
            ),
        },
        "flops": flops,
        "memory": memory,
    }
    if symbolic:
        named = {
            "forward": f.forward,
            "forward_matmul": f.forward_matmul,
            "forward_per_token": f.forward_per_token,
            "backward": f.backward,
            "train_step": f.train_step,
            "train_step_matmul": f.train_step_matmul,
        }
        if f.decode is not None:
            named["decode"] = f.decode
        named |= {f"component.{c}": mm + other for c, (mm, other) in f.components.items()}
        report["symbolic"] = {
            "flops": {k: formula(v) for k, v in named.items()},
            "memory": {
                "weights": formula(m.weights),
                "gradients": formula(m.gradients),
                "optimizer": formula(m.optimizer_states),
                "activations": formula(m.activations),
                "kv_cache": formula(m.kv_cache),
                "total": formula(m.total),
                "inference_total": formula(m.inference_total),
            },
        }
    return report


def _stage_bytes(stage, values: dict[sp.Symbol, int]) -> dict[str, Any]:
    return {
        "stage": stage.stage,
        "layers": list(stage.layers),
        "params": whole(stage.params, values),
        "weights": whole_bytes(stage.weights, values),
        "gradients": whole_bytes(stage.gradients, values),
        "optimizer": whole_bytes(stage.optimizer_states, values),
        "activations": whole_bytes(stage.activations, values),
        "kv_cache": whole_bytes(stage.kv_cache, values),
        "total": whole_bytes(stage.total, values),
        "inference_total": whole_bytes(stage.inference_total, values),
    }


# The small public API: one number each, for tools that tabulate many models.


def _at_seq(ir: IR, seq: int) -> dict[sp.Symbol, int]:
    """Batch 1, sequences of `seq` (both stacks of an encoder-decoder)."""
    return Workload(seq=seq).values(ir)


def forward_flops_per_token(ir: IR, seq: int, convention: str = "executed") -> int:
    """Forward FLOPs per token of a batch of sequences of `seq` positions."""
    f = flop_figures(ir, get_convention(convention))
    return whole(f.forward_per_token, _at_seq(ir, seq))


def train_flops_per_token(
    ir: IR, seq: int, convention: str = "executed", attn: str = "flash"
) -> int:
    """Training-step FLOPs (forward, backward and what the kernel recomputes) per token at
    sequence length `seq`."""
    f = flop_figures(ir, get_convention(convention), attn)
    return whole(f.train_step / f.tokens, _at_seq(ir, seq))


def decode_flops(ir: IR, kv_len: int, convention: str = "executed") -> int | None:
    """FLOPs of generating one token against a KV cache of `kv_len` positions (batch 1)."""
    f = flop_figures(ir, get_convention(convention))
    if f.decode is None:
        return None
    return whole(f.decode, Workload(seq=kv_len, kv_len=kv_len).values(ir))


def kv_cache_bytes_per_token(ir: IR, dtype: str = "bf16") -> int:
    """KV-cache bytes per generated position of one sequence (0 for encoder-only models).
    For encoder-decoders this counts the decoder's self-attention cache only."""
    if dtype not in COMPUTE_BYTES:
        raise SpecError(f"unknown dtype '{dtype}'", hint=f"one of: {', '.join(COMPUTE_BYTES)}")
    expr = kv_cache_bytes(ir, COMPUTE_BYTES[dtype]).xreplace({S: 0})
    return whole_bytes(expr, {**ir.env, B: 1, KV_LEN: 1})


def weight_bytes(ir: IR, dtype: str = "bf16") -> int:
    """Bytes of the weights stored in `dtype` (fp32, bf16, fp16, int8, int4)."""
    if dtype not in WEIGHT_BYTES:
        raise SpecError(f"unknown dtype '{dtype}'", hint=f"one of: {', '.join(WEIGHT_BYTES)}")
    return whole_bytes(WEIGHT_BYTES[dtype] * parameter_count(ir.root), ir.env)
