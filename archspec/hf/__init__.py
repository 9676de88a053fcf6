"""Hugging Face transformers interop.

- `FAMILIES`: one `Family` record per transformers model_type (`archspec.hf.families`): its
  classes, config import and export, name rules and buffers.
- `import_config(path)`: a transformers config.json -> a minimal spec (`archspec import-hf`).
- `hf_config_dict(spec)`: a spec -> its transformers config.json (`bench --vs-hf`).
- `load_weights(model, source)`: a transformers checkpoint -> a generated model, strictly.
- `convert(ir, state_dict)`: transformers' tensor names and layouts -> archspec's.
- `names.hf_module_names(ir)`: our module names beside transformers' (`count --names hf`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FAMILIES",
    "Family",
    "convert",
    "hf_config_dict",
    "import_config",
    "load_weights",
    "read_state_dict",
]


def __getattr__(name: str) -> Any:
    # Lazy: importing the package (as `import-hf` does) does not import torch.
    if name == "import_config":
        from archspec.hf.import_config import import_config

        return import_config
    if name == "hf_config_dict":
        from archspec.hf.export_config import hf_config_dict

        return hf_config_dict
    if name == "FAMILIES":
        from archspec.hf.families import FAMILIES

        return FAMILIES
    if name == "Family":
        from archspec.hf.family import Family

        return Family
    if name in ("convert", "load_weights", "read_state_dict"):
        from archspec.hf import weights

        return getattr(weights, name)
    raise AttributeError(f"module 'archspec.hf' has no attribute {name!r}")
