"""Find a spec by name or path, follow its `extends:` chain, apply `--set` overrides, validate.

Merging rule: mappings deep-merge (the child's keys win), scalars and lists replace. A family
base marked `abstract: true` can be extended but not used directly; `name` and `abstract` are
never inherited.

A reference is a path when it looks like one (it ends in .yaml or .yml, or holds a slash);
otherwise it names a built-in spec, and a file of that name in the working directory is used
only when no built-in has the name (`./gpt2` means the file). `extends:` follows a path
anywhere on the machine, as the user's own files may be anywhere, but only to a .yaml or .yml
file, and at most MAX_EXTENDS files deep.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from importlib import resources
from pathlib import Path
from typing import Any

from archspec.errors import Location, SpecError, did_you_mean
from archspec.safety.limits import MAX_EXTENDS
from archspec.safety.text import shortened, visible
from archspec.spec.flat_position import dropped_fields, flat_override_keys
from archspec.spec.schema import Spec
from archspec.spec.shorthand import expand_shorthands, override_keys
from archspec.spec.validate import Locations, validate
from archspec.spec.yaml_loader import KEY, NotYaml, load_yaml_file, load_yaml_text

NOT_INHERITED = ("name", "abstract")
_WARNED_NO_SOURCE: set[Path] = set()
_NOTED: set[Location] = set()  # ignored fields already reported, once per place


def builtin_dir() -> Path:
    return Path(str(resources.files("archspec") / "specs"))


def _note_ignored_positions(data: dict[str, Any], locations: Locations) -> None:
    """Say once where a user's file or --set gives a position field its kind does not read
    (`theta` beside `kind: learned`): accepted, as the flat form always was (a spec extending
    a rope family may switch kinds), and reported as ignored. Built-in files say nothing."""
    builtin = str(builtin_dir())
    for section in ("position", "local_position"):
        given = data.get(section)
        if not isinstance(given, dict):
            continue
        kind = given.get("kind", "rope" if section == "local_position" else "learned")
        for name in dropped_fields({"kind": kind, **given}):
            where = locations.get((section, name))
            if where is None or str(where.file).startswith(builtin) or where in _NOTED:
                continue
            _NOTED.add(where)
            value = shortened(visible(repr(given[name])), 60)
            sys.stderr.write(
                f"{visible(str(where))}: note: {section}.{name} (= {value}) is ignored: "
                f"{section}.kind {visible(str(kind))} does not read it\n"
            )


def builtin_names(include_abstract: bool = False) -> list[str]:
    """Names of the shipped specs; family bases start with '_'."""
    names = sorted(p.stem for p in builtin_dir().glob("*.yaml"))
    return [n for n in names if include_abstract or not n.startswith("_")]


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml")) or "/" in ref or "\\" in ref


def is_builtin(ref: str) -> bool:
    return not _looks_like_path(ref) and (builtin_dir() / f"{ref}.yaml").is_file()


def shadowed_file(ref: str) -> Path | None:
    """A file in the working directory that has a built-in's name (and is not used)."""
    return Path(ref) if is_builtin(ref) and Path(ref).exists() else None


def _find(ref: str, relative_to: Path | None, location: Location | None) -> Path:
    """A spec reference is a built-in name or a path (relative to the referring file)."""
    if relative_to is None and not _looks_like_path(ref) and not is_builtin(ref):
        if Path(ref).exists():  # a file without .yaml, named on the command line
            return Path(ref).resolve()
    if _looks_like_path(ref):
        path = Path(ref).expanduser()
        if relative_to is not None and not path.is_absolute():
            path = relative_to.parent / path
        if relative_to is not None and path.suffix not in (".yaml", ".yml"):
            # Not a spec: do not read it (its content could come back in an error).
            raise SpecError(
                f"`extends` names {ref!r}, which is not a .yaml or .yml file",
                location=location,
                path="extends",
            )
        if not path.exists():  # a special file is refused when it is read
            # A link to nothing (or to itself: a loop) is there, but leads nowhere.
            what = "a symbolic link that leads to no file" if path.is_symlink() else "not found"
            raise SpecError(f"spec file {what}: {path}", location=location)
        return path.resolve()
    path = builtin_dir() / f"{ref}.yaml"
    if not path.is_file():
        # On the command line, suggest only specs it accepts: an abstract family base
        # (`_mistral` for `mixtral`) would be refused next. `extends` may name bases.
        choices = builtin_names(include_abstract=relative_to is not None)
        starting = [n for n in choices if n.startswith(ref.lower()) and ref]
        hint = (
            f"did you mean {' or '.join(repr(n) for n in starting[:3])}?"
            if starting
            else did_you_mean(ref, choices)
        )
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
    if len(chain) >= MAX_EXTENDS:
        raise SpecError(
            f"the `extends` chain is more than {MAX_EXTENDS} files long",
            location=Location(str(path)),
        )
    if path in chain:
        cycle = " -> ".join(p.name for p in (*chain[chain.index(path) :], path))
        raise SpecError(f"`extends` forms a cycle: {cycle}", location=Location(str(path)))
    data, locations = load_yaml_file(path)
    if not isinstance(data, dict):
        raise SpecError(
            "a spec must be a YAML mapping of keys to values", location=Location(str(path))
        )
    data, locations = expand_shorthands(dict(data), locations)
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


def _option_location(text: str) -> Location:
    """Where a --set error is: the option, cut short (its value may be 10^5 characters)."""
    return Location(f"--set {text if len(text) <= 80 else text[:77] + '...'}")


def parse_override(text: str) -> tuple[list[str], Any]:
    """`--set attention.bias=true` -> (['attention', 'bias'], True); values are YAML scalars."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise SpecError(
            f"--set expects key=value, got {text!r}",
            location=Location("--set"),
            hint="for example --set n_layers=48 or --set norm.kind=rmsnorm",
        )
    keys = key.strip().split(".")
    if "" in keys:
        raise SpecError(
            f"--set expects a dotted key of names, got {key.strip()!r}",
            location=_option_location(text),
            hint="for example --set n_layers=48 or --set norm.kind=rmsnorm",
        )
    if keys[0] == "extends":
        raise SpecError(
            "--set cannot change `extends`: it sets fields of the spec its chain resolves to",
            location=_option_location(text),
            hint="write a spec file that extends the other model, with the fields you change",
        )
    try:
        # The spec loader's rules hold here too: `010` is refused, nesting is bounded.
        value = load_yaml_text(raw, "--set", tuple(keys))[0] if raw.strip() else None
    except NotYaml:  # not YAML (`a: b: c`), or a tag refusing its text (`2001-13-45`)
        value = raw
    except SpecError as exc:  # pointed at the option, not at a line of it
        raise SpecError(
            exc.message, location=_option_location(text), path=exc.path, hint=exc.hint
        ) from None
    return keys, value


def apply_overrides(
    data: dict[str, Any], locations: Locations, overrides: list[str]
) -> tuple[dict[str, Any], Locations]:
    locations = dict(locations)
    for text in overrides:
        keys, value = parse_override(text)
        keys = flat_override_keys(data, override_keys(keys, value))
        where = _option_location(text)
        # A section the option creates, or writes over a value with, is the option's too: an
        # error about it (`--set attention.bias.x=1` made attention.bias a mapping) names the
        # option, not the file line of what it replaced.
        node: Any = data
        for depth in range(1, len(keys)):
            node = node.get(keys[depth - 1]) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                locations[tuple(keys[:depth])] = locations[(*keys[:depth], KEY)] = where
        patch: Any = value
        for key in reversed(keys):
            patch = {key: patch}
        data = deep_merge(data, patch)
        for path in (tuple(keys), *_paths(value, tuple(keys))):  # and a mapping's own keys
            locations[path] = locations[(*path, KEY)] = where
    return data, locations


def _paths(value: Any, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
    if not isinstance(value, dict):
        return []
    out = []
    for key, sub in value.items():
        out += [(*prefix, str(key)), *_paths(sub, (*prefix, str(key)))]
    return out


def name_from_file(path: Path) -> str:
    """A spec's default name, from its file name: `my model (v2)é.yaml` -> `my-model-v2e`;
    allowed by NAME_PATTERN whatever the file is called."""
    return name_from_text(path.stem)


def name_from_text(text: str) -> str:
    """`text` as a spec name: the characters NAME_PATTERN allows, at most 64."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", ascii_text).strip("-.")
    return name[:64].rstrip("-.") or "spec"


def load_mapping(base: str, data: dict[str, Any], where: str, overrides: list[str]) -> Spec:
    """A spec given as a mapping over the built-in `base` (an imported config.json), with
    `--set` overrides applied, validated like a file."""
    merged, locations = _load_chain(builtin_dir() / f"{base}.yaml", ())
    merged = deep_merge(merged, data)
    merged.pop("abstract", None)
    merged, locations = apply_overrides(merged, locations, overrides)
    return validate(merged, locations, Location(where))


def load_spec(ref: str | Path, overrides: list[str] | None = None) -> Spec:
    """Resolve a built-in name or a path to a validated Spec, with `--set` overrides applied."""
    path = _find(str(ref), None, None) if not isinstance(ref, Path) else ref.resolve()
    data, locations = _load_chain(path, ())
    data.setdefault("name", name_from_file(path))
    data, locations = apply_overrides(data, locations, overrides or [])
    if data.get("abstract") is True:
        raise SpecError(
            f"'{data['name']}' is an abstract family base; use one of the specs that extend it",
            location=locations.get(("abstract",), Location(str(path))),
        )
    spec = validate(data, locations, Location(str(path)))
    _note_ignored_positions(data, locations)
    if spec.source is None and path not in _WARNED_NO_SOURCE:
        _WARNED_NO_SOURCE.add(path)  # once per file, however often a command loads it
        # Allowed, so that a first spec is quick to write; but every built-in says where its
        # numbers come from, and so should a spec that is shared.
        sys.stderr.write(
            f"{Location(str(path))}: warning: no `source:` (where the numbers "
            "come from, a URL or paper)\n"
        )
    return spec
