"""Issue #30 (hardening, round 3): plan on encoder-decoders, checkpoints that inflate, sizes
that grow with depth, and config values import-hf must refuse plainly."""

from __future__ import annotations

import collections
import io
import json
import pickle
import time
import warnings
import zipfile
from pathlib import Path

import pytest

from archspec import build_ir, load_spec
from archspec.spec.resolve import builtin_names
from tests.builtin_sizes import each_size
from tests.hostile import cli, refused, run_python

ENCODER_DECODERS = [
    name for name in builtin_names() if build_ir(load_spec(name)).root.layout == "encoder-decoder"
]

# t5-small as transformers builds it: T5ForConditionalGeneration(...).num_parameters(), and
# its config's decoder (num_decoder_layers 6, num_heads 8 of d_kv 64).
T5_SMALL_PARAMS = 60_506_624
T5_SMALL_DECODER_LAYERS, T5_SMALL_INNER = 6, 8 * 64


def _plan(*args: str) -> dict:
    result = cli("plan", *args, "--gpu", "h100-sxm", "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def test_encoder_decoders_are_among_the_builtins() -> None:
    assert {"t5-small", "bart-base", "flan-t5-small"} <= set(ENCODER_DECODERS)


@pytest.mark.parametrize("name", each_size(ENCODER_DECODERS))
def test_plan_trains_and_serves_every_encoder_decoder(name: str) -> None:
    train = _plan(name, "--gpus", "8", "--global-batch", "64", "--seq", "128")
    assert train["step_time_s"] > 0 and 0 < train["mfu"] < 1
    assert train["tokens_per_s"] == pytest.approx(64 * 128 / train["step_time_s"])
    serve = _plan(name, "--mode", "serve", "--prompt", "64", "--new-tokens", "16")
    assert serve["prefill_s"] > 0 and serve["tokens_per_s"] > 0


def test_plan_of_t5_small_against_its_config() -> None:
    train = _plan("t5-small", "--global-batch", "8", "--tp", "1", "--batch", "8")
    assert train["memory"]["weights"] == 2 * T5_SMALL_PARAMS  # bf16
    serve = _plan("t5-small", "--mode", "serve", "--prompt", "512", "--new-tokens", "128")
    # The prompt is the encoder's: cross-attention caches its 512 positions' keys and values;
    # the decoder's self-attention caches its start token and the 128 it generates.
    per_position = 2 * T5_SMALL_DECODER_LAYERS * T5_SMALL_INNER * 2  # K and V, bf16
    assert serve["memory"]["kv_cache"] == per_position * (512 + 1 + 128)


# --- A pickled checkpoint that declares more than it holds ------------------------------------


def _pickled_checkpoint(path: Path, declared: int, data: bytes, compress: bool) -> Path:
    """A torch.save zip whose one tensor declares `declared` bytes, backed by `data` in a
    record stored as is or deflated (what torch.save writes, field by field)."""
    import torch

    numel = declared // 4
    storage = object()

    class Tensor:
        def __reduce__(self):
            args = (storage, 0, (numel,), (1,), False, collections.OrderedDict())
            return torch._utils._rebuild_tensor_v2, args

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", numel) if obj is storage else None

    pickled = io.BytesIO()
    Pickler(pickled, protocol=2).dump({"transformer.wte.weight": Tensor()})
    how = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", compression=how, compresslevel=1) as archive:
        archive.writestr("archive/data.pkl", pickled.getvalue())
        archive.writestr("archive/version", "3\n")
        with archive.open("archive/data/0", "w", force_zip64=True) as record:
            for start in range(0, len(data), 2**24):
                record.write(data[start : start + 2**24])
    return path


def _peak_growth_reading(path: Path) -> tuple[str, int]:
    """What reading `path` says, and how far it raised the peak resident memory (bytes)."""
    printed, _ = run_python(
        "import resource\n"
        "from archspec import SpecError\n"
        "from archspec.hf.weights import read_state_dict\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        f"    read_state_dict({str(path)!r})\n"
        "    print('read')\n"
        "except SpecError as exc:\n"
        "    print(exc)\n"
        "print(1024 * (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before))\n"
    )
    said, _, growth = printed.rstrip("\n").rpartition("\n")
    return said, int(growth)


def test_a_compressed_checkpoint_is_refused_before_it_inflates(tmp_path: Path) -> None:
    bomb = _pickled_checkpoint(tmp_path / "pytorch_model.bin", 2**27, bytes(2**27), True)
    assert bomb.stat().st_size < 2**20
    said, growth = _peak_growth_reading(bomb)
    assert "is compressed" in said and "Traceback" not in said, said
    assert growth < 2**25, growth  # a quarter of what it declares


def test_a_checkpoint_declaring_more_than_its_data_is_refused_unread(tmp_path: Path) -> None:
    short = _pickled_checkpoint(tmp_path / "pytorch_model.bin", 2**33, bytes(2**20), False)
    said, growth = _peak_growth_reading(short)
    assert "declares more data than the file holds" in said, said
    assert growth < 2**25, growth


def test_a_legacy_checkpoint_declaring_more_than_its_file_is_refused(tmp_path: Path) -> None:
    import torch

    legacy = tmp_path / "pytorch_model.bin"  # the pre-1.6 format; a meta tensor saves no data
    weight = torch.empty(2**31, device="meta")
    torch.save({"transformer.wte.weight": weight}, legacy, _use_new_zipfile_serialization=False)
    said, growth = _peak_growth_reading(legacy)
    assert "declares 8,589,934,592 bytes of tensors in a file of" in said, said
    assert growth < 2**25, growth


def test_a_refused_pickle_is_the_only_message(tmp_path: Path) -> None:
    import torch

    from archspec import SpecError
    from archspec.hf.weights import read_state_dict

    path = tmp_path / "pytorch_model.bin"
    torch.save({"w": torch.zeros(1), "x": Path("x")}, path, pickle_protocol=4)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(SpecError, match="arbitrary code"):
            read_state_dict(path)
    assert [str(w.message) for w in said] == []  # torch's "Detected pickle protocol 4"


# --- Depth: a Repeat stays one multiplier ----------------------------------------------------

DEEP = "n_layers=1000000000"


def _timed(*args: str):
    start = time.perf_counter()
    result = cli(*args)
    seconds = time.perf_counter() - start
    assert seconds < 10, (args, seconds)
    return result


@pytest.mark.parametrize(
    "args",
    [
        ("count", "gpt2", "--names", "hf"),
        ("draw", "gpt2", "-o", "{tmp}/gpt2.svg"),
        ("report", "gpt2", "-o", "{tmp}/gpt2.html"),
    ],
    ids=["names", "draw", "report"],
)
def test_a_billion_layers_are_described_without_listing_them(args, tmp_path: Path) -> None:
    result = _timed(*(a.format(tmp=tmp_path) for a in args), "--set", DEEP)
    assert result.exit_code == 0, (result.output, result.exception)


def test_the_diagram_of_a_billion_layers_names_their_range(tmp_path: Path) -> None:
    _timed("draw", "gpt2", "-o", str(tmp_path / "gpt2.svg"), "--set", DEEP)
    assert "layers 0–999999999" in (tmp_path / "gpt2.svg").read_text()


def test_naming_every_module_copy_is_bounded() -> None:
    from archspec import SpecError
    from archspec.hf.names import leaves

    ir = build_ir(load_spec("gpt2", [DEEP]))
    with pytest.raises(SpecError, match="more than 1,000,000 parameter-owning modules"):
        list(leaves(ir))


def test_one_window_letter_stays_a_formula_at_any_depth() -> None:
    result = _timed("count", "mistral-7b", "--set", DEEP)
    assert result.exit_code == 0, (result.output, result.exception)


def test_plan_costs_the_same_at_any_depth() -> None:
    deep = ("--set", "n_layers=10000000", "--gpu", "h100-sxm")
    refused(_timed("plan", "gpt2", "--global-batch", "8", *deep), "no layout fits")
    assert _timed("plan", "gpt2", "--mode", "serve", *deep).exit_code == 0
    # The search's pipeline depths divide the devices too, not only the billion layers.
    wide = ("--gpus", "64", "--global-batch", "64", "--set", DEEP, "--gpu", "h100-sxm")
    refused(_timed("plan", "t5-small", *wide), "no layout fits")


# --- Config values import-hf must refuse plainly ---------------------------------------------

GPT2_CONFIG = {
    "model_type": "gpt2",
    "architectures": ["GPT2LMHeadModel"],
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "vocab_size": 50257,
    "n_positions": 1024,
}


def _config(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GPT2_CONFIG, **fields}))
    return path


def test_a_list_where_a_name_belongs_is_refused(tmp_path: Path) -> None:
    config = str(_config(tmp_path, activation_function=["gelu"]))
    refused(cli("import-hf", config), "activation ['gelu'] is not supported")
    refused(cli("diff", config, "gpt2"), "activation ['gelu'] is not supported")


def test_a_null_size_is_refused_naming_the_field(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    # transformers keeps the null (its default is for an absent field) and cannot use it.
    with pytest.raises(Exception, match="n_embd"):
        transformers.GPT2Config.from_dict({"n_embd": None}).n_embd + 1
    refused(cli("import-hf", str(_config(tmp_path, n_embd=None))), "at 'n_embd'", "null")


@pytest.mark.parametrize(("family", "field"), [("FalconConfig", "num_kv_heads"),
                                               ("T5Config", "num_decoder_layers")])  # fmt: skip
def test_a_null_transformers_reads_as_its_default_imports_as_it(family, field) -> None:
    transformers = pytest.importorskip("transformers")
    from archspec.hf.export_config import hf_config_dict
    from archspec.hf.import_config import import_config

    name = {"FalconConfig": "falcon-7b", "T5Config": "t5-small"}[family]
    config = {**hf_config_dict(load_spec(name)), field: None}
    if family == "FalconConfig":
        config["new_decoder_architecture"] = True
    theirs = getattr(transformers, family).from_dict(config)
    spec = import_config(config).spec
    if family == "FalconConfig":
        assert spec.kv_heads == theirs.num_kv_heads
    else:
        assert spec.stack_layers("decoder") == theirs.num_decoder_layers


def test_a_huge_field_value_is_echoed_cut_short(tmp_path: Path) -> None:
    err = refused(cli("import-hf", str(_config(tmp_path, activation_function="x" * 900_000))))
    assert "characters)" in err and len(err) < 1_000, len(err)
    # a field no transformers code reads is imported, and its note is cut short too
    result = cli("import-hf", str(_config(tmp_path, **{"x" * 1000: "y" * 900_000})))
    assert result.exit_code == 0 and "characters)" in result.stdout
    assert len(result.stdout) < 2_000, len(result.stdout)


def test_any_message_stays_a_few_lines_whatever_it_echoes() -> None:
    from archspec import SpecError

    shown = str(SpecError("value " + "v" * 10**6, hint="h" * 10**6))
    assert len(shown) < 5_000 and "1,000,006 characters" in shown
