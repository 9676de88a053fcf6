"""Multi-head latent attention (DeepSeek-V2, `attention.latent`) through every backend.

The generated model is the reference here: its parameters and `print(model)` equal the
counter's and the printer's, its executed FLOPs equal FlopCounterMode's, the activations the
counter predicts equal what autograd keeps, and its KV cache holds what `kv_cache_bytes` says
(the latent and the shared rotated key, not keys and values per head). Greedy decoding with the
cache equals recomputing the whole sequence each step. tests/test_deepseek_v2.py holds the
same models against transformers' DeepseekV2ForCausalLM.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from archspec import build_ir, load_spec
from archspec.backends.count.memory import kv_cache_bytes
from archspec.backends.count.passes import KV_LEN, B
from archspec.backends.torchgen import generate_source
from archspec.errors import SpecError
from tests.test_layer_variants import check, check_costs
from tests.tiny import generated_module, tiny_sizes

SIZES = {"d_model": 64, "d_ff": 96, "vocab_size": 256, "max_seq_len": 64}
TINY = tiny_sizes("norm.eps=1e-6", **SIZES)
LATENT = "attention.latent={kv_rank: 32, q_rank: 48, rope_dim: 8, nope_dim: 16, v_dim: 12}"
PLAIN_Q = "attention.latent.q_rank=null"


def tiny(*overrides: str):
    return build_ir(load_spec("llama-2-7b", [*TINY, LATENT, *overrides]))


@pytest.mark.parametrize("overrides", [(), (PLAIN_Q,), ("position.interleaved=true",)])
def test_latent_attention_counts_and_runs(tmp_path: Path, overrides: tuple[str, ...]) -> None:
    ir = tiny(*overrides)
    model = check(ir, tmp_path)
    check_costs(ir, model)
    attn = model.decoder.blocks[0].attn
    queries = ["q"] if PLAIN_Q in overrides else ["q_down", "q_down_norm", "q_up"]
    names = [name for name, _ in attn.named_children()]
    assert names == [*queries, "kv_down", "kv_down_norm", "kv_up", "o"]


def test_the_cache_keeps_the_latent_and_greedy_tokens_equal_recomputing(tmp_path: Path) -> None:
    ir = tiny()
    module = generated_module(ir, folder=tmp_path)
    caches = []

    class Recorded(module.KVCache):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            caches.append(self)

    module.KVCache = Recorded
    torch.manual_seed(0)
    model = module.Model().eval()
    ids = torch.randint(0, 256, (2, 5))
    out = model.generate(ids, 6)
    tokens = ids
    with torch.no_grad():
        for _ in range(6):
            nxt = model(tokens)[:, -1].argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
    assert torch.equal(out, tokens)
    # Per layer and position: kv_rank + rope_dim values (32 + 8), not 2 · heads · head_dim.
    held = sum(t.numel() * t.element_size() for c in caches for t in (c.k, c.v))
    assert held == kv_cache_bytes(ir, 4).xreplace({**ir.env, B: 2, KV_LEN: 11})
    assert held == 2 * 11 * 2 * (32 + 8) * 4


@pytest.mark.parametrize(
    "override, field",
    [
        ("n_kv_heads=2", "n_kv_heads"),
        ("head_dim=16", "head_dim"),
        ("attention.sliding_window=8", "sliding_window"),
        ("attention.qk_norm=true", "qk_norm"),
        ("position.kind=learned", "position.kind"),
    ],
)
def test_what_latent_attention_has_no_place_for_is_refused(override: str, field: str) -> None:
    with pytest.raises(SpecError) as error:
        load_spec("llama-2-7b", [*TINY, LATENT, override])
    assert field.split(".")[-1] in str(error.value)


def test_tensor_parallelism_of_latent_attention_is_counted(tmp_path: Path) -> None:
    """The generated parallelize splits latent attention by heads (tests/test_distributed_cp_ep.py
    trains it at tp=2 and checks each rank's parameter bytes against count's): the down
    projections and the latents' norms whole on every rank, q, kv_up and o split."""
    from archspec.backends.count.layout import Parallelism, check_layout, stage_params

    ir = tiny()
    check_layout(ir, Parallelism(tp=2, gpus=2))
    whole = int(stage_params(ir, Parallelism(gpus=1))[0].params.xreplace(ir.env))
    (half,) = stage_params(ir, Parallelism(tp=2, gpus=2))
    assert whole / 2 < int(half.params) < whole
    assert "SharedKeyGradient" in generate_source(ir)


def test_deepseek_experts_count_and_run(tmp_path: Path) -> None:
    """deepseek-v2-lite's block at tiny size: a dense first layer, routed experts scaled by
    routed_scale and limited to the best group (DeepSeek-V2's group_limited_greedy), ungated
    shared experts; YaRN on interleaved pairs and the scores' mscale."""
    overrides = tiny_sizes(
        "position.original_max_seq_len=8",
        "attention.latent={kv_rank: 32, rope_dim: 8, nope_dim: 16, v_dim: 12, yarn_mscale: 0.707}",
        "moe={n_experts: 4, top_k: 2, d_ff: 24, shared_d_ff: 48, dense_layers: 1,"
        " normalize: false, routed_scale: 1.5, groups: 2, top_groups: 1}",
        **{**SIZES, "n_layers": 3},
    )
    ir = build_ir(load_spec("deepseek-v2-lite", overrides))
    model = check(ir, tmp_path)
    check_costs(ir, model)
    assert "weights = weights * 1.5  # routed_scaling_factor" in generate_source(ir)


def test_kv_cache_of_deepseek_v2_lite_is_the_papers() -> None:
    """DeepSeek-V2 (arXiv:2405.04434) Table 1: MLA caches (d_c + d_h^R)·l elements per token,
    d_c = kv_lora_rank 512, d_h^R = 64, l = 27 layers; multi-head attention would cache
    2·n_h·d_h·l."""
    ir = build_ir(load_spec("deepseek-v2-lite"))
    per_token = kv_cache_bytes(ir, 2).xreplace({**ir.env, B: 1, KV_LEN: 1})
    assert per_token == (512 + 64) * 27 * 2
    assert 2 * 16 * 128 * 27 * 2 / per_token == pytest.approx(7.1, abs=0.05)


@pytest.mark.parametrize("overrides", [(), (PLAIN_Q,)])
def test_a_decode_step_projects_every_cached_latent_up_again(
    tmp_path: Path, overrides: tuple[str, ...]
) -> None:
    """With the cache of the latent, each step runs kv_up over every cached position (as
    transformers' DeepseekV2 does): the decode FLOPs count kv_len rows there, and equal
    FlopCounterMode's."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from archspec.backends.count.conventions import CONVENTIONS
    from archspec.backends.count.flops import flop_figures

    ir = tiny(*overrides)
    module = generated_module(ir, folder=tmp_path)
    model = module.Model().eval()
    b, s = 2, 7
    cache = [module.KVCache(s + 1) for _ in model.decoder.blocks]  # as long as the sequence
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        model(torch.randint(0, 256, (b, s)), cache=cache)
        with FlopCounterMode(display=False) as counter:
            model(torch.randint(0, 256, (b, 1)), cache=cache)
    figures = flop_figures(ir, CONVENTIONS["executed"])
    expected = figures.decode_matmul.xreplace({**ir.env, B: b, KV_LEN: s + 1})
    assert expected == counter.get_total_flops()
    kv_up = 2 * b * (s + 1) * 32 * 4 * (16 + 12) * 2  # 2 layers, every cached position
    assert kv_up < expected
