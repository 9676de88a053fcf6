"""Continuous (in-flight) batching: requests join and leave the decoding batch every step.

A server at steady state decodes B sequences together, each step one token for each; every
request costs one prefill of its prompt and T − 1 steps of its output, so B/T prefills come in
per step on average. Their prompts run in the same forward as the decode step (in-flight
batching), which reads the weights once for both. A step therefore takes

    τ(B) = decode step of B sequences at the mean cache length (P + T/2)
           + (B / T) × (one prompt's work beyond the weights' read, and the engine's
             per-request time)  (ServeParts.mixed_step_s),

the time per output token (TPOT) each sequence sees is τ, and the server makes B/τ output
tokens a second. How many sequences decode together:

- `--concurrency C` (C clients, each sending its next request when the last one ends): B is C,
  or at most what the cache holds, the rest waiting their turn (Little's law: a request spends
  C / (requests per second) in the system);
- `--rate R` requests a second: the smallest B for which the server keeps up, R · T · τ(B) ≤ B
  (Little's law for the sequences decoding); beyond what the cache holds it cannot, and the
  most it sustains is said.

The cache is paged (vLLM's PagedAttention): a sequence holds its positions so far, P + T/2 on
average, not the longest it could reach, and B is at most the sequences whose average fits in
what the weights leave of the engine's usable memory; an engine that admits a request only
once its whole length fits (ServeEngine.reserves_whole_sequence: TensorRT-LLM) holds P + T a
sequence. A new request waits half a step on average for the next step boundary, and behind
the prompts of requests that came before it (`prefill_wait_s`: the mean wait of a queue of one
server, arrivals at random, every prompt the same work), then its prefill: that is its time to
first token (queueing for a slot is added under --concurrency).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from archspec.errors import SpecError
from archspec.ir.nodes import IR
from archspec.plan.hardware import System
from archspec.plan.serve import Precision, ServeParts, serve_parts
from archspec.plan.serve_engine import ServeEngine


@dataclass(frozen=True)
class BatchingPoint:
    batch: int  # sequences decoding together
    max_batch: int  # the most the paged cache holds
    step_s: float  # τ: one step, prefills amortised
    ttft_s: float
    tpot_s: float
    tokens_per_s: float  # output tokens, all replicas
    requests_per_s: float  # all replicas

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def mean_cache_share(ir: IR, prompt: int, new_tokens: int) -> float:
    """What share of a sequence's whole cache (its positions at the end) a paged cache holds
    for it on average over its generation: the prompt (a decoder's; an encoder-decoder's
    decoder starts from one token) and half the new tokens."""
    fed = 1 if ir.root.layout == "encoder-decoder" else prompt
    return (fed + new_tokens / 2) / (fed + new_tokens)


def held_cache_share(ir: IR, engine: ServeEngine, prompt: int, new_tokens: int) -> float:
    """What share of a sequence's whole cache the engine holds for it while it decodes: all of
    it where its scheduler reserves the whole length (ServeEngine.reserves_whole_sequence),
    else its positions so far on average (a paged cache)."""
    return 1.0 if engine.reserves_whole_sequence else mean_cache_share(ir, prompt, new_tokens)


def most_sequences(ir: IR, one: ServeParts, engine: ServeEngine, prompt: int,
                   new_tokens: int) -> int:  # fmt: skip
    """The most sequences one tensor-parallel group decodes together: those whose held cache
    fits in what the weights leave of the engine's usable memory, at most the engine's
    `max_batch`. `one`: the run's parts at batch 1."""
    usable = one.memory_bytes * engine.usable_memory - one.weights_bytes
    share = held_cache_share(ir, engine, prompt, new_tokens)
    fits = max(0, math.floor(usable / (one.kv_cache_bytes * share)))
    return min(fits, engine.max_batch) if engine.max_batch else fits


class Server:
    """One model served on one tensor-parallel group of `system`, and its replicas."""

    def __init__(self, ir: IR, system: System, prompt: int, new_tokens: int, tp: int, gpus: int,
                 precision: Precision, engine: ServeEngine) -> None:  # fmt: skip
        self.ir, self.system, self.tp = ir, system, tp
        self.prompt, self.new_tokens = prompt, new_tokens
        self.replicas = gpus // tp
        self.precision, self.engine = precision, engine
        one = serve_parts(ir, system, 1, prompt, new_tokens, tp, precision,
                          fp16_accumulation=engine.fp16_accumulation)  # fmt: skip
        self.prefill_s = one.seconds(engine, precision)[0]  # one prompt, with its overhead
        fed = 1 if ir.root.layout == "encoder-decoder" else prompt
        self.max_batch = most_sequences(ir, one, engine, prompt, new_tokens)
        if self.max_batch < 1:
            raise SpecError(
                f"one sequence of {fed + new_tokens} positions does not fit beside the "
                f"weights ({one.weights_bytes / 2**30:.1f} GiB) in "
                f"{one.memory_bytes * engine.usable_memory / 2**30:.1f} GiB usable",
                hint="more tensor parallelism, or fewer bytes per weight (--dtype)",
            )

    @cache  # noqa: B019 - a server lives for one command
    def _parts(self, batch: int) -> ServeParts:
        acc16 = self.engine.fp16_accumulation
        return serve_parts(self.ir, self.system, batch, self.prompt, self.new_tokens, self.tp,
                           self.precision, fp16_accumulation=acc16)  # fmt: skip

    def step_s(self, batch: int) -> float:
        return self._parts(batch).mixed_step_s(self.engine, self.precision, self.new_tokens)

    def prefill_wait_s(self, batch: int, others: float = 1.0) -> float:
        """How long a new request's prompt waits behind the prompts of requests that came
        before it (Pollaczek-Khinchine's mean wait for a queue of one server, arrivals at
        random and each prompt the same work S: ρS / 2(1 − ρ), ρ the share of the time prompts
        take). `others`: the share of the arrivals that are other requests' (a closed loop of
        C clients: (C − 1) / C, none when one client waits only on itself)."""
        work = self._parts(batch).joining_prompt_s(self.engine, self.precision)
        arrivals = others * batch / (self.new_tokens * self.step_s(batch))  # a replica's
        busy = min(arrivals * work, 0.999)
        return busy * work / (2 * (1 - busy))

    def point(self, batch: int, queue_s: float = 0.0, others: float = 1.0) -> BatchingPoint:
        tau = self.step_s(batch)
        tokens = self.replicas * batch / tau
        first = queue_s + tau / 2 + self.prefill_wait_s(batch, others) + self.prefill_s
        return BatchingPoint(batch, self.max_batch, tau, first, tau, tokens,
                             tokens / self.new_tokens)  # fmt: skip

    def at_concurrency(self, clients: int) -> BatchingPoint:
        """`clients` per replica-set in all, each with one request at a time."""
        if clients < 1:
            raise SpecError("--concurrency must be at least 1")
        per_replica = math.ceil(clients / self.replicas)
        batch = min(per_replica, self.max_batch)
        others = (per_replica - 1) / per_replica
        point = self.point(batch, others=others)
        waiting = per_replica - batch
        queue = waiting / (point.requests_per_s / self.replicas) if waiting else 0.0
        return self.point(batch, queue, others) if waiting else point

    def at_rate(self, rate: float) -> BatchingPoint:
        """`rate` requests a second over all replicas."""
        if not 0 < rate < math.inf:  # nan and inf too
            raise SpecError(f"--rate must be a number above 0 (got {rate:g})")
        per_replica = rate / self.replicas

        def keeps_up(batch: int) -> bool:
            return per_replica * self.new_tokens * self.step_s(batch) <= batch

        if not keeps_up(self.max_batch):
            most = self.point(self.max_batch).requests_per_s
            raise SpecError(
                f"--rate {rate:g} requests/s is more than this server sustains: "
                f"{most:.3g} requests/s at its largest batch, {self.max_batch}",
                hint="more replicas (--gpus), a smaller --new-tokens, or fewer bytes per "
                "weight and cache (--dtype, --kv-dtype)",
            )
        low, high = 1, self.max_batch  # the smallest batch that keeps up
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if keeps_up(mid) else (mid + 1, high)
        return self.point(low)

    def sweep(self) -> list[BatchingPoint]:
        """Concurrency in doublings up to what the cache holds: the latency-throughput curve."""
        batches = sorted({min(2**i, self.max_batch) for i in range(32)
                          if 2 ** (i - 1) < self.max_batch})  # fmt: skip
        return [self.point(b) for b in batches]
