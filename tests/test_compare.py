"""`archspec compare`: the numbers equal `archspec count`'s, the facts are read off the IR."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.spec.resolve import builtin_names
from tests.hostile import run_main, run_python

runner = CliRunner()


def cli_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def every_builtin() -> dict[str, dict]:
    """`compare --json` over every built-in spec at once, by name."""
    report = cli_json("compare", *builtin_names())
    return {entry["name"]: entry for entry in report["specs"]}


@pytest.mark.parametrize("name", builtin_names())
def test_numbers_equal_count_json(every_builtin: dict[str, dict], name: str) -> None:
    params = every_builtin[name]["params"]
    counted = cli_json("count", name)["params"]
    assert params["total"] == counted["total"]
    assert params["groups"] == counted["groups"]
    assert params["active"] == counted.get("active", counted["total"])
    # Embedding parameters are exactly the report's `embeddings` group; the rest is not.
    assert params["embedding"] == counted["groups"]["embeddings"]
    assert params["embedding"] + params["non_embedding"] == counted["total"]


# Every layout, MHA / GQA / MQA, a mixture of experts, a tied and an untied head.
COST_SPECS = ["bert-base", "gpt2", "t5-small", "llama-2-70b", "mixtral-8x7b", "palm-8b"]


@pytest.mark.parametrize(
    "options",
    [
        [],  # compare's default: one S for all, the shortest max_seq_len; batch 1, fp32
        ["--seq", "2048", "--batch", "4", "--dtype", "bf16"],
        ["--seq", "300", "--dtype", "int4"],
    ],
)
def test_flops_and_memory_equal_count_json(options: list[str]) -> None:
    compared = cli_json("compare", *COST_SPECS, *options)["specs"]
    for entry in compared:
        # `count` adds FLOPs and memory only when asked; `--seq S` asks at compare's S.
        common = ["--seq", str(entry["workload"]["seq"])]
        counted = cli_json("count", entry["name"], *(options or common))
        for key in ("workload", "flops", "memory"):
            assert entry[key] == counted[key], (entry["name"], key)
        assert entry["params"]["total"] == counted["params"]["total"]
        per_token = entry["per_token"]
        assert per_token["forward_flops"] == counted["flops"]["forward_per_token"]
        train = counted["flops"]["train_step"] / counted["flops"]["tokens"]
        assert abs(per_token["train_flops"] - train) <= 0.5
        w = counted["workload"]
        if entry["structure"]["architecture"] == "decoder-only":
            # The whole cache is B sequences of kv_len positions.
            assert (
                per_token["kv_cache_bytes"] * w["batch"] * w["kv_len"]
                == counted["memory"]["kv_cache"]
            )
        if entry["structure"]["architecture"] == "encoder-only":
            assert per_token["kv_cache_bytes"] == 0


def test_one_sequence_length_for_all_columns() -> None:
    specs = cli_json("compare", "bert-base", "llama-2-7b", "--seq", "1024")["specs"]
    assert [e["workload"]["seq"] for e in specs] == [1024, 1024]
    # Unless asked, one common S too: the shortest context (rows of FLOPs per token at
    # 512 and 4,096 would compare unlike things), and the command says which.
    default = cli_json("compare", "bert-base", "llama-2-7b")["specs"]
    assert [e["workload"]["seq"] for e in default] == [512, 512]
    result = runner.invoke(app, ["compare", "gpt2", "mixtral-8x7b"])
    assert result.exit_code == 0
    assert "S = 1,024 for every spec" in result.stderr


def test_parameters_chart_on_a_log_axis_past_a_factor_of_20(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "c.svg"
    result = runner.invoke(app, ["compare", "gpt2", "mixtral-8x7b", "--plot", str(path)])
    assert result.exit_code == 0, result.output
    assert "Parameters (total, log scale)" in path.read_text()
    near = tmp_path / "near.svg"
    runner.invoke(app, ["compare", "llama-2-7b", "llama-2-13b", "--plot", str(near)])
    assert "Parameters by component" in near.read_text()  # comparable sizes: stacked, linear


@pytest.mark.parametrize("width", [80, 100, 140])
def test_tables_never_lose_data(width: int) -> None:
    """At 80, 100 and 140 columns no figure is cut ("6.…") or split across lines."""
    env = {"COLUMNS": str(width)}
    result = runner.invoke(app, ["compare", "gpt2", "mixtral-8x7b", "llama-2-70b"], env=env)
    assert result.exit_code == 0
    assert "…" not in result.stdout
    assert all(len(line) <= width for line in result.stdout.splitlines())
    for number in ("124,439,808", "46,702,792,704", "68,976,648,192", "mixtral-8x7b"):
        assert number in result.stdout
    result = runner.invoke(app, ["count", "llama-2-7b", "--seq", "512,1024,2048"], env=env)
    assert result.exit_code == 0 and "…" not in result.stdout
    assert all(len(line) <= width for line in result.stdout.splitlines())
    for text in ("512", "1,024", "2,048", "6.91T", "14.1T", "29.3T", "106 GiB", "27.1 GiB"):
        assert text in result.stdout


def test_weights_in_the_chosen_dtype() -> None:
    bf16, int4 = (
        cli_json("compare", "llama-2-7b", "--dtype", dtype)["specs"][0]["memory"]["weights"]
        for dtype in ("bf16", "int4")
    )
    assert bf16 == 2 * 6_738_415_616
    assert int4 == 6_738_415_616 // 2


def test_count_sweep_rows_equal_single_counts() -> None:
    """`count --seq a,b,c` is one `count --seq S` per length, in one table."""
    options = ["--batch", "2", "--dtype", "bf16"]
    swept = cli_json("count", "mixtral-8x7b", "--seq", "512,1024,2048,4096", *options)
    assert [e["workload"]["seq"] for e in swept["sweep"]] == [512, 1024, 2048, 4096]
    assert "flops" not in swept and swept["params"]["total"] == 46_702_792_704
    for entry in swept["sweep"]:
        single = cli_json("count", "mixtral-8x7b", "--seq", str(entry["workload"]["seq"]), *options)
        assert entry == {k: single[k] for k in ("workload", "flops", "memory")}
    table = runner.invoke(app, ["count", "t5-small", "--seq", "128,512, 2048"])
    assert table.exit_code == 0, table.output
    assert "t5-small across sequence lengths" in table.stdout
    assert all(s in table.stdout for s in ("128", "512", "2,048"))


@pytest.mark.parametrize("bad", ["512,x", "512,,1024", "0,512", "1e3"])
def test_count_sweep_rejects_bad_lists(bad: str) -> None:
    result = runner.invoke(app, ["count", "gpt2", "--seq", bad])
    assert result.exit_code == 2
    assert result.stderr.count("error:") == 1 and "--seq" in result.stderr


def test_columns_keep_the_order_given() -> None:
    names = ["mixtral-8x7b", "bert-base", "t5-small"]
    assert [e["name"] for e in cli_json("compare", *names)["specs"]] == names


def test_structure_facts(every_builtin: dict[str, dict]) -> None:
    llama70 = every_builtin["llama-2-70b"]["structure"]
    assert llama70["architecture"] == "decoder-only"
    assert llama70["layers"] == {"decoder": 80}
    assert (llama70["n_heads"], llama70["n_kv_heads"], llama70["head_dim"]) == (64, 8, 128)
    assert llama70["attention"] == "GQA"
    assert (llama70["d_ff"], llama70["activation"], llama70["gated"]) == (28672, "silu", True)
    assert (llama70["norm"], llama70["residual"], llama70["position"]) == ("rmsnorm", "pre", "rope")
    assert llama70["tied_embeddings"] is False and llama70["moe"] is None

    palm = every_builtin["palm-8b"]["structure"]
    assert (palm["attention"], palm["n_kv_heads"], palm["residual"]) == ("MQA", 1, "parallel")
    assert palm["tied_embeddings"] is True

    t5 = every_builtin["t5-small"]["structure"]
    assert t5["architecture"] == "encoder-decoder"
    assert t5["layers"] == {"encoder": 6, "decoder": 6}
    assert (t5["position"], t5["attention"]) == ("relative_bias", "MHA")

    bert = every_builtin["bert-base"]["structure"]
    assert (bert["architecture"], bert["residual"], bert["tied_embeddings"]) == (
        "encoder-only",
        "post",
        None,  # no LM head, nothing to tie
    )
    assert every_builtin["mixtral-8x7b"]["structure"]["moe"] == {"n_experts": 8, "top_k": 2}
    assert every_builtin["bloom-560m"]["structure"]["position"] == "alibi"


def test_active_differs_only_for_moe(every_builtin: dict[str, dict]) -> None:
    moe = {n for n, e in every_builtin.items() if e["params"]["active"] != e["params"]["total"]}
    assert moe == {n for n, e in every_builtin.items() if e["structure"]["moe"]}
    assert every_builtin["mixtral-8x7b"]["params"]["active"] == 12_879_925_248


def test_untied_head_is_non_embedding(every_builtin: dict[str, dict]) -> None:
    llama = every_builtin["llama-2-7b"]["params"]
    assert llama["embedding"] == 32000 * 4096  # tok_emb only; RoPE has no table
    assert llama["groups"]["head"] == 32000 * 4096
    gpt2 = every_builtin["gpt2"]["params"]
    assert gpt2["embedding"] == (50257 + 1024) * 768  # token + position tables; tied head: 0


def test_markdown_table() -> None:
    result = runner.invoke(app, ["compare", "llama-2-7b", "llama-2-70b", "--markdown"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "| | `llama-2-7b` | `llama-2-70b` |"
    assert lines[1] == "| --- | ---: | ---: |"
    assert all(line.startswith("| ") and line.endswith(" |") for line in lines)
    assert "| heads / kv heads | 32 / 32 | 64 / 8 |" in lines
    assert "| attention | MHA | GQA |" in lines
    assert "| total | 6,738,415,616 | 68,976,648,192 |" in lines


def test_rich_table() -> None:
    result = runner.invoke(app, ["compare", "bert-base", "gpt2"])
    assert result.exit_code == 0, result.output
    for text in ("bert-base", "gpt2", "encoder-only", "109,482,240", "124,439,808"):
        assert text in result.stdout


def test_user_errors_exit_2_with_one_message() -> None:
    result = run_main(["compare", "gpt2", "lama-2-7b"], text=True)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "unknown spec 'lama-2-7b'" in result.stderr and "Traceback" not in result.stderr
    bad_plot = runner.invoke(app, ["compare", "gpt2", "--plot", "chart.pdf"])
    assert bad_plot.exit_code == 2
    assert "must end in .png or .svg" in bad_plot.stderr
    for bad in (["--dtype", "fp4"], ["--seq", "0"]):
        result = runner.invoke(app, ["compare", "gpt2", "bert-base", *bad])
        assert result.exit_code == 2, result.output
        assert result.stderr.count("error:") == 1


def test_compare_and_diff_do_not_import_torch_or_matplotlib() -> None:
    code = (
        "from archspec.cli import app\n"
        "runs = [['compare', 'llama-2-70b', 'gpt2', '--json'], ['diff', 'gpt2', 't5-small']]\n"
        "for args in runs:\n"
        "    try:\n        app(args)\n    except SystemExit:\n        pass\n"
    )
    _, modules = run_python(code)
    assert "torch" not in modules, "torch imported"
    assert "matplotlib" not in modules, "matplotlib imported"
