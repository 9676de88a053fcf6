"""Issue 19, specs and overrides: deep nesting, cycles, YAML 1.1 numbers, merge keys, huge
integers, special files, `extends` chains and reach, file names and built-in names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from archspec import SpecError, load_spec
from archspec.safety.limits import MAX_DEPTH, MAX_EXTENDS
from tests.hostile import cli, refused


def spec_file(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("levels", [500, 100_000])
def test_deeply_nested_yaml_is_refused(tmp_path: Path, levels: int) -> None:
    text = "extends: gpt2\nnorm: " + "{a: " * levels + "1" + "}" * levels + "\n"
    with pytest.raises(SpecError, match=f"nested more than {MAX_DEPTH} levels"):
        load_spec(spec_file(tmp_path, text))


def test_deeply_nested_override_is_refused_briefly() -> None:
    with pytest.raises(SpecError, match=f"nested more than {MAX_DEPTH} levels") as err:
        load_spec("gpt2", ["norm=" + "[" * 100_000 + "]" * 100_000])
    assert len(str(err.value)) < 300


@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n", "<<: &m {x: *m}\n"])
def test_self_referencing_alias_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(SpecError, match="cycle|alias"):
        load_spec(spec_file(tmp_path, "extends: gpt2\n" + text))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("n_layers: 010", "reads 010 as the octal number 8"),
        ("n_layers: 1:30", "reads 1:30 as the base-60 number 90"),
        ("norm: {eps: 1:30.5}", "base-60"),
    ],
)
def test_yaml_1_1_numbers_nobody_means_are_refused(tmp_path: Path, text: str, words: str):
    with pytest.raises(SpecError, match=words):
        load_spec(spec_file(tmp_path, f"extends: gpt2\n{text}\n"))
    if "{" not in text:
        key, value = text.split(": ")
        with pytest.raises(SpecError, match=words):
            load_spec("gpt2", [f"{key}={value}"])


def test_plain_numbers_still_read(tmp_path: Path) -> None:
    spec = load_spec(spec_file(tmp_path, "extends: gpt2\nn_layers: 10\nd_ff: 3_072\n"))
    assert spec.n_layers == 10 and spec.d_ff == 3072
    assert load_spec("gpt2", ["n_layers=0x10"]).n_layers == 16


def test_merge_keys_follow_yaml(tmp_path: Path) -> None:
    text = (
        "extends: gpt2\n"
        "norm:\n"
        "  <<: [{eps: 1.0e-3, kind: rmsnorm}, {eps: 2.0e-3, bias: false}]\n"
        "  eps: 1.0e-6\n"
    )
    spec = load_spec(spec_file(tmp_path, text))
    # The mapping's own key wins; of the merged ones, the first.
    assert spec.norm.eps == 1e-6 and spec.norm.kind == "rmsnorm" and spec.norm.bias is False
    before = "extends: gpt2\nnorm:\n  eps: 1.0e-6\n  <<: {eps: 1.0e-3}\n"
    assert load_spec(spec_file(tmp_path, before, "b.yaml")).norm.eps == 1e-6


def test_merge_key_of_a_scalar_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="merge key"):
        load_spec(spec_file(tmp_path, "extends: gpt2\nnorm: {<<: 1}\n"))


@pytest.mark.parametrize("value", ["1" + "0" * 200, "1" + "0" * 2200])
def test_huge_integers_are_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(SpecError, match="expected at most 1,000,000,000"):
        load_spec(spec_file(tmp_path, f"extends: gpt2\nd_model: {value}\n"))
    refused(cli("count", "gpt2", "--set", f"d_model={value}", "--json"), "at most")
    refused(cli("print", "gpt2", "--set", f"d_model={value}", "--params"), "at most")


@pytest.mark.parametrize(
    ("field", "value"), [("vocab_size", 3 * 10**9), ("n_layers", 10**12), ("d_model", 10**10)]
)
def test_sizes_beyond_the_analysis_are_refused(field: str, value: int) -> None:
    refused(cli("count", "gpt2", "--set", f"{field}={value}", "--seq", "8"), "at most")


def test_special_and_unreadable_spec_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)
    if os.path.exists("/proc/self/pagemap"):
        with pytest.raises(SpecError, match="over the limit|cannot read"):
            load_spec(Path("/proc/self/pagemap"))
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="not a regular file"):
        load_spec(fifo)  # refused before opening: no wait for a writer


def test_unreadable_spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import archspec.safety.reading as reading

    locked = spec_file(tmp_path, "extends: gpt2\n", "locked.yaml")

    def denied(*args, **kwargs):  # chmod 0 does not stop root, who may run the tests
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(reading.os, "open", denied)
    with pytest.raises(SpecError, match="cannot read the file: Permission denied"):
        load_spec(locked)


def test_utf16_spec_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "u.yaml"
    path.write_bytes("extends: gpt2\n".encode("utf-16"))
    with pytest.raises(SpecError, match="not UTF-8"):
        load_spec(path)


def test_a_long_extends_chain_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s0.yaml").write_text("extends: gpt2\n")
    for i in range(1, 1000):
        (tmp_path / f"s{i}.yaml").write_text(f"extends: ./s{i - 1}.yaml\n")
    with pytest.raises(SpecError, match=f"more than {MAX_EXTENDS} files long"):
        load_spec(tmp_path / "s999.yaml")
    assert load_spec(tmp_path / "s20.yaml").n_layers == 12  # a reasonable chain is fine


def test_extends_of_a_non_spec_file_reads_nothing(tmp_path: Path) -> None:
    secret = tmp_path / "credentials"
    secret.write_text("token: hunter2-SECRET-TOKEN\n")
    for ref in ("./credentials", str(secret), "../" * 12 + "etc/passwd"):
        path = spec_file(tmp_path, f"extends: {ref}\n")
        with pytest.raises(SpecError, match="not a .yaml or .yml file") as err:
            load_spec(path)
        assert "hunter2" not in str(err.value)


def test_extends_of_a_yaml_that_is_no_spec_does_not_echo_it(tmp_path: Path) -> None:
    (tmp_path / "secrets.yaml").write_text("token: hunter2-SECRET-TOKEN\n")
    result = cli("count", str(spec_file(tmp_path, "extends: ./secrets.yaml\n")))
    err = refused(result, "unknown key 'token'")
    assert "hunter2" not in err


@pytest.mark.parametrize(
    ("file", "name"),
    [
        ("my model (v2).yaml", "my-model-v2"),
        ("modèle-été.yaml", "modele-ete"),
        ("日本.yaml", "spec"),
    ],
)
def test_spec_names_from_odd_file_names(tmp_path: Path, file: str, name: str) -> None:
    assert load_spec(spec_file(tmp_path, "extends: gpt2\n", file)).name == name


def test_a_file_named_like_a_builtin_does_not_shadow_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("gpt2").write_text("extends: gpt2\nn_layers: 2\n")
    result = cli("count", "gpt2", "--json")
    assert result.exit_code == 0 and '"name": "gpt2"' in result.stdout
    assert "is the built-in spec" in result.stderr and "./gpt2" in result.stderr
    mine = cli("count", "./gpt2", "--json")
    assert mine.exit_code == 0 and mine.stdout != result.stdout


def test_non_utf8_override_is_one_message() -> None:
    value = os.fsdecode(b"n_layers=\xff\xfe")
    with pytest.raises(SpecError) as err:
        load_spec("gpt2", [value])
    assert "\\udcff" in str(err.value)
