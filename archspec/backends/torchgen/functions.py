"""The generated file's module-level helpers: masks and the KV cache, plus the functions the
position kinds bring (`archspec.kinds.position_code`).

Each helper is emitted only when the model uses it. The templates are written out in full,
already formatted; the mask helper's mention of the cache depends on the model.
"""

from __future__ import annotations

from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.model import limited
from archspec.backends.torchgen.text import docstring, indent

PADDING_KEYS = '''
def padding_keys(attention_mask: Tensor) -> Tensor:
    """(B, 1, 1, S): True where a key is padding (attention_mask 1 = token, 0 = pad)."""
    return attention_mask[:, None, None, :] == 0
'''

HIDDEN_KEYS = """
def hidden_keys(
    attention_mask: Tensor | None, q_len: int, k_len: int, device: torch.device
) -> Tensor:
{doc}
    later = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    later = later.triu(k_len - q_len + 1)
    if attention_mask is None:
        return later
    return later | padding_keys(attention_mask)
"""

HIDDEN_KEYS_DOC = (
    "True where a query must not see a key: a later position, or padding.\n\n"
    "Shape (q_len, k_len), or (B, 1, q_len, k_len) given an attention_mask."
)
HIDDEN_KEYS_CACHE_DOC = (
    " The queries are the last q_len of the k_len positions; the earlier ones are cached."
)

MASK_OUT = '''
def mask_out(hidden: Tensor, bias: Tensor) -> Tensor:
    """An additive attention mask: `bias` where a query may look, and the most negative
    number of the dtype where it may not (not -inf, so a query with nothing to see stays
    finite instead of turning into NaN).
    """
    return torch.where(hidden, torch.finfo(bias.dtype).min, bias)
'''

DROPOUT = '''
def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """F.dropout, keeping a one-byte mask for the backward on every device (F.dropout
    on the CPU keeps a float mask), so archspec's activation memory holds anywhere.
    """
    return torch.native_dropout(x, p, True)[0] if training else x
'''

KV_CACHE = """
class KVCache:
    \"\"\"The keys and values one attention layer has computed so far, so that new tokens
    attend to earlier ones without recomputing them. Generation keeps one per block.

    Given max_len, the first update allocates room for max_len positions and later ones
    write in place (no copying of the whole cache each step); without it, each update
    appends by concatenation.
    \"\"\"

    def __init__(self, max_len: int | None = None) -> None:
        self.max_len = max_len
        self.k: Tensor | None = None
        self.v: Tensor | None = None
        self.length = 0  # positions cached so far

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
            shape = (*k.shape[:2], self.max_len, k.size(3))
            self.k, self.v = k.new_empty(shape), v.new_empty(shape)
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        return self.k[:, :, :end], self.v[:, :, :end]
"""

MAYBE_CHECKPOINT = '''
def maybe_checkpoint(
    fn: Callable[..., Tensor],
    *args,
    enabled: bool,
    **kwargs,
) -> Tensor:
    """fn(*args, **kwargs); if enabled, through torch.utils.checkpoint: autograd keeps
    only the tensors among args (and the RNG state, so dropout draws the same masks
    again), and the backward pass runs fn again for what fn would have kept.
    """
    if not enabled:
        return fn(*args, **kwargs)
    return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=False, **kwargs)
'''

CHECK_LENGTH = """
def check_length(length: int, max_seq_len: int) -> None:
    \"\"\"Refuse more positions than the model has (position table, trained angles).\"\"\"
    if length > max_seq_len:
        raise ValueError(f"{length} positions exceed max_seq_len = {max_seq_len}")
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
"""


def _hidden_keys(f: Features) -> str:
    doc = HIDDEN_KEYS_DOC
    if f.cache:
        doc = doc.replace("\n\n", f"\n\n{HIDDEN_KEYS_CACHE_DOC.strip()} ", 1)
    return HIDDEN_KEYS.format(doc=indent(docstring(doc, 1), 1))


def helpers(f: Features) -> list[str]:
    """The module-level functions and classes the model's code calls, in reading order:
    masks, then what each position kind brings, dropout, checkpointing, then the KV cache."""
    out = [PADDING_KEYS]
    if True in f.causalities:
        out.append(_hidden_keys(f))
    out.append(MASK_OUT)
    seen: set[str] = set()
    for stack in f.stacks:
        for code in f.position_code(stack).helpers(f.causalities):
            if code not in seen:
                seen.add(code)
                out.append(code)
    if f.dropout:
        out.append(DROPOUT)
    out.append(MAYBE_CHECKPOINT)
    if any(limited(stack) for stack in f.stacks):
        out.append(CHECK_LENGTH)
    if f.cache:
        out += [KV_CACHE, SAMPLING]
    return [code.strip("\n") for code in out]
