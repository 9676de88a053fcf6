"""archspec.runtime, the code a generated model runs beyond its own classes, checked directly:
the KV cache and its window ring against a cache that keeps everything, the masks against
masks built position by position, soft-capped attention against SDPA, sampling against
transformers' logits warpers, beam search against exhaustive search and against
transformers' beam search. Then the copies: every runtime function or class a generated file
holds is byte for byte its source here, and a runtime module imports only what a generated
file imports.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import pkgutil
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch.distributed.tensor.parallel import ColwiseParallel

import archspec.runtime
from archspec.backends.torchgen import generate_source
from archspec.backends.torchgen.copied import source_of
from archspec.ir.build import build_ir
from archspec.runtime.attention import softcapped_attention
from archspec.runtime.beam import beam_search
from archspec.runtime.kv_cache import KVCache
from archspec.runtime.masks import hidden_keys, mask_out, padding_keys, sliding_window
from archspec.runtime.sampling import next_token, sampling_probs
from archspec.runtime.tensor_parallel import CopiedKVHeads, kv_heads
from archspec.runtime.window_cache import update_window
from archspec.spec.resolve import load_spec

MODULES = [
    importlib.import_module(f"archspec.runtime.{info.name}")
    for info in pkgutil.iter_modules(archspec.runtime.__path__)
]


def kv(batch: int, length: int, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values (batch, 2 heads, length, 3) whose entries say their position."""
    positions = torch.arange(start, start + length, dtype=torch.float32)
    k = positions[None, None, :, None].expand(batch, 2, length, 3).clone()
    return k, -k


# The KV cache.


def test_cache_writes_in_place_after_the_cached_positions() -> None:
    cache = KVCache(6)
    k, v = kv(2, 4)
    whole_k, whole_v = cache.update(k, v)
    assert whole_k.shape == (2, 2, 6, 3) and int(cache.length) == 4
    storage = whole_k.data_ptr(), whole_v.data_ptr()
    k2, v2 = kv(2, 1, start=4)
    whole_k, whole_v = cache.update(k2, v2)
    assert (whole_k.data_ptr(), whole_v.data_ptr()) == storage  # nothing reallocated
    assert int(cache.length) == 5
    assert torch.equal(whole_k[:, :, :5], kv(2, 5)[0])
    assert torch.equal(whole_v[:, :, :5], kv(2, 5)[1])
    assert not whole_k[:, :, 5:].any()  # not written yet: zeros


def test_reorder_copies_rows_in_place() -> None:
    cache = KVCache(3)
    k = torch.arange(3.0)[:, None, None, None].expand(3, 1, 2, 1).clone()
    cache.update(k, k + 10)
    address = cache.k.data_ptr()
    cache.reorder(torch.tensor([2, 2, 0]))
    assert cache.k.data_ptr() == address
    assert cache.k[:, 0, 0, 0].tolist() == [2.0, 2.0, 0.0]
    assert cache.v[:, 0, 0, 0].tolist() == [12.0, 12.0, 10.0]


@pytest.mark.parametrize("chunks", [(1,) * 9, (5, 1, 1, 1, 1), (2, 3, 4), (9,)])
def test_window_ring_reads_the_window_of_every_query(chunks: tuple[int, ...]) -> None:
    window, total = 4, sum(chunks)
    cache = KVCache(total)
    start = 0
    for n in chunks:
        k, v = kv(1, n, start)
        k_read, v_read, positions = update_window(cache, k, v, window)
        assert cache.k.shape[2] == window  # the ring, not max_len positions
        # Every slot read holds the keys of the position it says.
        written = positions >= 0
        assert torch.equal(k_read[0, 0, written, 0], positions[written].float())
        assert torch.equal(v_read[0, 0, written, 0], -positions[written].float())
        # Every query finds every key of its window.
        for query in range(start, start + n):
            seen = set(range(max(0, query - window + 1), query + 1))
            assert seen <= set(positions.tolist())
        start += n
    assert int(cache.length) == total


def test_window_ring_is_no_larger_than_the_cache() -> None:
    cache = KVCache(3)
    update_window(cache, *kv(1, 2), window=8)
    assert cache.k.shape[2] == 3


# Masks.


def test_hidden_keys_is_the_causal_mask_with_padding() -> None:
    attention_mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    causal = ~torch.ones(4, 4, dtype=torch.bool).tril()
    assert torch.equal(hidden_keys(None, torch.arange(4), 4), causal)
    hidden = hidden_keys(attention_mask, torch.arange(4), 4)
    assert hidden.shape == (2, 1, 4, 4)
    assert torch.equal(hidden[1, 0], causal)
    assert torch.equal(hidden[0, 0], causal | torch.tensor([True, False, False, False]))
    assert torch.equal(padding_keys(attention_mask)[:, 0, 0], attention_mask == 0)
    # A query after a cache's first positions: the slots after it are hidden.
    assert hidden_keys(None, torch.tensor([2]), 5).tolist() == [[False] * 3 + [True] * 2]


def test_mask_out_is_finite() -> None:
    bias = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    out = mask_out(torch.tensor([False, True]), bias)
    assert out.tolist() == [1.5, torch.finfo(torch.bfloat16).min]


def test_sliding_window_hides_what_each_query_does_not_see() -> None:
    window, queries, keys = 3, torch.arange(4, 7), torch.tensor([-1, 1, 2, 3, 4, 5, 6])
    mask = torch.randn(2, 1, 3, 7)
    out = sliding_window(mask, queries, keys, window, torch.float32)
    minimum = torch.finfo(torch.float32).min
    for i, query in enumerate(queries.tolist()):
        for j, key in enumerate(keys.tolist()):
            seen = 0 <= key <= query and key > query - window
            expected = mask[:, :, i, max(key, 0)] if seen else torch.full((2, 1), minimum)
            assert torch.equal(out[:, :, i, j], expected)
    causal = sliding_window(None, queries, keys, window, torch.float16)
    assert causal.dtype == torch.float16 and causal.shape == (3, 7)


def test_softcapped_attention_with_a_loose_cap_is_causal_sdpa() -> None:
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    out = softcapped_attention(q, k, v, None, 8**-0.5, cap=1e6)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out, expected)


# Sampling.


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(1.0, None, None), (0.7, 3, None), (1.3, None, 0.8), (0.5, 4, 0.6), (1.0, 50, 0.95)],
)
def test_sampling_probs_are_transformers_warpers(temperature, top_k, top_p) -> None:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(1)
    # Rounded: ties at the top-k and top-p boundaries, which must fall the same way.
    logits = (torch.randn(3, 12) * 2).round()
    warped = transformers.TemperatureLogitsWarper(temperature)(None, logits.clone())
    if top_k is not None:
        warped = transformers.TopKLogitsWarper(top_k)(None, warped)
    if top_p is not None:
        warped = transformers.TopPLogitsWarper(top_p)(None, warped)
    expected = warped.softmax(dim=-1)
    assert torch.equal(sampling_probs(logits, temperature, top_k, top_p), expected)


def test_next_token_is_the_argmax_or_drawn_from_the_probs() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 0.0]])
    assert next_token(logits, False, 1.0, None, None, None).tolist() == [[1], [0]]
    # top_k=1 leaves one token to draw.
    drawn = next_token(logits, True, 1.0, 1, None, torch.Generator().manual_seed(0))
    assert drawn.tolist() == [[1], [0]]


# Beam search.


def history_step(cache: list[KVCache], logits_of):
    """A step function over a model that sees the whole sequence: the tokens so far are kept
    in a KVCache (as its keys), so that beam search's reordering keeps them with their beam."""

    def step(new: torch.Tensor) -> torch.Tensor:
        tokens = new[:, None, :, None].float()
        cache[0].update(tokens, tokens)
        seen = cache[0].k[:, 0, : int(cache[0].length), 0].long()
        return logits_of(seen)

    return step


def table_model(vocab: int, seed: int):
    """Next-token logits that depend on the last two tokens, from a fixed random table."""
    table = torch.randn(vocab, vocab, vocab, generator=torch.Generator().manual_seed(seed))
    return lambda seen: table[seen[:, -2], seen[:, -1]]


@pytest.mark.parametrize("seed", range(4))
def test_beam_search_with_every_prefix_kept_finds_the_most_likely(seed: int) -> None:
    vocab, new_tokens, prompt = 3, 3, torch.tensor([[0, 1], [2, 2]])
    logits_of = table_model(vocab, seed)
    beams = vocab ** (new_tokens - 1)  # every prefix stays a beam: the search is exhaustive
    cache = [KVCache(prompt.size(1) + new_tokens)]
    step = history_step(cache, logits_of)
    found = beam_search(step, cache, prompt, new_tokens, beams)
    for row in range(prompt.size(0)):
        best, best_score = None, -float("inf")
        for tail in itertools.product(range(vocab), repeat=new_tokens):
            tokens = torch.cat([prompt[row], torch.tensor(tail)])[None]
            score = sum(
                logits_of(tokens[:, :at]).log_softmax(-1)[0, tokens[0, at]].item()
                for at in range(prompt.size(1), tokens.size(1))
            )
            if score > best_score:
                best, best_score = tokens[0], score
        assert torch.equal(found[row], best)


@pytest.mark.parametrize("early_stopping", [False, True, "never"])
@pytest.mark.parametrize("length_penalty", [0.7, 2.0, -1.0])
@pytest.mark.parametrize("seed", [1, 3])
def test_beam_search_is_transformers_beam_search(seed, length_penalty, early_stopping) -> None:
    transformers = pytest.importorskip("transformers")
    eos = 2
    config = transformers.GPT2Config(
        vocab_size=11, n_positions=32, n_embd=16, n_layer=1, n_head=2, eos_token_id=eos
    )
    config.bos_token_id = 1
    torch.manual_seed(seed)
    hf = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # wide weights: beams part ways, and end at different lengths
        for param in hf.parameters():
            param.normal_(0.0, 1.0)
    prompt, steps = torch.tensor([[1, 5, 7], [4, 4, 2], [6, 8, 9]]), 6
    settings = dict(num_beams=3, length_penalty=length_penalty, early_stopping=early_stopping)
    with torch.no_grad():
        expected = hf.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=steps,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
            **settings,
        )
        cache = [KVCache(prompt.size(1) + steps)]
        step = history_step(cache, lambda seen: hf(seen).logits[:, -1])
        found = beam_search(step, cache, prompt, steps, eos_token_id=eos, **settings)
    assert torch.equal(found, expected)


# Parallel styles (run on several processes in tests/test_distributed_kv_copies.py).


def test_kv_heads_are_copied_only_beyond_the_kv_heads() -> None:
    assert isinstance(kv_heads(4, 16, 2), ColwiseParallel)  # two kv heads per rank
    copied = kv_heads(2, 16, 8)  # each kv head on four ranks
    assert isinstance(copied, CopiedKVHeads) and (copied.copies, copied.head_dim) == (4, 16)


# The copies in generated files.


SPECS = [
    "gpt2",
    "llama-2-7b",
    "t5-small",
    "gemma-2-2b",
    "mixtral-8x7b",
    "deepseek-v2-lite",
    "olmo-1b",
]


def runtime_objects() -> dict[str, object]:
    """Every function and class the runtime modules define, by name."""
    out = {}
    for module in MODULES:
        for name, obj in vars(module).items():
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == (
                module.__name__
            ):
                assert name not in out, f"{name} defined twice in archspec.runtime"
                out[name] = obj
    return out


@pytest.mark.parametrize("name", SPECS)
def test_generated_files_hold_runtime_code_byte_for_byte(name: str) -> None:
    source = generate_source(build_ir(load_spec(name)))
    tree = ast.parse(source)
    objects = runtime_objects()
    lines = source.splitlines()
    copied = 0
    # Anywhere in the file: parallelize holds its parallel styles inside itself.
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in objects:
            text = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            assert textwrap.dedent(text) == source_of(objects[node.name]), node.name
            copied += 1
    assert copied >= 4  # at least the masks and maybe_checkpoint
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert "archspec" not in imported
    assert imported <= {"torch", "math", "collections", "dataclasses"}


def test_the_kv_cache_window_ring_is_copied_only_for_windowed_models() -> None:
    windowed = generate_source(build_ir(load_spec("gemma-2-2b")))
    plain = generate_source(build_ir(load_spec("llama-2-7b")))
    assert "\ndef update_window(" in windowed and "update_window" not in plain
    assert "\nclass KVCache:" in windowed and "\nclass KVCache:" in plain


# What a generated file imports: torch, math and collections.abc's Callable; and inside
# parallelize, torch.distributed's tensor parallelism.
GENERATED_IMPORTS = {
    "import torch",
    "import torch.nn.functional as F",
    "import torch.utils.checkpoint",
    "from torch import Tensor",
    "from torch import nn",
    "import math",
    "from collections.abc import Callable",
}
PARALLEL_IMPORTS = (
    "from torch.distributed.tensor import",
    "from torch.distributed.tensor.parallel",
    "from torch.distributed.pipelining",  # inside pipeline's copies
    "from torch.distributed.fsdp",  # inside parallelize, and pipeline's copies
)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_runtime_modules_import_only_what_a_generated_file_imports(module) -> None:
    tree = ast.parse(inspect.getsource(module))
    objects = runtime_objects()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                line = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                assert line in GENERATED_IMPORTS, line
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # a sibling's function or class, which the generator copies too
                assert all(alias.name in objects for alias in node.names)
                continue
            for alias in node.names:
                line = f"from {node.module} import {alias.name}"
                assert line in GENERATED_IMPORTS or line.startswith(PARALLEL_IMPORTS), line
    # No state at module level that a copy would leave behind.
    for node in tree.body:
        assert not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)), (
            f"{module.__name__} assigns at module level"
        )
