"""Writing an imported config as a spec: `extends:` a family base, plus only what differs.

The importers say what every field should be; here each candidate base is resolved, the
fields it already gets right are left out, and the written spec is validated and resolved
again to check that it gives back exactly what was read. The base needing the fewest
overrides wins, and the spec is rendered as short YAML (one line per section).
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from dataclasses import dataclass
from typing import Any

from archspec.errors import Location, SpecError
from archspec.safety.text import visible
from archspec.spec.flat_position import flat_value
from archspec.spec.resolve import _load_chain, builtin_dir, deep_merge
from archspec.spec.schema import MoESpec, Spec
from archspec.spec.validate import validate

# The dimensions are always written, even where the base agrees: a spec's size at a glance.
DIMS = ("d_model", "n_layers", "n_heads", "d_ff", "vocab_size", "max_seq_len")
ORDER = [f.name for f in dataclasses.fields(Spec)]  # the schema's order, used within a group


@dataclass(frozen=True)
class Imported:
    """An imported config: the spec as written (minimal, over `base`) and as resolved."""

    data: dict[str, Any]  # the spec file's mapping, without `extends`
    base: str
    spec: Spec
    notes: tuple[str, ...]
    config_path: str
    model_type: str
    hf_class: str

    def yaml(self) -> str:
        return _render(self)


def fewest_overrides(
    bases: tuple[str, ...],
    target: dict[str, Any],
    family: str | None,
    source: str,
    where: Location,
) -> tuple[str, dict[str, Any], Spec]:
    """The base (the first on a tie) whose minimal spec for `target` sets the fewest fields:
    the base, the spec file's mapping (without `extends`), and the spec it resolves to."""
    best: tuple[str, dict[str, Any], Spec] | None = None
    for base in bases:
        minimal, spec = _minimal_over(base, target, family, source, where)
        if best is None or len(_flat(minimal)) < len(_flat(best[1])):
            best = (base, minimal, spec)
    assert best is not None
    return best


def _base_data(base: str) -> dict[str, Any]:
    data, _ = _load_chain(builtin_dir() / f"{base}.yaml", ())
    for key in ("name", "abstract"):
        data.pop(key, None)
    return data


def _effective(spec: Spec, path: tuple[str, ...]) -> Any:
    """A spec field's value as the IR sees it: derived defaults filled in."""
    if path == ("n_kv_heads",):
        return spec.kv_heads
    if path == ("head_dim",):
        return spec.resolved_head_dim
    if path == ("final_norm",):
        return spec.has_final_norm
    if path == ("norm", "bias"):
        return spec.norm.has_bias
    if path[0] in ("encoder", "decoder") and path[1:] == ("n_layers",):
        return spec.stack_layers(path[0])
    # The importers write the flat form (a local_position's too: ModernBERT's decoder scales
    # both layer types' rotations)
    if path[0] in ("position", "local_position") and len(path) == 2:
        position = getattr(spec, path[0])
        if position is None:
            return None
        value = flat_value(position, path[1])
        return list(value) if isinstance(value, tuple) else value
    value: Any = spec
    for key in path:
        if value is None:
            return None
        value = getattr(value, key)
    # A list field (longrope's factors) is a tuple in the spec, a list in the YAML written.
    return list(value) if isinstance(value, tuple) else value


def _wanted(target: dict[str, Any], d_model: int, n_heads: int) -> dict[tuple[str, ...], Any]:
    """The target as (path, effective value) pairs."""
    out: dict[tuple[str, ...], Any] = {}
    for key, value in target.items():
        if key == "moe" and value is not None:
            for sub, v in value.items():
                out[("moe", sub)] = v
        elif isinstance(value, dict):
            for sub, v in value.items():
                if isinstance(v, dict):  # a section within a section (attention.latent)
                    out |= {(key, sub, leaf): w for leaf, w in v.items()}
                else:
                    out[(key, sub)] = v
        else:
            out[(key,)] = value
    if out.get(("n_kv_heads",)) is None:
        out[("n_kv_heads",)] = n_heads
    if out.get(("head_dim",)) is None:
        out[("head_dim",)] = d_model // n_heads
    return out


def _minimal_over(
    base: str, target: dict[str, Any], family: str | None, source: str, where: Location
) -> tuple[dict[str, Any], Spec]:
    """The fields to write over `base` so that the spec resolves to `target`, and that spec."""
    base_data = _base_data(base)
    fixed: dict[str, Any] = {"source": source}
    if family is not None:
        fixed["family"] = family
    for key in DIMS:
        if key in target:
            fixed[key] = target[key]
    # Head counts first: the base's may not fit these dimensions (validation would refuse).
    d_model, n_heads = target["d_model"], target["n_heads"]
    divides = isinstance(n_heads, int) and n_heads > 0 and d_model % n_heads == 0
    default_head_dim = d_model // n_heads if divides else None  # else validation says why
    for key, derived in (("n_kv_heads", n_heads), ("head_dim", default_head_dim)):
        want = target.get(key) or derived
        if want != (base_data.get(key) or derived):
            fixed[key] = want
    probe = _validate(deep_merge(base_data, fixed), where)
    wanted = _wanted(target, probe.d_model, probe.n_heads)
    minimal: dict[str, Any] = dict(fixed)
    for path, value in wanted.items():
        if path[0] in fixed:
            continue
        if path[0] == "moe" and probe.moe is None:
            if len(path) > 1:  # ("moe",): None, no experts over a base without them
                minimal.setdefault("moe", {})[path[1]] = value
            continue
        if _effective(probe, path) != value:
            if len(path) == 1:
                minimal[path[0]] = value
            elif len(path) == 2:
                minimal.setdefault(path[0], {})[path[1]] = value
            else:
                minimal.setdefault(path[0], {}).setdefault(path[1], {})[path[2]] = value
    # The embedding dropout defaults to the hidden one: write it whenever the two differ, since
    # a hidden dropout written above would otherwise carry the embedding's along.
    embedding, hidden = wanted.get(("dropout", "embedding")), wanted.get(("dropout", "hidden"))
    if embedding is not None and embedding != hidden:
        minimal.setdefault("dropout", {})["embedding"] = embedding
    if "moe" in minimal and probe.moe is None:
        # A new MoE section: the expert counts, and other fields where not the defaults.
        defaults = dataclasses.asdict(MoESpec())
        minimal["moe"] = {
            k: v
            for k, v in minimal["moe"].items()
            if k in ("n_experts", "top_k") or defaults[k] != v
        }
    spec = _validate(deep_merge(base_data, minimal), where)
    for path, value in wanted.items():
        got = _effective(spec, path)
        if got != value:  # pragma: no cover - a bug in the importer, not a user mistake
            raise AssertionError(f"import-hf: {'.'.join(path)} came out {got!r}, not {value!r}")
    ordered = {k: minimal[k] for k in sorted(minimal, key=_order_key)}
    return ordered, spec


def _order_key(key: str) -> tuple[int, int]:
    # source first, then the family, the dimensions, and the rest in the schema's order
    if key == "source":
        return (0, 0)
    if key in ("family", "hf_class"):
        return (1, ORDER.index(key))
    if key in DIMS or key in ("n_kv_heads", "head_dim"):
        return (2, ORDER.index(key))
    return (3, ORDER.index(key))


def _validate(data: dict[str, Any], where: Location) -> Spec:
    try:
        return validate({"name": "imported", **data}, {}, where)
    except SpecError as exc:
        # The spec field it came to (the config's own names differ by family) points the user
        # at the config's setting: "attention.multiplier" for granite's attention_multiplier.
        field = f" (the spec's {exc.path})" if exc.path else ""
        raise SpecError(
            f"the config describes a model archspec cannot build{field}: {exc.message}",
            location=where,
            hint=exc.hint,
        ) from None


def _flat(data: dict[str, Any]) -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += [f"{key}.{sub}" for sub in value]
        else:
            out.append(key)
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, dict):  # a section within a section (attention.latent)
        return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e7):
            mantissa, exponent = f"{value:e}".split("e")
            mantissa = mantissa.rstrip("0")
            mantissa = mantissa + "0" if mantissa.endswith(".") else mantissa
            return f"{mantissa}e{int(exponent)}"
        return repr(value)
    if isinstance(value, str):
        plain = value and all(c.isalnum() or c in "-_./" for c in value)
        return value if plain and not value[0].isdigit() else json.dumps(value)
    return str(value)


def _render(imported: Imported) -> str:
    # A comment ends at any line break YAML knows, U+2028 and U+0085 among them: text from the
    # config (its path, a field's name or value in a note) goes in with those escaped, or a
    # crafted key would write spec lines of its own.
    lines = [
        f"# Imported by `archspec import-hf` from {visible(imported.config_path)}",
        f"# (model_type {visible(imported.model_type)}, {imported.hf_class}).",
    ]
    for note in imported.notes:
        lines += textwrap.wrap(f"Note: {visible(note)}.", 96, initial_indent="# ",
                               subsequent_indent="# ")  # fmt: skip
    lines.append(f"extends: {imported.base}")
    for key, value in imported.data.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items())
            lines.append(f"{key}: {{{inner}}}")
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"
