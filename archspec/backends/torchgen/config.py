"""The generated `Config` dataclass: the spec's dimensions and constants, with its values.

Its fields are the IR's dimension symbols (`d_model`, `n_layers`, ...: whatever the module
sizes are written in) followed by the constants the forward pass reads (`norm_eps`,
`rope_theta`, ...). It is frozen, so `Config()` is a safe default argument; use
`Config(n_layers=2)` or `dataclasses.replace` for variants.
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.backends.torchgen.exprs import DIM_ORDER
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.text import class_, lines

COMMENTS = {
    "n_kv_heads": "key/value heads, each shared by a group of query heads",
    "n_experts": "experts in each mixture-of-experts layer",
    "top_k": "experts each token is routed to",
    "rope_theta": "base of the rotary frequencies",
    "num_buckets": "relative-position buckets",
    "max_distance": "distance at which the last bucket starts",
    "token_types": "segment (token type) embeddings",
    "pos_offset": "rows of the position table before position 0",
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    value: int | float

    def code(self) -> str:
        line = f"{self.name}: {self.type} = {self.value!r}"
        comment = COMMENTS.get(self.name)
        return f"{line}  # {comment}" if comment else line


def config_fields(f: Features) -> list[Field]:
    """The fields in order: dimensions as DIM_ORDER lists them, then constants."""

    def rank(name: str) -> tuple[int, str]:
        return (DIM_ORDER.index(name) if name in DIM_ORDER else len(DIM_ORDER), name)

    dims = sorted(((s.name, v) for s, v in f.ir.env.items()), key=lambda nv: rank(nv[0]))
    fields = [Field(name, "int", value) for name, value in dims]
    fields.append(Field("norm_eps", "float", f.norm_eps))
    position = f.position
    if f.rope:
        fields.append(Field("rope_theta", "float", position.theta))
    if f.relative_bias:
        fields.append(Field("num_buckets", "int", position.num_buckets))
        fields.append(Field("max_distance", "int", position.max_distance))
    if f.type_emb is not None:
        fields.append(Field("token_types", "int", f.ir.value(f.type_emb.num)))
    if position.kind == "learned" and position.offset:
        fields.append(Field("pos_offset", "int", position.offset))
    return fields


def config_class(f: Features, derived_head_dim: bool) -> str:
    head_dim = None
    if derived_head_dim:
        head_dim = lines(
            "@property",
            "def head_dim(self) -> int:",
            "    return self.d_model // self.n_heads",
        )
    return class_(
        "@dataclass(frozen=True)\nclass Config:",
        "Hyperparameters; the defaults are the spec's values.",
        lines(field.code() for field in config_fields(f)),
        head_dim,
    )
