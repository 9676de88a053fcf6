"""Helpers for the hardening tests: running the CLI (in process, or in a fresh Python to see
what it imports) and checking its one-message contract."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from archspec.cli import app
from tests.tiny import as_sets, built_model, tiny_sizes

SIZES = tiny_sizes(n_layers=1, d_model=8, n_heads=2, d_ff=16, vocab_size=16, max_seq_len=8)
TINY = as_sets(SIZES)  # for the command line


def cli(*args: str):
    """Run a command in process; stderr apart."""
    return CliRunner().invoke(app, list(args))


def refused(result, *words: str) -> str:
    """The command ended with exit code 2 and one clear message holding `words`."""
    err = result.stderr
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in err and "error:" in err, err
    for word in words:
        assert word in err, err
    return err


def _this_checkout() -> dict[str, str]:
    """The environment of a child Python that imports this checkout's archspec, whatever is
    installed."""
    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def run_main(args: list[str], cwd: Path | None = None, timeout: float = 60, **kw):
    """Run `python -m archspec` (main(), with its stdout handling) in a subprocess."""
    kw.setdefault("env", _this_checkout())
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "archspec", *args], cwd=cwd, timeout=timeout, **kw)


def run_python(code: str) -> tuple[str, set[str]]:
    """Run `code` in a fresh Python, which must exit 0: what it printed, and the modules
    imported by its end (so a test can say what a command must not import)."""
    script = f"import sys\n{code}\nprint('\\n' + ' '.join(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_this_checkout()
    )
    assert result.returncode == 0, result.stderr
    printed, _, modules = result.stdout.rstrip("\n").rpartition("\n")
    return printed, set(modules.split())


def tiny_checkpoint(folder: Path) -> dict:
    """A transformers-named GPT-2 checkpoint of the SIZES, as model.safetensors."""
    from safetensors.torch import save_file

    from archspec import build_ir, load_spec
    from archspec.hf.weights import to_hf

    ir = build_ir(load_spec("gpt2", SIZES))
    with tempfile.TemporaryDirectory() as scratch:  # the generated module's file
        state = built_model(ir, folder=scratch).state_dict()
    hf = {k: v.clone().contiguous() for k, v in to_hf(ir, state).items()}
    folder.mkdir(exist_ok=True)
    save_file(hf, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return hf
