"""Sliding-window attention: a window per layer, against transformers and its own mask.

The window's semantics are transformers' (`masking_utils.sliding_window_overlay`: a query at
position q sees key k when q - window < k <= q). Logits and greedy tokens of Mistral with a
real window are checked in tests/test_hf_weights.py (`mistral-window`); here: the FLOPs of a
windowed model under each convention against FlopCounterMode on transformers' model and the
pairs transformers' own mask function keeps, per-layer patterns (Gemma 2's alternation) through
class names, print and build, and what is refused.
"""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from archspec.backends.count.conventions import CONVENTIONS
from archspec.backends.count.flops import KV_LEN, B, S, flop_figures
from archspec.backends.count.memory import kv_cache_bytes
from archspec.backends.printer import module_repr
from archspec.backends.torchgen import generate_source, load_generated
from archspec.errors import SpecError
from archspec.hf.export_config import hf_config_dict
from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec
from tests.tiny import tiny_sizes

transformers = pytest.importorskip("transformers")
masking_utils = pytest.importorskip("transformers.masking_utils")

WINDOW = 4
TINY = tiny_sizes("n_kv_heads=2", n_layers=3, d_model=64, d_ff=128, vocab_size=99, max_seq_len=64)


def windowed(pattern: str = "L", window: int = WINDOW):
    return load_spec(
        "mistral-7b",
        [*TINY, f"attention.sliding_window={window}", f"attention.window_pattern={pattern}"],
    )


def at(expr, vals) -> int:
    result = sp.sympify(expr).xreplace(vals)
    assert result.is_Integer, result
    return int(result)


def visible_pairs(window: int, queries: int, keys: int) -> int:
    """Pairs transformers' own sliding-window causal mask keeps, the queries being the last
    `queries` of `keys` positions."""
    allowed = masking_utils.and_masks(
        masking_utils.causal_mask_function, masking_utils.sliding_window_overlay(window)
    )
    q = torch.arange(keys - queries, keys)[:, None]
    k = torch.arange(keys)[None, :]
    return int(allowed(torch.tensor(0), torch.tensor(0), q, k).sum())


def hf_mistral(spec):
    config = transformers.AutoConfig.for_model(**hf_config_dict(spec))
    torch.manual_seed(0)
    return transformers.MistralForCausalLM(config).eval()


def test_executed_flops_equal_flop_counter_on_transformers() -> None:
    """Windowed layers still compute every score (masked): the executed matmul FLOPs equal
    FlopCounterMode on MistralForCausalLM with the same window, past it."""
    spec = windowed()
    ir = build_ir(spec)
    f = flop_figures(ir, CONVENTIONS["executed"])
    hf = hf_mistral(spec)
    for b, s in ((1, 10), (2, 17)):
        with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as c:
            hf(torch.randint(0, 99, (b, s)))
        assert at(f.forward_matmul, {**ir.env, B: b, S: s}) == c.get_total_flops()


@pytest.mark.parametrize("pattern", ["L", "LG", "GLL"])
def test_causal_convention_counts_the_pairs_of_transformers_mask(pattern: str) -> None:
    """Under `causal`, QKᵀ of a windowed layer counts the pairs transformers' mask keeps; a
    full layer counts S(S+1)/2. Forward at several S, and a decode step at several kv_len."""
    spec = windowed(pattern)
    ir = build_ir(spec)
    f = flop_figures(ir, CONVENTIONS["causal"])
    scores = f.components["attn_scores"][0]
    per_pair = 2 * 4 * 16  # 2 FLOPs per multiply-add, 4 heads of 16
    layers = [spec.windowed(i) for i in range(spec.n_layers)]
    for s in (1, 3, 4, 5, 11):
        pairs = sum(visible_pairs(WINDOW, s, s) if w else s * (s + 1) // 2 for w in layers)
        assert at(scores, {**ir.env, B: 1, S: s}) == per_pair * pairs
    assert f.decode_matmul is not None
    # A decode step of the generated code reads a windowed layer's ring, the window alone:
    # it runs no hidden score, so `executed` counts what `causal` counts.
    executed = flop_figures(ir, CONVENTIONS["executed"]).decode_matmul
    for kv in (2, 4, 9):
        vals = {**ir.env, B: 1, KV_LEN: kv}
        assert at(executed, vals) == at(f.decode_matmul, vals)


def test_alternating_layers_generate_print_and_run(tmp_path) -> None:
    """Gemma 2's pattern: windowed and full layers alternate, two block classes; the generated
    model prints as archspec prints it and agrees with the same model built with every layer
    full on a sequence no longer than the window (where the window hides nothing), but not
    past it."""
    spec = windowed("LG")
    ir = build_ir(spec)
    source = generate_source(ir)
    assert "class SlidingBlock" in source and "class FullBlock" in source
    model = load_generated(source, tmp_path).Model().eval()
    assert module_repr(ir) == repr(model)
    full_ir = build_ir(load_spec("mistral-7b", TINY))
    full = load_generated(generate_source(full_ir), tmp_path).Model().eval()
    full.load_state_dict(model.state_dict())
    ids = torch.randint(0, 99, (2, 10))
    with torch.no_grad():
        short, long = ids[:, :WINDOW], ids
        torch.testing.assert_close(model(short), full(short))
        assert not torch.allclose(model(long), full(long), atol=1e-3)


def test_kv_cache_is_bounded_by_the_window(tmp_path) -> None:
    """A windowed layer caches its window alone, in a ring of `window` slots. Mistral with a
    window of 4 generates 12 tokens after a prompt of 5 (17 positions) as transformers'
    greedy generate does, step by step through the caches and through `generate`; the
    caches then hold the bytes count says: min(kv_len, window) positions per layer."""
    from archspec.hf.weights import load_weights
    from tests.test_hf_weights import VOCAB, generated, greedy_hf, hf_model, save

    hf = hf_model("mistral-window")
    checkpoint = save(hf, tmp_path / "checkpoint", "mistral-window")
    module, spec_path = generated(checkpoint, tmp_path)
    model = load_weights(module.Model().eval(), checkpoint)
    torch.manual_seed(5)
    prompt, steps = torch.randint(3, VOCAB, (2, 5)), 12
    expected = greedy_hf(hf, prompt, steps)
    total = prompt.size(1) + steps
    cache = [module.KVCache(total) for _ in model.decoder.blocks]
    tokens = prompt
    with torch.no_grad():
        logits = model(prompt, cache=cache)
        for step in range(steps):
            new = logits[:, -1:].argmax(dim=-1)
            tokens = torch.cat([tokens, new], dim=1)
            if step < steps - 1:
                logits = model(new, cache=cache)
    assert torch.equal(tokens, expected)
    assert torch.equal(model.generate(prompt, steps), expected)
    assert cache[0].k.shape == (2, 2, WINDOW, 16)
    held = sum(t.numel() * t.element_size() for layer in cache for t in (layer.k, layer.v))
    ir = build_ir(load_spec(str(spec_path)))
    assert held == at(kv_cache_bytes(ir, 4), {**ir.env, B: 2, KV_LEN: total})
    # Shorter than the window, a windowed cache holds every position, as one without.
    short = build_ir(windowed())
    vals = {**short.env, B: 2, KV_LEN: WINDOW - 1}
    without = kv_cache_bytes(build_ir(load_spec("mistral-7b", TINY)))
    assert at(kv_cache_bytes(short), vals) == at(without, vals)


def test_refusals_name_the_field() -> None:
    with pytest.raises(SpecError, match="sliding window needs layout: decoder"):
        load_spec("t5-small", ["attention.sliding_window=8"])
    with pytest.raises(SpecError) as err:
        load_spec("mistral-7b", ["attention.window_pattern=LX"])
    assert "window_pattern" in str(err.value.path)
    # Mistral's config windows every layer: an alternating spec has no Mistral config.
    with pytest.raises(SpecError, match="window_pattern"):
        hf_config_dict(windowed("LG"))


def test_mistral_config_round_trips_its_window() -> None:
    fields = hf_config_dict(windowed())
    assert fields["sliding_window"] == WINDOW
    assert import_config(fields).spec.attention.sliding_window == WINDOW
