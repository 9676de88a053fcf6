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
from archspec.backends.torchgen import generate_source, load_generated
from archspec.errors import SpecError
from tests.test_layer_variants import check, check_costs

TINY = [
    "d_model=64",
    "n_layers=2",
    "n_heads=4",
    "d_ff=96",
    "vocab_size=256",
    "max_seq_len=64",
    "norm.eps=1e-6",
]
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
    module = load_generated(generate_source(ir), tmp_path)
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


def test_tensor_parallelism_of_latent_attention_is_refused(tmp_path: Path) -> None:
    from archspec.backends.count.layout import Parallelism, check_layout

    ir = tiny()
    with pytest.raises(SpecError, match="latent attention"):
        check_layout(ir, Parallelism(tp=2, gpus=2))
    assert 'raise ValueError("tensor parallelism: latent attention is not split")' in (
        generate_source(ir)
    )
