"""Turn a merged spec mapping into a typed `Spec`, or fail with precise messages.

Validation is driven by the dataclasses in `schema.py`: their fields say which keys exist, their
types, defaults and constraints. These structural checks go on past a mistake, so that a file's
mistakes are reported together (up to MAX_ERRORS). Cross-field checks (heads dividing the width,
...) follow, on a spec that passed them, and stop at the first.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any, Literal, Union

from archspec import kinds
from archspec.errors import Location, SpecError, SpecErrors, did_you_mean
from archspec.kinds.positions import SCALINGS
from archspec.kinds.positions.rope import Rope
from archspec.kinds.positions.rope_longrope import LongRopeScaling
from archspec.kinds.positions.rope_yarn import YarnScaling
from archspec.safety.limits import FLOAT_RANGE, MAX_SIZE
from archspec.spec.flat_position import nest_position
from archspec.spec.layer_positions import check_position_pattern
from archspec.spec.schema import Spec
from archspec.spec.shorthand import expand_shorthands
from archspec.spec.yaml_loader import KEY, YamlPath, format_path

Locations = dict[YamlPath, Location]

MAX_ERRORS = 20  # the most mistakes of one spec reported at once

_TYPE_WORDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def _describe(value: Any) -> str:
    """The value, briefly: a long one (a 10**5-character string) is cut."""
    text = _describe_in_full(value)
    return text if len(text) <= 100 else text[:97] + "..."


def _expected_mapping(data: Any, kinds: Any) -> str:
    """What a section takes: a mapping, or for a section with kinds a kind's name alone."""
    if kinds:
        return f"expected a mapping or a kind's name ({' | '.join(kinds)}), got {_describe(data)}"
    return f"expected a mapping, got {_describe(data)}"


def _describe_in_full(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and abs(value) >= 10**100:
        return f"an integer of {len(str(abs(value)))} digits"
    return f"{type(value).__name__} {value!r}"


class _Reported(Exception):
    """A part of the spec failed; its errors are already in `_Validator.errors`."""


class _Stopped(Exception):
    """MAX_ERRORS errors are collected: checking stops there."""


class _Validator:
    def __init__(self, locations: Locations, fallback: Location) -> None:
        self.locations = locations
        self.fallback = fallback
        # Paths validated under other names than the user wrote (`flat_position`): new -> old.
        self.aliases: dict[YamlPath, YamlPath] = {}
        self.errors: list[SpecError] = []

    def collect(self, exc: SpecError | _Reported) -> None:
        """Note a failed part and go on with the next, up to MAX_ERRORS."""
        if isinstance(exc, SpecError):
            self.errors.append(exc)
        if len(self.errors) >= MAX_ERRORS:
            raise _Stopped

    def structure(self, data: Any) -> Spec:
        """The Spec `data` describes, or every structural mistake in it as one error."""
        try:
            return self.dataclass_(Spec, data, ())
        except (_Reported, _Stopped) as exc:
            if len(self.errors) == 1:
                raise self.errors[0] from None
            self.errors.sort(key=self.in_file_order)
            raise SpecErrors(self.errors, stopped=isinstance(exc, _Stopped)) from None

    def error(
        self, path: YamlPath, message: str, hint: str | None = None, at_key: bool = False
    ) -> SpecError:
        for new, old in self.aliases.items():
            if path[: len(new)] == new:
                path = (*old, *path[len(new) :])
                break
        location = self.locations.get((*path, KEY)) if at_key else None
        # An error about a missing key points at the nearest enclosing value that exists.
        where = path
        while where and where not in self.locations:
            where = where[:-1]
        location = location or self.locations.get(where, self.fallback)
        return SpecError(message, location=location, path=format_path(path), hint=hint)

    def error_between(self, paths: list[YamlPath], message: str) -> SpecError:
        """An error involving several fields: point at the one the user most likely just wrote
        (a --set override, else the spec file itself, else the first field named that any
        file gives: one left to its default is named last)."""

        def rank(path: YamlPath) -> int:
            if path not in self.locations:
                return 3
            file = str(self.locations[path].file)
            return 0 if file.startswith("--set") else 1 if file == str(self.fallback.file) else 2

        return self.error(min(paths, key=rank), message)

    def in_file_order(self, exc: SpecError) -> tuple:
        """The spec file's lines first, top to bottom; then the files it extends and --set."""
        where = exc.location or self.fallback
        own = str(where.file) == str(self.fallback.file)
        return (not own, str(where.file), where.line or 0, where.column or 0)

    def dataclass_(self, cls: type, data: Any, path: YamlPath) -> Any:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        if not isinstance(data, dict):
            kind = hints.get("kind")
            kinds = typing.get_args(kind) if typing.get_origin(kind) is Literal else None
            raise self.error(path, _expected_mapping(data, kinds))
        failed = False
        for key in data:
            if not isinstance(key, str):  # a YAML file refuses these; a --set mapping may not
                self.collect(self.error(path, f"keys must be strings, got {_describe(key)}"))
                failed = True
            elif key not in fields:
                # At the top, `extends` is a key too (the loader follows it before this).
                known = [*fields, "extends"] if not path else list(fields)
                self.collect(
                    self.error(
                        (*path, key),
                        f"unknown key '{key}'",
                        did_you_mean(key, known) or f"expected one of: {', '.join(known)}",
                        at_key=True,
                    )
                )
                failed = True
        values = {}
        for name, f in fields.items():
            try:
                if name not in data:
                    no_default = f.default is dataclasses.MISSING
                    if no_default and f.default_factory is dataclasses.MISSING:
                        raise self.error(
                            (*path, name), f"missing required key '{name}' ({f.metadata['doc']})"
                        )
                    continue
                if "choices" in f.metadata:
                    value = self.tagged(f, data[name], (*path, name))
                else:
                    value = self.value(hints[name], data[name], (*path, name))
                self.constraints(f, value, (*path, name))
                values[name] = value
            except (SpecError, _Reported) as exc:
                self.collect(exc)
                failed = True
        if failed:
            raise _Reported
        return cls(**values)

    def tagged(self, f: dataclasses.Field, data: Any, path: YamlPath) -> Any:
        """One of a catalogue's records (`metadata["choices"]`), chosen by the mapping's tag
        (`metadata["tag"]`: `kind`, `type`); left out, the tag of the field's default."""
        tag, choices = f.metadata["tag"], f.metadata["choices"]
        if data is None and f.default is None:  # an optional section left out
            return None
        if not isinstance(data, dict):
            kinds = list(choices) if tag == "kind" else None
            raise self.error(path, _expected_mapping(data, kinds))
        default = f.metadata.get("default_tag") or getattr(f.default_factory(), tag)
        chosen = data.get(tag, default)
        if not isinstance(chosen, str) or chosen not in choices:
            raise self.error(
                (*path, tag),
                f"expected one of {' | '.join(choices)}, got {_describe(chosen)}",
                did_you_mean(str(chosen), list(choices)),
            )
        return self.dataclass_(choices[chosen], data, path)

    def value(self, hint: Any, data: Any, path: YamlPath) -> Any:
        origin = typing.get_origin(hint)
        if origin in (Union, types.UnionType):
            options = [a for a in typing.get_args(hint) if a is not type(None)]
            if data is None:
                return None
            return self.value(options[0], data, path)
        if origin is Literal:
            choices = typing.get_args(hint)
            if data not in choices:
                listed = " | ".join(str(c) for c in choices)
                raise self.error(
                    path,
                    f"expected one of {listed}, got {_describe(data)}",
                    did_you_mean(str(data), [str(c) for c in choices]),
                )
            return data
        if dataclasses.is_dataclass(hint):
            return self.dataclass_(hint, data, path)
        if origin is tuple:
            return self.sequence(hint, data, path)
        return self.scalar(hint, data, path)

    def sequence(self, hint: Any, data: Any, path: YamlPath) -> tuple:
        """A `tuple[X, ...]` from a YAML list: each item checked as an X."""
        item, _ = typing.get_args(hint)
        if not isinstance(data, (list, tuple)) or not data:
            raise self.error(path, f"expected a non-empty list, got {_describe(data)}")
        values, failed = [], False
        for i, x in enumerate(data):
            try:
                values.append(self.value(item, x, (*path, i)))
            except (SpecError, _Reported) as exc:
                self.collect(exc)
                failed = True
        if failed:
            raise _Reported
        return tuple(values)

    def scalar(self, hint: type, data: Any, path: YamlPath) -> Any:
        if hint is float and isinstance(data, str):
            # PyYAML follows YAML 1.1, where `1e-5` (no dot) is a string: accept it as a number.
            try:
                data = float(data)
            except ValueError:
                pass
        if hint is float and isinstance(data, int) and not isinstance(data, bool):
            try:
                data = float(data)
            except OverflowError:
                raise self.error(path, "expected a number, got an integer too large") from None
        ok = isinstance(data, hint) and not (hint is not bool and isinstance(data, bool))
        if not ok:
            raise self.error(path, f"expected {_TYPE_WORDS[hint]}, got {_describe(data)}")
        if hint is float and not math.isfinite(data):
            # `.nan`, `.inf` or 1e400 would reach the generated code as a bare `nan` or `inf`.
            raise self.error(path, f"expected a finite number, got {data}")
        if hint is float and data and not FLOAT_RANGE[0] <= abs(data) <= FLOAT_RANGE[1]:
            # A multiplier of 1e308 or a divisor of 1e-320 is finite, and makes every logit
            # inf or nan in the model built from it.
            low, high = FLOAT_RANGE
            raise self.error(path, f"expected 0 or a size from {low:g} to {high:g}, got {data:g}")
        if hint is int and abs(data) > MAX_SIZE:
            # Far beyond any model; products of such sizes overflow the float arithmetic of
            # the analyses and tables (and a 10**200 does not fit any tensor).
            shown = f"{data:,}" if abs(data) < 10**30 else f"an integer of {len(str(data))} digits"
            raise self.error(path, f"expected at most {MAX_SIZE:,}, got {shown}")
        return data

    def constraints(self, f: dataclasses.Field, value: Any, path: YamlPath) -> None:
        pattern = f.metadata.get("pattern")
        if isinstance(value, str) and pattern and not re.fullmatch(pattern, value):
            raise self.error(
                path,
                f"{_describe(value)[:80]} is not allowed here: expected "
                f"{f.metadata.get('expects') or f'text matching {pattern}'}",
            )
        if isinstance(value, tuple):  # a list's constraints hold for each of its items
            for i, item in enumerate(value):
                self.constraints(f, item, (*path, i))
            return
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        if f.metadata.get("positive") and value <= 0:
            raise self.error(path, f"expected a positive number, got {value}")
        if "min" in f.metadata and value < f.metadata["min"]:
            raise self.error(path, f"expected at least {f.metadata['min']}, got {value}")
        if "below" in f.metadata and value >= f.metadata["below"]:
            raise self.error(path, f"expected less than {f.metadata['below']}, got {value}")


def validate(data: Any, locations: Locations, fallback: Location) -> Spec:
    """Check a merged spec mapping against the schema and the rules between its fields."""
    if isinstance(data, dict):
        data, locations = expand_shorthands(data, locations)
    v = _Validator(locations, fallback)
    for section in ("position", "local_position"):
        if isinstance(data, dict) and isinstance(data.get(section), dict):
            given = data[section]
            if section == "local_position":  # a rotation unless it says otherwise
                given = {"kind": "rope", **given}
            position, aliases = nest_position(given, v.error, (section,))
            v.aliases |= aliases
            data = {**data, section: position}
    spec = v.structure(data)
    _check_shapes(spec, v)
    return _resolve_defaults(spec)


def _resolve_defaults(spec: Spec) -> Spec:
    """Fill in the defaults that follow other fields, once, so that two specs that mean the
    same compare equal."""
    if spec.dropout.embedding is None:
        dropout = dataclasses.replace(spec.dropout, embedding=spec.dropout.hidden)
        spec = dataclasses.replace(spec, dropout=dropout)
    if spec.embedding.dim == spec.d_model:  # no projection: the same model as leaving it out
        spec = dataclasses.replace(spec, embedding=dataclasses.replace(spec.embedding, dim=None))
    if spec.layer_groups == spec.n_layers:  # a block per layer: no sharing
        spec = dataclasses.replace(spec, layer_groups=None)
    for section in ("position", "local_position"):
        position = getattr(spec, section)
        if position is not None and position.rotary_dim == spec.resolved_head_dim:
            # every channel: a full rotation
            whole = dataclasses.replace(position, rotary_dim=None)
            spec = dataclasses.replace(spec, **{section: whole})
    return spec


def _check_gpt_oss_moe(spec: Spec, v: _Validator) -> None:
    """gpt-oss's router and its experts' clamped SwiGLU: what they are defined for."""
    m = spec.moe
    assert m is not None
    if m.router in ("topk_softmax", "softmax_bias", "softmax_in_dtype") and m.groups > 1:
        raise v.error_between(
            [("moe", "groups"), ("moe", "router")],
            f"the {m.router} router chooses among all experts: moe.groups ({m.groups}) "
            "needs router softmax or sigmoid",
        )
    if (m.swiglu_limit is None) != (m.swiglu_alpha is None):
        given, missing = (
            ("swiglu_limit", "swiglu_alpha")
            if m.swiglu_alpha is None
            else ("swiglu_alpha", "swiglu_limit")
        )
        raise v.error(
            ("moe", given),
            f"the clamped SwiGLU takes both moe.swiglu_limit and moe.swiglu_alpha; set "
            f"moe.{missing} too",
        )
    if m.swiglu_limit is not None and not spec.mlp.gated:
        raise v.error_between(
            [("moe", "swiglu_limit"), ("mlp", "gated")],
            "moe.swiglu_limit clamps a gated MLP's gate and up projections: set mlp.gated",
        )


def _check_shapes(spec: Spec, v: _Validator) -> None:
    """Rules that involve more than one field. Each message prints the values involved."""
    if spec.attention.latent is not None:
        _check_latent(spec, v)
    elif spec.head_dim is None and spec.d_model % spec.n_heads:
        raise v.error_between(
            [("n_heads",), ("d_model",)],
            f"n_heads ({spec.n_heads}) does not divide d_model ({spec.d_model}); "
            "choose another n_heads or give head_dim explicitly",
        )
    if spec.n_heads % spec.kv_heads:
        raise v.error_between(
            [("n_kv_heads",), ("n_heads",)],
            f"n_heads ({spec.n_heads}) is not a multiple of n_kv_heads ({spec.kv_heads})",
        )
    head_dim = spec.resolved_head_dim
    if spec.attention.latent is not None:
        head_dim = spec.attention.latent.rope_dim  # what RoPE turns, for the checks below
    if spec.position.kind == "rope" and spec.attention.latent is not None:
        rope_dim = head_dim
        if rope_dim % 2:
            raise v.error_between(
                [("attention", "latent", "rope_dim"), ("position", "kind")],
                f"rope turns channel pairs: attention.latent.rope_dim must be even, got {rope_dim}",
            )
    elif spec.position.kind == "rope" and head_dim % 2:
        where = [("head_dim",), ("n_heads",), ("d_model",), ("position", "kind")]
        raise v.error_between(where, f"rope needs an even head_dim, got {head_dim}")
    if spec.position.kind == "sinusoidal" and spec.position.layout == "fairseq":
        width = min(spec.d_model, spec.embedding.dim or spec.d_model)
        if width < 4:  # fairseq divides by width // 2 - 1, as transformers' M2M100 does
            raise v.error(
                ("position", "layout"),
                "fairseq's sinusoids space their frequencies over width // 2 - 1 steps: "
                f"they need embeddings at least 4 wide, got {width}",
            )
    _check_sharing(spec, v)
    if spec.moe is not None and spec.moe.shared_gate and not spec.moe.shared_d_ff:
        raise v.error_between(
            [("moe", "shared_gate"), ("moe", "shared_d_ff")],
            "moe.shared_gate gates a shared expert; set moe.shared_d_ff",
        )
    _check_rotary(spec, v, head_dim)
    check_position_pattern(spec, v)
    if spec.position.kind == "relative_bias":
        # T5's buckets: an encoder splits them between keys before and after the query; in
        # each direction half hold one distance each, the rest reach max_distance on a log
        # scale. A causal stack (any but an encoder's) has the most exact distances.
        buckets, distance = spec.position.num_buckets, spec.position.max_distance
        least = 2 if spec.layout == "decoder" else 4
        if buckets < least:
            raise v.error(
                ("position", "num_buckets"),
                f"relative_bias needs num_buckets >= {least} with layout: {spec.layout}, "
                f"got {buckets}",
            )
        exact = buckets // 4 if spec.layout == "encoder" else buckets // 2
        if distance <= exact:
            raise v.error_between(
                [("position", "max_distance"), ("position", "num_buckets")],
                f"relative_bias needs max_distance ({distance}) above the {exact} exact "
                f"distances that num_buckets ({buckets}) gives with layout: {spec.layout}",
            )
    if spec.attention.softcap is not None and spec.layout != "decoder":
        raise v.error(
            ("attention", "softcap"),
            f"soft-capped attention needs layout: decoder (causal), not {spec.layout}",
        )
    if spec.attention.softcap is not None and spec.dropout.attention:
        raise v.error(
            ("attention", "softcap"),
            "soft-capped attention has no dropout on its probabilities; set dropout.attention: 0",
        )
    _check_sinks(spec, v)
    if spec.attention.scale is not None and (
        spec.attention.scale_dim is not None or not spec.attention.scale_scores
    ):
        raise v.error(
            ("attention", "scale"),
            "give the scores one scale: attention.scale, attention.scale_dim or "
            "scale_scores: false",
        )
    if spec.attention.qk_norm_scope != "head" and not spec.attention.qk_norm:
        raise v.error(("attention", "qk_norm_scope"), "qk_norm_scope needs attention.qk_norm")
    if spec.attention.clip_qkv is not None and spec.layout != "decoder":
        raise v.error(
            ("attention", "clip_qkv"), f"clip_qkv needs layout: decoder, not {spec.layout}"
        )
    if not spec.norm.first_attention:
        _check_bare_first_block(spec, v)
    if spec.attention.sliding_window is not None and spec.layout == "encoder-decoder":
        raise v.error(
            ("attention", "sliding_window"),
            "a sliding window needs layout: decoder (causal) or encoder (two-sided), "
            f"not {spec.layout}",
        )
    if spec.norm.bias and not kinds.norm(spec.norm.kind).allows_bias:
        raise v.error(
            ("norm", "bias"),
            f"{spec.norm.kind} has no bias; remove norm.bias or use layernorm",
        )
    if spec.embedding.scale_in_dtype and not spec.embedding.scale:
        raise v.error(("embedding", "scale_in_dtype"), "scale_in_dtype needs embedding.scale: true")
    if spec.moe and spec.moe.top_k > spec.moe.n_experts:
        raise v.error(
            ("moe", "top_k"),
            f"top_k ({spec.moe.top_k}) exceeds n_experts ({spec.moe.n_experts})",
        )
    if spec.moe is not None:
        _check_gpt_oss_moe(spec, v)
    if spec.moe and (spec.moe.groups > 1 or spec.moe.top_groups > spec.moe.groups):
        m = spec.moe
        if m.n_experts % m.groups or m.top_groups > m.groups:
            raise v.error_between(
                [("moe", "groups"), ("moe", "top_groups"), ("moe", "n_experts")],
                f"moe.groups ({m.groups}) must divide n_experts ({m.n_experts}) and be at "
                f"least top_groups ({m.top_groups})",
            )
        if m.router == "sigmoid" and m.n_experts // m.groups < 2:
            raise v.error_between(
                [("moe", "groups"), ("moe", "n_experts")],
                f"the sigmoid router ranks a group by its two best experts: moe.groups "
                f"({m.groups}) must leave at least 2 of n_experts ({m.n_experts}) in each",
            )
        if m.top_k > m.top_groups * (m.n_experts // m.groups):
            raise v.error_between(
                [("moe", "top_k"), ("moe", "top_groups")],
                f"top_k ({m.top_k}) exceeds the experts of top_groups ({m.top_groups}) groups",
            )
    if spec.moe and spec.moe.dense_layers:
        shortest = min(spec.stack_layers(role) for role in spec.roles)
        if spec.moe.dense_layers >= shortest:
            raise v.error(
                ("moe", "dense_layers"),
                f"dense_layers ({spec.moe.dense_layers}) leaves no mixture-of-experts layer in "
                f"a stack of {shortest} layers",
            )
    if spec.head.pooler and spec.layout != "encoder":
        raise v.error(("head", "pooler"), f"a pooler needs layout: encoder, not {spec.layout}")
    if spec.embedding.token_types and spec.layout != "encoder":
        raise v.error(
            ("embedding", "token_types"),
            f"token type embeddings need layout: encoder, not {spec.layout}",
        )
    start = spec.head.decoder_start_token
    if start is not None and spec.layout != "encoder-decoder":
        raise v.error(
            ("head", "decoder_start_token"),
            f"decoder_start_token needs layout: encoder-decoder, not {spec.layout}",
        )
    if start is not None and not 0 <= start < spec.vocab_size:
        raise v.error(
            ("head", "decoder_start_token"),
            f"decoder_start_token {start} is not a token of the vocabulary (0 to "
            f"{spec.vocab_size - 1})",
        )
    if spec.head.scale_tied_output and not spec.head.tied:
        raise v.error(("head", "scale_tied_output"), "scale_tied_output needs head.tied: true")
    if (
        not kinds.residual(spec.residual).allows_cross_attention
        and spec.layout == "encoder-decoder"
    ):
        raise v.error(
            ("residual",), "parallel blocks with cross-attention are not supported; use pre or post"
        )
    if spec.layout != "encoder-decoder":
        for role in ("encoder", "decoder"):
            if getattr(spec, role).n_layers is not None:
                raise v.error(
                    (role, "n_layers"),
                    f"per-stack overrides need layout: encoder-decoder, not {spec.layout}",
                )


def _check_sharing(spec: Spec, v: _Validator) -> None:
    """Factorised embeddings and layers sharing weights: where archspec builds them (ALBERT's
    and ELECTRA's encoders)."""
    if spec.embedding.dim is not None and spec.embedding.dim != spec.d_model:
        where = ("embedding", "dim")
        around = spec.embedding.projection == "around_stack"
        if around and spec.layout == "encoder-decoder":
            raise v.error(where, "projections around the stack need a single stack")
        # OPT-350m's projections: the stack runs at d_model between project_in and
        # project_out, so nothing that reads d_model beyond the stack, nor a norm of the
        # embeddings' width, has a place.
        if around and spec.embedding.norm:
            raise v.error_between(
                [("embedding", "norm"), ("embedding", "projection")],
                "an embedding norm with projection around_stack: the embeddings are projected "
                "to d_model before the positions, so no norm of embedding.dim's width follows",
            )
        for field_name in ("pooler", "token_score"):
            if around and getattr(spec.head, field_name):
                raise v.error_between(
                    [("head", field_name), ("embedding", "projection")],
                    f"head.{field_name} reads d_model ({spec.d_model}) wide states; with "
                    f"projection around_stack the stack returns embedding.dim "
                    f"({spec.embedding.dim}) wide ones",
                )
        if not around and spec.layout != "encoder":
            raise v.error(where, f"a factorised embedding needs layout encoder, not {spec.layout}")
        if spec.embedding.scale:
            raise v.error_between(
                [where, ("embedding", "scale")],
                "embedding.scale multiplies by sqrt(d_model); with embedding.dim the "
                "embeddings are narrower than d_model",
            )
        if spec.head.lm_head and not spec.head.transform and not around:
            raise v.error_between(
                [where, ("head", "lm_head")],
                f"an LM head over d_model ({spec.d_model}) cannot be tied to embeddings of "
                f"width {spec.embedding.dim}",
            )
    if spec.head.transform and (not spec.head.lm_head or spec.layout == "encoder-decoder"):
        # A masked-LM head's, or ModernBERT's decoder's (the same prediction head, causal)
        raise v.error(
            ("head", "transform"),
            "a prediction-head transform sits before the LM head of a single stack "
            "(lm_head: true, layout: encoder or decoder)",
        )
    if spec.head.token_score and (spec.head.lm_head or spec.head.pooler):
        raise v.error(
            ("head", "token_score"),
            "a token-score head is the model's only output: set lm_head and pooler to false",
        )
    groups = spec.layer_groups
    if groups is None or groups == spec.n_layers:
        return
    if spec.n_layers % groups:
        raise v.error_between(
            [("layer_groups",), ("n_layers",)],
            f"layer_groups ({groups}) does not divide n_layers ({spec.n_layers})",
        )
    if spec.layout != "encoder":
        raise v.error(
            ("layer_groups",),
            f"layers sharing weights need layout encoder, not {spec.layout} (a KV cache "
            "and cross-attention keep one module per layer)",
        )
    if spec.moe is not None and spec.moe.dense_layers:
        raise v.error_between(
            [("layer_groups",), ("moe", "dense_layers")],
            "dense first layers and shared layers cannot be combined",
        )


def _check_rotary(spec: Spec, v: _Validator, head_dim: int) -> None:
    """Partial and interleaved rotation, on an even number of a head's channels; interleaved
    pairs come with the scalings that name an interleaved catalogue entry."""
    p = spec.position
    if not isinstance(p, Rope):
        return
    if p.rotary_dim is not None and (p.rotary_dim % 2 or p.rotary_dim > head_dim):
        raise v.error(
            ("position", "rotary_dim"),
            f"rotary_dim ({p.rotary_dim}) must be even and at most head_dim ({head_dim})",
        )
    if p.interleaved and p.scaling.interleaved_entry_name is None:
        built = [name for name, s in SCALINGS.items() if s.interleaved_entry_name]
        raise v.error(
            ("position", "interleaved"),
            f"interleaved rope with {p.scaling.type} scaling is not supported (these are: "
            f"{', '.join(built)})",
        )
    if isinstance(p.scaling, LongRopeScaling):
        _check_longrope(spec, p.scaling, v, p.rotary_dim or head_dim)


def _check_longrope(spec: Spec, s: LongRopeScaling, v: _Validator, rotated: int) -> None:
    """LongRoPE's factors: one per rotated channel pair, in each list."""
    where = ("position", "scaling")
    for name in ("short_factor", "long_factor"):
        factors = getattr(s, name)
        if factors is None:
            raise v.error(where, f"longrope scaling needs position.{name}")
        if len(factors) != rotated // 2:
            raise v.error(
                (*where, name),
                f"{name} has {len(factors)} numbers; longrope needs one per rotated channel "
                f"pair: {rotated // 2} (rotated channels {rotated} / 2)",
            )


def _check_latent(spec: Spec, v: _Validator) -> None:
    """Multi-head latent attention as DeepSeek-V2 builds it: causal self-attention whose keys'
    rotated part is RoPE over rope_dim channels, every head with keys of its own. What it has
    no place for is refused, naming the field."""
    where = ("attention", "latent")
    if spec.layout != "decoder":
        raise v.error(where, f"latent attention needs layout: decoder, not {spec.layout}")
    if spec.position.kind != "rope":
        raise v.error_between(
            [where, ("position", "kind")],
            f"latent attention rotates rope_dim channels: position.kind must be rope, not "
            f"{spec.position.kind}",
        )
    if spec.position.rotary_dim is not None:
        raise v.error_between(
            [("position", "rotary_dim"), where],
            "latent attention rotates attention.latent.rope_dim channels; remove "
            "position.rotary_dim",
        )
    if spec.n_kv_heads is not None and spec.n_kv_heads != spec.n_heads:
        raise v.error_between(
            [("n_kv_heads",), where],
            f"latent attention gives each of the {spec.n_heads} heads its keys and values; "
            f"n_kv_heads ({spec.n_kv_heads}) must be left out",
        )
    if spec.head_dim is not None:
        raise v.error_between(
            [("head_dim",), where],
            "latent attention's head widths are attention.latent's nope_dim, rope_dim and "
            "v_dim; remove head_dim",
        )
    lat = spec.attention.latent
    assert lat is not None
    if lat.yarn_mscale is not None and not isinstance(spec.position.scaling, YarnScaling):
        raise v.error_between(
            [(*where, "yarn_mscale"), ("position", "scaling")],
            "attention.latent.yarn_mscale scales the scores by YaRN's factor: it needs "
            "position.scaling: yarn",
        )
    a = spec.attention
    others = {
        "bias": a.bias,
        "qkv_bias": a.qkv_bias,
        "qk_norm": a.qk_norm,
        "softcap": a.softcap is not None,
        "sinks": a.sinks,
        "scale_dim": a.scale_dim is not None,
        "sliding_window": a.sliding_window is not None,
        "scale_scores": not a.scale_scores,
    }
    for name, used in others.items():
        if used:
            raise v.error(("attention", name), f"attention.{name} is not supported with latent")


def _check_sinks(spec: Spec, v: _Validator) -> None:
    """Sinks run in a written-out causal core (`sink_attention`), as gpt-oss's eager
    attention: self-attention of a decoder, without the features that core lacks."""
    if not spec.attention.sinks:
        return
    where = ("attention", "sinks")
    if spec.layout != "decoder":
        raise v.error(where, f"attention sinks need layout: decoder (causal), not {spec.layout}")
    if spec.dropout.attention:
        raise v.error_between(
            [where, ("dropout", "attention")],
            "attention with sinks has no dropout on its probabilities; set dropout.attention: 0",
        )
    if spec.attention.softcap is not None:
        raise v.error_between(
            [where, ("attention", "softcap")],
            "attention.sinks and attention.softcap are two written-out attention cores; choose one",
        )


def _check_bare_first_block(spec: Spec, v: _Validator) -> None:
    """A first block without an attention norm (ModernBERT) takes the embedding norm's output:
    a pre-norm block after an embedding norm, in layers of their own."""
    where = ("norm", "first_attention")
    if not spec.embedding.norm:
        raise v.error(where, "norm.first_attention: false needs embedding.norm, which stands in")
    if kinds.residual(spec.residual).norm_position != "before":
        raise v.error(
            where, f"norm.first_attention: false needs a pre-norm residual, not {spec.residual}"
        )
    if spec.shares_layers:
        raise v.error(
            where, "norm.first_attention: false needs layers of their own, not layer_groups"
        )
