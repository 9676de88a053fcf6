"""The generated file's module-level helpers: masks, the functions the position kinds bring
(`archspec.kinds.position_code`) and, for models that generate, the decoding helpers
(`decoding.py`, `beam.py`).

Each helper is emitted only when the model uses it. The templates are written out in full,
already formatted; the mask helper's mention of the cache depends on the model.
"""

from __future__ import annotations

from archspec.backends.torchgen.beam import BEAM_SEARCH
from archspec.backends.torchgen.decoding import SAMPLING, kv_cache
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.model import limited
from archspec.backends.torchgen.text import docstring, indent

PADDING_KEYS = '''
def padding_keys(attention_mask: Tensor) -> Tensor:
    """(B, 1, 1, S): True where a key is padding (attention_mask 1 = token, 0 = pad)."""
    return attention_mask[:, None, None, :] == 0
'''

HIDDEN_KEYS = """
def hidden_keys(attention_mask: Tensor | None, queries: Tensor, k_len: int) -> Tensor:
{doc}
    later = torch.arange(k_len, device=queries.device) > queries[:, None]
    if attention_mask is None:
        return later
    return later | padding_keys(attention_mask)
"""

HIDDEN_KEYS_DOC = (
    "True where a query must not see a key: a later position, or padding.\n\n"
    "queries (q_len,) are the queries' positions, the keys are at 0 .. k_len - 1. "
    "Shape (q_len, k_len), or (B, 1, q_len, k_len) given an attention_mask (B, k_len)."
)
HIDDEN_KEYS_CACHE_DOC = (
    " With a cache, the keys are all its slots: those not written yet come after every query."
)

MASK_OUT = '''
def mask_out(hidden: Tensor, bias: Tensor) -> Tensor:
    """An additive attention mask: `bias` where a query may look, and the most negative
    number of the dtype where it may not (not -inf, so a query with nothing to see stays
    finite instead of turning into NaN).
    """
    return torch.where(hidden, torch.finfo(bias.dtype).min, bias)
'''

SLIDING_WINDOW = '''
def sliding_window(
    mask: Tensor | None,
    queries: Tensor,
    keys: Tensor,
    window: int,
    dtype: torch.dtype,
) -> Tensor:
    """The additive mask of a windowed layer: `mask` (None: plain causal), which has
    a column per position, taken at the keys' positions `keys` (k_len,), with what a
    query at positions `queries` (q_len,) does not see hidden: later keys, keys
    `window` or more positions before it, and cache slots not written yet (negative).
    """
    query = queries[:, None]
    outside = (keys < 0) | (keys > query) | (keys <= query - window)
    if mask is None:
        return mask_out(outside, torch.zeros((), dtype=dtype, device=keys.device))
    return mask_out(outside, mask[..., keys.clamp(min=0)])
'''

SOFTCAPPED_ATTENTION = '''
def softcapped_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, cap: float
) -> Tensor:
    """Causal attention whose scores are soft-capped, cap * tanh(scores / cap),
    before the mask (Gemma 2). SDPA cannot cap, so the scores are written out, and
    the softmax runs in float32, as transformers' eager attention. mask: additive,
    or None for plain causal.
    """
    groups = q.size(1) // k.size(1)  # query heads per key/value head
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    scores = torch.tanh(scores / cap) * cap
    if mask is None:
        hidden = hidden_keys(None, torch.arange(q.size(2), device=q.device), k.size(2))
        mask = mask_out(hidden, q.new_zeros(()))
    probs = (scores + mask).softmax(dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, v)
'''

SOFTCAP = '''
def softcap(x: Tensor, cap: float) -> Tensor:
    """x squashed smoothly into (-cap, cap): cap * tanh(x / cap)."""
    return torch.tanh(x / cap) * cap
'''

DROPOUT = '''
def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """F.dropout, keeping a one-byte mask for the backward on every device (F.dropout
    on the CPU keeps a float mask), so archspec's activation memory holds anywhere.
    """
    return torch.native_dropout(x, p, True)[0] if training else x
'''

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


def _hidden_keys(f: Features) -> str:
    doc = HIDDEN_KEYS_DOC
    if f.cache:
        doc += HIDDEN_KEYS_CACHE_DOC
    return HIDDEN_KEYS.format(doc=indent(docstring(doc, 1), 1))


def helpers(f: Features) -> list[str]:
    """The module-level functions and classes the model's code calls, in reading order:
    masks, then what each position kind brings, dropout, checkpointing, then the KV cache."""
    out = [PADDING_KEYS]
    if True in f.causalities:
        out.append(_hidden_keys(f))
    out.append(MASK_OUT)
    out += sorted({norm.entry.code for norm in f.norms if norm.entry.code})
    if f.windowed:
        out.append(SLIDING_WINDOW)
    if f.softcapped:
        out.append(SOFTCAPPED_ATTENTION)
    if f.model.logit_softcap is not None:
        out.append(SOFTCAP)
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
        out += [kv_cache(f.windowed), SAMPLING, BEAM_SEARCH]
    return [code.strip("\n") for code in out]
