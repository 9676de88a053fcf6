"""Issue 19, data loss and unsafe outputs: every file archspec writes goes through one writer
(archspec/safety/writing.py): atomic, never onto an input, never replacing a different file
without --force, never into a device, pipe or link, all outputs of a command or none."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from archspec.errors import SpecError
from archspec.safety.writing import Output, write_files
from tests.hostile import TINY, cli, refused, run_main, tiny_checkpoint


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    pytest.importorskip("safetensors")
    tiny_checkpoint(tmp_path / "ckpt")
    return tmp_path / "ckpt"


def test_build_into_the_checkpoint_folder_is_refused(checkpoint: Path) -> None:
    before = (checkpoint / "model.safetensors").read_bytes()
    err = refused(
        cli("build", "gpt2", *TINY, "--hf-weights", str(checkpoint), "-o", "ckpt/model.py"),
        "an input of this command",
    )
    assert "ckpt" in err
    assert (checkpoint / "model.safetensors").read_bytes() == before
    assert names(checkpoint) == ["model.safetensors"]


def test_build_onto_the_checkpoint_file_is_refused(checkpoint: Path) -> None:
    file = checkpoint / "model.safetensors"
    before = file.read_bytes()
    refused(cli("build", "gpt2", *TINY, "--hf-weights", str(file), "-o", str(file)))
    assert file.read_bytes() == before


def test_code_and_weights_to_one_file_is_refused(checkpoint: Path) -> None:
    refused(
        cli("build", "gpt2", *TINY, "--hf-weights", "ckpt", "-o", "m.safetensors"),
        "would both be written to m.safetensors",
    )
    assert names(checkpoint.parent) == ["ckpt"]


def test_existing_weights_are_kept_without_force(checkpoint: Path) -> None:
    Path("model.safetensors").write_bytes(b"mine")
    refused(
        cli("build", "gpt2", *TINY, "--hf-weights", "ckpt", "-o", "model.py"),
        "model.safetensors exists and differs from the converted weights",
    )
    assert Path("model.safetensors").read_bytes() == b"mine"
    assert not Path("model.py").exists()  # all outputs or none
    ok = cli("build", "gpt2", *TINY, "--hf-weights", "ckpt", "-o", "model.py", "--force")
    assert ok.exit_code == 0, ok.output
    assert Path("model.safetensors").read_bytes() != b"mine" and Path("model.py").exists()


def test_code_is_not_left_behind_when_the_weights_fail(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import archspec.safety.writing as writing

    real = writing._temporary

    def fail_on_weights(out: Output) -> Path:
        if out.path.suffix == ".safetensors":
            raise SpecError(f"cannot write {out.path}: No space left on device")
        return real(out)

    monkeypatch.setattr(writing, "_temporary", fail_on_weights)
    refused(cli("build", "gpt2", *TINY, "--hf-weights", "ckpt", "-o", "model.py"), "No space")
    assert names(checkpoint.parent) == ["ckpt"]


def test_a_failed_move_puts_back_what_was_moved(tmp_path: Path, monkeypatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"old a")
    real = os.replace

    failed = []

    def fail_on_b(src, dst):
        if Path(dst) == b and not failed:  # once: putting the old b back works
            failed.append(dst)
            raise OSError(28, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_on_b)
    b.write_bytes(b"old b")
    with pytest.raises(SpecError):
        write_files([Output(a, b"new a", "a"), Output(b, b"new b", "b")], force=True)
    assert a.read_bytes() == b"old a" and b.read_bytes() == b"old b"


@pytest.mark.parametrize("special", ["/dev/null", "/dev/zero", "/dev/full"])
def test_devices_are_never_written_even_with_force(special: str, tmp_path: Path) -> None:
    if not os.path.exists(special):
        pytest.skip(f"no {special}")
    refused(cli("build", "gpt2", "-o", special, "--force"), "a device, not a regular file")


def test_a_fifo_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "f.py"
    os.mkfifo(fifo)
    # In a subprocess with a timeout: opening a FIFO for writing would block forever.
    result = run_main(["build", "gpt2", "-o", str(fifo)], timeout=60)
    assert result.returncode == 2 and b"a pipe, not a regular file" in result.stderr


def test_dev_stdout_into_a_pipe_is_refused(tmp_path: Path) -> None:
    result = run_main(["build", "gpt2", "-o", "/dev/stdout"], timeout=60)
    assert result.returncode == 2, result.stderr
    assert b"a pipe, not a regular file" in result.stderr and b"Traceback" not in result.stderr


def test_symbolic_links_are_not_written_through(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "chart.svg").symlink_to(target)
    (tmp_path / "model.py").symlink_to(target)
    refused(cli("build", "gpt2", "-o", "model.py", "--force"), "symbolic link")
    pytest.importorskip("matplotlib")
    refused(cli("count", "gpt2", "--plot", "chart.svg", "--force"), "symbolic link")
    assert target.read_text() == "keep me"


def test_plot_keeps_an_existing_file_without_force(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    Path("chart.svg").write_text("mine")
    refused(cli("count", "gpt2", "--plot", "chart.svg"), "exists and differs", "--force")
    assert Path("chart.svg").read_text() == "mine"
    assert cli("count", "gpt2", "--plot", "chart.svg", "--force").exit_code == 0
    assert Path("chart.svg").read_text().lstrip().startswith("<?xml")


def test_output_onto_the_spec_it_reads_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("my.yaml").write_text("extends: gpt2\n")
    refused(cli("build", "my.yaml", "-o", "my.yaml", "--force"), "an input of this command")
    assert Path("my.yaml").read_text() == "extends: gpt2\n"


def test_parallel_writers_without_force_cannot_both_win(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    results: list[str] = []

    def write(i: int) -> None:
        try:
            write_files([Output(path, f"code {i}\n".encode(), "the code")])
            results.append("ok")
        except SpecError:
            results.append("refused")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert results.count("ok") == 1 and results.count("refused") == 9
    assert names(tmp_path) == ["model.py"]  # no temporary file left


def test_odd_output_names_are_shown_safely(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("build", "gpt2", "-o", "[bold]x[red].py")
    assert result.exit_code == 0, result.output
    assert "[bold]x[red].py" in result.stderr  # rich markup is shown, not interpreted
    refused(cli("build", "gpt2", "-o", "[/x].py"), "no such directory: [")
    # A name that is not UTF-8 (undecodable bytes arrive as lone surrogates).
    weird = os.fsdecode(b"m\xff\x1b.py")
    result = cli("build", "gpt2", "-o", weird)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stderr and "\\udcff" in result.stderr
    assert os.path.exists(weird)
