"""Issue 19, checkpoints and config.json: shards stay inside their folder, JSON is strict
(duplicate keys, depth, huge integers, encodings), foreign dtypes and pickles are refused,
special files are one message."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from archspec.errors import SpecError
from archspec.hf.weights import read_state_dict
from archspec.safety.limits import MAX_DEPTH
from tests.hostile import SIZES, TINY, cli, refused, tiny_checkpoint
from tests.tiny import generated_module

pytest.importorskip("safetensors")


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    tiny_checkpoint(tmp_path / "ckpt")
    return tmp_path / "ckpt"


def sharded(ckpt: Path, weight_map: object) -> Path:
    (ckpt / "model.safetensors").rename(ckpt / "shard.safetensors")
    (ckpt / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return ckpt


@pytest.mark.parametrize("shard", ["../../../../etc/passwd", "/etc/passwd", "../other.bin"])
def test_shards_outside_the_folder_are_refused(ckpt: Path, shard: str) -> None:
    sharded(ckpt, {"transformer.wte.weight": shard})
    with pytest.raises(SpecError, match="outside the checkpoint folder"):
        read_state_dict(ckpt)


def test_an_absolute_shard_in_another_checkpoint_is_refused(ckpt: Path, tmp_path: Path):
    tiny_checkpoint(tmp_path / "other")
    other = str(tmp_path / "other" / "model.safetensors")
    sharded(ckpt, {"transformer.wte.weight": other})
    with pytest.raises(SpecError, match="outside the checkpoint folder"):
        read_state_dict(ckpt)


@pytest.mark.parametrize("weight_map", [["shard.safetensors"], {"a": 1}, {"a": None}, "x"])
def test_malformed_weight_maps(ckpt: Path, weight_map: object) -> None:
    sharded(ckpt, weight_map)
    with pytest.raises(SpecError, match="weight_map"):
        read_state_dict(ckpt)


def test_a_good_sharded_checkpoint_still_loads(ckpt: Path) -> None:
    keys = list(read_state_dict(ckpt))
    sharded(ckpt, {k: "shard.safetensors" for k in keys})
    assert sorted(read_state_dict(ckpt)) == sorted(keys)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"weight_map": {"a": "s", "a": "t"}}', "duplicate key"),
        (b"[" * 500 + b"]" * 500, f"nested more than {MAX_DEPTH} levels"),
        ('{"weight_map": {}}'.encode("utf-16"), "not UTF-8"),
        (b'{"weight_map": {"a": "\xff"}}', "not UTF-8"),
    ],
)
def test_strict_index_json(ckpt: Path, data: bytes, words: str) -> None:
    (ckpt / "model.safetensors").unlink()
    (ckpt / "model.safetensors.index.json").write_bytes(data)
    with pytest.raises(SpecError, match=words):
        read_state_dict(ckpt)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"model_type": "gpt2", "n_layer": 2, "n_layer": 12}', "duplicate key"),
        (b'{"model_type": "gpt2", "n_embd": ' + b"9" * 5000 + b"}", "5,000 digits"),
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested more than"),
        ('{"model_type": "gpt2"}'.encode("utf-16"), "not UTF-8"),
        (b'{"model_type": "gpt\xe9"}', "not UTF-8"),
    ],
)
def test_strict_config_json(tmp_path: Path, data: bytes, words: str) -> None:
    (tmp_path / "config.json").write_bytes(data)
    refused(cli("import-hf", str(tmp_path)), words)


def test_special_config_files(tmp_path: Path) -> None:
    (tmp_path / "dir" / "config.json").mkdir(parents=True)
    refused(cli("import-hf", str(tmp_path / "dir")), "is a directory")
    os.mkfifo(tmp_path / "config.json")
    refused(cli("import-hf", str(tmp_path)), "not a regular file")
    if os.path.exists("/proc/self/pagemap"):
        refused(cli("import-hf", "/proc/self/pagemap"), "over the limit")


def test_special_checkpoint_files(ckpt: Path) -> None:
    (ckpt / "model.safetensors").unlink()
    (ckpt / "model.safetensors").mkdir()
    with pytest.raises(SpecError, match="is a directory"):
        read_state_dict(ckpt)
    (ckpt / "model.safetensors").rmdir()
    os.mkfifo(ckpt / "model.safetensors")
    with pytest.raises(SpecError, match="not a regular file"):
        read_state_dict(ckpt)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.complex64])
def test_foreign_dtypes_are_refused(ckpt: Path, dtype: torch.dtype) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(str(ckpt / "model.safetensors"))
    state["transformer.wte.weight"] = state["transformer.wte.weight"].to(dtype)
    save_file(state, str(ckpt / "model.safetensors"))
    refused(
        cli("build", "gpt2", *TINY, "--hf-weights", str(ckpt), "-o", str(ckpt.parent / "m.py")),
        "'transformer.wte.weight' has dtype",
        "floating-point",
    )


def test_load_weights_refuses_foreign_dtypes_in_our_names(tmp_path: Path) -> None:
    from archspec import build_ir, load_spec
    from archspec.hf.weights import load_weights

    ir = build_ir(load_spec("gpt2", SIZES))
    model = generated_module(ir, folder=tmp_path).Model()
    state = {k: v.to(torch.int64) for k, v in model.state_dict().items()}
    with pytest.raises(SpecError, match="has dtype int64"):
        load_weights(model, state, ir)


def test_a_pickle_is_refused_without_torch_advice(tmp_path: Path) -> None:
    path = tmp_path / "pytorch_model.bin"
    # Any object beyond tensors and plain containers needs a global from the pickle.
    torch.save({"w": torch.zeros(1), "x": Path("x")}, path)
    with pytest.raises(SpecError) as err:
        read_state_dict(path)
    message = str(err.value)
    assert "arbitrary code" in message and "weights_only=False" not in message
    assert "weights_only" not in message.replace("weights_only refused", "")


def test_import_hf_refuses_a_folder_name_with_a_yaml_line(tmp_path: Path) -> None:
    folder = tmp_path / "x\nattention: {bias: true}"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    )
    err = refused(cli("import-hf", str(folder)), "control or invisible character")
    assert "\nattention" not in err and "x\\x0aattention" in err  # the path, escaped


def test_import_hf_names_a_path_that_is_not_utf8_or_missing(tmp_path: Path) -> None:
    folder = tmp_path / os.fsdecode(b"dir\xff")
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    refused(cli("import-hf", str(folder)), "dir\\xff' holds a byte that is not UTF-8")
    missing = tmp_path / os.fsdecode(b"none\xff")
    err = refused(cli("import-hf", str(missing)), "no such file")
    assert "control" not in err


LLAMA = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2,
    "vocab_size": 100, "max_position_embeddings": 64,
}  # fmt: skip


def test_zero_kv_heads_is_refused(tmp_path: Path) -> None:
    # Once imported as multi-head attention, as if the field were absent.
    config = LLAMA
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_key_value_heads": 0}))
    refused(cli("import-hf", str(tmp_path)), "num_key_value_heads")


def test_zero_head_dim_is_refused(tmp_path: Path) -> None:
    # Once dropped without a word.
    config = LLAMA
    (tmp_path / "config.json").write_text(json.dumps({**config, "head_dim": 0}))
    refused(cli("import-hf", str(tmp_path)), "head_dim")


@pytest.mark.parametrize("hub_id", ["org/x\x1b[2J", "org/\u202ex", "org/x\nattention: {}"])
def test_control_characters_in_a_config_never_reach_the_written_spec(
    tmp_path: Path, hub_id: str
) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "_name_or_path": hub_id}))
    result = cli("import-hf", str(tmp_path), "-o", str(tmp_path / "s.yaml"))
    if result.exit_code == 0:
        text = (tmp_path / "s.yaml").read_text()
        assert not any(c in text for c in "\x1b\u202e") and "\nattention: {}" not in text
    else:
        err = refused(result)
        assert "\x1b" not in err and "\u202e" not in err
