"""Speculative decoding: a small draft model proposes k tokens, the target checks them at once.

Leviathan, Kalman and Matias 2023 ("Fast Inference from Transformers via Speculative Decoding",
Equation 1): when each drafted token is accepted with probability α, independently, one round
of k drafted tokens yields (1 − α^(k+1)) / (1 − α) tokens on average (the accepted prefix, and
the target's own token after it). A round costs k decode steps of the draft and one verifying
pass of the target over k + 1 positions per sequence against its cache: at small batches that
pass reads the target's weights once, as a decode step does, so the target's weights are read
once per round instead of once per token. The prefill is the target's (the draft's own prefill
is left out: it is the draft's size over the same prompt).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy as sp

from archspec.backends.count.memory import COMPUTE_BYTES
from archspec.backends.count.passes import KV_LEN, S_DEC, B, Pass, S, decode_pass
from archspec.errors import SpecError
from archspec.ir.nodes import IR
from archspec.plan.collectives import Link, all_reduce, group_link
from archspec.plan.efficiency import CALIBRATED
from archspec.plan.hardware import System
from archspec.plan.opcost import pass_costs
from archspec.plan.serve import (
    IDEAL,
    Precision,
    ServeEngine,
    ServePrediction,
    _pass_parts,
    serve_parts,
)


@dataclass(frozen=True)
class Speculation:
    draft: IR
    k: int  # tokens the draft proposes a round
    accept: float  # the probability each is accepted

    def __post_init__(self) -> None:
        if self.k < 1:
            raise SpecError(f"--speculate must be at least 1 (got {self.k})")
        if not 0 <= self.accept < 1:
            raise SpecError(f"--accept is a probability below 1 (got {self.accept})")

    @property
    def tokens_per_round(self) -> float:
        a = self.accept
        return (1 - a ** (self.k + 1)) / (1 - a)


def verify_pass(layout: str, k: int) -> Pass:
    """The target over k + 1 new positions per sequence, against its cache."""
    base = decode_pass(layout)
    if base is None or base.decoder is None:
        raise SpecError("an encoder-only model generates no tokens to speculate on")
    return Pass("verify", None, replace(base.decoder, queries=sp.Integer(k + 1)))


def speculative_decode_s(ir: IR, spec: Speculation, system: System, batch: int, prompt: int,
                         new_tokens: int, tp: int = 1, precision: Precision | None = None,
                         engine: ServeEngine = IDEAL) -> float:  # fmt: skip
    """The mean time per generated token (per sequence) of speculative decoding."""
    precision = precision or Precision()
    if spec.draft.root.layout != ir.root.layout:
        raise SpecError("the draft model must have the target's layout "
                        f"({ir.root.layout}, not {spec.draft.root.layout})")  # fmt: skip
    draft = serve_parts(spec.draft, system, batch, prompt, new_tokens, tp, precision,
                        fp16_accumulation=engine.fp16_accumulation)  # fmt: skip
    c = COMPUTE_BYTES[precision.dtype]
    fed = 1 if ir.root.layout == "encoder-decoder" else prompt
    middle = fed + (new_tokens + 1) // 2
    values = {B: batch, S: prompt, S_DEC: fed, KV_LEN: middle + spec.k + 1}
    link = group_link(system, tp, 1, CALIBRATED.network_peak)
    size = batch * (spec.k + 1) * ir.value(ir.root.d_model) * c
    if tp == 1:
        allreduce = (0.0, 0.0, 0)
    else:
        data = all_reduce(size, tp, Link(link.bandwidth, 0.0))
        allreduce = (2 * data, 2 * (all_reduce(size, tp, link) - data), 2)
    costs = pass_costs(ir, c, "flash", verify_pass(ir.root.layout, spec.k))
    verify = _pass_parts(costs, values, tp, system.accelerator.peak(precision.compute),
                         CALIBRATED, allreduce)  # fmt: skip
    bandwidth = system.accelerator.bandwidth * engine.efficiency(precision.dtype)
    draft_step = draft.decode.seconds(bandwidth, precision, c, engine, draft.fp16_accumulate)
    check = verify.seconds(bandwidth, precision, c, engine, draft.fp16_accumulate)
    return (spec.k * draft_step + check) / spec.tokens_per_round


def with_speculation(p: ServePrediction, ir: IR, spec: Speculation, system: System, batch: int,
                     prompt: int, new_tokens: int, tp: int, precision: Precision,
                     engine: ServeEngine) -> ServePrediction:  # fmt: skip
    """A prediction decoded speculatively: the mean time per token, and the draft's weights and
    cache beside the target's (each on every tensor-parallel rank, split as the target is)."""
    decode = speculative_decode_s(ir, spec, system, batch, prompt, new_tokens, tp, precision,
                                  engine)  # fmt: skip
    draft = serve_parts(spec.draft, system, batch, prompt, new_tokens + spec.k, tp, precision)
    return replace(
        p,
        decode_token_s=decode,
        weights_bytes=p.weights_bytes + draft.weights_bytes,
        kv_cache_bytes=p.kv_cache_bytes + draft.kv_cache_bytes,
    )
