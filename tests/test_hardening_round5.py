"""Hostile inputs a fuzz of the command line found mishandled (2026-11-29): NaN and infinities
in a config.json (a Python traceback), a non-finite partial_rotary_factor handed to import-hf
as a dict, and rich's emoji codes, which turned ":skull:" in a name or source into a glyph
the input never held."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archspec.errors import SpecError
from archspec.hf.import_config import import_config
from tests.hf_reference import FAMILY_CONFIGS
from tests.hostile import cli, refused


def _config(model_type: str, **changes) -> dict:
    return {"model_type": model_type, **FAMILY_CONFIGS[model_type], **changes}


@pytest.mark.parametrize("word", ["NaN", "Infinity", "-Infinity"])
def test_a_config_json_holding_nan_or_an_infinity_is_one_message(tmp_path: Path, word) -> None:
    text = json.dumps(_config("falcon"), indent=1)[:-2] + f',\n "partial_rotary_factor": {word}\n}}'
    path = tmp_path / "config.json"
    path.write_text(text)
    err = refused(cli("import-hf", str(path)), f"{word} is not a JSON number")
    line = text[: text.index(word)].count("\n") + 1
    assert f"config.json:{line}:" in err


def test_a_string_holding_nan_is_still_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("llama", _name_or_path="NaN and Infinity")))
    assert cli("count", str(path), "--json").exit_code == 0


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0, -0.5])
@pytest.mark.parametrize("model_type", ["falcon", "phi3"])
def test_a_partial_rotary_factor_that_is_no_fraction_is_refused(model_type, value) -> None:
    with pytest.raises(SpecError, match="expected a positive finite number") as err:
        import_config(_config(model_type, partial_rotary_factor=value))
    assert err.value.path == "partial_rotary_factor"


def test_a_float_field_given_nan_is_refused_naming_it() -> None:
    with pytest.raises(SpecError, match="expected a finite number") as err:
        import_config(_config("llama", rms_norm_eps=float("nan")))
    assert err.value.path == "rms_norm_eps"


def test_emoji_codes_in_a_name_print_as_written(tmp_path: Path) -> None:
    systems = tmp_path / "systems.yaml"
    systems.write_text(
        "accelerators:\n  acc:\n    name: 'Evil :skull: GPU'\n    peak_tflops: {bf16: 1000}\n"
        "    memory_gib: 80\n    memory_bandwidth_gbs: 3000\n    source: s\n"
    )
    listed = cli("plan", "--system", str(systems), "--list-systems")
    assert listed.exit_code == 0, listed.output
    assert ":skull:" in listed.stdout and "\N{SKULL}" not in listed.stdout


def test_stage_ranges_are_running_sums() -> None:
    from archspec.backends.count.stages import stage_ranges

    assert stage_ranges((5, 6, 6, 5)) == [(0, 5), (5, 11), (11, 17), (17, 22)]
    ranges = stage_ranges((1,) * 100_000)  # was quadratic in the stages
    assert ranges[-1] == (99_999, 100_000)


def test_a_pipeline_beyond_the_limit_is_refused_naming_it() -> None:
    from archspec.safety.limits import MAX_PIPELINE_STAGES

    deep = str(2 * MAX_PIPELINE_STAGES)
    for command in ("count", "plan"):
        args = [command, "gpt2", "--set", f"n_layers={deep}", "--gpus", deep, "--pp", deep,
                "--global-batch", deep, "--seq", "128"]  # fmt: skip
        if command == "plan":
            args += ["--gpu", "h100-sxm"]
        refused(cli(*args), f"--pp {deep}", f"at most {MAX_PIPELINE_STAGES:,} stages")


def test_the_search_tries_no_pipeline_beyond_the_limit() -> None:
    """A model of 2,048 layers on 2,048 devices: every depth that divides the layers up to the
    limit, none above (each layout costs every stage: 100,000 of them had taken minutes)."""
    from archspec import build_ir, load_spec
    from archspec.plan.hardware import get_system
    from archspec.plan.search import layout_space
    from archspec.plan.step import Training
    from archspec.safety.limits import MAX_PIPELINE_STAGES

    ir = build_ir(load_spec("gpt2", ["n_layers=2048"]))
    run = Training(gpus=2048, global_batch=2048, seq=128)
    pps = {layout.pp for layout, _ in layout_space(ir, get_system("h100-sxm"), run) if layout}
    assert max(pps) == MAX_PIPELINE_STAGES


def test_count_torch_engine_refuses_a_model_too_deep_to_walk() -> None:
    deep = ["gpt2", "--set", "n_layers=30000", "--seq", "128", "--gpus", "8", "--pp", "8"]
    args = ["count", *deep, "--engine", "torch", "--global-batch", "8"]
    err = refused(cli(*args), "walks each parameter tensor")
    assert "240,004" in err  # 8 leaves a block; the two embeddings, final norm and tied head


AROUND = "extends: albert-base-v2\nname: x\nembedding: {projection: around_stack%s}\n"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("", "an embedding norm with projection around_stack"),  # ALBERT's norm, 128 wide
        (", norm: false", "head.pooler reads d_model (768) wide states"),
    ],
)
def test_projections_around_the_stack_refuse_what_reads_the_other_width(
    tmp_path: Path, extra: str, words: str
) -> None:
    """Such specs had validated and built a model that failed on its first forward."""
    spec = tmp_path / "s.yaml"
    spec.write_text(AROUND % extra)
    refused(cli("validate", str(spec)), words)
    refused(cli("build", str(spec), "-o", str(tmp_path / "m.py")), words)


def test_projections_around_an_encoder_without_them_run() -> None:
    import torch

    from archspec import build_ir, load_spec
    from archspec.backends.torchgen.load import load_generated
    from archspec.backends.torchgen.source import generate_source

    sizes = ["d_model=64", "n_heads=4", "d_ff=16", "n_layers=1", "vocab_size=50",
             "max_seq_len=16", "embedding.norm=false", "head.pooler=false"]  # fmt: skip
    spec = load_spec("albert-base-v2", [*sizes, "embedding.projection=around_stack"])
    module = load_generated(generate_source(build_ir(spec)))
    model = module.Model(module.Config()).eval()
    with torch.no_grad():
        out = model(torch.randint(0, 50, (2, 6)))
    assert out.shape == (2, 6, 128)  # the stack's output, projected back to embedding.dim


def test_an_odd_latent_rope_width_is_named_in_the_users_file(tmp_path: Path) -> None:
    """It had pointed at the built-in _llama.yaml's position.kind."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "extends: llama-2-7b\nname: x\n"
        "attention: {latent: {kv_rank: 512, rope_dim: 63, nope_dim: 128, v_dim: 128}}\n"
    )
    err = refused(cli("validate", str(spec)), "attention.latent.rope_dim must be even, got 63")
    assert err.startswith(f"{spec}:3:") and "at 'attention.latent.rope_dim'" in err


def test_an_error_between_fields_names_one_the_file_gives(tmp_path: Path) -> None:
    """An odd head width from d_model / n_heads: not head_dim, which no file gives."""
    spec = tmp_path / "s.yaml"
    spec.write_text("extends: llama-2-7b\nname: x\nd_model: 4094\nn_heads: 2\nn_kv_heads: 2\n")
    err = refused(cli("validate", str(spec)), "rope needs an even head_dim, got 2047")
    assert f"{spec}:4:" in err and "at 'n_heads'" in err


@pytest.mark.parametrize("content", ["hello", "extends: gpt2\n"])
def test_a_file_that_is_no_checkpoint_says_what_was_expected(tmp_path: Path, content) -> None:
    """torch.load's own words had been the message ("101", "pop from empty list")."""
    weights = tmp_path / "weights.bin"
    weights.write_text(content)
    args = ["build", "gpt2", "--set", "n_layers=1", "--hf-weights", str(weights)]
    refused(cli(*args, "-o", str(tmp_path / "m.py")), "is not a checkpoint torch.save wrote",
            "model.safetensors")  # fmt: skip


def test_a_long_search_off_a_terminal_says_one_line_before_its_error() -> None:
    """rich's progress bar, drawn nowhere off a terminal, had left a blank first line."""
    args = ["plan", "mixtral-8x7b", "--set", "moe.n_experts=100000", "--gpu", "h100-sxm",
            "--gpus", "1024", "--global-batch", "1024", "--seq", "128"]  # fmt: skip
    err = refused(cli(*args), "no layout fits")
    assert err.splitlines()[0].startswith("searching ") and "\n\n" not in err


def test_an_unknown_catalogue_field_is_named_without_internal_markers(tmp_path: Path) -> None:
    systems = tmp_path / "systems.yaml"
    systems.write_text("systems:\n  sys:\n    kind: 1\n    accelerator: h100-sxm\n")
    err = refused(cli("plan", "--system", str(systems), "--list-systems"), "unknown field 'kind'")
    assert f"{systems}:3:5:" in err and "at 'systems.sys.kind'" in err and "<key>" not in err


def test_an_int4_group_must_divide_every_quantized_row() -> None:
    """Falcon-7B's 4,544-wide rows hold no whole group of 128 (AWQ quantizes it in 64s)."""
    args = ["plan", "falcon-7b", "--mode", "serve", "--gpu", "a100-80g", "--dtype", "int4"]
    refused(cli(*args, "--group", "128"), "--group 128 does not divide the 4544 inputs of",
            "e.g. 32, 64")  # fmt: skip
    assert cli(*args, "--group", "64").exit_code == 0


def test_a_position_field_its_kind_does_not_read_is_reported_as_ignored(tmp_path: Path) -> None:
    """Accepted, as the flat form always was, but no longer in silence: where the user wrote
    it. A rope family's own fields, inherited by a spec that switches kind, stay unsaid."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "extends: gpt2\nname: x\nposition: {kind: learned, theta: abc, scaling: {type: bogus}}\n"
    )
    result = cli("validate", str(spec))
    assert result.exit_code == 0, result.output
    assert f"{spec}:3:" in result.stderr
    assert "position.theta (= 'abc') is ignored: position.kind learned does not read it" in (
        result.stderr
    )
    assert "position.scaling (= {'type': 'bogus'}) is ignored" in result.stderr
    switched = cli("validate", "llama-2-7b", "--set", "position.kind=learned")
    assert switched.exit_code == 0 and "ignored" not in switched.stderr


def test_output_dash_is_refused_rather_than_a_file_named_dash(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    refused(cli("build", "gpt2", "-o", "-"), "-o -:", "stdout")
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "setting",
    [
        "head.logits_divisor=1e-320",
        "embedding.multiplier=1e308",
        "norm.eps=5e-324",
        "head.logit_scale=1e31",
    ],  # fmt: skip
)
def test_a_real_number_whose_model_overflows_is_refused(setting: str) -> None:
    """Finite, and every logit of the model built from it inf or nan."""
    refused(cli("validate", "gpt2", "--set", setting), "expected 0 or a size from 1e-30 to 1e+30")


def test_real_numbers_of_real_models_stay_within_the_range() -> None:
    from archspec import load_spec

    assert load_spec("gpt2", ["norm.eps=1e-12", "dropout.hidden=0"]).norm.eps == 1e-12
