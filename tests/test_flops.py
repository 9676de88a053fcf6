"""FLOPs: the `executed` convention against torch's FlopCounterMode, the presets against their
papers' formulas, and the `count` command's FLOP output.

FlopCounterMode counts matmuls (nn.Linear, bmm) and SDPA; on the meta device SDPA runs its math
path as two bmms forward and four backward, so forward + backward is exactly 3 × forward, as in
the `executed` convention. Models run on the meta device at full size: no memory, no data.
The exception is the mixture of experts: its routing picks tokens with torch.where, which has
no meta implementation (the output size depends on the data), so Mixtral runs on the CPU with
real tensors at a small size, with SDPA forced onto its math path (the CPU's fused kernel is
not one FlopCounterMode counts).
"""

from __future__ import annotations

import json
import math

import pytest
import sympy as sp
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from typer.testing import CliRunner

from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import KV_LEN, S_DEC, B, S, flop_figures
from archspec.backends.count.flops_report import (
    Workload,
    decode_flops,
    flops_report,
    forward_flops_per_token,
    train_flops_per_token,
)
from archspec.backends.count.params import parameter_count
from archspec.cli import app
from archspec.ir.build import build_ir
from archspec.spec.resolve import builtin_names, load_spec
from tests.builtin_sizes import each_size
from tests.hf_reference import HF_CONFIGS, build_meta
from tests.tiny import generated_module

EXECUTED = CONVENTIONS["executed"]
# Routing needs real values: small-size tests (deepseek-v2-lite: tests/test_latent_attention.py).
MOE = {
    "mixtral-8x7b",
    "qwen1.5-moe-a2.7b",
    "qwen3-30b-a3b",
    "deepseek-v2-lite",
    "deepseek-v3",
    "gpt-oss-120b",
    "gpt-oss-20b",
}  # gpt-oss's tiny models: tests/test_hf_zoo_gpt_oss.py
POINTS = [(1, 128, 64), (3, 77, 20), (2, 200, 33)]  # (B, S, S_dec)


def ir_of(name: str, overrides: list[str] | None = None):
    return build_ir(load_spec(name, overrides or []))


def values(ir, b: int, s: int, s_dec: int | None = None, kv_len: int | None = None):
    return {**ir.env, B: b, S: s, S_DEC: s_dec or s, KV_LEN: kv_len or s}


def at(expr, vals) -> int:
    result = sp.sympify(expr).xreplace(vals)
    assert result.is_Integer, result
    return int(result)


def inputs(ir, b: int, s: int, s_dec: int, device: str = "meta"):
    ids = torch.randint(0, 100, (b, s), device="cpu").to(device)
    if ir.root.layout == "encoder-decoder":
        return (ids, torch.randint(0, 100, (b, s_dec)).to(device))
    return (ids,)


def scalar(out) -> torch.Tensor:
    """A scalar to call backward on: the pooled and hidden outputs together, or the logits."""
    if isinstance(out, tuple):
        return sum(o.float().sum() for o in out)
    if hasattr(out, "logits"):
        return out.logits.sum()
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state.sum() + out.pooler_output.sum()
    return out.sum()


def counted(model, args, backward: bool = True, **kwargs) -> tuple[int, int]:
    """FlopCounterMode's forward count, and forward + backward."""
    with FlopCounterMode(display=False) as counter:
        out = model(*args, **kwargs)
        forward = counter.get_total_flops()
        if backward:
            scalar(out).backward()
    return forward, counter.get_total_flops()


def generated(ir, device: str = "meta"):
    module = generated_module(ir)
    with torch.device(device):
        return module, module.Model()


# The executed convention against FlopCounterMode on the generated code.


# On the meta device a forward costs one Python dispatch per op: time grows with depth, not
# with size. The default suite checks each built-in at its full width and at most this many
# blocks per stack (every built-in's per-layer pattern fits within it: the longest, Gemma 3's
# window and position patterns, is six layers); `-m long` checks the full depth as well.
DEPTH = 6
DENSE = [n for n in builtin_names() if n not in MOE]
DEEP = [n for n in DENSE if load_spec(n).n_layers > DEPTH]


def check_generated_flops(name: str, depth: list[str] | None) -> None:
    """The model at full width and the given depth at one (B, S); more (B, S) on the same
    model cut to two blocks per stack, which checks the dependence on B and S at a fraction
    of the time."""
    for overrides, points in ((depth, POINTS[:1]), (["n_layers=2"], POINTS[1:])):
        ir = ir_of(name, overrides)
        f = flop_figures(ir, EXECUTED)
        _, model = generated(ir)
        for b, s, s_dec in points:
            forward, total = counted(model, inputs(ir, b, s, s_dec))
            vals = values(ir, b, s, s_dec)
            assert at(f.forward_matmul, vals) == forward, (name, overrides, b, s)
            assert at(f.train_step_matmul, vals) == total, (name, overrides, b, s)
            model.zero_grad(set_to_none=True)


@pytest.mark.parametrize("name", each_size(DENSE))
def test_executed_matches_flop_counter_on_generated_code(name: str) -> None:
    depth = min(load_spec(name).n_layers, DEPTH)
    check_generated_flops(name, [f"n_layers={depth}"])


@pytest.mark.long
@pytest.mark.parametrize("name", DEEP)
def test_executed_matches_flop_counter_at_full_depth(name: str) -> None:
    check_generated_flops(name, None)


def test_executed_matches_flop_counter_on_moe_at_small_size() -> None:
    """Mixtral's routing is data-dependent: real tensors on the CPU, at a small size. Every
    token reaches exactly top_k experts, so the expert matmuls are top_k × tokens rows
    whatever the router chooses."""
    small = ["d_model=64", "n_heads=4", "n_kv_heads=2", "d_ff=96", "n_layers=2", "vocab_size=100"]
    ir = ir_of("mixtral-8x7b", small)
    f = flop_figures(ir, EXECUTED)
    torch.manual_seed(0)
    _, model = generated(ir, "cpu")
    for b, s, _ in [(2, 32, 0), (1, 45, 0)]:
        with sdpa_kernel(SDPBackend.MATH):
            forward, total = counted(model, inputs(ir, b, s, s, "cpu"))
        vals = values(ir, b, s)
        assert at(f.forward_matmul, vals) == forward
        assert at(f.train_step_matmul, vals) == total


@pytest.mark.parametrize("name", ["gpt2", "llama-3-8b", "palm-8b", "bloom-560m"])
def test_decode_step_matches_flop_counter_with_kv_cache(name: str) -> None:
    ir = ir_of(name)
    f = flop_figures(ir, EXECUTED)
    module, model = generated(ir)
    b, s = 2, 50
    # Room for exactly the prompt and one step: the step attends to s + 1 keys.
    cache = [module.KVCache(s + 1) for _ in model.decoder.blocks]
    with torch.no_grad():
        model(torch.zeros(b, s, dtype=torch.long, device="meta"), cache=cache)
        with FlopCounterMode(display=False) as counter:
            model(torch.zeros(b, 1, dtype=torch.long, device="meta"), cache=cache)
    assert at(f.decode_matmul, values(ir, b, s, kv_len=s + 1)) == counter.get_total_flops()


# The executed convention against transformers' own models.


def test_bert_base_forward_is_the_published_flop_counter_figure() -> None:
    ir = ir_of("bert-base")
    f = flop_figures(ir, EXECUTED)
    assert at(f.forward_matmul, values(ir, 1, 128)) == 22_348_431_360
    model = build_meta("bert-base")
    with FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, 128, dtype=torch.long, device="meta"))
    assert counter.get_total_flops() == 22_348_431_360


HF_BACKWARD = {"bert-base", "gpt2", "t5-small", "bart-base", "llama-3-8b", "bloom-560m"}


@pytest.mark.parametrize("name", each_size([n for n in HF_CONFIGS if n not in MOE]))
def test_executed_matches_flop_counter_on_transformers(name: str) -> None:
    ir = ir_of(name)
    f = flop_figures(ir, EXECUTED)
    model = build_meta(name)
    if ir.root.layout == "encoder-decoder":
        # BART's SDPA mask helper calls .item(), which the meta device cannot answer.
        model.set_attn_implementation("eager")
    b, s, s_dec = 2, 96, 40
    args = inputs(ir, b, s, s_dec)
    kwargs = {"decoder_input_ids": args[1]} if len(args) == 2 else {}
    # Backward on the smallest of each family: it triples the time and adds no new shapes.
    backward = name in HF_BACKWARD
    forward, total = counted(model, args[:1], backward=backward, **kwargs)
    vals = values(ir, b, s, s_dec)
    assert at(f.forward_matmul, vals) == forward
    if backward:
        assert at(f.train_step_matmul, vals) == total


def test_executed_matches_flop_counter_on_transformers_mixtral_at_small_size() -> None:
    import transformers

    config = transformers.MixtralConfig(
        vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
        num_experts_per_tok=2, tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(config)
    # The default grouped_mm kernel is not one FlopCounterMode counts; the loop over experts is.
    model.set_experts_implementation("eager")
    small = ["d_model=64", "n_heads=4", "n_kv_heads=2", "d_ff=96", "n_layers=2", "vocab_size=100"]
    ir = ir_of("mixtral-8x7b", small)
    with sdpa_kernel(SDPBackend.MATH):
        forward, total = counted(model, (torch.randint(0, 100, (2, 32)),))
    f = flop_figures(ir, EXECUTED)
    assert at(f.forward_matmul, values(ir, 2, 32)) == forward
    assert at(f.train_step_matmul, values(ir, 2, 32)) == total


# Conventions.


def test_causal_counts_the_attended_pairs_only() -> None:
    ir = ir_of("gpt2")
    s = 1024
    vals = values(ir, 1, s)
    executed = flop_figures(ir, EXECUTED).components["attn_scores"][0]
    causal = flop_figures(ir, CONVENTIONS["causal"]).components["attn_scores"][0]
    assert at(causal, vals) * 2 * s == at(executed, vals) * (s + 1)
    # Everything but the attention core is the same.
    e, c = flop_figures(ir, EXECUTED), flop_figures(ir, CONVENTIONS["causal"])
    assert at(e.components["mlp"][0], vals) == at(c.components["mlp"][0], vals)
    # An encoder is not causal: nothing changes.
    bert = ir_of("bert-base")
    assert flop_figures(bert, EXECUTED).forward == flop_figures(bert, CONVENTIONS["causal"]).forward


def test_flash_attention_backward_recomputes_the_scores() -> None:
    """FlopCounterMode counts 5 bmms for a fused kernel's backward (it rebuilds QKᵀ)."""
    ir = ir_of("llama-2-7b")
    vals = values(ir, 1, 2048)
    eager = flop_figures(ir, EXECUTED, attn="eager")
    flash = flop_figures(ir, EXECUTED, attn="flash")
    qk = at(eager.components["attn_scores"][0], vals)
    assert at(flash.train_step_matmul, vals) == at(eager.train_step_matmul, vals) + qk
    full = flop_figures(ir, EXECUTED, recompute="full")
    blocks = at(eager.forward_matmul, vals) - at(eager.components["head"][0], vals)
    # torch's non-reentrant checkpoint stops before each block's down projection (replay.py;
    # tests/test_early_stop.py measures it with FlopCounterMode).
    spec = load_spec("llama-2-7b")
    down = 2 * 2048 * spec.d_model * spec.d_ff * spec.n_layers
    full_matmul = at(full.train_step_matmul, vals)
    assert full_matmul == at(eager.train_step_matmul, vals) + blocks - down
    # A preset is its paper's formula: the kernel and the recompute options do not change it.
    for name in ("kaplan", "chinchilla", "palm", "megatron"):
        conv = CONVENTIONS[name]
        plain = flop_figures(ir, conv).train_step
        assert flop_figures(ir, conv, attn="flash", recompute="selective").train_step == plain


def _kaplan_forward_per_token(d_model, n_layer, d_attn, d_ff, n_ctx) -> int:
    """Kaplan et al. 2020, Table 1: C_forward = 2N + 2 n_layer n_ctx d_attn, with
    N = 2 d_model n_layer (2 d_attn + d_ff)."""
    n = 2 * d_model * n_layer * (2 * d_attn + d_ff)
    return 2 * n + 2 * n_layer * n_ctx * d_attn


@pytest.mark.parametrize("name", ["gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-175b"])
def test_kaplan_reproduces_table_1(name: str) -> None:
    ir, spec = ir_of(name), load_spec(name)
    n_ctx = spec.max_seq_len
    d_attn = spec.n_heads * (spec.head_dim or spec.d_model // spec.n_heads)
    expected = _kaplan_forward_per_token(spec.d_model, spec.n_layers, d_attn, spec.d_ff, n_ctx)
    assert forward_flops_per_token(ir, n_ctx, "kaplan") == expected
    f = flop_figures(ir, CONVENTIONS["kaplan"])
    assert at(f.forward * 3, values(ir, 4, n_ctx)) == at(f.train_step, values(ir, 4, n_ctx))


# Chinchilla (Hoffmann et al. 2022): Table 4 gives Gopher 280B and Chinchilla 70B; both use a
# 32,000-token vocabulary, sequences of 2048 and ffw_size = 4 d_model.
CHINCHILLA_MODELS = {
    "chinchilla-70b": dict(n_layers=80, n_heads=64, head_dim=128, d_model=8192),
    "gopher-280b": dict(n_layers=80, n_heads=128, head_dim=128, d_model=16384),
}


def _chinchilla_forward(seq_len, vocab, d_model, n_layers, n_heads, key_size, ffw) -> int:
    """Appendix F, term by term, for one sequence."""
    embeddings = 2 * seq_len * vocab * d_model
    attention = (
        2 * 3 * seq_len * d_model * (key_size * n_heads)  # key, query and value projections
        + 2 * seq_len * seq_len * (key_size * n_heads)  # key @ query logits
        + 3 * n_heads * seq_len * seq_len  # softmax
        + 2 * seq_len * seq_len * (key_size * n_heads)  # softmax @ query reductions
        + 2 * seq_len * (key_size * n_heads) * d_model  # final linear
    )
    dense = 2 * seq_len * (d_model * ffw + d_model * ffw)
    logits = 2 * seq_len * d_model * vocab
    return embeddings + n_layers * (attention + dense) + logits


@pytest.mark.parametrize("model", list(CHINCHILLA_MODELS))
def test_chinchilla_reproduces_appendix_f(model: str) -> None:
    dims = CHINCHILLA_MODELS[model]
    d = dims["d_model"]
    overrides = [f"{k}={v}" for k, v in dims.items()]
    overrides += [f"d_ff={4 * d}", "vocab_size=32000", "max_seq_len=2048"]
    ir = ir_of("gpt2", overrides)
    forward = _chinchilla_forward(2048, 32000, d, dims["n_layers"], dims["n_heads"], 128, 4 * d)
    f = flop_figures(ir, CONVENTIONS["chinchilla"])
    b = 3
    assert at(f.forward, values(ir, b, 2048)) == b * forward
    assert at(f.train_step, values(ir, b, 2048)) == 3 * b * forward  # backward = 2 × forward


@pytest.mark.parametrize(
    "name, published", [("palm-8b", 8.63e9), ("palm-62b", 62.50e9), ("palm-540b", 540.35e9)]
)
def test_palm_reproduces_appendix_b(name: str, published: float) -> None:
    """6N + 12·L·H·Q·T training FLOPs per token, N every parameter (PaLM, Table 1 counts)."""
    ir, spec = ir_of(name), load_spec(name)
    n = ir.value(parameter_count(ir.root))
    assert abs(n - published) < 0.01e9  # the paper's own N, to the last digit it prints
    t = 2048
    expected = 6 * n + 12 * spec.n_layers * spec.n_heads * spec.head_dim * t
    assert train_flops_per_token(ir, t, "palm") == expected


# Narayanan et al. 2021, Table 1: (heads, hidden size, layers) of the GPT models, trained with a
# 51,200-token vocabulary on sequences of 2048.
MEGATRON_MODELS = [
    (24, 2304, 24), (32, 3072, 30), (32, 4096, 36), (48, 6144, 40), (64, 8192, 48),
    (80, 10240, 60), (96, 12288, 80), (128, 16384, 96), (128, 20480, 105), (160, 25600, 128),
]  # fmt: skip


@pytest.mark.parametrize("heads, h, layers", MEGATRON_MODELS)
def test_megatron_reproduces_equation_3(heads: int, h: int, layers: int) -> None:
    overrides = [f"d_model={h}", f"n_heads={heads}", f"n_layers={layers}", f"d_ff={4 * h}"]
    ir = ir_of("gpt2", [*overrides, "vocab_size=51200", "max_seq_len=2048"])
    s, v, batch = 2048, 51200, 512
    # F = 96 B s l h² (1 + s/6h + V/16lh), per iteration, with activation recomputation.
    expected = sp.Rational(96 * batch * s * layers * h * h) * (
        1 + sp.Rational(s, 6 * h) + sp.Rational(v, 16 * layers * h)
    )
    f = flop_figures(ir, CONVENTIONS["megatron"])
    assert at(f.train_step, values(ir, batch, s)) == expected


# Symbolic form, MoE and GQA.


def test_forward_of_llama_2_7b_is_a_quadratic_in_s() -> None:
    ir = ir_of("llama-2-7b")
    f = flop_figures(ir, EXECUTED)
    poly = sp.Poly(sp.expand(f.forward_matmul), S)
    assert poly.degree() == 2
    d, n_layers = (sp.Symbol(n, positive=True, integer=True) for n in ("d_model", "n_layers"))
    # QKᵀ and AV: 2 · 2 · B · S² · d_model per layer.
    assert sp.simplify(poly.coeff_monomial(S**2) - 4 * B * d * n_layers) == 0
    report = flops_report(ir, Workload(seq=4096), symbolic=True)
    assert "S**2" in report["symbolic"]["flops"]["forward"]


def test_moe_counts_top_k_experts_and_the_router() -> None:
    ir = ir_of("mixtral-8x7b")
    vals = values(ir, 1, 1000)
    f = flop_figures(ir, EXECUTED)
    active = ir.value(parameter_count(ir.root, active=True))
    router = at(f.components["router"][0], vals)
    assert router == 2 * 1000 * 32 * 4096 * 8
    mlp = at(f.components["mlp"][0], vals)
    assert mlp == 2 * 1000 * 32 * 2 * 3 * 4096 * 14336  # top-2 of 8 SwiGLU experts
    # The matmul FLOPs of the weights are 2 per active parameter per token, less the
    # embedding (a lookup).
    weights = sum(at(f.components[c][0], vals) for c in ("attn_proj", "router", "mlp", "head"))
    assert weights == 2 * 1000 * (active - 32000 * 4096 - 32 * 2 * 4096 - 4096)


def test_gqa_shrinks_the_key_value_projections() -> None:
    vals_of = lambda ir: values(ir, 1, 512)  # noqa: E731
    mha, gqa = ir_of("llama-2-70b", ["n_kv_heads=64"]), ir_of("llama-2-70b")
    proj = lambda ir: at(flop_figures(ir, EXECUTED).components["attn_proj"][0], vals_of(ir))  # noqa: E731
    # q and o are 8192 × 8192; k and v shrink from 8192 to 8 heads × 128.
    per_token_layer = lambda kv: 2 * (2 * 8192 * 8192 + 2 * 8192 * kv)  # noqa: E731
    assert proj(mha) == 512 * 80 * per_token_layer(8192)
    assert proj(gqa) == 512 * 80 * per_token_layer(1024)


def test_cross_attention_uses_encoder_length_for_keys() -> None:
    ir = ir_of("t5-small")
    f = flop_figures(ir, EXECUTED)
    scores = f.components["attn_scores"][0]
    # Encoder self: S², decoder self: S_dec², cross: S_dec · S; 2·h·d_kv per pair, 6 layers.
    expected = 2 * B * 8 * 64 * 6 * (S**2 + S_DEC**2 + S_DEC * S)
    assert sp.expand(scores.xreplace({k: v for k, v in ir.env.items()}) - expected) == 0
    # A decode step attends over kv_len cached positions and the S encoder positions.
    decode = flop_figures(ir, EXECUTED).decode_matmul
    assert decode is not None and {KV_LEN, S} <= decode.free_symbols


def test_public_helpers() -> None:
    gpt2 = ir_of("gpt2")
    assert decode_flops(ir_of("bert-base"), 128) is None
    per_token = forward_flops_per_token(gpt2, 1024)
    assert math.isclose(per_token, 2 * 124e6, rel_tol=0.3)
    assert decode_flops(gpt2, 1024) == per_token  # dense attention over the same keys


# The command.

runner = CliRunner()


def test_count_shows_parameters_flops_and_memory() -> None:
    result = runner.invoke(app, ["count", "llama-2-7b", "--seq", "4096", "--dtype", "bf16"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "6,738,415,616 parameters" in out
    assert "FLOPs at B=1, S=4096" in out and "train step" in out
    assert "memory per device" in out and "KV cache" in out
    assert out.count("executed") >= 10  # the convention beside every figure


def test_count_json_has_flops_and_memory() -> None:
    args = ["count", "gpt2", "--seq", "1024", "--batch", "8", "--attn", "eager", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    flops_keys = {"convention", "forward", "forward_matmul", "forward_per_token", "backward"}
    assert flops_keys | {"train_step", "train_step_matmul"} <= set(data["flops"])
    memory_keys = {"weights", "gradients", "optimizer", "activations", "kv_cache", "total"}
    assert memory_keys <= set(data["memory"])
    assert all(isinstance(data["memory"][k], int) for k in memory_keys)
    assert data["flops"]["convention"] == "executed"
    # The math kernel recomputes nothing: backward = 2 × the training forward, which is the
    # inference forward plus GPT-2's dropout (2 FLOPs per dropped element).
    flops = data["flops"]
    assert flops["train_step"] == 3 * (flops["forward"] + flops["dropout"])
    assert flops["dropout"] > 0
    assert data["params"]["total"] == 124_439_808  # the parameter report is unchanged


def test_count_without_workload_options_is_parameters_only() -> None:
    result = runner.invoke(app, ["count", "gpt2", "--json"])
    data = json.loads(result.output)
    assert "flops" not in data and "memory" not in data


@pytest.mark.parametrize(
    "args",
    [
        ["--convention", "nope"],
        ["--dtype", "fp4"],
        ["--gpus", "6", "--tp", "4"],
        ["--zero", "4"],
        ["--seq", "0"],
        ["--dec-seq", "64"],  # gpt2 has no decoder of its own length
    ],
)
def test_count_rejects_bad_workload_options(args: list[str]) -> None:
    result = runner.invoke(app, ["count", "gpt2", *args])
    assert result.exit_code == 2, result.output


def test_count_symbolic_prints_formulas() -> None:
    result = runner.invoke(app, ["count", "llama-2-7b", "--seq", "4096", "--symbolic", "--json"])
    data = json.loads(result.output)
    assert "S**2" in data["symbolic"]["flops"]["forward"]
    assert "total" in data["symbolic"]  # the parameter formulas stay
    assert "kv_len" in data["symbolic"]["memory"]["kv_cache"]
