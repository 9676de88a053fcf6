"""Generation in generated decoder models: the length limit, sampling as transformers'
logits processors shape it, the eos stop, and a decode step that compiles without graph
breaks."""

from __future__ import annotations

import pytest
import torch

from tests.tiny import generated_module, scaled_down, tiny_sizes

VOCAB = 100


def tiny(name: str, tmp_path, max_seq_len: int = 32, extra: tuple[str, ...] = ()):
    """The generated module of a small `name` and its model, in evaluation mode."""
    sizes = tiny_sizes(*extra, vocab_size=VOCAB, max_seq_len=max_seq_len)
    module = generated_module(name, scaled_down(name, sizes), tmp_path)
    torch.manual_seed(0)
    return module, module.Model().eval()


@pytest.mark.parametrize("name", ["gpt2", "llama-2-7b"])
def test_past_max_seq_len_is_a_value_error(name: str, tmp_path) -> None:
    _, model = tiny(name, tmp_path, max_seq_len=16)
    prompt = torch.randint(VOCAB, (1, 10))
    with pytest.raises(ValueError, match=r"30 positions exceed max_seq_len = 16"):
        model.generate(prompt, 20)
    with pytest.raises(ValueError, match=r"17 positions exceed max_seq_len = 16"):
        model(torch.randint(VOCAB, (1, 17)))
    assert model.generate(prompt, 6).shape == (1, 16)


def test_top_k_1_sampling_equals_greedy(tmp_path) -> None:
    _, model = tiny("gpt2", tmp_path)
    prompt = torch.randint(VOCAB, (2, 5))
    sampled = model.generate(prompt, 8, do_sample=True, top_k=1, temperature=0.7)
    assert torch.equal(sampled, model.generate(prompt, 8))


def test_sampling_is_reproducible_with_a_seeded_generator(tmp_path) -> None:
    _, model = tiny("gpt2", tmp_path)
    prompt = torch.randint(VOCAB, (2, 5))

    def draw(seed: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return model.generate(prompt, 8, do_sample=True, top_p=0.9, generator=generator)

    assert torch.equal(draw(1), draw(1))
    assert not torch.equal(draw(1), draw(2))


@pytest.mark.parametrize(
    "temperature, top_k, top_p",
    [(0.7, None, None), (1.0, 5, None), (1.3, None, 0.8), (0.9, 7, 0.6)],
)
def test_sampling_probs_equal_transformers_processors(
    temperature: float, top_k: int | None, top_p: float | None, tmp_path
) -> None:
    generation = pytest.importorskip("transformers.generation.logits_process")
    module, _ = tiny("gpt2", tmp_path)
    logits = torch.randn(3, VOCAB) * 3
    processors = [generation.TemperatureLogitsWarper(temperature)]
    if top_k is not None:
        processors.append(generation.TopKLogitsWarper(top_k))
    if top_p is not None:
        processors.append(generation.TopPLogitsWarper(top_p))
    scores = logits.clone()
    for processor in processors:
        scores = processor(None, scores)
    expected = scores.softmax(dim=-1)
    ours = module.sampling_probs(logits, temperature, top_k, top_p)
    torch.testing.assert_close(ours, expected)


def test_eos_stops_and_pads(tmp_path) -> None:
    _, model = tiny("gpt2", tmp_path)
    prompt = torch.randint(VOCAB, (2, 5))
    greedy = model.generate(prompt, 10)
    eos = int(greedy[0, 7])  # the third generated token of the first sequence
    stopped = model.generate(prompt, 10, eos_token_id=eos)
    first = stopped[0, 5:]
    assert (first[first.tolist().index(eos) :] == eos).all()
    if not (stopped[1, 5:] == eos).any():
        assert stopped.size(1) == 15  # the other sequence never stopped


def test_cached_steps_equal_a_full_forward(tmp_path) -> None:
    """A prefill and single-token steps against the preallocated cache (read whole, its
    unwritten positions masked) give the logits of one forward over all the tokens."""
    module, model = tiny("llama-2-7b", tmp_path)
    tokens = torch.randint(VOCAB, (2, 12))
    with torch.no_grad():
        cache = [module.KVCache(16) for _ in model.decoder.blocks]
        model(tokens[:, :7], cache=cache)
        steps = [model(tokens[:, i : i + 1], cache=cache) for i in range(7, 12)]
    assert int(cache[0].length) == 12 and cache[0].k.shape == (2, 4, 16, 8)
    torch.testing.assert_close(torch.cat(steps, dim=1), model(tokens)[:, 7:], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["gpt2", "llama-2-7b", "bart-base"])
def test_prompt_attends_its_own_keys_causally(name: str, tmp_path, monkeypatch) -> None:
    """A prompt without padding, written into empty caches, attends its own keys with SDPA's
    causal flag (the scores above the diagonal skipped), not all of the caches' slots under
    a mask; later steps and padded prompts read the whole cache under a mask. The tokens are
    the same either way (test_generation_hf.py checks them against transformers)."""
    _, model = tiny(name, tmp_path)
    calls: list[tuple[int, int, bool]] = []  # (queries, keys, masked)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, **kwargs):
        calls.append((q.size(2), k.size(2), attn_mask is not None))
        return sdpa(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    ids = torch.randint(3, VOCAB, (2, 6))
    with torch.no_grad():
        tokens = model.generate(ids, 3)
    if name == "bart-base":
        assert tokens.shape == (2, 1 + 3)  # the start token and 3 new ones
        # The decoder starts from one token; the encoder's and the cross-attention's calls
        # have the encoder's 6 keys.
        decoder = [c for c in calls if c[1] != 6]
        assert decoder == [(1, 1, False)] * 2 + [(1, 4, True)] * 4
        return
    assert tokens.shape == (2, 6 + 3)
    assert calls == [(6, 6, False)] * 2 + [(1, 9, True)] * 4  # the prompt in 2 layers, 2 steps
    calls.clear()
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    with torch.no_grad():
        model.generate(ids, 3, attention_mask=mask)
    assert calls == [(6, 9, True)] * 2 + [(1, 9, True)] * 4  # padding: masked from the start


def test_rope_tables_are_buffers_out_of_the_state_dict(tmp_path, monkeypatch) -> None:
    """RoPE's cos and sin are computed once, at construction, for max_seq_len positions:
    buffers (they follow .to()), not parameters, not in the state_dict; a forward only
    reads their rows."""
    module, model = tiny("llama-2-7b", tmp_path, max_seq_len=24)
    buffers = dict(model.named_buffers())
    assert buffers["decoder.rope_cos"].shape == (24, 8)  # max_seq_len × head_dim
    assert not any("rope" in name for name in model.state_dict())
    assert not any("rope" in name for name, _ in model.named_parameters())
    ids = torch.randint(VOCAB, (2, 6))
    with torch.no_grad():
        before = model(ids)

    def computed(*args, **kwargs):
        raise AssertionError("rope_angles called after construction")

    monkeypatch.setattr(module, "rope_angles", computed)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), before)
        model.generate(ids, 4)
    decoder = model.decoder
    cos, _ = module.rope_at(decoder.rope_cos, decoder.rope_sin, torch.arange(6), torch.float32)
    # RoPE's formula itself: position p turns channel pair i by p / theta ** (2i / head_dim)
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8)
    angles = torch.arange(6).float()[:, None] * inv_freq
    torch.testing.assert_close(cos[0], torch.cat([angles, angles], -1).cos())


def test_beam_sampling_is_refused(tmp_path) -> None:
    _, model = tiny("gpt2", tmp_path)
    with pytest.raises(ValueError, match="beam sampling"):
        model.generate(torch.randint(VOCAB, (1, 4)), 3, num_beams=2, do_sample=True)


# Gemma 2 with a window of 4: a full layer and a windowed one, whose cache is a ring of 4.
GEMMA2_WINDOW = ("attention.sliding_window=4",)


@pytest.mark.parametrize("name", ["gpt2", "llama-2-7b", "bloom-560m", "t5-small", "gemma-2-2b"])
def test_decode_step_compiles_once(name: str, tmp_path) -> None:
    """The decode step (one token against the static cache; an encoder-decoder's decoder
    with its cross-attention keys and values cached; a windowed layer's ring) compiles into
    one graph, once, for nine steps at nine positions: fullgraph=True and dynamic=False, so
    that a step specialising on its position would compile again. The steps' logits equal
    eager ones."""
    from torch._dynamo.testing import CompileCounter

    extra = GEMMA2_WINDOW if name == "gemma-2-2b" else ()
    module, model = tiny(name, tmp_path, extra=extra)
    steps, rows = 9, 2
    counter = CompileCounter()
    compiled = torch.compile(model.decoder, backend=counter, fullgraph=True, dynamic=False)
    with torch.no_grad():
        if name == "t5-small":
            encoder_out = model.encoder(model.tok_emb(torch.randint(VOCAB, (rows, 6))))
            first = torch.zeros(rows, 1, dtype=torch.long)  # projects the encoder output
            prompt, memory = first, (encoder_out,)
        else:
            prompt, memory = torch.randint(VOCAB, (rows, 4)), ()
        tokens = torch.randint(VOCAB, (rows, steps))
        logits = {}
        for decoder in (model.decoder, compiled):
            cache = [module.KVCache(prompt.size(1) + steps) for _ in model.decoder.blocks]
            model.decoder(model.tok_emb(prompt), *memory, cache=cache)  # eager prefill
            out = [
                decoder(model.tok_emb(tokens[:, i : i + 1]), *memory, cache=cache)
                for i in range(steps)
            ]
            logits[decoder is compiled] = torch.cat(out, dim=1)
    torch._dynamo.reset()
    assert counter.frame_count == 1
    torch.testing.assert_close(logits[True], logits[False], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", ["llama-2-7b", "t5-small", "gemma-2-2b"])
def test_decode_step_writes_only_static_inputs(name: str, tmp_path) -> None:
    """CUDA graphs replay fixed addresses. cudagraph trees (torch.compile's
    mode="reduce-overhead") capture a compiled step only if every input it writes in place
    is static: a parameter, a buffer or a tensor marked with mark_static_address
    (torch/_inductor/cudagraph_utils.py, check_for_mutation); otherwise they run it without
    a graph ("skipping cudagraphs due to mutated inputs"). A decode step writes each
    cache's keys, values and length in place. The prefill is compiled too, as bench
    compiles generation: the caches it allocates must be made outside its graphs, else
    they are a CUDA graph's outputs, overwritten by its next replay (seen on an H100:
    "accessing tensor output of CUDAGraphs that has been overwritten"). This reads
    AOTAutograd's metadata of the compiled steps, the same that check reads: which
    inputs a step mutates, which are static, and whether it returns a new cache.
    (Replaying the graph itself needs a GPU.)"""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    graphs = []

    def keep_metadata(gm, example_inputs):
        meta = torch._guards.TracingContext.get().fw_metadata
        graphs.append((set(meta.mutated_inp_runtime_indices), set(meta.static_input_indices)))
        return make_boxed_func(gm.forward)

    extra = GEMMA2_WINDOW if name == "gemma-2-2b" else ()
    _, model = tiny(name, tmp_path, extra=extra)
    model.decoder.compile(backend=aot_autograd(fw_compiler=keep_metadata), dynamic=False)
    with torch.no_grad():
        model.generate(torch.randint(VOCAB, (2, 5)), max_new_tokens=4)
    torch._dynamo.reset()
    # The prompt's step, then one graph every later step replays (an encoder-decoder's
    # first decoder step, which also projects the encoder output, is a graph of its own).
    assert len(graphs) == 2
    mutated, static = graphs[-1]
    # Keys, values and length of every layer's cache.
    assert len(mutated) == 3 * len(model.decoder.blocks)
    assert mutated <= static


@pytest.mark.parametrize("name", ["llama-2-7b", "t5-small"])
def test_forward_and_training_step_compile_in_one_graph(name: str, tmp_path) -> None:
    """fullgraph=True refuses any graph break: the forward, and the loss of a training step
    whose backward AOTAutograd traces from the same graph (aot_eager), then the step."""
    from torch._dynamo.testing import CompileCounterWithBackend

    _, model = tiny(name, tmp_path)
    model.train()
    ids = torch.randint(VOCAB, (2, 8))
    args = (ids, ids) if name == "t5-small" else (ids,)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss_of(*args: torch.Tensor) -> torch.Tensor:
        logits = model(*args)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())

    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(loss_of, backend=counter, fullgraph=True, dynamic=False)
    for _ in range(2):
        loss = compiled(*args)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert counter.frame_count == 1
    with torch.no_grad():
        torch.compile(model, backend="eager", fullgraph=True, dynamic=False)(*args)
    torch._dynamo.reset()
