"""The symbols costs are written in, and the passes a model runs.

FLOPs and memory are formulas in the batch `B`, the sequence lengths `S` and `S_dec` and the
cached positions `kv_len` before they are numbers. A `Pass` says which stacks run and with which
lengths; `rows` turns an op value's row kind (`archspec.ir.ops.Rows`) into a count for a stack.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from archspec.ir.ops import Value

B = sp.Symbol("B", positive=True, integer=True)  # sequences in the batch
S = sp.Symbol("S", positive=True, integer=True)  # positions per sequence (the encoder's)
S_DEC = sp.Symbol("S_dec", positive=True, integer=True)  # decoder positions (encoder-decoders)
KV_LEN = sp.Symbol("kv_len", positive=True, integer=True)  # cached positions in a decode step


@dataclass(frozen=True)
class Lengths:
    """The positions one stack sees in one pass, per sequence."""

    queries: sp.Expr  # positions run through the stack
    keys: sp.Expr  # positions a self-attention query attends over (queries are the last ones)
    memory: sp.Expr = sp.Integer(0)  # encoder positions cross-attention attends over
    project_memory: bool = True  # False in a decode step: the encoder's K and V are cached
    # The keys come from a KV cache (a decode step), which holds at most its capacity.
    cached: bool = False

    def rows(self, value: Value, computed: bool = False) -> sp.Expr:
        """Rows of `value` in this pass. `computed`: rows an op computes, which for the
        encoder output (`memory`) are none when its keys and values are cached."""
        kind = value.rows
        if kind == "tokens":
            n = B * self.queries
        elif kind == "memory":
            n = B * self.memory if (self.project_memory or not computed) else sp.Integer(0)
        elif kind == "batch":
            n = B
        elif kind == "positions":
            n = self.queries
        elif kind == "pairs":
            n = self.queries * self.keys
        elif kind == "keys":
            n = B * self.held(value)
        else:
            raise ValueError(f"unknown rows {kind!r}")
        return value.copies * n

    def held(self, value: Value) -> sp.Expr:
        """Positions per sequence of a value with rows `keys`: every key, or at most the
        capacity of the cache that holds them when they come from one."""
        if self.cached and value.capacity is not None:
            return sp.Min(self.keys, value.capacity)
        return self.keys

    def attended(self, keys: Value) -> sp.Expr:
        """Positions per sequence an attention's `keys` span: the encoder output's, or the
        positions the KV cache holds."""
        if keys.rows == "memory":
            return self.memory
        assert keys.rows == "keys", "attention reads its keys from the cache or the encoder"
        return self.held(keys)

    def elements(self, value: Value, computed: bool = False) -> sp.Expr:
        return self.rows(value, computed) * value.width


@dataclass(frozen=True)
class Pass:
    """One run of the model: the lengths of each stack that runs (None: it does not run)."""

    name: str
    encoder: Lengths | None
    decoder: Lengths | None

    def lengths(self, role: str) -> Lengths | None:
        return self.encoder if role == "encoder" else self.decoder


def whole_sequences(seq: int) -> dict[sp.Symbol, int]:
    """The lengths of a step over sequences of `seq` positions: an encoder-decoder's decoder runs
    as many positions as its encoder (count's `--dec-seq` default), and a cache holds them all."""
    return {S: seq, S_DEC: seq, KV_LEN: seq}


def forward_pass(layout: str) -> Pass:
    """A forward over whole sequences: training, or the prefill of inference."""
    if layout == "encoder-decoder":
        return Pass("forward", Lengths(S, S), Lengths(S_DEC, S_DEC, S))
    return Pass("forward", Lengths(S, S), Lengths(S, S))


def decode_pass(layout: str) -> Pass | None:
    """One generated token per sequence, attending over `kv_len` cached positions (its own
    included). An encoder-decoder's encoder has run already and its K and V are cached."""
    if layout == "encoder":
        return None
    if layout == "encoder-decoder":
        lengths = Lengths(sp.Integer(1), KV_LEN, S, project_memory=False, cached=True)
        return Pass("decode", None, lengths)
    return Pass("decode", None, Lengths(sp.Integer(1), KV_LEN, cached=True))
