"""Hub ids offline (issue 28): `count`, `print`, `build` and `import-hf` read `org/name` from a
local Hugging Face cache laid out as huggingface_hub lays it out (models--org--name/refs/main,
snapshots/<commit>/config.json), found through HF_HUB_CACHE or HF_HOME, without any network;
an id not cached is exit code 2 naming the folder looked in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.hf.hub_cache import cache_dir, looks_like_hub_id
from tests.hf_reference import FAMILY_CONFIGS

huggingface_hub = pytest.importorskip("huggingface_hub")

HUB_ID = "tiny-org/tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
CONFIG = {"model_type": "llama", **FAMILY_CONFIGS["llama"]}


def fake_cache(root: Path, hub_id: str = HUB_ID) -> Path:
    """A Hub cache holding `hub_id`'s config.json at `main`, as a download leaves it."""
    repo = root / ("models--" + hub_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(CONFIG))
    return snapshot / "config.json"


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hub"
    config = fake_cache(cache)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    return config


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def test_huggingface_hub_finds_the_fake_cache(hub_cache: Path) -> None:
    # the layout is huggingface_hub's own: its lookup finds the file
    found = huggingface_hub.try_to_load_from_cache(HUB_ID, "config.json", cache_dir=cache_dir())
    assert Path(found) == hub_cache


def test_count_print_and_build_read_a_cached_hub_id(hub_cache: Path, tmp_path: Path) -> None:
    count = invoke("count", HUB_ID, "--json")
    assert count.exit_code == 0, count.output
    via_file = invoke("count", str(hub_cache), "--json")
    total = json.loads(count.stdout)["params"]["total"]
    assert total == json.loads(via_file.stdout)["params"]["total"]
    printed = invoke("print", HUB_ID)
    assert printed.exit_code == 0 and printed.stdout == invoke("print", str(hub_cache)).stdout
    assert f"{HUB_ID} (cached: " in printed.stderr
    built = invoke("build", HUB_ID, "-o", str(tmp_path / "model.py"))
    assert built.exit_code == 0, built.output
    assert "class Model" in (tmp_path / "model.py").read_text()


def test_import_hf_reads_a_cached_hub_id(hub_cache: Path) -> None:
    result = invoke("import-hf", HUB_ID)
    assert result.exit_code == 0, result.output
    assert f"https://huggingface.co/{HUB_ID}/blob/main/config.json" in result.stdout
    assert result.stdout == invoke("import-hf", HUB_ID).stdout


def test_hf_home_names_the_cache_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cache(tmp_path / "home" / "hub")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert invoke("count", HUB_ID).exit_code == 0


@pytest.mark.parametrize("command", ["count", "print", "build", "import-hf"])
def test_an_id_not_cached_is_exit_2_saying_where_it_looked(hub_cache: Path, command: str) -> None:
    result = invoke(command, "other-org/not-downloaded")
    assert result.exit_code == 2
    assert "'other-org/not-downloaded' is not in the local cache" in result.stderr
    assert str(cache_dir()) in result.stderr
    assert "Traceback" not in result.output


def test_a_cache_file_that_cannot_be_read_is_named(hub_cache: Path) -> None:
    """huggingface_hub reads refs/main as text: other bytes there were its UnicodeDecodeError."""
    refs_main = cache_dir() / ("models--" + HUB_ID.replace("/", "--")) / "refs" / "main"
    refs_main.write_bytes(b"\xff\x00\x01")
    result = invoke("validate", HUB_ID)
    assert result.exit_code == 2, result.output
    assert f"{refs_main} is not UTF-8 text" in result.stderr
    assert "Traceback" not in result.output


def test_paths_and_builtins_are_not_hub_ids(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert looks_like_hub_id("meta-llama/Llama-3.1-8B")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mine").write_text("")
    assert not looks_like_hub_id("specs/mine")  # a file of that name wins
    assert not looks_like_hub_id("specs/mine.yaml") and not looks_like_hub_id("a/b/c")
    assert not looks_like_hub_id("gpt2") and not looks_like_hub_id("../x")
