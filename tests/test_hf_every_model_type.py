"""Every model type transformers registers, from its configuration class's defaults: import-hf
either imports it with the trainable parameter count of the transformers class it names
(built on the meta device), or refuses it with a SpecError. Nothing else: no other exception,
no count that differs. Long (about a minute): `python -m pytest -m long`."""

from __future__ import annotations

import json
import warnings

import pytest

from archspec import build_ir
from archspec.backends.count.params import parameter_count
from archspec.errors import SpecError
from archspec.hf.classes import hf_class
from archspec.hf.import_config import import_config

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.long


def _default_config(model_type: str):
    """transformers' default configuration for `model_type`, or None where the class cannot
    build one on its own (it needs a sub-configuration given)."""
    try:
        return transformers.CONFIG_MAPPING[model_type]()
    except Exception:  # noqa: BLE001 - transformers' own validation, not ours
        return None


def _trainable(model) -> int:
    # Marian's, Pegasus' and RoFormer's sinusoid tables and ERNIE 4.5's expert-bias statistics
    # are frozen parameters: no weight a spec declares (tests/test_hf_families.py).
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("model_type", sorted(transformers.CONFIG_MAPPING.keys()))
def test_a_default_config_imports_exactly_or_is_refused(model_type: str) -> None:
    config = _default_config(model_type)
    if config is None:
        pytest.skip(f"transformers builds no default {model_type} configuration")
    data = json.loads(config.to_json_string(use_diff=False))
    try:
        imported = import_config(data)
    except SpecError:
        return
    ir = build_ir(imported.spec)
    ours = int(ir.value(parameter_count(ir.root)))
    built_as = hf_class(imported.hf_class).transformers_name  # EXAONE 3 is a Llama class
    model_class = getattr(transformers, built_as)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        try:
            model = model_class(config)
        except Exception as exc:  # noqa: BLE001
            pytest.skip(f"transformers cannot build {built_as} from defaults: {exc}")
    assert ours == _trainable(model), (model_type, imported.hf_class)
