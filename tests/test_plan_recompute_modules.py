"""Megatron-Core's selective recomputation by module (`--recompute-modules`,
recompute_modules.py): what each module frees, read off Megatron-Core's checkpoints and
Transformer Engine's saved tensors (te_activations.py's docstring), and how plan takes it."""

from __future__ import annotations

import json

import pytest
import sympy as sp
from typer.testing import CliRunner

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.passes import B, whole_sequences
from archspec.backends.count.recompute_modules import selective, selective_modules
from archspec.backends.count.te_activations import transformer_engine_counter
from archspec.cli import app
from archspec.cli.common import resolve_spec
from archspec.errors import SpecError
from archspec.ir.build import build_ir
from archspec.plan.opcost import pass_costs
from tests.hf_reference import DEEPSEEK_V3

TOKENS = 1000
D, TOP_K, EXPERT_FF = 2048, 8, 768  # Qwen3-30B-A3B's width, routing and expert width
BF16, FP32 = 2, 4


def _layers(recompute: str, fp8: bool = False, model: str = "qwen3-30b-a3b") -> list[float]:
    """Bytes one layer of each run of layers keeps for its backward (TE's layers)."""
    ir = build_ir(resolve_spec(model, []))
    values = {**ir.env, **whole_sequences(TOKENS), B: 1}
    parts = activation_parts(ir, BF16, "flash", recompute,
                             counter_class=transformer_engine_counter(fp8=fp8))  # fmt: skip
    return [float(sp.sympify(each).xreplace(values)) for _, each in parts.layers]


def _kept(recompute: str, fp8: bool = False) -> float:
    (each,) = _layers(recompute, fp8)
    return each


def test_layernorm_frees_the_moe_norms_output_and_statistics() -> None:
    """A MoE layer's pre-MLP norm stands apart from any projection under Transformer Engine's
    layer spec; CheckpointWithoutOutput keeps its input, and neither the fp32 1/rms per token
    nor the normalised output the router keeps stays."""
    freed = _kept("none") - _kept(selective(["layernorm"]))
    assert freed == TOKENS * (D * BF16 + FP32)


def test_moe_act_frees_the_fused_products_output() -> None:
    """The experts' fused SwiGLU keeps its input (the first projection's output); its output,
    the second projection's input, is freed: top_k rows of the expert width per token."""
    freed = _kept("none") - _kept(selective(["moe_act"]))
    assert freed == TOKENS * TOP_K * EXPERT_FF * BF16
    both = _kept("none") - _kept(selective(["moe_act", "layernorm"]))
    assert both == TOKENS * (D * BF16 + FP32 + TOP_K * EXPERT_FF * BF16)


def test_under_fp8_the_second_projection_keeps_its_own_quantized_copy() -> None:
    assert _kept("none", fp8=True) == _kept(selective(["moe_act"]), fp8=True)


def test_the_attention_core_alone_is_selective() -> None:
    assert selective(["core_attn"]) == "selective"
    assert selective_modules("selective") == {"core_attn"}
    assert selective(["moe_act", "core_attn"]) == "selective:core_attn,moe_act"
    assert selective_modules("full") == frozenset()


def test_pytorch_layers_are_not_counted_with_output_discarding() -> None:
    ir = build_ir(resolve_spec("qwen3-30b-a3b", []))
    with pytest.raises(ValueError, match="Transformer Engine"):
        activation_parts(ir, BF16, "flash", selective(["layernorm"]))


def test_the_ops_each_module_replays() -> None:
    """layernorm: the norms apart from a projection (a MoE layer's, a latent attention's
    input norm); moe_act: the experts' activation and gated product; mla_up_proj: the latent
    norms, up projections, rotations and the heads put together; mlp: a dense layer's MLP,
    its fused norm included; a dense Llama: only mlp."""
    tagged = {}
    for name in ("qwen3-30b-a3b", "deepseek-v2-lite", "llama-2-7b"):
        costs = pass_costs(build_ir(resolve_spec(name, [])), BF16, "flash")
        tagged[name] = [[(c.label, c.recompute_module) for c in block if c.recompute_module]
                        for _, block in costs.layers]  # fmt: skip
    moe = [("normop", "layernorm"), ("activationop", "moe_act"), ("mul", "moe_act")]
    # V2-Lite has no query latent: its query projection reads the normalised input.
    up = [("attn_proj.linear", "mla_up_proj"), ("rope", "mla_up_proj"),
          ("concat", "mla_up_proj"), ("normop", "mla_up_proj"), ("rope", "mla_up_proj"),
          ("attn_proj.linear", "mla_up_proj"), ("concat", "mla_up_proj")]  # fmt: skip
    mlp = [("normop", "mlp"), ("mlp.linear", "mlp"), ("activationop", "mlp"),
           ("mlp.linear", "mlp"), ("mul", "mlp"), ("mlp.linear", "mlp")]  # fmt: skip
    assert tagged["qwen3-30b-a3b"] == [moe]
    assert tagged["deepseek-v2-lite"] == [[("normop", "layernorm"), *up, *mlp],
                                          [("normop", "layernorm"), *up, *moe]]  # fmt: skip
    assert tagged["llama-2-7b"] == [mlp]


def _deepseek_v3(recompute: str, fp8: bool = False) -> list[float]:
    """A dense and a MoE layer of DeepSeek-V3."""
    return _layers(recompute, fp8, "deepseek-v3")


@pytest.mark.parametrize("fp8", [False, True])
def test_mla_up_proj_frees_the_heads_and_the_normalised_latents(fp8: bool) -> None:
    """The checkpoint keeps the two latents before their norms (which the norms keep anyway)
    and frees what it covers: the queries, keys and values the core kept (heads of 192, 192
    and 128: the values a contiguous copy, as Megatron-Core makes them), the normalised
    latents the up projections kept (one byte an element under fp8: TE's copies) and the
    two norms' fp32 statistics. The same in the dense and the MoE layers."""
    c = DEEPSEEK_V3
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    heads = c["num_attention_heads"] * (2 * qk + c["v_head_dim"]) * BF16
    latents = (c["q_lora_rank"] + c["kv_lora_rank"]) * (1 if fp8 else BF16)
    freed = [
        a - b
        for a, b in zip(
            _deepseek_v3("none", fp8), _deepseek_v3(selective(["mla_up_proj"]), fp8), strict=True
        )
    ]
    assert freed == [TOKENS * (heads + latents + 2 * FP32)] * 2


@pytest.mark.parametrize("fp8", [False, True])
def test_mlp_keeps_only_the_dense_mlps_input(fp8: bool) -> None:
    """A dense layer's MLP under a normal checkpoint keeps its input (the residual stream)
    where it kept that, the norm's statistics, the normalised input (TE's fused norm and
    first projection), the gate and up outputs (the fused SwiGLU's input) and the product
    (the second projection's input; quantized copies under fp8). A MoE layer is untouched."""
    c = DEEPSEEK_V3
    d, ff, q = c["hidden_size"], c["intermediate_size"], 1 if fp8 else BF16
    none, mlp = _deepseek_v3("none", fp8), _deepseek_v3(selective(["mlp"]), fp8)
    assert none[0] - mlp[0] == TOKENS * (FP32 + d * q + 2 * ff * BF16 + ff * q)
    assert none[1] == mlp[1]


PLAN = ["plan", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "1024",
        "--seq", "4096", "--engine", "nemo", "--ep", "16", "--zero", "1", "--json"]  # fmt: skip


def _plan(*extra: str) -> dict:
    result = CliRunner().invoke(app, [*PLAN, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_plan_replays_the_modules_forward_and_holds_less() -> None:
    none = _plan("--recompute", "none")
    both = _plan("--recompute", "selective", "--recompute-modules", "layernorm,moe_act")
    assert both["layout"]["recompute"] == "selective:layernorm,moe_act"
    assert none["breakdown"]["recompute"] == 0 < both["breakdown"]["recompute"]
    assert both["step_time_s"] > none["step_time_s"]
    assert both["memory"]["activations"] < none["memory"]["activations"]
    assert both["hfu"] > both["mfu"] == pytest.approx(none["mfu"] * none["step_time_s"]
                                                      / both["step_time_s"])  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--recompute", "full", "--recompute-modules", "moe_act"], "--recompute full"),
        (["--recompute-modules", "moe"], "moe: not modelled"),
        (["--recompute-modules", "layer_norm"], "layer_norm: not a module"),
        (["--recompute-modules", "moe_act", "--engine", "megatron"], "--engine megatron"),
        (["--recompute", "selective:moe_act"], "--recompute takes one of"),
    ],
)
def test_what_cannot_be_timed_is_refused(extra: list[str], message: str) -> None:
    args = [a for a in PLAN if a not in ("--engine", "nemo")] if "--engine" in extra else PLAN
    result = CliRunner().invoke(app, [*args, *extra])
    assert result.exit_code == 2
    assert message in result.output


def test_plan_times_latent_attentions_modules() -> None:
    """NeMo's DeepSeek presets recompute mla_up_proj and mlp: each replays more and holds
    less than the attention core alone."""
    args = ["plan", "deepseek-v2-lite", "--gpu", "h100-sxm", "--gpus", "8", "--global-batch",
            "64", "--seq", "4096", "--engine", "nemo", "--ep", "8", "--json"]  # fmt: skip
    runs = {}
    for modules in ("core_attn", "mla_up_proj", "mla_up_proj,mlp"):
        result = CliRunner().invoke(app, [*args, "--recompute-modules", modules])
        assert result.exit_code == 0, result.output
        runs[modules] = json.loads(result.stdout)
    base, up, both = runs["core_attn"], runs["mla_up_proj"], runs["mla_up_proj,mlp"]
    assert up["layout"]["recompute"] == "selective:mla_up_proj"
    assert base["breakdown"]["recompute"] < up["breakdown"]["recompute"]
    assert up["breakdown"]["recompute"] < both["breakdown"]["recompute"]
    assert both["memory"]["activations"] < up["memory"]["activations"]


def test_mla_up_proj_needs_latent_attention() -> None:
    result = CliRunner().invoke(app, [*PLAN, "--recompute-modules", "mla_up_proj"])
    assert result.exit_code == 2
    assert "no latent attention" in result.output


def test_selective_names_an_unknown_module() -> None:
    with pytest.raises(SpecError, match="not a module"):
        selective(["core_atn"])
