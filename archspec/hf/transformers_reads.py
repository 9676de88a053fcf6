"""Which config.json fields transformers' own code could read for a model_type, found in its
source files without importing it (import-hf never imports torch or transformers).

A field that archspec's importer does not read is an error unless it is known not to change
the model; this tells the rest apart: a field that no file of transformers for that model_type
(its configuration and modeling modules) nor its shared code (the package's top-level modules
and `integrations/`) ever names cannot change what transformers computes, so import-hf accepts
it and reports it once as ignored. The scan errs towards "read": any identifier of the
configuration module counts (declared fields, attribute_map, docstrings), and any `config.X`,
`getattr(config, "X")` or `hasattr(config, "X")` of the modeling and shared modules.
"""

from __future__ import annotations

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


@lru_cache(maxsize=1)
def _shared_reads(package: Path) -> frozenset[str]:
    names: set[str] = set()
    for path in [*package.glob("*.py"), *package.glob("integrations/*.py")]:
        text = path.read_text(encoding="utf-8", errors="replace")
        # PreTrainedConfig reads its own attributes as self.X: every identifier counts
        names |= (
            set(_IDENTIFIER.findall(text))
            if path.name == "configuration_utils.py"
            else (_accessed(text))
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
            names |= set(_IDENTIFIER.findall(text)) if configuration else _accessed(text)
    return frozenset(names)


def unread_fields(model_type: str, keys: list[str]) -> list[str]:
    """Those of `keys` that no transformers code for `model_type` reads (none when that cannot
    be known)."""
    read = fields_read(model_type)
    return [] if read is None else [k for k in keys if k not in read]
