"""`plan --mode serve`: no decode step beats the memory-bandwidth bound.

A decode step reads every weight a token uses and the whole KV cache at least once, so it
takes at least those bytes over the accelerator's peak bandwidth. The bytes are counted here
from count's parameter breakdown and KV-cache model, not from the plan's op costs: the
generating stack's layers (less cross-attention's keys and values, which a decode step takes
from the cache) and the head, with a mixture of experts' routed experts counted at the
expected number a batch of B tokens touches, E·(1 − (1 − top_k/E)^B).
"""

from __future__ import annotations

import re

import pytest

from archspec.backends.count.memory import kv_cache_bytes
from archspec.backends.count.params import parameter_rows
from archspec.backends.count.passes import KV_LEN, S_DEC, B, S
from archspec.cli.common import compile_spec
from archspec.ir.nodes import MoE
from archspec.ir.visit import walk
from archspec.plan.hardware import get_system
from archspec.plan.serve import predict_serving
from archspec.spec.resolve import builtin_names

SYSTEM = get_system("h200")
PROMPT, NEW = 512, 128
CACHED_IN_DECODE = re.compile(r"\.cross_attn\.(k|v|kv)$")


def read_per_step(ir, batch: int) -> float:
    """Bytes a decode step must read at `batch`: the weights its tokens use, and the cache."""
    generating = "decoder" if ir.root.layout != "encoder" else None
    assert generating is not None
    moe = [p.node for p in walk(ir.root) if isinstance(p.node, MoE)]
    share = 1.0  # of the routed experts' weights read
    if moe:
        e, k = ir.value(moe[0].n_experts), ir.value(moe[0].top_k)
        share = 1 - (1 - k / e) ** batch  # E·(1 − (1 − k/E)^B) of the E experts
    params = 0.0
    for row in parameter_rows(ir):
        in_layers = row.name.startswith(f"{generating}.blocks.") or row.name == "lm_head"
        if not in_layers or CACHED_IN_DECODE.search(row.name):
            continue
        params += ir.value(row.count) * (share if ".experts." in row.name else 1.0)
    fed = 1 if ir.root.layout == "encoder-decoder" else PROMPT
    middle = fed + (NEW + 1) // 2
    kv = kv_cache_bytes(ir, 2).xreplace({**ir.env, B: batch, S: PROMPT, S_DEC: fed,
                                         KV_LEN: middle})  # fmt: skip
    return 2 * params + float(kv)


GENERATING = [n for n in builtin_names() if compile_spec(n, None).root.layout != "encoder"]


@pytest.mark.parametrize("name", GENERATING)
def test_decode_is_never_faster_than_reading_its_bytes(name: str) -> None:
    ir = compile_spec(name, None)
    is_moe = any(isinstance(p.node, MoE) for p in walk(ir.root))
    for batch in (1, 4, 64) if is_moe else (1, 64):
        p = predict_serving(ir, SYSTEM, batch, PROMPT, NEW)
        bound = read_per_step(ir, batch) / SYSTEM.accelerator.bandwidth
        assert p.decode_token_s >= bound, (name, batch, p.decode_token_s, bound)


def test_mixtral_at_batch_1_reads_two_experts_per_layer() -> None:
    # The case: Mixtral-8x7B on 2 A100s at tp 2 must take at least the 12.9 GB per
    # device that attention and two experts per layer hold over 2,039 GB/s (6.3 ms).
    ir = compile_spec("mixtral-8x7b", None)
    a100 = get_system("a100-80g")
    p = predict_serving(ir, a100, 1, PROMPT, NEW, tp=2)
    assert p.decode_token_s >= read_per_step(ir, 1) / 2 / a100.accelerator.bandwidth
    assert read_per_step(ir, 1) / 2 > 12.5e9


def test_no_engine_profile_decodes_an_moe_faster_than_its_bytes() -> None:
    # The fitted profiles (their bandwidth, their experts' share of it, a 16-bit head) only
    # ever slow a step down: Mixtral at batch 1 and 64 under each 16-bit profile.
    from archspec.plan.serve_engine import load_engines

    ir = compile_spec("mixtral-8x7b", None)
    for engine in load_engines().values():
        if "16-bit" not in engine.memory_efficiency:
            continue
        for batch in (1, 64):
            p = predict_serving(ir, SYSTEM, batch, PROMPT, NEW, engine=engine)
            bound = read_per_step(ir, batch) / SYSTEM.accelerator.bandwidth
            assert p.decode_token_s >= bound, (engine.key, batch)


def test_a_long_prefill_counts_the_experts_it_touches_without_exact_powers() -> None:
    """A prefill of B·S tokens touches E·(1 − (1 − top_k/E)^(B·S)) experts: the power of a
    float base, the same to 12 digits as the exact fraction at a few tokens, and a number at
    the 8,388,608 tokens of batch 1,024 × 8,192 (an exact fraction of millions of digits took
    minutes there; a user's `plan --mode serve` of that size timed out)."""
    import sympy as sp

    from archspec.plan.opcost import distinct_experts

    class Route:  # a mixture's routing as the op carries it: 8 experts, 2 a token
        n_experts, top_k = 8, 2

    exact = 8 * (1 - (1 - sp.Rational(2, 8)) ** 5)
    assert float(distinct_experts(Route, sp.Integer(5))) == pytest.approx(float(exact), rel=1e-12)
    tokens = sp.Symbol("tokens", positive=True)
    many = distinct_experts(Route, tokens).subs(tokens, 1024 * 8192)
    assert float(many) == pytest.approx(8.0)
