"""Building blocks for a family's name rules (`NameRules`): lookups that several families share.

A lookup takes a `Where` (the place of one module of ours) and gives what transformers calls
it, or None. Families compose these with `chain`; what only one family uses stays in its module.
"""

from __future__ import annotations

from typing import Literal

from archspec.hf.family import Lookup, Target, Where

Level = Literal["model", "stack", "block"]


def table(entries: dict[str, Target | str]) -> Lookup:
    """A plain table keyed by the path inside the block (or stack, or model)."""
    return lambda w: entries.get(w.local)


def chain(*lookups: Lookup) -> Lookup:
    """The first lookup that knows the place."""

    def find(w: Where) -> Target | str | None:
        for lookup in lookups:
            found = lookup(w)
            if found is not None:
                return found
        return None

    return find


def placed(level: Level, ours: str, theirs: Target | str) -> Lookup:
    """One module of ours, matched only at one level (the model, a stack, inside a block), so
    that moving it in the IR is a change of this one rule. `{role}` in `theirs` stands for the
    stack's role: at stack level a name may reach into one of transformers' blocks."""

    def find(w: Where) -> Target | str | None:
        here: Level = "model" if w.role is None else "stack" if w.index is None else "block"
        if here != level or w.local != ours:
            return None
        return theirs.format(role=w.role) if isinstance(theirs, str) else theirs

    return find


def lm_head(w: Where) -> Target | None:
    """The LM head: outside the base model, so never prefixed."""
    return Target("lm_head", outside=True) if w.local == "lm_head" else None


def shared_embedding(w: Where) -> Target | None:
    """T5 and BART: `shared`, which each stack's `embed_tokens` ties to."""
    if w.local != "tok_emb":
        return None
    return Target("shared", aliases=tuple(f"{r}.embed_tokens" for r in w.roles))


def fairseq_block(w: Where) -> str | None:
    """The fairseq-derived blocks of BART and OPT: `self_attn.q_proj`, `fc1`, ..."""
    names = {
        "attn_norm": "self_attn_layer_norm",
        "cross_norm": "encoder_attn_layer_norm",
        "mlp.up": "fc1",
        "mlp.down": "fc2",
        "mlp_norm": "final_layer_norm",
    }
    for ours, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
        names[f"attn.{ours}"] = f"self_attn.{theirs}"
        names[f"cross_attn.{ours}"] = f"encoder_attn.{theirs}"
    return names.get(w.local)
