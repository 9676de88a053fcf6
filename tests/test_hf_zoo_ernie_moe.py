"""ERNIE 4.5 MoE (`ernie4_5_moe`) and its router (`moe.router: softmax_bias`, transformers'
Ernie4_5_MoeTopKRouter) against transformers' own classes (tests/zoo_check.py says what the
zoo checks measure).

transformers holds each MoE layer's e_score_correction_bias as a frozen parameter (one row of
experts); archspec keeps it as a buffer and counts the trainable parameters, so the totals
below are transformers' less those rows. The tiny models' corrections are drawn (transformers
starts them at zero, where choosing by the biased probabilities would go unseen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

transformers = pytest.importorskip("transformers")

# fmt: off
# baidu/ERNIE-4.5-21B-A3B-PT (huggingface.co/baidu/ERNIE-4.5-21B-A3B-PT/blob/main/config.json).
# Sources for its sizes, found by exact-string search of public code (repositories not named
# by the index): a MindIE (atb_llm) unit test's FAKE_CONFIG_DICT for its ERNIE-MoE model
# (hidden 2560, intermediate 12288, 28 layers, 20 heads, 4 kv heads, 64 experts, top-6
# (moe_k), 2 shared experts, moe_intermediate_size 1536, moe_layer_start_index 1,
# moe_layer_end_index 27, moe_layer_interval 1, vocab 103424, max positions 131072,
# rms_norm_eps 1e-05, rope_theta 500000.0) and an LLM memory calculator's test fixture
# ERNIE_45_21B_A3B (the same sizes, head_dim 128, tie_word_embeddings true, "21.8B in all");
# transformers' Ernie4_5_MoeConfig, documented for this checkpoint, has them all as its
# defaults; model pages (apxml.com/models/ernie-45-21b-a3b-base: hidden 2560, 28 layers, 20
# heads, 4 KV heads, 64 experts, 6 active; the model card: 21B total, 3B activated). The
# count below is 21,825,436,160 trainable (and 27 x 64 = 1,728 frozen corrections).
ERNIE_45_21B_A3B = {
    "architectures": ["Ernie4_5_MoeForCausalLM"], "model_type": "ernie4_5_moe",
    "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 12288,
    "max_position_embeddings": 131072, "moe_intermediate_size": 1536, "moe_k": 6,
    "moe_layer_end_index": 27, "moe_layer_interval": 1, "moe_layer_start_index": 1,
    "moe_num_experts": 64, "moe_num_shared_experts": 2, "num_attention_heads": 20,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "head_dim": 128, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "tie_word_embeddings": True, "use_bias": False,
    "vocab_size": 103424, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
}
REAL = {"ernie4_5_moe-21b": (ERNIE_45_21B_A3B, 21_825_436_160, 27 * 64)}

_TINY = dict(
    model_type="ernie4_5_moe", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, intermediate_size=96, max_position_embeddings=64,
    moe_num_experts=8, moe_k=2, moe_intermediate_size=24, pad_token_id=0,
)
# name: (transformers class, config fields of a tiny model, frozen corrections)
TINY: dict[str, tuple[str, dict[str, Any], int]] = {
    # the 21B's shape: a dense first layer, two shared experts; untied
    "ernie4_5_moe": ("Ernie4_5_MoeForCausalLM", dict(
        _TINY, moe_num_shared_experts=2, moe_layer_start_index=1, tie_word_embeddings=False),
        2 * 8),
    # experts on every layer, no shared expert, the head tied, 32-wide heads; weights drawn
    # wider (initializer_range) so that the tied head's greedy tokens vary
    "ernie4_5_moe-tied": ("Ernie4_5_MoeForCausalLM", dict(
        _TINY, moe_num_shared_experts=0, moe_layer_start_index=0, head_dim=32,
        tie_word_embeddings=True, rope_theta=10000.0, initializer_range=0.2), 3 * 8),
    # every second layer of two: experts on the last one only, a dense first layer
    "ernie4_5_moe-interval": ("Ernie4_5_MoeForCausalLM", dict(
        _TINY, num_hidden_layers=2, moe_num_shared_experts=1, moe_layer_start_index=0,
        moe_layer_interval=2, tie_word_embeddings=False), 1 * 8),
}
# fmt: on


@pytest.mark.long  # transformers' full-size model on the meta device: seconds
@pytest.mark.parametrize("name", list(REAL))
def test_real_size_total_equals_the_transformers_class(name: str) -> None:
    config, trainable, frozen = REAL[name]
    ours, theirs = real_total_equals_transformers(config)
    assert ours == theirs - frozen == trainable


@pytest.mark.long  # a generated model, two transformers models and 16 steps each: seconds
@pytest.mark.parametrize("name", list(TINY))
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    cls, fields, frozen = TINY[name]
    check_logits_and_tokens(cls, fields, tmp_path, frozen=frozen)


@pytest.mark.parametrize("name", list(TINY))
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    cls, fields, _ = TINY[name]
    check_forward_matmul_flops(cls, fields)


def test_loads_from_transformers_memory_layout(tmp_path: Path) -> None:
    """transformers 5's state dict in memory (each layer's experts stacked, the correction
    under the router, mlp.gate.moe_statics) loads too."""
    from archspec.backends.torchgen import generate_source, load_generated
    from archspec.hf.weights import load_weights
    from archspec.ir.build import build_ir
    from tests.zoo_check import tiny_model

    cls, fields, _ = TINY["ernie4_5_moe"]
    hf = tiny_model(cls, fields)
    state = hf.state_dict()
    spec = import_config({**hf.config.to_dict(), "architectures": [cls]}).spec
    model = load_weights(
        load_generated(generate_source(build_ir(spec)), tmp_path).Model().eval(), state, spec=spec
    )
    router = model.decoder.blocks[1].moe.router
    theirs = state["model.layers.1.mlp.gate.moe_statics.e_score_correction_bias"]
    assert torch.equal(router.e_score_correction_bias, theirs) and theirs.abs().sum() > 0
    ids = torch.randint(3, 99, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(input_ids=ids).logits, rtol=0, atol=1e-4)


# --- The router alone -------------------------------------------------------------------


def test_softmax_bias_route_chooses_and_weighs_as_transformers() -> None:
    from transformers.models.ernie4_5_moe.modeling_ernie4_5_moe import Ernie4_5_MoeTopKRouter

    from archspec.runtime.routing import RowBiasCorrectedRouter, softmax_bias_route

    config = transformers.Ernie4_5_MoeConfig(hidden_size=32, moe_num_experts=16, moe_k=3)
    theirs = Ernie4_5_MoeTopKRouter(config)
    ours = RowBiasCorrectedRouter(32, 16, bias=False)
    torch.manual_seed(0)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.moe_statics.e_score_correction_bias.normal_(0.0, 0.5)
        ours.weight.copy_(theirs.weight)
        ours.e_score_correction_bias.copy_(theirs.moe_statics.e_score_correction_bias)
    x = torch.randn(64, 32)
    _, their_weights, their_chosen = theirs(x)
    weights, chosen = softmax_bias_route(ours(x), ours.e_score_correction_bias, 3, True, 1.0)
    order, their_order = chosen.argsort(-1), their_chosen.argsort(-1)
    assert torch.equal(chosen.gather(-1, order), their_chosen.gather(-1, their_order))
    torch.testing.assert_close(
        weights.gather(-1, order), their_weights.gather(-1, their_order), rtol=0, atol=1e-6
    )
    # the correction chose: without it, other experts win
    unbiased = softmax_bias_route(ours(x), torch.zeros(1, 16), 3, True, 1.0)
    assert not torch.equal(unbiased[1], chosen)


@pytest.mark.parametrize("normalize", [True, False])
def test_the_routing_keeps_for_backward_what_its_kind_says(normalize: bool) -> None:
    """The storages autograd still holds once the routing has returned, against the kind's
    count (as tests/test_hf_zoo_sigmoid_router.py measures the sigmoid router's)."""
    import weakref

    from archspec import kinds
    from archspec.kinds.routers import Routing
    from archspec.runtime.routing import softmax_bias_route

    n, e, k = 12, 8, 3
    logits = torch.randn(n, e, requires_grad=True)
    saved: list[weakref.ref] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        weights, chosen = softmax_bias_route(logits, torch.randn(1, e), k, normalize, 1.0)
    del chosen
    alive = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
             for t in (ref() for ref in saved) if t is not None}  # fmt: skip
    routing = Routing(n, e, k, normalize, 1.0, 1, 1)
    assert sum(alive.values()) == kinds.router("softmax_bias").kept_bytes(routing)
    weights.sum().backward()
    assert logits.grad is not None


# --- The family's refusals ----------------------------------------------------------------


def _config(**changes) -> dict[str, Any]:
    return {**ERNIE_45_21B_A3B, **changes}


@pytest.mark.parametrize(
    "changes, field",
    [
        # experts on every second layer of 28: not a dense prefix
        ({"moe_layer_interval": 2}, "moe_layer_interval"),
        # dense last layers
        ({"moe_layer_end_index": 20}, "moe_layer_end_index"),
        # biased attention and shared experts beside unbiased routed ones
        ({"use_bias": True}, "use_bias"),
        ({"moe_norm_min": 1e-6}, "moe_norm_min"),
        ({"moe_norm_min": None}, "moe_norm_min"),
        ({"num_key_value_heads": None}, "num_key_value_heads"),
        ({"head_dim": None}, "head_dim"),
        ({"moe_num_shared_experts": -1}, "moe_num_shared_experts"),
    ],
)
def test_what_the_spec_cannot_express_is_refused_naming_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(SpecError) as err:
        import_config(_config(**changes))
    assert err.value.path == field


def test_the_layer_pattern_imports_as_dense_first_layers() -> None:
    spec = import_config(_config(moe_layer_start_index=3, moe_layer_end_index=-1)).spec
    assert spec.moe is not None and spec.moe.dense_layers == 3
    assert spec.moe.router == "softmax_bias" and spec.moe.shared_d_ff == 2 * 1536
    dense = import_config(_config(moe_layer_start_index=28)).spec
    assert dense.moe is None  # no layer builds experts


def test_the_frozen_corrections_are_noted() -> None:
    notes = import_config(ERNIE_45_21B_A3B).notes
    assert any("27 x 64 = 1,728" in n and "e_score_correction_bias" in n for n in notes)
