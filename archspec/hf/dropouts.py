"""Dropout probabilities between config.json and the spec's `dropout` section.

Each family says which config field holds each of the spec's dropouts (`attention`, `hidden`,
`embedding`, `mlp`, `output`), with transformers' config-class default, or that its model has
no such dropout (`NONE`). One config field may serve several of the spec's keys (T5's
`dropout_rate` is all five); exporting a spec whose values there differ is refused, naming the
field, since the transformers model could not run it.
"""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.config_fields import Fields
from archspec.spec.schema import Spec

NONE = None  # the transformers model has no dropout at this place
KEYS = ("attention", "hidden", "embedding", "mlp", "output")
Places = dict[str, tuple[str, float] | None]  # spec key -> (config field, default) | NONE


def read_dropout(f: Fields, places: Places) -> dict[str, float]:
    """The spec's `dropout` section from config.json."""
    out: dict[str, float] = {}
    for key in KEYS:
        place = places.get(key, NONE)
        out[key] = 0.0 if place is None else f.float(place[0], place[1])
    return out


def write_dropout(spec: Spec, places: Places) -> dict[str, Any]:
    """config.json's dropout fields for the spec, or an error naming the first that cannot
    hold what the spec asks."""
    values = {
        "attention": spec.dropout.attention,
        "hidden": spec.dropout.hidden,
        "embedding": spec.dropout.embeddings,
        "mlp": spec.dropout.mlp,
        "output": spec.dropout.output,
    }
    fields: dict[str, Any] = {}
    for key in KEYS:
        place = places.get(key, NONE)
        if place is None:
            if values[key]:
                raise SpecError(
                    f"dropout.{key} = {values[key]}: this transformers model has no such dropout"
                )
            continue
        name = place[0]
        if name in fields and fields[name] != values[key]:
            raise SpecError(
                f"dropout.{key} = {values[key]} differs from another dropout that "
                f"config.json's `{name}` also sets ({fields[name]})"
            )
        fields[name] = values[key]
    return fields


GPT2: Places = {
    "attention": ("attn_pdrop", 0.1),
    "hidden": ("resid_pdrop", 0.1),
    "embedding": ("embd_pdrop", 0.1),
}
BERT: Places = {
    "attention": ("attention_probs_dropout_prob", 0.1),
    "hidden": ("hidden_dropout_prob", 0.1),
    "embedding": ("hidden_dropout_prob", 0.1),
}
T5: Places = {key: ("dropout_rate", 0.1) for key in KEYS}
BART: Places = {
    "attention": ("attention_dropout", 0.0),
    "hidden": ("dropout", 0.1),
    "embedding": ("dropout", 0.1),
    "mlp": ("activation_dropout", 0.0),
}
OPT: Places = {"attention": ("attention_dropout", 0.0), "hidden": ("dropout", 0.1)}
BLOOM: Places = {"attention": ("attention_dropout", 0.0), "hidden": ("hidden_dropout", 0.0)}
LLAMA: Places = {"attention": ("attention_dropout", 0.0)}
# Seed-OSS drops each sublayer's output before the residual add (residual_dropout), and both
# default to 0.1 in SeedOssConfig.
SEED_OSS: Places = {"attention": ("attention_dropout", 0.1), "hidden": ("residual_dropout", 0.1)}
