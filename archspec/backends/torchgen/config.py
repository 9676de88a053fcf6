"""The generated `Config` dataclass: the spec's dimensions and constants, with its values.

Its fields are the IR's dimension symbols (`d_model`, `n_layers`, ...: whatever the module
sizes are written in) followed by the constants the forward pass reads (`norm_eps`,
`rope_theta`, ...). It is frozen, so `Config()` is a safe default argument; use
`Config(n_layers=2)` or `dataclasses.replace` for variants.
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.backends.torchgen.exprs import DIM_ORDER, ExprPrinter
from archspec.backends.torchgen.features import Features, UnsupportedIR
from archspec.backends.torchgen.local_rope import PREFIX, local_fields
from archspec.backends.torchgen.text import class_, lines
from archspec.ir.nodes import Attention
from archspec.ir.visit import walk

COMMENTS = {
    "n_kv_heads": "key/value heads, each shared by a group of query heads",
    "n_experts": "experts in each mixture-of-experts layer",
    "top_k": "experts each token is routed to",
    "rope_theta": "base of the rotary frequencies",
    "local_rope_theta": "base of the local layers' rotary frequencies",
    "num_buckets": "relative-position buckets",
    "max_distance": "distance at which the last bucket starts",
    "token_types": "segment (token type) embeddings",
    "pos_offset": "rows of the position table before position 0",
    "d_embedding": "width of the embeddings, projected to d_model",
    "d_ff_expert": "hidden width of each routed expert",
    "d_ff_shared": "hidden width of the shared expert",
    "n_layer_groups": "distinct blocks; each serves n_layers / n_layer_groups layers",
    "decoder_start_token": "the decoder's first token when generating",
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    value: int | float | tuple[float, ...] | None

    def code(self) -> str:
        line = f"{self.name}: {self.type} = {self.value!r}"
        if isinstance(self.value, tuple) and len(line) > 84:
            # As ruff format lays out a tuple too long for the line (inside the class,
            # at 88 columns): one item a line.
            items = "".join(f"    {item!r},\n" for item in self.value)
            return f"{self.name}: {self.type} = (\n{items})"
        comment = COMMENTS.get(self.name)
        return f"{line}  # {comment}" if comment else line


def config_fields(f: Features) -> list[Field]:
    """The fields in order: dimensions as DIM_ORDER lists them, then constants."""

    def rank(name: str) -> tuple[int, str]:
        return (DIM_ORDER.index(name) if name in DIM_ORDER else len(DIM_ORDER), name)

    dims = sorted(((s.name, v) for s, v in f.ir.env.items()), key=lambda nv: rank(nv[0]))
    out = [Field(name, "int", value) for name, value in dims]
    if f.norm_eps is not None:
        out.append(Field("norm_eps", "float", f.norm_eps))
    out += _position_fields(f)
    if f.model.type_emb is not None:
        out.append(Field("token_types", "int", f.ir.value(f.model.type_emb.num)))
    if f.cache and f.encoder_decoder:
        # None when the spec names none (the original Transformer): generate then asks.
        start = f.model.decoder_start_token
        out.append(Field("decoder_start_token", "int | None", start))
    return out


def _position_fields(f: Features) -> list[Field]:
    """The parameters of the stacks' position kinds their code reads (`rope_theta`, ...)."""
    found: dict[str, Field] = {}
    for stack in f.stacks:
        position = stack.position
        entry = position.entry
        values = position.values()
        spec_field = {c: s for s, c in entry.parameters}
        # "int", "float" ("int | None" for a value the code asks for only when it is set)
        types = {name: kind.removesuffix(" | None") for name, kind in position.types().items()}
        for name in f.position_code(stack).config_fields(entry, values):
            spec = spec_field[name]
            field = Field(name, types[spec], values[spec])
            if found.setdefault(name, field) != field:
                raise UnsupportedIR(f"stacks with different values of {name}")
        local = stack.local_position
        if local is not None:  # the local layers' rotation (Gemma 3): fields of its own
            spec_field = {c: s for s, c in local.entry.parameters}
            values, types = local.values(), local.types()
            for name in local_fields(stack):
                spec = spec_field[name]
                kind = types[spec].removesuffix(" | None")
                found[PREFIX + name] = Field(PREFIX + name, kind, values[spec])
    return list(found.values())


def config_class(f: Features, derived_head_dim: bool) -> str:
    head_dim = None
    if derived_head_dim:
        # The IR's own formula for the width of a head, over this Config's fields.
        attention = next(p.node for p in walk(f.model) if isinstance(p.node, Attention))
        formula = ExprPrinter(f.ir, owner="self", derive_head_dim=False)(attention.head_dim)
        head_dim = lines("@property", "def head_dim(self) -> int:", f"    return {formula}")
    return class_(
        "@dataclass(frozen=True)\nclass Config:",
        "Hyperparameters; the defaults are the spec's values.",
        lines(field.code() for field in config_fields(f)),
        head_dim,
    )
