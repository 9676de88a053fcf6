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

TOKENS = 1000
D, TOP_K, EXPERT_FF = 2048, 8, 768  # Qwen3-30B-A3B's width, routing and expert width
BF16, FP32 = 2, 4


def _kept(recompute: str, fp8: bool = False) -> float:
    ir = build_ir(resolve_spec("qwen3-30b-a3b", []))
    values = {**ir.env, **whole_sequences(TOKENS), B: 1}
    parts = activation_parts(ir, BF16, "flash", recompute,
                             counter_class=transformer_engine_counter(fp8=fp8))  # fmt: skip
    ((_, each),) = parts.layers
    return float(sp.sympify(each).xreplace(values))


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
    input norm); moe_act: the experts' activation and gated product; a dense Llama: none."""
    tagged = {}
    for name in ("qwen3-30b-a3b", "deepseek-v2-lite", "llama-2-7b"):
        costs = pass_costs(build_ir(resolve_spec(name, [])), BF16, "flash")
        tagged[name] = [[(c.label, c.recompute_module) for c in block if c.recompute_module]
                        for _, block in costs.layers]  # fmt: skip
    moe = [("normop", "layernorm"), ("activationop", "moe_act"), ("mul", "moe_act")]
    assert tagged["qwen3-30b-a3b"] == [moe]
    assert tagged["deepseek-v2-lite"] == [[("normop", "layernorm")],
                                          [("normop", "layernorm"), *moe]]  # fmt: skip
    assert tagged["llama-2-7b"] == [[]]


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
        (["--recompute-modules", "mlp"], "mlp: not modelled"),
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


def test_selective_names_an_unknown_module() -> None:
    with pytest.raises(SpecError, match="not a module"):
        selective(["core_atn"])
