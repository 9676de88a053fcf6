"""Scale: specs beyond a trillion parameters and stacks of 10,000 layers.

Counting, printing and FLOPs work on the IR, where a run of identical blocks is one `Repeat`
with a symbolic count: their time and memory must not grow with depth, and totals stay exact
integers past float precision. The generated model is built on the meta device (no storage)
at 10,000 layers and must hold exactly the counted parameters.

Memory is measured with tracemalloc; time only gets generous sanity bounds (speed targets
belong in benchmarks/count_speed.py, not in unit tests).
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import KV_LEN, S_DEC, B, S, flop_figures
from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr
from archspec.backends.torchgen import generate_source, load_generated
from archspec.cli import app
from archspec.ir.nodes import IR

runner = CliRunner()

DEEP = 10_000


def ir_of(name: str | Path, overrides: list[str] | None = None) -> IR:
    return build_ir(load_spec(name, overrides or []))


def total(ir: IR) -> int:
    return ir.value(parameter_count(ir.root))


def palm(n_layers: int) -> int:
    """PaLM's parameters by hand (Chowdhery et al. 2022, Table 1 and section 2): a parallel
    block of multi-query attention (one shared key/value head of width 256), a SwiGLU MLP of
    width 4·d_model, one layernorm without bias; no biases anywhere; the head is tied to the
    256k-token embedding."""
    d, heads, head_dim, vocab = 18432, 48, 256, 256_000
    attention = d * heads * head_dim * 2 + d * head_dim * 2  # q and o; one k and v head
    mlp = 3 * d * 4 * d
    return vocab * d + n_layers * (attention + mlp + d) + d  # + the final norm


def dense_decoder(d: int, layers: int, d_ff: int, vocab: int) -> int:
    """A LLaMA-style decoder by hand: MHA without biases, a gated MLP of branch width d_ff,
    two RMSNorms per block and a final one, an untied head."""
    return vocab * d + layers * (4 * d * d + 3 * d * d_ff + 2 * d) + d + d * vocab


# --- beyond a trillion parameters --------------------------------------------------------------


def test_palm_formula_matches_the_built_in_spec() -> None:
    assert total(ir_of("palm-540b")) == palm(118) == 540_356_474_880


@pytest.mark.parametrize(
    ("name", "overrides", "expected"),
    [
        ("palm-540b", ["n_layers=236"], palm(236)),  # twice PaLM's depth: 1.08T
        ("palm-540b", [f"n_layers={DEEP}"], palm(DEEP)),  # 45 quadrillion: beyond 2**53
        ("llama-2-7b", "d_model=65536 n_heads=512 d_ff=262144 n_layers=200".split(), None),
    ],
    ids=["palm-1t", "palm-10000-layers", "llama-13t"],
)
def test_trillions_count_exactly(name: str, overrides: list[str], expected: int | None) -> None:
    ir = ir_of(name, overrides)
    if expected is None:
        expected = dense_decoder(65536, 200, 262144, 32000)
    assert total(ir) == expected > 10**12
    result = runner.invoke(app, ["count", name, *(a for o in overrides for a in ("--set", o))])
    assert result.exit_code == 0, result.output
    assert f"{expected:,}" in result.stdout
    result = runner.invoke(
        app, ["count", name, "--json", *(a for o in overrides for a in ("--set", o))]
    )
    data = json.loads(result.stdout)
    # JSON carries the exact integer, also past the 2**53 where a float would round it.
    assert data["params"]["total"] == expected
    assert sum(row["count"] for row in data["params"]["rows"]) == expected


def test_trillion_parameter_mixture_of_experts_from_a_spec_file(tmp_path: Path) -> None:
    path = tmp_path / "switch.yaml"
    path.write_text(
        "extends: mixtral-8x7b\nsource: a what-if, 256 experts\nmoe: {n_experts: 256, top_k: 2}\n"
    )
    ir = ir_of(path)
    mixtral = total(ir_of("mixtral-8x7b"))
    expert = 32 * 3 * 4096 * 14336  # one more expert in each of 32 layers: gate, up, down
    router = 32 * 4096  # one more router output per layer
    assert total(ir) == mixtral + (256 - 8) * (expert + router) == 1_444_747_153_408
    text = module_repr(ir)
    assert "(experts): Experts(n_experts=256, in_features=4096, hidden_features=14336" in text
    assert "(router): Linear(in_features=4096, out_features=256, bias=False)" in text


# --- 10,000 layers: the IR backends do not grow with depth -------------------------------------


def ir_work(name: str, n_layers: int) -> Callable[[], Any]:
    """Everything `count`, `print` and `count --flops` do for a spec, from its name."""

    def work() -> Any:
        ir = ir_of(name, [f"n_layers={n_layers}"])
        figures = flop_figures(ir, CONVENTIONS["executed"])
        values = {**ir.env, B: 8, S: 2048, S_DEC: 512, KV_LEN: 2048}
        flops = int(figures.train_step.xreplace(values))
        return total(ir), module_repr(ir), flops

    return work


def peak_bytes(work: Callable[[], Any]) -> tuple[int, float]:
    work()  # warm sympy's caches and imports first: the second run is the steady state
    tracemalloc.start()
    start = time.perf_counter()
    try:
        work()
        seconds = time.perf_counter() - start
        return tracemalloc.get_traced_memory()[1], seconds
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["gpt2", "t5-small", "mixtral-8x7b"])
def test_count_print_and_flops_cost_the_same_at_10000_layers(name: str) -> None:
    shallow_peak, _ = peak_bytes(ir_work(name, 12))
    deep_peak, deep_seconds = peak_bytes(ir_work(name, DEEP))
    assert deep_peak < 1.25 * shallow_peak + 256 * 1024, (shallow_peak, deep_peak)
    assert deep_seconds < 30  # a sanity bound only: it takes well under a second


def test_10000_layers_print_folded() -> None:
    gpt2 = module_repr(ir_of("gpt2", [f"n_layers={DEEP}"]))
    assert "\n      (0-9999): 10000 x Block(\n" in gpt2
    shallow = module_repr(ir_of("gpt2", ["n_layers=12"]))
    assert gpt2 == shallow.replace("(0-11): 12 x Block(", "(0-9999): 10000 x Block(")
    t5 = module_repr(ir_of("t5-small", [f"n_layers={DEEP}"]))
    # T5's stacks own the relative-position bias, so all 10,000 blocks of each fold.
    assert "\n      (0-9999): 10000 x EncoderBlock(\n" in t5
    assert "\n      (0-9999): 10000 x DecoderBlock(\n" in t5
    result = runner.invoke(app, ["print", "gpt2", "--set", f"n_layers={DEEP}", "--params"])
    assert result.exit_code == 0, result.output
    assert "(0-9999): 10000 x Block(" in result.stdout


def test_10000_layers_generate_the_same_file() -> None:
    """The code does not unroll the layers: only the Config's numbers change."""
    shallow = generate_source(ir_of("gpt2", ["n_layers=12"]))
    deep = generate_source(ir_of("gpt2", [f"n_layers={DEEP}"]))
    assert abs(len(deep) - len(shallow)) < 200
    assert "n_layers: int = 10000" in deep


# --- 10,000 layers built on the meta device ---------------------------------------------------


def resident_bytes() -> int | None:
    """The process's resident memory now (Linux), or None where /proc is not there."""
    statm = Path("/proc/self/statm")
    if not statm.exists():
        return None
    return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def no_default_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip torch's default initialisers, which have nothing to fill on the meta device but
    run as decomposed ops there, about 1 ms per module: over half the time of a 10,000-layer
    build. Shapes are unaffected."""
    for cls in (torch.nn.Linear, torch.nn.Embedding, torch.nn.LayerNorm, torch.nn.RMSNorm):
        monkeypatch.setattr(cls, "reset_parameters", lambda self: None)
    # The generated init_weights() likewise: nothing to fill on meta, 1 ms a call.
    for name in ("normal_", "zeros_", "ones_", "constant_", "trunc_normal_"):
        monkeypatch.setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)


def test_generated_model_with_10000_layers_on_meta_has_the_counted_parameters(
    tmp_path: Path, no_default_init: None
) -> None:
    """PaLM's width at 10,000 layers: 45 quadrillion parameters, none of them allocated.
    torch builds one Python module object per part of a block (11 per PaLM block), which is
    what time and memory grow with here; the IR stays one Repeat."""
    ir = ir_of("palm-540b", [f"n_layers={DEEP}"])
    module = load_generated(generate_source(ir), tmp_path)
    before = resident_bytes()
    start = time.perf_counter()
    with torch.device("meta"):
        model = module.Model()
    seconds = time.perf_counter() - start
    after = resident_bytes()
    assert sum(p.numel() for p in model.parameters()) == total(ir) == palm(DEEP)
    assert all(p.is_meta for p in model.parameters())
    assert len(model.decoder.blocks) == DEEP
    if before is not None and after is not None:
        # Python objects only, no tensor storage: about 25 KB per block.
        assert after - before < DEEP * 100 * 1024, f"{(after - before) / 2**20:.0f} MiB"
    assert seconds < 300  # a sanity bound only: about 7 s on one core
    assert repr(model) == module_repr(ir)


def test_trillion_parameter_model_on_meta_has_the_counted_parameters(tmp_path: Path) -> None:
    ir = ir_of("palm-540b", ["n_layers=236"])
    with torch.device("meta"):
        model = load_generated(generate_source(ir), tmp_path).Model()
    assert sum(p.numel() for p in model.parameters()) == total(ir) == palm(236)
    assert repr(model) == module_repr(ir)
