"""`plan --mode serve`: a decode step's attention over a grouped-query cache (several query heads
a key/value head), read once or again by each further query head of its group
(`ServeEngine.grouped_cache_reread`, serve_engine.py).

Its two ends against transformers' Llama: read again in full is what its eager attention
multiplies, each key/value head expanded to its group's query heads (`repeat_kv`), as a kernel
with a thread block per sequence and query head loads it (TensorRT-LLM v0.6.1's decode
kernel); read once is its cache, each key/value head held once (what XQA loads). Between them,
the share TensorRT-LLM's figures were fitted to, against those figures: Falcon-180B's long
decodes (29 query heads a key/value head), which reading the cache once leaves far too fast.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir
from archspec.plan.serve import serve_parts
from archspec.plan.serve_engine import load_engines, serving_system
from archspec.plan.serve_validation import load_dataset, parts_of

BATCH, PROMPT = 3, 12


def tiny_llama():
    """transformers' Llama with grouped keys and values (8 query heads, 2 key/value heads)."""
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=99, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=8, num_key_value_heads=2,
    )  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    data = {**config.to_dict(), "architectures": [type(model).__name__]}
    return model.eval(), build_ir(import_config(data).spec)


def test_the_cache_read_once_or_by_every_query_head_is_transformers_eager_decode_step() -> None:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class AttentionOperands(TorchDispatchMode):
        """The elements of the keys and values each batched matmul multiplies (QKᵀ, then PV:
        the projections and the head are aten.mm)."""

        def __init__(self) -> None:
            super().__init__()
            self.elements = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.bmm.default:
                self.elements += args[1].numel()
            return func(*args, **(kwargs or {}))

    model, ir = tiny_llama()
    with torch.no_grad():
        cache = model(torch.zeros(BATCH, PROMPT, dtype=torch.long), use_cache=True).cache
        with AttentionOperands() as seen:
            model(torch.zeros(BATCH, 1, dtype=torch.long), cache=cache, use_cache=True)
    # One new token: the step attends over the prompt and itself, what the cache then holds.
    decode = serve_parts(ir, serving_system("rtx-4090"), BATCH, PROMPT, 1).decode
    [(layers, _, _, _, kv, rereads, *_)] = [op for op in decode.ops if op.kv]
    held = sum(layer.keys.numel() + layer.values.numel() for layer in cache.layers)
    assert layers * kv == held
    assert layers * (kv + rereads) == seen.elements == 4 * held  # 8 query heads over 2


def test_the_fitted_share_is_what_falcon_180b_long_decodes_take() -> None:
    """TensorRT-LLM's Falcon-180B decoding 2,048 tokens (A100 at batch 128, H100 at 64 and
    1,024): within 15% with the stored share, predicted over 30% fast with the cache read once."""
    stored = load_engines()["tensorrt-llm"]
    assert 0 < stored.grouped_cache_reread <= 1
    once = replace(stored, grouped_cache_reread=0.0)
    figures = [f for f in load_dataset()[1]
               if f.model == "falcon-180b" and f.new_tokens == 2048]  # fmt: skip
    assert len(figures) == 3
    for f in figures:
        parts = parts_of(f)
        assert f.published_s / f.predicted_s(parts, stored) - 1 == pytest.approx(0, abs=0.15)
        assert f.published_s / f.predicted_s(parts, once) - 1 > 0.3, f
