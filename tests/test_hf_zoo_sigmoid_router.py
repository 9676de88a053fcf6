"""Issue 28: the sigmoid router (`moe.router: sigmoid`, transformers' DeepseekV3TopkRouter) and
the families that route by it, DeepSeek-V3 (`deepseek_v3`), GLM-4-MoE (`glm4_moe`) and
dots.llm1 (`dots1`), against transformers' own classes (tests/zoo_check.py says what
the zoo checks measure).

The router alone: `archspec.runtime.routing`'s code, the code the generated file runs,
chooses the experts transformers' router chooses and weighs them alike, with a random bias
correction. The whole model: tiny random models whose e_score_correction_bias is drawn too
(transformers starts it at zero, where choosing by the biased scores would go unseen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_reference import DEEPSEEK_V3
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

transformers = pytest.importorskip("transformers")

# fmt: off
# zai-org/GLM-4.5-Air (huggingface.co/zai-org/GLM-4.5-Air). Sources for its sizes:
# github.com/pufanyi/Megatron-Bridge docs/models/llm/glm45.md ("GLM 4.5 Air 106B-A12B": 46
# layers, the first dense, hidden 4096, FFN 10944, 96 heads, 8 query groups, 128 experts,
# top-8, scaling 1.0, MoE FFN 1408, shared expert 1408, no QK LayerNorm, context 131,072,
# vocabulary 151,552); github.com/zyzshishui/slime scripts/models/glm4.5-106B-A12B.sh
# (kv-channels 128, rotary-percent 0.5, add-qkv-bias, untied, rotary-base 1e6);
# github.com/zai-org/GLM-4.5 README ("1060 亿总参数量", 106B in all -- the count below is
# 106,852,245,504, its MTP layer apart). Fields that change no count take the class's names.
GLM_45_AIR = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 10944,
    "max_position_embeddings": 131072, "moe_intermediate_size": 1408, "norm_topk_prob": True,
    "num_attention_heads": 96, "n_group": 1, "topk_group": 1, "n_routed_experts": 128,
    "n_shared_experts": 1, "routed_scaling_factor": 1.0, "num_experts_per_tok": 8,
    "first_k_dense_replace": 1, "num_hidden_layers": 46, "num_key_value_heads": 8,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_theta": 1000000,
    "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "use_qk_norm": False,
    "vocab_size": 151552,
}
# rednote-hilab/dots.llm1.inst (huggingface.co/rednote-hilab/dots.llm1.inst). Source: the
# config.json of mlx-community's dots.llm1.inst-mixed-4-6bit as a test quotes it, trimmed to
# the fields a loader reads, found by exact-string search of public code (its quantization
# left out here: archspec refuses quantized checkpoints); the dots.llm1 technical report
# (arXiv:2506.05767, quoted in transformers' docs/source/en/model_doc/dots1.md): "14B
# parameters out of a total of 142B" -- the count below is 142,774,373,888.
DOTS_LLM1 = {
    "architectures": ["Dots1ForCausalLM"], "model_type": "dots1", "hidden_size": 4096,
    "num_hidden_layers": 62, "intermediate_size": 10944, "num_attention_heads": 32,
    "num_key_value_heads": 32, "rms_norm_eps": 1e-05, "vocab_size": 152064,
    "first_k_dense_replace": 1, "moe_intermediate_size": 1408, "n_routed_experts": 128,
    "n_shared_experts": 2, "num_experts_per_tok": 6, "norm_topk_prob": True,
    "routed_scaling_factor": 2.5, "max_position_embeddings": 32768, "rope_theta": 10000000,
    "attention_bias": False, "tie_word_embeddings": False,
}
REAL = {
    "deepseek_v3": (DEEPSEEK_V3, 671_026_404_352),
    "glm4_moe": (GLM_45_AIR, 106_852_245_504),
    "dots1": (DOTS_LLM1, 142_774_373_888),
}

_GLM = dict(
    model_type="glm4_moe", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, intermediate_size=96, max_position_embeddings=64,
    n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=24, n_shared_experts=2,
    first_k_dense_replace=1, pad_token_id=0, tie_word_embeddings=False,
)

_TINY = dict(
    model_type="deepseek_v3", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    num_key_value_heads=4, intermediate_size=96, max_position_embeddings=64,
    kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12,
    n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=24, n_shared_experts=1,
    first_k_dense_replace=1, pad_token_id=0, tie_word_embeddings=False,
)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # 4 groups of 2 experts, the best 2 groups compete; renormalised, scaled by 2.5;
    # interleaved rotation, YaRN stretching 16 positions 4 times with mscale_all_dim
    "deepseek_v3": ("DeepseekV3ForCausalLM", dict(
        _TINY, n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 16, "mscale": 1.0,
                         "mscale_all_dim": 0.707})),
    # one group, not renormalised, rotate_half's halves, queries without a latent
    "deepseek_v3-plain": ("DeepseekV3ForCausalLM", dict(
        _TINY, n_group=1, topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0,
        rope_interleave=False, q_lora_rank=None)),
    # biases on q, k and v, a norm over each head's queries and keys, 2 groups of 4 experts
    # (the best one competes), RoPE on half of each 16-wide head
    "glm4_moe": ("Glm4MoeForCausalLM", dict(
        _GLM, attention_bias=True, use_qk_norm=True, n_group=2, topk_group=1,
        routed_scaling_factor=2.5)),
    # GLM-4.5-Air's shape: no q/k norms, one group, not scaled
    "glm4_moe-air": ("Glm4MoeForCausalLM", dict(
        _GLM, attention_bias=True, use_qk_norm=False, norm_topk_prob=False)),
    # biases on all four projections, 4 groups of 2 experts (2 compete), renormalised
    "dots1": ("Dots1ForCausalLM", dict(
        _GLM, model_type="dots1", attention_bias=True, n_group=4, topk_group=2,
        norm_topk_prob=True, routed_scaling_factor=2.5)),
    # windows of 6 keys on the layers from the second on (max_window_layers), past which the
    # 16 greedy tokens go
    "dots1-windowed": ("Dots1ForCausalLM", dict(
        _GLM, model_type="dots1", sliding_window=6, max_window_layers=1)),
}
# fmt: on


@pytest.mark.long  # transformers' full-size model on the meta device: seconds
@pytest.mark.parametrize("name", list(REAL))
def test_real_size_total_equals_the_transformers_class(name: str) -> None:
    config, published = REAL[name]
    ours, theirs = real_total_equals_transformers(config)
    assert ours == theirs == published


# A generated model, two transformers models and 16 steps each: seconds. DeepSeek-V3 runs by
# default (its names checked on real tensors; tests/test_hf_import.py maps it at full size in
# the long run), the others in the long run.
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.long] if i else []) for i, n in enumerate(TINY)]
)
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[pytest.mark.long] if i else []) for i, n in enumerate(TINY)]
)
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


@pytest.mark.long  # two generated models and two transformers models: seconds
@pytest.mark.parametrize("name", ["deepseek_v3", "glm4_moe"])
def test_loads_from_transformers_memory_layout(name: str, tmp_path: Path) -> None:
    """transformers 5's state dict in memory (each layer's experts stacked in gate_up_proj
    and down_proj, the router's e_score_correction_bias beside its weight) loads too."""
    from archspec.backends.torchgen import generate_source, load_generated
    from archspec.hf.weights import load_weights
    from archspec.ir.build import build_ir
    from tests.zoo_check import tiny_model

    cls, fields = TINY[name]
    hf = tiny_model(cls, fields)
    state = hf.state_dict()
    assert any(k.endswith("mlp.experts.gate_up_proj") for k in state)
    spec = import_config({**hf.config.to_dict(), "architectures": [cls]}).spec
    model = load_weights(
        load_generated(generate_source(build_ir(spec)), tmp_path).Model().eval(), state, spec=spec
    )
    router = model.decoder.blocks[1].moe.router
    theirs = state["model.layers.1.mlp.gate.e_score_correction_bias"]
    assert torch.equal(router.e_score_correction_bias, theirs) and theirs.abs().sum() > 0
    ids = torch.randint(3, 99, (2, 7))
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf(input_ids=ids).logits, rtol=0, atol=1e-4)


# --- The router alone -------------------------------------------------------------------


@pytest.mark.parametrize("groups, top_groups, normalize", [(4, 2, True), (1, 1, False)])
def test_sigmoid_route_chooses_and_weighs_as_transformers(
    groups: int, top_groups: int, normalize: bool
) -> None:
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter

    from archspec.runtime.routing import BiasCorrectedRouter, sigmoid_route

    config = transformers.DeepseekV3Config(
        hidden_size=32, n_routed_experts=16, num_experts_per_tok=3, n_group=groups,
        topk_group=top_groups, norm_topk_prob=normalize, routed_scaling_factor=2.5,
    )  # fmt: skip
    theirs = DeepseekV3TopkRouter(config)
    ours = BiasCorrectedRouter(32, 16, bias=False)
    torch.manual_seed(0)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.e_score_correction_bias.normal_(0.0, 0.5)
    ours.load_state_dict(theirs.state_dict())  # the same names: weight, the bias correction
    x = torch.randn(64, 32)
    _, their_weights, their_chosen = theirs(x)
    weights, chosen = sigmoid_route(
        ours(x), ours.e_score_correction_bias, 3, groups, top_groups, normalize, 2.5
    )
    # transformers leaves the top-k unsorted: compare each token's experts in one order
    order, their_order = chosen.argsort(-1), their_chosen.argsort(-1)
    assert torch.equal(chosen.gather(-1, order), their_chosen.gather(-1, their_order))
    torch.testing.assert_close(
        weights.gather(-1, order), their_weights.gather(-1, their_order), rtol=0, atol=1e-6
    )
    # the bias chose: without it, other experts win
    unbiased = sigmoid_route(ours(x), torch.zeros(16), 3, groups, top_groups, normalize, 2.5)
    assert not torch.equal(unbiased[1], chosen)


@pytest.mark.parametrize("groups, normalize", [(4, True), (4, False), (1, True)])
def test_the_routing_keeps_for_backward_what_its_kind_says(groups: int, normalize: bool) -> None:
    """The storages autograd still holds once the routing has returned (in training), against
    the kind's count. Those of the choice alone (the groups' ranking, the biased scores
    masked) feed no weight: their ops are freed with what they saved."""
    import weakref

    from archspec import kinds
    from archspec.kinds.routers import Routing
    from archspec.runtime.routing import sigmoid_route

    n, e, k = 12, 8, 3
    logits = torch.randn(n, e, requires_grad=True)
    saved: list[weakref.ref] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        weights, chosen = sigmoid_route(logits, torch.randn(e), k, groups, 2, normalize, 2.5)
    del chosen
    alive = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
             for t in (ref() for ref in saved) if t is not None}  # fmt: skip
    routing = Routing(n, e, k, normalize, 2.5, groups, 2)
    assert sum(alive.values()) == kinds.router("sigmoid").kept_bytes(routing)
    weights.sum().backward()  # what was kept is enough for the gradient
    assert logits.grad is not None


# --- The spec language ------------------------------------------------------------------


def test_a_misspelt_router_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    from archspec.spec.resolve import load_spec

    path = tmp_path / "spec.yaml"
    path.write_text("extends: deepseek-v2-lite\nmoe: {router: sigmod}\n")
    with pytest.raises(SpecError, match="sigmoid") as err:
        load_spec(str(path))
    assert "moe" in str(err.value) and "router" in str(err.value)


def test_sigmoid_groups_need_two_experts_each(tmp_path: Path) -> None:
    from archspec.spec.resolve import load_spec

    path = tmp_path / "spec.yaml"
    path.write_text(
        "extends: deepseek-v2-lite\n"
        "moe: {router: sigmoid, n_experts: 8, top_k: 2, groups: 8, top_groups: 2}\n"
    )
    with pytest.raises(SpecError, match="two best experts"):
        load_spec(str(path))


# --- The family's refusals ----------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [("scoring_func", "softmax"), ("topk_method", "greedy"), ("n_group", 3),
     ("topk_group", 9), ("moe_layer_freq", 2)],
)  # fmt: skip
def test_deepseek_v3_refuses_what_transformers_does_not_compute(field: str, value: Any) -> None:
    with pytest.raises(SpecError) as err:
        import_config({**DEEPSEEK_V3, field: value})
    assert err.value.path == field


def test_deepseek_v3_reports_the_mtp_layer_as_ignored() -> None:
    imported = import_config(DEEPSEEK_V3)
    assert any("num_nextn_predict_layers" in note for note in imported.notes)
    moe = imported.spec.moe
    assert moe is not None and moe.router == "sigmoid"
    assert (moe.groups, moe.top_groups, moe.normalize, moe.routed_scale) == (8, 4, True, 2.5)


def test_the_public_config_imports_to_the_builtin() -> None:
    """The built-in `deepseek-v3` is DeepSeek-V3's config.json as imported, at the size
    transformers' class has on the meta device (the `long` test above checks that figure)."""
    from archspec.backends.count.params import parameter_count
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec
    from tests.test_deepseek_v2 import architecture

    imported = import_config(DEEPSEEK_V3)
    assert architecture(imported.spec) == architecture(load_spec("deepseek-v3"))
    ir = build_ir(load_spec("deepseek-v3"), symbolic=False)
    assert ir.value(parameter_count(ir.root)) == REAL["deepseek_v3"][1]


def test_an_expert_count_without_a_default_is_named_absent_or_null() -> None:
    """dots1 has no default expert count: a config that leaves it out and one that gives null
    (what Dots1Config's own defaults save) are each told which."""
    base = {k: v for k, v in DEEPSEEK_V3.items() if k != "n_routed_experts"}
    base["model_type"], base["architectures"] = "dots1", ["Dots1ForCausalLM"]
    with pytest.raises(SpecError, match="has no 'n_routed_experts'") as err:
        import_config(base)
    assert err.value.path == "n_routed_experts"
    with pytest.raises(SpecError, match="gives null for 'n_routed_experts'"):
        import_config({**base, "n_routed_experts": None})
