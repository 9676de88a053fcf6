"""Safe YAML loading that remembers where every value came from.

PyYAML's `safe_load` forgets line numbers and silently keeps the last of duplicate keys. We
compose the node graph with the safe loader instead and build plain Python values ourselves,
recording the position of each value under its YAML path, so a validation error can point at
`file:line:column`. Sizes are bounded so that a hostile file (an alias bomb, a huge file) is
refused quickly instead of exhausting memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from archspec.errors import Location, SpecError

# A YAML path: the keys (and list indices) from the document root down to a value.
YamlPath = tuple[str | int, ...]

MAX_FILE_BYTES = 1_000_000  # a real spec is a few hundred bytes
MAX_NODES = 100_000  # bounds alias expansion ("billion laughs")

# Locations are recorded for values under their path, and for keys under (*path, KEY): an
# unknown or duplicate key is reported where the key is written, a bad value where its value is.
KEY = "<key>"

PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


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

    def build(self, node: yaml.Node, path: YamlPath) -> Any:
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
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        return self._scalar(node)

    def _scalar(self, node: yaml.Node) -> Any:
        try:
            return self.loader.construct_object(node)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # a safe constructor refusing its text: `2001-13-45`
            why = f": {exc}" if isinstance(exc, ValueError) else ""
            raise SpecError(
                f"cannot read {node.value!r} as {node.tag.rsplit(':', 1)[-1]}{why}",
                location=_location(self.file, node),
            ) from None

    def _mapping(self, node: yaml.MappingNode, path: YamlPath) -> dict[str, Any]:
        self.loader.flatten_mapping(node)  # applies YAML merge keys (<<)
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self._scalar(key_node)
            if not isinstance(key, str):
                raise SpecError(
                    f"keys must be strings, got {key!r}",
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
        return result


def load_yaml_file(path: Path) -> tuple[Any, dict[YamlPath, Location]]:
    """Read and parse a spec file, refusing oversized and binary files with a clear message."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SpecError(
            f"cannot read the file: {exc.strerror}", location=Location(str(path))
        ) from None
    if size > MAX_FILE_BYTES:
        raise SpecError(
            f"the file is {size:,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes",
            location=Location(str(path)),
        )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(
            "the file is not UTF-8 text (a binary file?)", location=Location(str(path))
        ) from None
    if "\x00" in text:
        raise SpecError(
            "the file contains NUL bytes (a binary file?)", location=Location(str(path))
        )
    return load_yaml_text(text, str(path))


def load_yaml_text(text: str, file: str) -> tuple[Any, dict[YamlPath, Location]]:
    """Parse one YAML document; return its value and the location of every value in it."""
    if len(text.encode("utf-8", "surrogateescape")) > MAX_FILE_BYTES:
        raise SpecError(
            f"the file is larger than the limit of {MAX_FILE_BYTES:,} bytes",
            location=Location(file),
        )
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:  # checked up front: control characters
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise SpecError(
            f"character #x{exc.character:04x} is not allowed in YAML ({exc.reason})",
            location=Location(file, line, column),
        ) from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError("the file is empty; a spec is a YAML mapping", location=Location(file))
        builder = _Builder(file, loader)
        return builder.build(node, ()), builder.locations
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file)
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(f"YAML syntax error: {problem}", location=where) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {exc}", location=Location(file)) from None
    finally:
        loader.dispose()
