"""The generated file's decoding helpers: the KV cache, the next-token choice (greedy or
sampled as transformers' logits processors shape it) and the greedy or sampling loop.

They are emitted for every model that generates (`Features.cache`). The loop knows nothing
of the model: `Model.generate` hands it a `step` function that feeds the newest tokens
through the decoder (filling the cache) and returns the next-token logits, so decoder-only
and encoder-decoder models, greedy decoding, sampling and beam search (`beam.py`) share it.
"""

from __future__ import annotations

KV_CACHE = """
class KVCache:
    \"\"\"The keys and values one attention layer has computed so far, so that new tokens
    attend to earlier ones without recomputing them. Generation keeps one per block.

    Given max_len, the first update allocates room for max_len positions and later ones
    write in place (no copying of the whole cache each step); without it, each update
    appends by concatenation. In an encoder-decoder's block, `memory` also keeps the
    cross-attention's keys and values of the encoder output, projected once.
    \"\"\"

    def __init__(self, max_len: int | None = None) -> None:
        self.max_len = max_len
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.length = 0  # positions cached so far
        self.memory: tuple[Tensor, Tensor] | None = None

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        \"\"\"Add new keys and values (B, heads, S, head_dim); return all so far.\"\"\"
        start, end = self.length, self.length + k.size(2)
        self.length = end
        if self.max_len is None:
            if self.k is not None:
                k = torch.cat([self.k, k], dim=2)
                v = torch.cat([self.v, v], dim=2)
            self.k, self.v = k, v
            return k, v
        if end > self.max_len:
            raise ValueError(f"{end} positions exceed the cache's {self.max_len}")
        if self.k is None or self.v is None:
            self.k = k.new_empty((*k.shape[:2], self.max_len, k.size(3)))
            self.v = v.new_empty((*v.shape[:2], self.max_len, v.size(3)))
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        return self.k[:, :, :end], self.v[:, :, :end]

    def reorder(self, rows: Tensor) -> None:
        \"\"\"Keep, in row i, what row rows[i] holds (beam search continues some beams
        twice and drops others). The encoder's memory is the same for every beam of a
        sequence, so it stays.\"\"\"
        if self.k is not None and self.v is not None:
            self.k.copy_(self.k.index_select(0, rows))
            self.v.copy_(self.v.index_select(0, rows))
"""

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
