"""gpt-oss's mixture-of-experts pieces as spec features any spec can use, against
transformers' own classes (models/gpt_oss/modeling_gpt_oss.py): the `topk_softmax` router
(GptOssTopKRouter: the top_k logits, then a softmax over them in their dtype), biases on
every expert's projections (`moe.expert_bias`: gate_up_proj_bias, down_proj_bias) and the
experts' clamped SwiGLU (`moe.swiglu_limit`, `moe.swiglu_alpha`: GptOssExperts._apply_gate).

The generated MoE layer runs as transformers' GptOssMLP with the same weights, mapped from
transformers' interleaved, transposed gate_up_proj (x @ gate_up_proj[e]: gate the even
columns, up the odd) onto archspec's stacked (n_experts, out, in) gate and up. The counts
are checked on the generated model: parameters, FLOPs against FlopCounterMode, the bytes
autograd keeps against saved_tensors_hooks, and the printer against print(model).
"""

from __future__ import annotations

import weakref
from pathlib import Path

import pytest
import sympy as sp
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from archspec import build_ir, kinds, load_spec
from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import B, S, flop_figures
from archspec.backends.count.memory import activation_bytes
from archspec.backends.count.params import parameter_count
from archspec.backends.printer import module_repr
from archspec.errors import SpecError
from archspec.kinds.routers import Routing
from archspec.runtime.experts import clamped_swiglu
from archspec.runtime.routing import topk_softmax_route
from tests.test_memory import saved_bytes
from tests.tiny import built_model, tiny_sizes

transformers = pytest.importorskip("transformers")
from transformers.models.gpt_oss.modeling_gpt_oss import (  # noqa: E402
    GptOssExperts,
    GptOssMLP,
    GptOssTopKRouter,
)

D, F_EXPERT, E, K = 32, 24, 8, 2
GPT_OSS_MOE = [
    "moe.router=topk_softmax",
    "moe.router_bias=true",
    "moe.expert_bias=true",
    "moe.swiglu_limit=7.0",
    "moe.swiglu_alpha=1.702",
    f"moe.n_experts={E}",
    f"moe.top_k={K}",
    f"moe.d_ff={F_EXPERT}",
]
SIZES = tiny_sizes("n_kv_heads=2", *GPT_OSS_MOE, d_model=D)


def gpt_oss_config():
    return transformers.GptOssConfig(
        hidden_size=D,
        intermediate_size=F_EXPERT,
        num_local_experts=E,
        num_experts_per_tok=K,
        swiglu_limit=7.0,
        swiglu_alpha=1.702,
    )


def spec_ir(*more: str):
    return build_ir(load_spec("mixtral-8x7b", [*SIZES, *more]))


# --- The router alone -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_topk_softmax_route_chooses_and_weighs_as_transformers(dtype: torch.dtype) -> None:
    theirs = GptOssTopKRouter(gpt_oss_config()).to(dtype)
    ours = torch.nn.Linear(D, E, dtype=dtype)
    torch.manual_seed(0)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours.load_state_dict(theirs.state_dict())  # the same names: weight, bias
    x = torch.randn(64, D, dtype=dtype)
    _, scores, indices = theirs(x)
    weights, chosen = topk_softmax_route(ours(x), K, 1.0)
    assert torch.equal(chosen, indices) and torch.equal(weights, scores)
    assert weights.dtype == dtype  # not float32, as the softmax router's
    assert len(chosen.unique()) == E


def test_the_routing_keeps_for_backward_what_its_kind_says() -> None:
    n, e, k = 12, 8, 3
    logits = torch.randn(n, e, requires_grad=True)
    saved: list[weakref.ref] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        weights, chosen = topk_softmax_route(logits, k, 2.5)
    del chosen
    alive = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
             for t in (ref() for ref in saved) if t is not None}  # fmt: skip
    routing = Routing(n, e, k, False, 2.5, 1, 1, compute=4)
    assert sum(alive.values()) == kinds.router("topk_softmax").kept_bytes(routing)
    weights.sum().backward()
    assert logits.grad is not None


# --- The clamped SwiGLU ---------------------------------------------------------------------


def test_clamped_swiglu_is_transformers_apply_gate() -> None:
    experts = GptOssExperts(gpt_oss_config())
    gate_up = torch.randn(40, 2 * F_EXPERT) * 8  # many beyond the limit of 7
    theirs = experts._apply_gate(gate_up)
    ours = clamped_swiglu(gate_up[..., ::2], gate_up[..., 1::2], 7.0, 1.702)
    assert torch.equal(ours, theirs)
    assert (gate_up.abs() > 7).any()


# --- The generated layer against GptOssMLP --------------------------------------------------


def _copy_gpt_oss_into(moe, theirs) -> None:
    """transformers' weights into the generated MoE: x @ gate_up_proj[e] + its bias, gate
    the even columns, up the odd; x @ down_proj[e] + down_proj_bias."""
    experts = theirs.experts
    with torch.no_grad():
        moe.router.weight.copy_(theirs.router.weight)
        moe.router.bias.copy_(theirs.router.bias)
        moe.experts.gate.copy_(experts.gate_up_proj[..., ::2].transpose(1, 2))
        moe.experts.up.copy_(experts.gate_up_proj[..., 1::2].transpose(1, 2))
        moe.experts.gate_bias.copy_(experts.gate_up_proj_bias[..., ::2])
        moe.experts.up_bias.copy_(experts.gate_up_proj_bias[..., 1::2])
        moe.experts.down.copy_(experts.down_proj.transpose(1, 2))
        moe.experts.down_bias.copy_(experts.down_proj_bias)


def test_generated_moe_layer_equals_gpt_oss_mlp(tmp_path: Path) -> None:
    model = built_model(spec_ir(), folder=tmp_path)
    moe = model.decoder.blocks[0].moe
    config = gpt_oss_config()
    config._experts_implementation = "eager"  # transformers' loop over the experts
    theirs = GptOssMLP(config)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, 0.5)
    _copy_gpt_oss_into(moe, theirs)
    x = torch.randn(2, 24, D) * 2
    ours_x, theirs_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    want, _ = theirs(theirs_x)
    got = moe(ours_x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # and trains alike: the gradients of the input, the router and the experts
    grad = torch.randn_like(got)
    got.backward(grad)
    want.backward(grad)
    torch.testing.assert_close(ours_x.grad, theirs_x.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(moe.router.bias.grad, theirs.router.bias.grad)
    gate_up = theirs.experts.gate_up_proj.grad
    torch.testing.assert_close(moe.experts.up.grad, gate_up[..., 1::2].transpose(1, 2))
    torch.testing.assert_close(moe.experts.down_bias.grad, theirs.experts.down_proj_bias.grad)
    with torch.no_grad():
        logits = moe.router(x.flatten(0, 1))
        gate = F.linear(x.flatten(0, 1), moe.experts.gate[0], moe.experts.gate_bias[0])
    assert len(logits.topk(K, dim=-1).indices.unique()) == E  # every expert in use
    assert (gate > 7).any() and (gate < 7).any()  # the limit bites


def test_expert_biases_are_parameters_the_count_includes(tmp_path: Path) -> None:
    ir = spec_ir()
    model = built_model(ir, folder=tmp_path)
    names = dict(model.decoder.blocks[0].moe.experts.named_parameters())
    shapes = {name: tuple(p.shape) for name, p in names.items() if name.endswith("_bias")}
    assert shapes == {"gate_bias": (E, F_EXPERT), "up_bias": (E, F_EXPERT), "down_bias": (E, D)}
    assert parameter_count(ir.root).xreplace(ir.env) == sum(p.numel() for p in model.parameters())
    plain = spec_ir("moe.expert_bias=false")
    more = parameter_count(ir.root).xreplace(ir.env) - parameter_count(plain.root).xreplace(ir.env)
    assert more == 2 * E * (2 * F_EXPERT + D)  # two layers of biases


@pytest.mark.parametrize("b, s", [(2, 16), (1, 12)])
def test_forward_flops_equal_flop_counter(b: int, s: int, tmp_path: Path) -> None:
    ir = spec_ir()
    model = built_model(ir, folder=tmp_path)
    ids = torch.randint(0, 64, (b, s))
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(ids)
    figures = flop_figures(ir, CONVENTIONS["executed"])
    expected = sp.sympify(figures.forward_matmul).xreplace({**ir.env, B: b, S: s})
    assert int(expected) == counter.get_total_flops()


@pytest.mark.parametrize("more", [[], ["moe.routed_scale=2.5"]])
def test_activations_equal_saved_tensors(more: list[str], tmp_path: Path) -> None:
    ir = spec_ir(*more)
    model = built_model(ir, folder=tmp_path)
    for b, s in [(2, 16), (1, 12)]:
        # the targets a tensor of their own, as in training (the next tokens): the loss
        # keeps them beside the ids the embedding keeps
        ids, targets = torch.randint(0, 64, (b, s)), torch.randint(0, 64, (b, s))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            measured = saved_bytes(
                model,
                (ids,),
                lambda out, t=targets: F.cross_entropy(out.flatten(0, 1), t.flatten()),
            )
        predicted = activation_bytes(ir, 4, "flash", device="cpu").xreplace({**ir.env, B: b, S: s})
        assert int(predicted) == measured


def test_clamping_keeps_what_the_counter_says(tmp_path: Path) -> None:
    """The clamped SwiGLU against the spec's plain SwiGLU: the difference in what autograd
    keeps is the counter's (six tensors of hidden units per routed row against SwiGLU's
    three: gate, act(gate) and up)."""
    ir, plain = spec_ir(), spec_ir("moe.swiglu_limit=null", "moe.swiglu_alpha=null")
    ids = torch.randint(0, 64, (2, 16))

    def measured(ir) -> int:
        model = built_model(ir)  # a fresh temporary folder each
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return saved_bytes(model, (ids,), lambda out: out.float().sum())

    def predicted(ir) -> int:
        bytes_ = activation_bytes(ir, 4, "flash", device="cpu")
        return int(bytes_.xreplace({**ir.env, B: 2, S: 16}))

    assert measured(ir) - measured(plain) == predicted(ir) - predicted(plain) > 0


def test_bfloat16_routing_weights_are_counted_in_bfloat16() -> None:
    """In bf16 the topk_softmax router's weights are bf16 (the softmax's kept output and
    their gathered copy the experts' outputs are scaled by), the softmax router's fp32: the
    difference between the two routers is what the counter says it is."""
    ids, targets = torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))

    def measured(ir) -> int:
        model = built_model(ir).to(torch.bfloat16)
        with sdpa_kernel(SDPBackend.MATH):
            return saved_bytes(
                model, (ids,), lambda out: F.cross_entropy(out.flatten(0, 1), targets.flatten())
            )

    def predicted(ir) -> int:
        bytes_ = activation_bytes(ir, 2, "eager", device="cpu")
        return int(bytes_.xreplace({**ir.env, B: 2, S: 16}))

    ours, softmax = spec_ir(), spec_ir("moe.router=softmax")
    assert measured(softmax) - measured(ours) == predicted(softmax) - predicted(ours) > 0


def test_printer_equals_print_of_the_generated_model(tmp_path: Path) -> None:
    from tests.tiny import generated_module

    ir = spec_ir()
    module = generated_module(ir, folder=tmp_path)
    with torch.device("meta"):
        model = module.Model()
    assert module_repr(ir) == repr(model)


def test_dense_and_shared_mlps_keep_the_spec_activation(tmp_path: Path) -> None:
    """moe.swiglu_* change the routed experts only: a dense layer's MLP and a shared expert
    keep mlp.activation's plain SwiGLU, and train (backward reaches every parameter)."""
    ir = spec_ir("n_layers=3", "moe.dense_layers=1", "moe.shared_d_ff=16")
    from archspec.backends.torchgen import generate_source

    source = generate_source(ir)
    assert source.count("clamped_swiglu(") == 2  # its definition and the experts' call
    assert "F.silu(" in source
    model = built_model(ir, folder=tmp_path)
    ids = torch.randint(0, 64, (2, 16))
    F.cross_entropy(model(ids).flatten(0, 1), ids.flatten()).backward()
    assert all(p.grad is not None for p in model.parameters())


# --- Refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, field, words",
    [
        (["moe.swiglu_alpha=null"], "moe.swiglu_limit", "set moe.swiglu_alpha"),
        (["moe.swiglu_limit=null"], "moe.swiglu_alpha", "set moe.swiglu_limit"),
        (["mlp.gated=false", "mlp.activation=gelu"], "moe.swiglu_limit", "set mlp.gated"),
        (["moe.groups=2", "moe.top_groups=1"], "moe.groups", "needs router softmax or sigmoid"),
        (["moe.swiglu_limit=0"], "moe.swiglu_limit", "positive|greater"),
        (["moe.swiglu_alpha=-1.0"], "moe.swiglu_alpha", "positive|greater"),
    ],
)
def test_invalid_combinations_are_refused(overrides: list[str], field: str, words: str) -> None:
    with pytest.raises(SpecError, match=words) as err:
        load_spec("mixtral-8x7b", [*SIZES, *overrides])
    assert field in str(err.value)


def test_normalize_does_not_apply_to_topk_softmax() -> None:
    """The k weights sum to 1 as they are: moe.normalize changes nothing."""
    source = {}
    for normalize in ("true", "false"):
        from archspec.backends.torchgen import generate_source

        source[normalize] = generate_source(spec_ir(f"moe.normalize={normalize}"))
    assert source["true"] == source["false"]


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_training_step_peak(recompute: str) -> None:
    """The peak of a training step (tests/test_train_peak.py's measure) is count's: in the
    backward of the experts' clamped SwiGLU, whose last product peaks as a gated MLP's."""
    from archspec.backends.count.flops import S_DEC
    from archspec.backends.count.memory import memory_figures
    from archspec.backends.count.step_peak import step_peak
    from tests.test_train_peak import SMALL, measured_peak

    ir = build_ir(load_spec("mixtral-8x7b", [*SMALL, "n_kv_heads=2", *GPT_OSS_MOE[:5]]))
    measured = measured_peak(ir, "fused", 4, 64, recompute)
    figures = memory_figures(ir, "fp32", "adamw", recompute, attn="flash")
    predicted, moment = step_peak(ir, figures, "fused").at({**ir.env, B: 4, S: 64, S_DEC: 64})
    assert measured == pytest.approx(predicted, rel=0.0025), (moment, measured, predicted)


# --- transformers' layout of the experts ----------------------------------------------------


def test_interleaved_experts_rules_hold_gpt_oss_experts() -> None:
    """The tensor rules' stacked experts, interleaved and transposed, build transformers'
    gate_up_proj (each expert's (in, 2·out) with gate the even columns, up the odd), its bias
    and the transposed down_proj from archspec's per-expert tensors, and split them back: loaded
    into GptOssExperts, the experts compute what archspec's grouped ones do."""
    from archspec.hf.tensor_rules import TensorRule
    from archspec.runtime.experts import grouped_linear

    gen = torch.Generator().manual_seed(3)

    def each(*shape):
        return [torch.randn(*shape, generator=gen) for _ in range(E)]

    gate, up, down = each(F_EXPERT, D), each(F_EXPERT, D), each(D, F_EXPERT)
    gate_b, up_b, down_b = each(F_EXPERT), each(F_EXPERT), each(D)
    pairs = [t for e in range(E) for t in (gate[e], up[e])]
    bias_pairs = [t for e in range(E) for t in (gate_b[e], up_b[e])]

    def rule(tensors: list, group: int) -> TensorRule:
        names = tuple(f"t{i}" for i in range(len(tensors)))
        shapes = tuple(tuple(t.shape) for t in tensors)
        return TensorRule("x", names, shapes, "experts", group=group, interleaved=group > 1,
                          transposed=True)  # fmt: skip

    rules = {
        "gate_up_proj": (rule(pairs, 2), pairs),
        "gate_up_proj_bias": (rule(bias_pairs, 2), bias_pairs),
        "down_proj": (rule(down, 1), down),
        "down_proj_bias": (rule(down_b, 1), down_b),
    }
    theirs = GptOssExperts(gpt_oss_config())
    with torch.no_grad():
        for name, (r, tensors) in rules.items():
            joined = r.join(tensors)
            assert joined.shape == getattr(theirs, name).shape == r.hf_shape()
            getattr(theirs, name).copy_(joined)
            assert all(torch.equal(a, b) for a, b in zip(r.split(joined), tensors, strict=True))
    assert torch.equal(theirs.gate_up_proj[3][:, ::2], gate[3].t())
    assert torch.equal(theirs.gate_up_proj_bias[3][1::2], up_b[3])
    # transformers' forward against the grouped experts on the same weights
    tokens = torch.randn(10, D, generator=gen)
    chosen = torch.randint(0, E, (10, 1), generator=gen)
    with torch.no_grad():
        want = theirs(tokens, chosen, torch.ones(10, 1))
        counts = torch.bincount(chosen.flatten(), minlength=E)
        order = chosen.flatten().argsort(stable=True)
        x = tokens[order]
        h = clamped_swiglu(
            grouped_linear(x, torch.stack(gate), counts, torch.stack(gate_b)),
            grouped_linear(x, torch.stack(up), counts, torch.stack(up_b)),
            7.0,
            1.702,
        )
        got = torch.empty_like(tokens)
        got[order] = grouped_linear(h, torch.stack(down), counts, torch.stack(down_b))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
