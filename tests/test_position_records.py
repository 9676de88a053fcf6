"""The `position` section as records: each kind (and each RoPE scaling) is a record chosen by
its tag, validated as a section of its own, and kept by the IR as it is. The flat form of
before still reads, to the same spec, IR, counts and generated code; `archspec validate
--resolved` writes the tagged form, which reads back to the same model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from archspec import SpecError, load_spec
from archspec.backends.count.params import parameter_count
from archspec.backends.torchgen import generate_source
from archspec.cli import app
from archspec.ir.build import build_ir
from archspec.kinds.positions import POSITION_KINDS, SCALINGS
from archspec.kinds.positions.rope import Rope

runner = CliRunner()

LONGROPE = [
    "position.scaling=longrope",
    "position.original_max_seq_len=1024",
    f"position.short_factor={[1.0] * 64}",
    f"position.long_factor={[2.0] * 64}",
]
# Specs in the flat form (built-in files, --set), one per kind and scaling.
FLAT = {
    "learned-offset": ("bart-base", []),
    "learned-from-mask": ("gpt2", ["position.from_mask=true"]),
    "sinusoidal": ("gpt2", ["position.kind=sinusoidal"]),
    "alibi": ("bloom-560m", []),
    "relative-bias": ("t5-small", []),
    "none": ("gpt2", ["position.kind=none"]),
    "rope": ("llama-2-7b", []),
    "rope-partial": ("phi-2", []),
    "rope-interleaved-partial": ("gpt-j-6b", []),
    "rope-linear": ("llama-2-7b", ["position.scaling=linear", "position.factor=4"]),
    "rope-dynamic-partial": ("pythia-1.4b", ["position.scaling=dynamic", "position.factor=2"]),
    "rope-llama3": ("llama-3.1-8b", []),
    "rope-yarn-interleaved": ("deepseek-v2-lite", []),
    "rope-longrope": ("llama-2-7b", LONGROPE),
}


def resolved(name: str, overrides: list[str]) -> dict:
    """What `archspec validate --resolved --json` prints for the spec."""
    sets = [arg for o in overrides for arg in ("--set", o)]
    result = runner.invoke(app, ["validate", name, *sets, "--resolved", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", list(FLAT))
def test_the_tagged_form_gives_the_flat_forms_model(case: str, tmp_path: Path) -> None:
    name, overrides = FLAT[case]
    flat = load_spec(name, overrides)
    data = resolved(name, overrides)
    position = data["position"]
    assert position["kind"] == flat.position.kind
    if position["kind"] == "rope":
        assert isinstance(position["scaling"], dict) and "factor" not in position
    # --resolved also fills in derived defaults; leave those out where the spec did, so
    # that only the form of `position` differs.
    for key in ("n_kv_heads", "head_dim", "final_norm"):
        if getattr(flat, key) is None:
            del data[key]
    if flat.norm.bias is None:
        del data["norm"]["bias"]
    path = tmp_path / "tagged.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    tagged = load_spec(path)
    assert tagged.position == flat.position
    assert tagged == flat
    ir_flat, ir_tagged = build_ir(flat), build_ir(tagged)
    assert parameter_count(ir_tagged.root) == parameter_count(ir_flat.root)
    assert generate_source(ir_tagged) == generate_source(ir_flat)


def test_the_ir_keeps_the_record_itself() -> None:
    spec = load_spec("llama-3.1-8b")
    assert all(stack.position is spec.position for stack in build_ir(spec).root.stacks)


def test_every_record_and_scaling_names_a_catalogue_entry() -> None:
    for cls in POSITION_KINDS.values():
        assert cls().entry.name == cls.kind or cls is Rope
    for scaling in SCALINGS.values():
        assert Rope(scaling=scaling()).entry.name == scaling.entry_name
        if scaling.interleaved_entry_name:
            rope = Rope(interleaved=True, scaling=scaling())
            assert rope.entry.name == scaling.interleaved_entry_name


def write(tmp_path: Path, position: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(f"extends: llama-2-7b\nposition:\n{position}")
    return path


@pytest.mark.parametrize(
    "position, where, hint",
    [
        ("  kind: rope\n  scaling: {type: yarn, factr: 4}\n", "position.scaling.factr", "factor"),
        ("  kind: rope\n  scaling: {type: yarm}\n", "position.scaling.type", "yarn"),
        ("  kind: rope\n  thetta: 5\n", "position.thetta", "theta"),
        ("  kind: relative_bias\n  num_bucket: 8\n", "position.num_bucket", "num_buckets"),
        ("  kind: ropee\n", "position.kind", "rope"),
    ],
)
def test_a_record_refuses_what_it_lacks_with_line_path_and_suggestion(
    tmp_path: Path, position: str, where: str, hint: str
) -> None:
    path = write(tmp_path, position)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert err.value.path == where and f"did you mean '{hint}'" in str(err.value.hint)
    assert err.value.location is not None and err.value.location.line >= 3
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and f"s.yaml:{err.value.location.line}:" in result.stderr


def test_flat_form_errors_name_the_fields_where_they_were_written(tmp_path: Path) -> None:
    path = write(tmp_path, "  kind: rope\n  scaling: yarn\n  factor: 4\n  beta_fast: x\n")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert err.value.path == "position.beta_fast" and err.value.location.line == 6
    with pytest.raises(SpecError) as err:
        load_spec("llama-2-7b", ["position.scaling=yarm"])
    assert err.value.path == "position.scaling" and "yarn" in str(err.value.hint)


def test_a_kind_switched_by_override_drops_the_flat_fields_it_does_not_read() -> None:
    # As before: t5's buckets and llama's theta do not follow the kind they belonged to.
    assert load_spec("t5-small", ["position.kind=rope"]).position == Rope()
    assert load_spec("llama-3.1-8b", ["position.kind=alibi"]).position.kind == "alibi"


@pytest.mark.parametrize(
    ("tagged", "flat"),
    [
        ("position.scaling.factor=4", "position.factor=4"),
        ("position.scaling.type=linear", "position.scaling=linear"),
    ],
)
def test_a_tagged_override_applies_to_a_flat_spec(tagged: str, flat: str) -> None:
    # `validate --resolved` shows position.scaling.factor, so that is the path a user copies
    # into --set, and llama-3.1-8b's file is written in the flat form.
    spec = load_spec("llama-3.1-8b", [tagged])
    assert spec == load_spec("llama-3.1-8b", [flat])
    assert spec != load_spec("llama-3.1-8b")


def test_a_tagged_override_over_a_spec_without_scaling_sets_the_tagged_form() -> None:
    # llama-2-7b has no scaling: the first --set makes `scaling` a mapping, the second adds
    # to it (a crash, unhashable dict, when the flat-form check looked the mapping up).
    spec = load_spec("llama-2-7b", ["position.scaling.type=linear", "position.scaling.factor=2"])
    assert spec == load_spec("llama-2-7b", ["position.scaling=linear", "position.factor=2"])
