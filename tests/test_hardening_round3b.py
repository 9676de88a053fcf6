"""Issue #30 (hardening, round 3), the rest: outputs onto a run's inputs, `--system` files,
zero and out-of-range values that gave wrong results, and the guards `bench --nproc` skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import cli, refused

PARENT = "extends: gpt2\nn_layers: 2\n"


# --- One output guard that knows every input of the run --------------------------------------


def _family(tmp_path: Path, parent_name: str) -> Path:
    """child.yaml extends parent.yaml, whose file is `parent_name` (a link to it when the name
    does not end in .yaml: a diagram's or a chart's name); the parent's real file."""
    real = tmp_path / parent_name
    real.write_text(PARENT)
    if parent_name != "parent.yaml":
        (tmp_path / "parent.yaml").symlink_to(real)
    (tmp_path / "child.yaml").write_text(
        f"extends: {tmp_path / 'parent.yaml'}\nd_model: 64\nn_heads: 2\n"
    )
    return real


@pytest.mark.parametrize(
    ("parent_name", "command"),
    [
        ("parent.yaml", ["build", "{child}", "-o", "{out}"]),
        ("parent.svg", ["draw", "{child}", "-o", "{out}"]),
        ("parent.html", ["report", "{child}", "-o", "{out}"]),
        ("parent.png", ["compare", "{child}", "gpt2", "--plot", "{out}"]),
        ("parent.png", ["count", "{child}", "--seq", "8,16", "--plot", "{out}"]),
    ],
)
def test_no_output_replaces_an_extends_parent(tmp_path, parent_name, command) -> None:
    real = _family(tmp_path, parent_name)
    child = str(tmp_path / "child.yaml")
    args = [a.format(child=child, out=real) for a in command]
    refused(cli(*args, "--force"), "input of this command", str(real))
    assert real.read_text() == PARENT


def test_no_output_replaces_the_config_json_it_imports(tmp_path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, '
                      '"vocab_size": 16, "n_positions": 8}')  # fmt: skip
    before = config.read_text()
    refused(cli("build", str(tmp_path), "-o", str(config), "--force"), "input of this command")
    assert config.read_text() == before


def test_a_new_run_forgets_the_last_runs_inputs(tmp_path) -> None:
    # In one process (a notebook, the tests), the next command may write what the last read.
    spec = tmp_path / "a.yaml"
    spec.write_text(PARENT)
    assert cli("count", str(spec)).exit_code == 0
    other = tmp_path / "b.yaml"
    other.write_text(PARENT)
    result = cli("build", str(other), "-o", str(spec), "--force")
    assert result.exit_code == 0, result.output
