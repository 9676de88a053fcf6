"""Which config.json fields transformers' own code could read for a model_type, found in its
source files without importing it (import-hf never imports torch or transformers).

A field that archspec's importer does not read is an error unless it is known not to change
the model; this tells the rest apart: a field that no file of transformers for that model_type
(its configuration and modeling modules) nor its shared code (the package's top-level modules
and `integrations/`) ever names cannot change what transformers computes, so import-hf accepts
it and reports it once as ignored. The scan errs towards "read": any identifier of the
configuration modules' code counts (declared fields, attribute_map, any string that could name
a field; not their docstrings, whose examples name other models' fields: configuration_utils'
own docstring writes `scale_attn_weights=false`), and any `config.X`, `getattr(config, "X")`
or `hasattr(config, "X")` of the modeling and shared modules.

RoPE settings are read the same way (`rope_keys_read`): a key of rope_parameters that
transformers' RoPE functions (modeling_rope_utils.py) and the model's own modules never name is
one they ignore, as transformers' validator says ("Unrecognized keys in `rope_parameters`").
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_CONFIG_ACCESS = re.compile(
    r"config\.([A-Za-z_]\w*)"
    r"|(?:getattr|hasattr)\(\s*(?:self\.)?\w*config\w*\s*,\s*[\"']([A-Za-z_]\w*)[\"']"
    r"|config\w*(?:\.get|\.pop|\[)\(?\s*[\"']([A-Za-z_]\w*)[\"']"
)


def _package() -> Path | None:
    spec = importlib.util.find_spec("transformers")  # finds it; runs none of its code
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _accessed(text: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in _CONFIG_ACCESS.finditer(text)}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that stand alone as statements: docstrings (of modules,
    classes, functions and attributes), which execute nothing."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }  # fmt: skip


def _code_identifiers(text: str) -> set[str]:
    """Every identifier a module's code names, in names, attributes, arguments and any string
    (a field name in attribute_map or kwargs.pop("X")), but not in its docstrings or comments.
    A file Python cannot parse counts whole, docstrings and all."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set(_IDENTIFIER.findall(text))
    docstrings = _docstrings(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings
        ):  # fmt: skip
            names |= set(_IDENTIFIER.findall(node.value))
    return names


@lru_cache(maxsize=1)
def _shared_reads(package: Path) -> frozenset[str]:
    names: set[str] = set()
    for path in [*package.glob("*.py"), *package.glob("integrations/*.py")]:
        text = path.read_text(encoding="utf-8", errors="replace")
        # PreTrainedConfig reads its own attributes as self.X: every identifier of its code counts
        names |= (
            _code_identifiers(text) if path.name == "configuration_utils.py" else _accessed(text)
        )
    return frozenset(names)


def _model_dirs(package: Path, model_type: str) -> list[Path]:
    """The model folders whose configuration module declares this model_type."""
    declared = re.compile(rf"model_type\s*(?::\s*str\s*)?=\s*[\"']{re.escape(model_type)}[\"']")
    return [
        path.parent
        for path in sorted(package.glob("models/*/configuration_*.py"))
        if declared.search(path.read_text(encoding="utf-8", errors="replace"))
    ]


@lru_cache(maxsize=64)
def fields_read(model_type: str) -> frozenset[str] | None:
    """Every config field transformers' code for `model_type` may read, or None when
    transformers is not installed or has no such model_type (nothing can then be ruled out)."""
    package = _package()
    if package is None:
        return None
    folders = _model_dirs(package, model_type)
    if not folders:
        return None
    names = set(_shared_reads(package))
    for folder in folders:
        for path in folder.glob("*.py"):
            text = path.read_text(encoding="utf-8", errors="replace")
            configuration = path.name.startswith("configuration_")
            names |= _code_identifiers(text) if configuration else _accessed(text)
    return frozenset(names)


@lru_cache(maxsize=64)
def rope_keys_read(model_type: str) -> frozenset[str] | None:
    """Every key of rope_parameters (rope_scaling) transformers' code for `model_type` may
    read: any identifier the code of its RoPE functions or of the model's own modules names
    (None when that cannot be known)."""
    package = _package()
    folders = [] if package is None else _model_dirs(package, model_type)
    rope = None if package is None else package / "modeling_rope_utils.py"
    if not folders or rope is None or not rope.exists():
        return None
    names = _code_identifiers(rope.read_text(encoding="utf-8", errors="replace"))
    for folder in folders:
        for path in folder.glob("*.py"):
            names |= _code_identifiers(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(names)


def unread_fields(model_type: str, keys: list[str]) -> list[str]:
    """Those of `keys` that no transformers code for `model_type` reads (none when that cannot
    be known)."""
    if not keys:  # the usual case: no scan of transformers' sources
        return []
    read = fields_read(model_type)
    return [] if read is None else [k for k in keys if k not in read]
