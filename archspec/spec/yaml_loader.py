"""Safe YAML loading that remembers where every value came from.

PyYAML's `safe_load` forgets line numbers and silently keeps the last of duplicate keys. We
compose the node graph with the safe loader instead and build plain Python values ourselves,
recording the position of each value under its YAML path, so a validation error can point at
`file:line:column`. Sizes are bounded so that a hostile file (an alias bomb, a huge file, 10^5
nested brackets, an alias inside its own anchor) is refused quickly instead of exhausting memory
or the recursion limit (archspec/safety/limits.py).

Two YAML 1.1 readings that nobody means in a spec are refused rather than guessed: `010` (octal
8) and `1:30` (base 60, 90). Merge keys (`<<: *base`) follow YAML's rule: the mapping's own keys
win over merged ones, and of several merged mappings the first wins.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from archspec.errors import Location, SpecError
from archspec.safety.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES
from archspec.safety.reading import decode_utf8, read_bounded

# A YAML path: the keys (and list indices) from the document root down to a value.
YamlPath = tuple[str | int, ...]

# Locations are recorded for values under their path, and for keys under (*path, KEY): an
# unknown or duplicate key is reported where the key is written, a bad value where its value is.
KEY = "<key>"

PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
MERGE_TAG = "tag:yaml.org,2002:merge"

# YAML 1.1 numbers a person writing a spec does not mean (see the module's docstring).
_OCTAL = re.compile(r"[-+]?0[0-7_]+")
_BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")


class AmbiguousNumber(SpecError):
    """A plain scalar that YAML 1.1 reads as a number other than the one written."""


class NotYaml(SpecError):
    """Text that is not YAML at all, or a scalar its tag refuses: a `--set` value that is
    then taken as a plain string."""


class _Loader(yaml.SafeLoader):
    """The safe loader, with its (recursive) composer held to MAX_DEPTH levels of nesting."""

    depth = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise SpecError(
                    f"the document is nested more than {MAX_DEPTH} levels deep",
                    location=Location(self.name, mark.line + 1, mark.column + 1),
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def format_path(path: YamlPath) -> str:
    """`('attention', 'bias')` -> `attention.bias`; list indices as `[0]`."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + part
    return text or "<root>"


def _location(file: str, node: yaml.Node) -> Location:
    mark = node.start_mark
    return Location(file, mark.line + 1, mark.column + 1)


class _Builder:
    """Turns a composed YAML node graph into dicts, lists and scalars plus a location map."""

    def __init__(self, file: str, loader: yaml.SafeLoader) -> None:
        self.file = file
        self.loader = loader
        self.locations: dict[YamlPath, Location] = {}
        self.visited = 0
        self.open: set[int] = set()  # the collections being built: an alias to one is a cycle

    def build(self, node: yaml.Node, path: YamlPath) -> Any:
        if id(node) in self.open:
            raise SpecError(
                "an alias refers to a collection that contains it (a cycle)",
                location=_location(self.file, node),
                path=format_path(path),
            )
        self.visited += 1
        if self.visited > MAX_NODES:
            raise SpecError(
                f"the document expands to more than {MAX_NODES:,} YAML nodes "
                "(an anchor/alias bomb?); refusing to load it",
                location=_location(self.file, node),
            )
        self.locations[path] = _location(self.file, node)
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in PLAIN_TAGS:
            # Safe loading would ignore a tag on a collection; refuse it instead of guessing.
            raise SpecError(
                f"unsupported YAML tag {node.tag!r}", location=_location(self.file, node)
            )
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            self.open.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self._mapping(node, path)
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            finally:
                self.open.discard(id(node))
        return self._scalar(node)

    def _scalar(self, node: yaml.Node) -> Any:
        self._check_number(node)
        try:
            return self.loader.construct_object(node)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # a safe constructor refusing its text: `2001-13-45`
            why = f": {exc}" if isinstance(exc, ValueError) else ""
            raise NotYaml(
                f"cannot read {node.value!r} as {node.tag.rsplit(':', 1)[-1]}{why}",
                location=_location(self.file, node),
            ) from None

    def _check_number(self, node: yaml.Node) -> None:
        if not isinstance(node, yaml.ScalarNode) or node.style is not None:
            return  # only plain scalars are resolved as numbers; a quoted one is text
        text = node.value
        if node.tag == "tag:yaml.org,2002:int" and _OCTAL.fullmatch(text):
            value = self.loader.construct_object(node)
            raise AmbiguousNumber(
                f"YAML 1.1 reads {text} as the octal number {value}; write {value}, or "
                f"{text.lstrip('+-0_') or 0} without the leading zero",
                location=_location(self.file, node),
            )
        if node.tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") and (
            _BASE_60.fullmatch(text)
        ):
            value = self.loader.construct_object(node)
            raise AmbiguousNumber(
                f"YAML 1.1 reads {text} as the base-60 number {value}; write the number, or "
                "quote the text",
                location=_location(self.file, node),
            )

    def _merged(self, node: yaml.Node, path: YamlPath) -> list[dict[str, Any]]:
        """The mappings that a merge key (`<<`) names, in order of precedence."""
        if isinstance(node, yaml.MappingNode):
            return [self.build(node, path)]
        if isinstance(node, yaml.SequenceNode) and all(
            isinstance(item, yaml.MappingNode) for item in node.value
        ):
            return [self.build(item, path) for item in node.value]
        raise SpecError(
            "a merge key (<<) takes a mapping or a list of mappings",
            location=_location(self.file, node),
            path=format_path(path),
        )

    def _mapping(self, node: yaml.MappingNode, path: YamlPath) -> dict[str, Any]:
        # Merge keys are applied here, not by PyYAML's flatten_mapping, which puts the merged
        # keys among the mapping's own (a key set both ways looked like a duplicate).
        merges = [value for key, value in node.value if key.tag == MERGE_TAG]
        merged: dict[str, Any] = {}
        merged_at: dict[YamlPath, Location] = {}
        here = self.locations[path]  # building a merged mapping records its place under path
        for value_node in merges:
            for source in self._merged(value_node, path):
                for key, value in source.items():
                    if key not in merged:  # the first merged mapping wins
                        merged[key] = value
                        merged_at[(*path, key)] = self.locations[(*path, key)]
        self.locations[path] = here
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self._scalar(key_node)
            if not isinstance(key, str):
                raise SpecError(
                    f"keys must be strings, got {_key_words(key)}",
                    location=_location(self.file, key_node),
                    path=format_path(path),
                )
            if key in result:
                first = self.locations[(*path, key, KEY)]
                raise SpecError(
                    f"duplicate key '{key}' (first given at line {first.line})",
                    location=_location(self.file, key_node),
                    path=format_path((*path, key)),
                )
            self.locations[(*path, key, KEY)] = _location(self.file, key_node)
            result[key] = self.build(value_node, (*path, key))
        for key, value in merged.items():
            if key not in result:  # the mapping's own keys win over merged ones
                result[key] = value
                self.locations[(*path, key)] = merged_at[(*path, key)]
        return result


def load_yaml_file(path: Path, what: str = "a spec") -> tuple[Any, dict[YamlPath, Location]]:
    """Read and parse a spec file (or `what` else the file should be: "a hardware
    catalogue"); oversized, binary and special files are refused clearly."""
    text = decode_utf8(read_bounded(path, MAX_FILE_BYTES), str(path))
    return load_yaml_text(text, str(path), what=what)


def _key_words(key: Any) -> str:
    return "nothing (null)" if key is None else f"{type(key).__name__} {key!r}"


def load_yaml_text(
    text: str, file: str, root: YamlPath = (), what: str = "a spec"
) -> tuple[Any, dict[YamlPath, Location]]:
    """Parse one YAML document; return its value and the location of every value in it.
    `what`: what the file should be, for the message about an empty one."""
    if len(text.encode("utf-8", "surrogateescape")) > MAX_FILE_BYTES:
        raise SpecError(
            f"the file is larger than the limit of {MAX_FILE_BYTES:,} bytes",
            location=Location(file),
        )
    try:
        loader = _Loader(text)
        loader.name = file
    except yaml.reader.ReaderError as exc:  # checked up front: control characters
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise NotYaml(
            f"character #x{exc.character:04x} is not allowed in YAML ({exc.reason})",
            location=Location(file, line, column),
        ) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError(f"the file is empty; {what} is a YAML mapping", location=Location(file))
        builder = _Builder(file, loader)
        return builder.build(node, root), builder.locations
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file)
        problem = exc.problem or exc.context or "invalid YAML"
        raise NotYaml(f"YAML syntax error: {problem}", location=where) from None
    except yaml.YAMLError as exc:
        raise NotYaml(f"YAML error: {exc}", location=Location(file)) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH keeps well below the limit
        raise SpecError("the document is nested too deeply", location=Location(file)) from None
    finally:
        loader.dispose()
