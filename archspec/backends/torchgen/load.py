"""Importing a generated file as a module, without leaving it on `sys.path`."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType

_FOLDER: tempfile.TemporaryDirectory[str] | None = None


def _process_folder() -> Path:
    """This process's folder for generated files; `TemporaryDirectory` removes it at exit."""
    global _FOLDER
    if _FOLDER is None:
        _FOLDER = tempfile.TemporaryDirectory(prefix="archspec-")
    return Path(_FOLDER.name)


def load_generated(source: str, directory: str | Path | None = None) -> ModuleType:
    """Write `source` to a file in `directory` (a temporary one by default) and import it.

    The module gets a unique name derived from its content and is registered in `sys.modules`
    (dataclasses and pickling look modules up there); its file stays for tracebacks. Without a
    `directory`, files go to one temporary folder per process, removed when the process exits,
    so a loop of loads (a test suite) leaves nothing behind.
    """
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    name = f"archspec_generated_{digest}"
    folder = Path(directory) if directory is not None else _process_folder()
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
