"""The Hugging Face family records: each complete, and export(import(config)) = config.

Every family in `archspec.hf.families.FAMILIES` must say everything archspec needs of its
model_type (classes, base spec, config import and export, names, buffer checks), and its small
reference config (tests/hf_reference.py FAMILY_CONFIGS) must import to a spec that exports back
to the same config, names every tensor, and counts like transformers' own class.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from archspec.backends.count.params import parameter_count
from archspec.errors import SpecError
from archspec.hf.classes import CLASSES, hf_class
from archspec.hf.export_config import hf_config_dict
from archspec.hf.families import FAMILIES, t5
from archspec.hf.family import Family, Where
from archspec.hf.import_config import import_config
from archspec.hf.names import hf_module_names, naming
from archspec.hf.tensor_rules import CHECKS
from archspec.ir.build import build_ir
from archspec.spec.resolve import builtin_dir
from tests.hf_reference import FAMILY_CONFIGS
from tests.hostile import run_python

transformers = pytest.importorskip("transformers")


def reference_config(model_type: str) -> dict[str, Any]:
    return {"model_type": model_type, **FAMILY_CONFIGS[model_type]}


def architecture_fields(spec) -> dict[str, Any]:
    skip = {"name", "source"}
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name not in skip}


# --- The records ------------------------------------------------------------------------------


def test_every_family_has_a_reference_config() -> None:
    assert set(FAMILY_CONFIGS) == set(FAMILIES)


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_family_record_is_complete(model_type: str) -> None:
    family = FAMILIES[model_type]
    assert isinstance(family, Family) and family.model_type == model_type
    # Classes: at least one, all of this model_type, each found by name.
    assert family.classes
    for cls in family.classes:
        assert cls.model_type == model_type
        assert cls.head in ("lm", "pooler", "none", "score")
        assert hf_class(cls.name) is CLASSES[cls.name] == cls
    for old, new in family.class_aliases.items():
        assert hf_class(old).name == new
    if family.unsupported_heads is not None:
        assert family.unsupported_heads.instead in {c.name for c in family.classes}
        for name in family.unsupported_heads.classes:
            with pytest.raises(SpecError, match=family.unsupported_heads.instead):
                hf_class(name)
    # Bases: built-in spec files.
    assert family.bases
    for base in family.bases:
        assert (builtin_dir() / f"{base}.yaml").is_file(), base
    # Import, export, names, buffers.
    assert callable(family.import_config) and callable(family.export_config)
    names = family.names
    assert callable(names.model) and callable(names.stack) and callable(names.block)
    assert isinstance(names.blocks("decoder"), str)
    assert names.variants[0] == "checkpoint"
    for buffer in family.buffers:
        assert buffer.check in CHECKS, buffer


def test_class_names_are_unique_across_families() -> None:
    names = [c.name for f in FAMILIES.values() for c in f.classes]
    assert len(names) == len(set(names)) == len(CLASSES)


# --- Each family's reference config ------------------------------------------------------------


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_export_of_import_round_trips(model_type: str) -> None:
    config = reference_config(model_type)
    imported = import_config(config)
    assert imported.model_type == model_type
    assert imported.base in FAMILIES[model_type].bases
    exported = hf_config_dict(imported.spec)  # itself checks import(export(spec)) == spec
    assert exported["model_type"] == model_type
    assert exported["architectures"] == config["architectures"]
    # Every field the reference sets comes back with its value.
    changed = {k: (v, exported[k]) for k, v in config.items() if k in exported and exported[k] != v}
    assert changed == {}
    again = import_config(exported)
    assert architecture_fields(again.spec) == architecture_fields(imported.spec)


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_reference_config_names_and_counts_like_transformers(model_type: str) -> None:
    config = reference_config(model_type)
    spec = import_config(config).spec
    ir = build_ir(spec)
    names = hf_module_names(ir)  # a SpecError if any module has no transformers name
    assert names and all(names.values())
    for variant in FAMILIES[model_type].variants:
        naming(ir, variant=variant)
    exported = hf_config_dict(spec)
    fields = {k: v for k, v in exported.items() if k not in ("model_type", "architectures")}
    hf_config = transformers.AutoConfig.for_model(model_type, **fields)
    with torch.device("meta"):
        model = getattr(transformers, hf_class(config["architectures"][0]).transformers_name)(
            hf_config
        )
    # Trainable parameters: Marian and Pegasus hold their fixed sinusoids as frozen
    # nn.Embeddings (tests/test_hf_zoo_seq2seq.py counts those apart).
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert ir.value(parameter_count(ir.root)) == trainable


# --- T5's relative-position bias: one rule, at whichever level the IR puts the table ----------


def _where(role: str | None, index: str | None, local: str) -> Where:
    return Where(role, index, local, (), False, False, ("encoder", "decoder"))


def test_t5_rel_bias_is_one_rule_on_the_stack() -> None:
    table = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias"
    # The IR keeps the table on its stack; transformers in the first block's self-attention.
    assert t5.REL_BIAS(_where("encoder", None, "rel_bias")) == table
    assert t5.REL_BIAS(_where("encoder", "0", "attn.rel_bias")) is None
    ir = build_ir(import_config(reference_config("t5")).spec)
    assert hf_module_names(ir)["encoder.rel_bias"] == table


def test_family_records_do_not_import_torch() -> None:
    code = (
        "from archspec.hf.families import FAMILIES\n"
        "from archspec.hf.export_config import hf_config_dict\n"
        "assert len(FAMILIES) > 0\n"
    )
    _, modules = run_python(code)
    assert "torch" not in modules, "torch imported"
