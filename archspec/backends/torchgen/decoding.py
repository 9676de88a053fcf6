"""The generated file's decoding helpers: the KV cache, the next-token choice (greedy or
sampled as transformers' logits processors shape it) and the greedy or sampling loop.

They are emitted for every model that generates (`Features.cache`). The loop knows nothing
of the model: `Model.generate` hands it a `step` function that feeds the newest tokens
through the decoder (filling the cache) and returns the next-token logits, so decoder-only
and encoder-decoder models, greedy decoding, sampling and beam search (`beam.py`) share it.
"""

from __future__ import annotations

KV_CACHE = """
def static_address(t: Tensor) -> Tensor:
    \"\"\"t, marked as a static input of compiled steps: one whose address stays. Not
    while compiling: a tensor a compiled step creates is its output, which a CUDA graph
    keeps in memory of its own.\"\"\"
    if not torch.compiler.is_compiling():
        torch._dynamo.mark_static_address(t)
    return t


class KVCache:
    \"\"\"The keys and values one attention layer has computed so far, so that new tokens
    attend to earlier ones without recomputing them. Generation keeps one per block.

    The first update allocates room for max_len positions; each update writes the new
    positions in place (nothing is copied or concatenated). A decode step reads all
    max_len positions, those not written yet hidden by the causal mask (they come
    after every query), so that every decode step has the same shapes: compiled, it
    is one graph for every position. For the same reason the count of positions
    written, `length`, is a tensor: a Python int would be a constant of the compiled
    graph. In an encoder-decoder's block, `memory` also keeps the cross-attention's
    keys and values of the encoder output, projected once.{window}

    CUDA graphs replay fixed addresses: torch.compile(mode="reduce-overhead") captures
    a step in one only if every tensor the step writes in place is a static input (as
    parameters and buffers are), so the cache marks its own tensors static.
    \"\"\"

    def __init__(self, max_len: int, device: torch.device | None = None) -> None:
        self.max_len = max_len
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.length = static_address(torch.zeros((), dtype=torch.long, device=device))
        self.memory: tuple[Tensor, Tensor] | None = None

    def allocate(self, k: Tensor, v: Tensor, slots: int) -> None:
        \"\"\"Room for `slots` positions of keys like k and values like v (latent
        attention caches values of another width than its keys). Zeros: a hidden key
        gets weight 0, and 0 times leftover NaNs would be NaN.\"\"\"
        self.k = static_address(k.new_zeros((*k.shape[:2], slots, k.size(3))))
        self.v = static_address(v.new_zeros((*v.shape[:2], slots, v.size(3))))

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        \"\"\"Write new keys and values (B, heads, S, head_dim) after the cached ones;
        return the whole cache, (B, heads, max_len, head_dim).\"\"\"
        if self.k is None or self.v is None:
            self.allocate(k, v, self.max_len)
        positions = self.length + torch.arange(k.size(2), device=k.device)
        self.k.index_copy_(2, positions, k)
        self.v.index_copy_(2, positions, v)
        self.length += k.size(2)
        return self.k, self.v

    def reorder(self, rows: Tensor) -> None:
        \"\"\"Keep, in row i, what row rows[i] holds (beam search continues some beams
        twice and drops others). The encoder's memory is the same for every beam of a
        sequence, so it stays.\"\"\"
        if self.k is not None and self.v is not None:
            self.k.copy_(self.k.index_select(0, rows))
            self.v.copy_(self.v.index_select(0, rows))
"""

# Emitted for models with a sliding window: the ring a windowed layer caches.
UPDATE_WINDOW = """
    def update_window(
        self,
        k: Tensor,
        v: Tensor,
        window: int,
    ) -> tuple[Tensor, Tensor, Tensor]:
        \"\"\"As `update`, for a layer whose queries see only `window` positions (their
        own and the window - 1 before it): the cache keeps the latest `window` in a
        ring, position p in slot p % window. Returns the keys and values attention
        reads, and the position of each (negative where none is written yet).\"\"\"
        size = min(window, self.max_len)
        if self.k is None or self.v is None:
            self.allocate(k, v, size)
        new = self.length + torch.arange(k.size(2), device=k.device)
        slots = torch.arange(size, device=k.device)
        if k.size(2) == 1:
            # One new token, written first: the ring then holds its whole window.
            self.k.index_copy_(2, new % size, k)
            self.v.index_copy_(2, new % size, v)
            self.length += 1
            return self.k, self.v, new - (new - slots) % size
        # Several: the first of them see keys that the later ones overwrite, so they
        # read the ring as it was beside the new keys; then the ring keeps the last.
        last = self.length - 1  # the latest position in the ring
        positions = torch.cat([last - (last - slots) % size, new])
        k_read, v_read = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        kept = min(k.size(2), size)
        self.k.index_copy_(2, new[-kept:] % size, k[:, :, -kept:])
        self.v.index_copy_(2, new[-kept:] % size, v[:, :, -kept:])
        self.length += k.size(2)
        return k_read, v_read, positions
"""
WINDOW_SENTENCE = """

    A layer with a sliding window keeps only its window, in a ring (`update_window`)."""


def kv_cache(windowed: bool) -> str:
    """The KVCache class, with the ring of windowed layers if the model has any."""
    if not windowed:
        return KV_CACHE.replace("{window}", "")
    update_end = KV_CACHE.index("    def reorder(")
    return (
        KV_CACHE[:update_end].replace("{window}", WINDOW_SENTENCE)
        + UPDATE_WINDOW.strip("\n")
        + "\n\n"
        + KV_CACHE[update_end:]
    )


SAMPLING = """
def sampling_probs(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Tensor:
    \"\"\"The distribution (B, vocab) sampling draws from: logits (B, vocab) divided by
    temperature, then only the top_k most likely tokens kept, then only the smallest set
    whose probability reaches top_p, in the order and with the ties of transformers'
    TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper.
    \"\"\"
    logits = logits.float() / temperature
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.size(-1))).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p is not None:
        ascending, order = logits.sort(dim=-1)
        dropped = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        dropped[:, -1] = False  # the most likely token always stays
        logits = logits.masked_fill(dropped.scatter(1, order, dropped), -math.inf)
    return logits.softmax(dim=-1)


def next_token(
    logits: Tensor,
    do_sample: bool,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    generator: torch.Generator | None,
) -> Tensor:
    \"\"\"(B, 1): the most likely token of logits (B, vocab), or one drawn.\"\"\"
    if not do_sample:
        return logits.argmax(dim=-1, keepdim=True)
    probs = sampling_probs(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator)


def decode(
    step: Callable[[Tensor], Tensor],
    tokens: Tensor,
    max_new_tokens: int,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    eos_token_id: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    \"\"\"Append up to max_new_tokens tokens to tokens (B, S): the most likely one, or
    with do_sample one drawn from `sampling_probs`. step(new) feeds the newest tokens
    (first all of `tokens`, then one per sequence) and returns the next-token logits.

    A sequence that emits eos_token_id is done: its later tokens are eos_token_id, and
    decoding stops when all are done.
    \"\"\"
    new = tokens
    done = torch.zeros_like(tokens[:, :1], dtype=torch.bool)
    for _ in range(max_new_tokens):
        new = next_token(step(new), do_sample, temperature, top_k, top_p, generator)
        if eos_token_id is not None:
            new = new.masked_fill(done, eos_token_id)
            done = done | (new == eos_token_id)
        tokens = torch.cat([tokens, new], dim=1)
        if eos_token_id is not None and bool(done.all()):
            break
    return tokens
"""
