"""DBRX (`dbrx`, databricks/dbrx-base and -instruct) against transformers' own classes
(tests/zoo_check.py says what is measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.zoo_check import (
    check_forward_matmul_flops,
    check_logits_and_tokens,
    real_total_equals_transformers,
)

pytest.importorskip("transformers")

# fmt: off
# databricks/dbrx-instruct's config.json as mlx-community/dbrx-instruct-4bit republished it,
# quoted whole by a test fixture of github.com/lablup/mlxcel (its DBRX model tests, found by
# exact-string search of public code), the sub-configs' PretrainedConfig clutter included; its
# MLX "quantization" field is left out, and moe_normalize_expert_weights, 1 in the file, is
# written 1.0 (transformers 5's strict DbrxFFNConfig refuses the integer; archspec reads
# both). Sizes read there: d_model 6144, 48 heads, 8 kv heads, 40 layers, vocab 100352,
# 16 experts of width 10752, top-4, clip_qkv 8, attn_config.rope_theta 500000. The same sizes
# appear in a DBRX write-up quoting "the official Hugging Face model configuration" (d_model
# 6144, n_heads 48, n_layers 40, vocab_size 100352, ffn_hidden_size 10752, 16 experts, top-4)
# and in another repository's DBRX tests (d_model 6144, ffn_hidden_size 10752, 40 layers).
# The count below is 131,596,523,520: "132B total".
DBRX_INSTRUCT = {
    "architectures": ["DbrxForCausalLM"],
    "attn_config": {
        "return_dict": True, "output_hidden_states": False, "torch_dtype": None,
        "tie_word_embeddings": True, "max_length": 20, "temperature": 1.0, "top_k": 50,
        "top_p": 1.0, "id2label": {"0": "LABEL_0", "1": "LABEL_1"}, "model_type": "",
        "attn_pdrop": 0, "clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000,
    },
    "d_model": 6144, "emb_pdrop": 0.0,
    "ffn_config": {
        "return_dict": True, "tie_word_embeddings": True, "temperature": 1.0, "model_type": "",
        "ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": 10752, "moe_num_experts": 16,
        "moe_top_k": 4, "moe_jitter_eps": 0, "moe_loss_weight": 0.05,
        "moe_normalize_expert_weights": 1.0, "uniform_expert_assignment": False,
    },
    "initializer_range": 0.02, "max_seq_len": 32768, "model_type": "dbrx", "n_heads": 48,
    "n_layers": 40, "output_router_logits": False, "resid_pdrop": 0.0,
    "router_aux_loss_coef": 0.05, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.39.2", "use_cache": True, "vocab_size": 100352,
}
# transformers 5 rotates by the top-level base: the file as it must be to run as trained.
ROPE_500K = {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}

_TINY = dict(model_type="dbrx", d_model=64, n_layers=2, n_heads=4, max_seq_len=64,
             pad_token_id=0, initializer_range=0.2)
# name: (transformers class, config fields of a tiny model)
TINY: dict[str, tuple[str, dict[str, Any]]] = {
    # a clamp that bites (initializer_range 0.2 gives q/k/v well beyond 0.5), p = 1
    "dbrx": ("DbrxForCausalLM", dict(
        **_TINY, attn_config={"kv_n_heads": 2, "clip_qkv": 0.5, "rope_theta": 10000.0},
        ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 6, "moe_top_k": 2})),
    # DBRX's own base, one key/value head per head, weights not renormalised (a clip_qkv:
    # transformers 5's DbrxAttention calls clamp(None, None) without one, which torch refuses)
    "dbrx-unnormalised": ("DbrxForCausalLM", dict(
        **_TINY, **ROPE_500K,
        attn_config={"kv_n_heads": 4, "clip_qkv": 8.0, "rope_theta": 500000.0},
        ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 3,
                    "moe_normalize_expert_weights": None})),
}
# fmt: on


def test_real_size_total_equals_the_transformers_class() -> None:
    ours, theirs = real_total_equals_transformers({**DBRX_INSTRUCT, **ROPE_500K})
    assert ours == theirs == 131_596_523_520


def test_the_released_file_is_refused_as_transformers_5_ignores_its_rope_base() -> None:
    with pytest.raises(SpecError, match="ignores") as err:
        import_config(DBRX_INSTRUCT)
    assert err.value.path == "attn_config.rope_theta"
    assert "rope_parameters" in (err.value.hint or "")


# a generated model, two transformers models and 16 steps each: the second with the long tests
@pytest.mark.parametrize(
    "name", [n if n == "dbrx" else pytest.param(n, marks=pytest.mark.long) for n in TINY]
)
def test_logits_and_greedy_tokens_equal_transformers(name: str, tmp_path: Path) -> None:
    check_logits_and_tokens(*TINY[name], tmp_path)


@pytest.mark.parametrize("name", list(TINY))
def test_forward_matmul_flops_equal_flop_counter(name: str) -> None:
    check_forward_matmul_flops(*TINY[name])


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("ffn_config", "moe_normalize_expert_weights", 2.0),  # a 2-norm
        ("ffn_config", "uniform_expert_assignment", True),
        ("ffn_config", "ffn_act_fn", {"name": "gelu", "approximate": "tanh"}),
        ("ffn_config", "moe_capacity_factor", 1.0),  # a field not understood
        ("attn_config", "clip_qkv", 0),
        ("attn_config", "kv_n_heads", 5),
    ],
)
def test_what_dbrx_cannot_express_is_refused_naming_the_field(
    section: str, field: str, value: Any
) -> None:
    config = {**DBRX_INSTRUCT, **ROPE_500K}
    config[section] = {**config[section], field: value}
    with pytest.raises(SpecError) as err:
        import_config(config)
    assert err.value.path == f"{section}.{field}"


def test_tied_embeddings_are_refused_as_dbrx_config_refuses_them() -> None:
    with pytest.raises(SpecError) as err:
        import_config({**DBRX_INSTRUCT, **ROPE_500K, "tie_word_embeddings": True})
    assert err.value.path == "tie_word_embeddings"


# --- The router, as DbrxFFN routes -----------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("normalize", [1.0, None])
def test_the_router_equals_dbrx_bit_for_bit(dtype: str, normalize: float | None) -> None:
    """softmax_in_dtype against transformers' DbrxFFN.route_tokens_to_experts on the same
    logits: in bf16 too, where a float32 softmax would round otherwise."""
    import torch
    import transformers

    from archspec.runtime.routing import softmax_in_dtype_route

    config = transformers.DbrxConfig(
        d_model=32, n_heads=2, n_layers=1,
        ffn_config={"ffn_hidden_size": 16, "moe_num_experts": 8, "moe_top_k": 3,
                    "moe_normalize_expert_weights": normalize},
        attn_config={"kv_n_heads": 2, "rope_theta": 10000.0},
    )  # fmt: skip
    ffn = transformers.models.dbrx.modeling_dbrx.DbrxFFN(config)
    logits = (torch.randn(64, 8, generator=torch.Generator().manual_seed(0)) * 3).to(
        getattr(torch, dtype)
    )
    theirs, their_experts = ffn.route_tokens_to_experts(logits)
    ours, our_experts = softmax_in_dtype_route(logits, 3, normalize is not None, 1.0)
    assert ours.dtype == theirs.dtype == logits.dtype
    assert torch.equal(our_experts, their_experts)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("normalize", [True, False])
def test_the_routing_keeps_for_backward_what_its_kind_says(normalize: bool) -> None:
    """The storages autograd still holds once the routing has returned (saved_tensors_hooks),
    against the kind's count, in bf16 (the logits' dtype is what it keeps)."""
    import weakref

    import torch

    from archspec import kinds
    from archspec.kinds.routers import Routing
    from archspec.runtime.routing import softmax_in_dtype_route

    n, e, k = 12, 8, 3
    logits = torch.randn(n, e, dtype=torch.bfloat16, requires_grad=True)
    saved: list[weakref.ref] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(weakref.ref(t))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        weights, chosen = softmax_in_dtype_route(logits, k, normalize, 1.0)
    del chosen
    alive = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
             for t in (ref() for ref in saved) if t is not None}  # fmt: skip
    routing = Routing(n, e, k, normalize, 1.0, 1, 1, compute=2)
    assert sum(alive.values()) == kinds.router("softmax_in_dtype").kept_bytes(routing)
    weights.float().sum().backward()
    assert logits.grad is not None
