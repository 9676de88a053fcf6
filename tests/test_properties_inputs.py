"""Property tests, issue #30's classes of input: `--system` files of random types, values and
nesting; outputs aimed at an input the run reads through `extends:`; zero and null values;
depth. Each ends in exit 0 or one clean message (exit 2), never a traceback, never a file of
the run's overwritten, and a deep model costs what a shallow one does.

The examples per property follow the hypothesis profile (tests/conftest.py) at a quarter of
tests/test_properties.py's, these being whole CLI runs: `ci` by default, HYPOTHESIS_PROFILE=long
for the soak run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from tests.hostile import cli
from tests.test_properties import (
    HOSTILE_STRINGS,
    check_every_backend,
    copy,
    extreme_numbers,
    get,
    invoke_cli,
    junk,
    paths,
    valid_specs,
    write_spec,
)

pytestmark = pytest.mark.usefixtures("one_thread")

EXAMPLES = max(3, settings.default.max_examples // 4)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inputs")


def clean(result, seconds: float | None = None) -> None:
    """Exit 0, or 2 with one message; no traceback; within 10 s where timed."""
    assert result.exit_code in (0, 2), (result.output, result.exception)
    if result.exit_code == 2:
        assert "Traceback" not in result.stderr and "error" in result.stderr.lower()
    assert result.exception is None or isinstance(result.exception, SystemExit)
    if seconds is not None:
        assert seconds < 10, seconds
    event(f"exit {result.exit_code}")


# --- --system files ------------------------------------------------------------------------

SYSTEM_FILE = {
    "accelerators": {
        "myacc": {"name": "My Accelerator", "peak_tflops": {"bf16": 100, "fp32": 10},
                  "memory_gib": 80, "memory_bandwidth_gbs": 2000, "source": "a test"},
    },
    "systems": {
        "mysys": {"accelerator": "myacc", "name": "my system", "gpus_per_node": 8,
                  "intra_node_gbs": 300, "inter_node_gbs": 25, "intra_node_latency_us": 1,
                  "inter_node_latency_us": 5, "source": "a test"},
    },
}  # fmt: skip
NUMBERS = st.one_of(extreme_numbers, st.floats(), st.integers(-5, 10**6))


@st.composite
def system_files(draw: st.DrawFn) -> Any:
    """A good system file with one to three of its values, keys or levels replaced."""
    data = copy(SYSTEM_FILE)
    for _ in range(draw(st.integers(1, 3))):
        keyed = paths(data) if isinstance(data, dict) else []
        if not keyed:
            break
        path = draw(st.sampled_from(keyed))
        parent, key = get(data, path[:-1]), path[-1]
        op = draw(st.sampled_from(["number", "junk", "string", "delete", "nest", "whole"]))
        if op == "number":
            parent[key] = draw(NUMBERS)
        elif op == "junk":
            parent[key] = draw(junk)
        elif op == "string":
            parent[key] = draw(st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(max_size=9)))
        elif op == "delete":
            del parent[key]
        elif op == "nest":
            value = parent[key]
            for _ in range(draw(st.integers(1, 100))):
                value = [value] if draw(st.booleans()) else {key: value}
            parent[key] = value
        else:
            data = draw(junk)
    return data


@settings(max_examples=EXAMPLES)
@given(data=system_files())
def test_system_files_plan_or_are_refused(data: Any, workdir: Path) -> None:
    path = workdir / "system.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    note(path.read_text())
    for args in (
        ["plan", "--list-systems", "--system", str(path)],
        ["plan", "gpt2", "--gpu", "mysys", "--system", str(path), "--gpus", "8",
         "--global-batch", "8", "--seq", "128"],
    ):  # fmt: skip
        start = time.perf_counter()
        result = cli(*args)
        clean(result, time.perf_counter() - start)
        assert "\x1b" not in result.stdout  # a name's escape sequence never reaches a terminal


# --- outputs onto the files a run reads ----------------------------------------------------


@settings(max_examples=EXAMPLES)
@given(data=valid_specs(), depth=st.integers(1, 3), target=st.data())
def test_no_output_replaces_a_file_of_the_extends_chain(
    data: dict[str, Any], depth: int, target: st.DataObject, workdir: Path
) -> None:
    """A chain root <- child1 <- ... ; `build` (and `import-hf`'s sibling guard) with `-o` any
    file of the chain, --force or not: refused, every file as it was."""
    folder = workdir / "chain"
    folder.mkdir(exist_ok=True)
    chain = [folder / "root.yaml"]
    chain[0].write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    for k in range(depth):
        child = folder / f"child{k}.yaml"
        child.write_text(f"extends: {chain[-1].name}\nname: child{k}\n")
        chain.append(child)
    before = {p: p.read_bytes() for p in chain}
    output = target.draw(st.sampled_from(chain[:-1]))
    force = target.draw(st.booleans())
    result = cli("build", str(chain[-1]), "-o", str(output), *(["--force"] if force else []))
    clean(result)
    assert {p: p.read_bytes() for p in chain} == before
    if result.exit_code == 2 and "input" in result.stderr:
        event("refused: an input")


# --- zero and null values ------------------------------------------------------------------


@settings(max_examples=EXAMPLES)
@given(data=valid_specs(), picks=st.data())
def test_zero_and_null_values_are_valid_or_a_spec_error(
    data: dict[str, Any], picks: st.DataObject, workdir: Path
) -> None:
    data = copy(data)
    for _ in range(picks.draw(st.integers(1, 3))):
        path = picks.draw(st.sampled_from(paths(data)))
        parent = get(data, path[:-1])
        parent[path[-1]] = picks.draw(st.sampled_from([0, 0.0, -0.0, None, "", [], {}, False]))
    path = write_spec(workdir, data)
    note(path.read_text())
    check_every_backend(path, [], workdir)
    for command in ("count", "print"):
        invoke_cli([command, str(path)])


@settings(max_examples=EXAMPLES)
@given(key=st.sampled_from(["n_layers", "d_model", "n_heads", "d_ff", "vocab_size",
                            "max_seq_len", "attention.sliding_window", "attention.softcap",
                            "position.theta", "norm.eps", "moe.top_k"]),
       value=st.sampled_from(["0", "null", "0.0", "-0", "~", "''"]))  # fmt: skip
def test_a_zero_or_null_set_is_refused_plainly(key: str, value: str) -> None:
    clean(cli("count", "gemma-2-2b", "--set", f"{key}={value}"))


# --- depth ---------------------------------------------------------------------------------

DEEP_COMMANDS = [
    ["count"],
    ["draw"],
    ["plan", "--gpu", "h100-sxm", "--mode", "serve"],
    ["plan", "--gpu", "h100-sxm", "--global-batch", "8"],
]


@settings(max_examples=EXAMPLES)
@given(
    data=valid_specs(),
    layers=st.sampled_from([1001, 10**4 + 1, 10**6, 10**9]),
    pattern=st.sampled_from([None, "LG", "GLL", "LLLLLG"]),
    command=st.sampled_from(DEEP_COMMANDS),
)
def test_depth_costs_nothing(
    data: dict[str, Any], layers: int, pattern: str | None, command: list[str], workdir: Path
) -> None:
    """A random valid spec at up to a billion layers, with or without a cycled window pattern
    (a decoder's): each command exits 0 or 2 within 10 s."""
    sets = ["--set", f"n_layers={layers}"]
    if pattern and data.get("layout", "decoder") == "decoder":
        sets += [
            "--set",
            "attention.sliding_window=4",
            "--set",
            f"attention.window_pattern={pattern}",
        ]
    path = write_spec(workdir, data)
    note(path.read_text())
    start = time.perf_counter()
    result = cli(command[0], str(path), *command[1:], *sets)
    clean(result, time.perf_counter() - start)
