"""archspec's parameter count of an imported config beside transformers' own model of it."""

from __future__ import annotations

import copy
import warnings

import torch

from archspec.backends.count.params import parameter_count
from archspec.hf.classes import hf_class
from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir


def counts(config: dict, dequantized: bool = False) -> tuple[int, int]:
    """(archspec's count, the trainable parameters of transformers' class built from the same
    config on the meta device); `dequantized` is import_config's."""
    import transformers

    fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_config = transformers.AutoConfig.for_model(config["model_type"], **fields)
    cls = getattr(transformers, hf_class(config["architectures"][0]).transformers_name)
    with torch.device("meta"):
        model = cls(hf_config)
    ir = build_ir(import_config(copy.deepcopy(config), dequantized=dequantized).spec)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return ir.value(parameter_count(ir.root)), trainable
