"""Find a spec by name or path, follow its `extends:` chain, apply `--set` overrides, validate.

Merging rule: mappings deep-merge (the child's keys win), scalars and lists replace. A family
base marked `abstract: true` can be extended but not used directly; `name` and `abstract` are
never inherited.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from archspec.errors import Location, SpecError, did_you_mean
from archspec.spec.schema import Spec
from archspec.spec.validate import Locations, validate
from archspec.spec.yaml_loader import load_yaml_file

NOT_INHERITED = ("name", "abstract")


def builtin_dir() -> Path:
    return Path(str(resources.files("archspec") / "specs"))


def builtin_names(include_abstract: bool = False) -> list[str]:
    """Names of the shipped specs; family bases start with '_'."""
    names = sorted(p.stem for p in builtin_dir().glob("*.yaml"))
    return [n for n in names if include_abstract or not n.startswith("_")]


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml")) or "/" in ref or "\\" in ref


def _find(ref: str, relative_to: Path | None, location: Location | None) -> Path:
    """A spec reference is a built-in name or a path (relative to the referring file)."""
    if _looks_like_path(ref):
        path = Path(ref).expanduser()
        if relative_to is not None and not path.is_absolute():
            path = relative_to.parent / path
        if not path.is_file():
            raise SpecError(f"spec file not found: {path}", location=location)
        return path.resolve()
    path = builtin_dir() / f"{ref}.yaml"
    if not path.is_file():
        hint = did_you_mean(ref, builtin_names(include_abstract=True))
        raise SpecError(
            f"unknown spec '{ref}'",
            location=location,
            hint=hint or "`archspec list` shows the built-in specs; a path must end in .yaml",
        )
    return path


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _load_chain(path: Path, chain: tuple[Path, ...]) -> tuple[dict[str, Any], Locations]:
    """Load `path` and everything it extends, merged; `chain` detects cycles."""
    if path in chain:
        cycle = " -> ".join(p.name for p in (*chain[chain.index(path) :], path))
        raise SpecError(f"`extends` forms a cycle: {cycle}", location=Location(str(path)))
    data, locations = load_yaml_file(path)
    if not isinstance(data, dict):
        raise SpecError(
            "a spec must be a YAML mapping of keys to values", location=Location(str(path))
        )
    data = dict(data)
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data, locations
    if not isinstance(parent_ref, str):
        raise SpecError(
            "`extends` takes a built-in spec name or a path to a .yaml file",
            location=locations[("extends",)],
            path="extends",
        )
    parent_path = _find(parent_ref, path, locations[("extends",)])
    parent, parent_locations = _load_chain(parent_path, (*chain, path))
    for key in NOT_INHERITED:
        parent.pop(key, None)
    return deep_merge(parent, data), {**parent_locations, **locations}


def parse_override(text: str) -> tuple[list[str], Any]:
    """`--set attention.bias=true` -> (['attention', 'bias'], True); values are YAML scalars."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise SpecError(
            f"--set expects key=value, got {text!r}",
            location=Location("--set"),
            hint="for example --set n_layers=48 or --set norm.kind=rmsnorm",
        )
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except Exception:  # not YAML (`a: b: c`), or a tag refusing its text (`2001-13-45`)
        value = raw
    return key.strip().split("."), value


def apply_overrides(
    data: dict[str, Any], locations: Locations, overrides: list[str]
) -> tuple[dict[str, Any], Locations]:
    locations = dict(locations)
    for text in overrides:
        keys, value = parse_override(text)
        patch: Any = value
        for key in reversed(keys):
            patch = {key: patch}
        data = deep_merge(data, patch)
        locations[tuple(keys)] = Location(f"--set {text}")
    return data, locations


def load_spec(ref: str | Path, overrides: list[str] | None = None) -> Spec:
    """Resolve a built-in name or a path to a validated Spec, with `--set` overrides applied."""
    path = _find(str(ref), None, None) if not isinstance(ref, Path) else ref.resolve()
    data, locations = _load_chain(path, ())
    data.setdefault("name", path.stem)
    data, locations = apply_overrides(data, locations, overrides or [])
    if data.get("abstract") is True:
        raise SpecError(
            f"'{data['name']}' is an abstract family base; use one of the specs that extend it",
            location=locations.get(("abstract",), Location(str(path))),
        )
    return validate(data, locations, Location(str(path)))
