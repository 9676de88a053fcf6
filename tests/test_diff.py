"""`archspec diff`: the known differences between pairs of built-in specs, at the spec level
and module by module, with parameter deltas that add up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.compare.diff import diff_report
from archspec.cli import app
from archspec.spec.diff import spec_diff

runner = CliRunner()


def diff(a: str | Path, b: str | Path) -> dict:
    spec_a, spec_b = load_spec(a), load_spec(b)
    return diff_report(build_ir(spec_a), build_ir(spec_b), spec_diff(spec_a, spec_b))


def fields(report: dict) -> dict[str, tuple]:
    return {f["field"]: (f["a"], f["b"]) for f in report["spec"]}


def modules(report: dict) -> dict[str, dict]:
    return {m["module"]: m for m in report["modules"]}


def test_llama_2_7b_to_70b() -> None:
    report = diff("llama-2-7b", "llama-2-70b")
    changed = fields(report)
    assert changed.pop("source")
    assert changed == {
        "d_model": (4096, 8192),
        "n_layers": (32, 80),
        "n_heads": (32, 64),
        "d_ff": (11008, 28672),
        "n_kv_heads": (32, 8),  # llama-2-7b leaves it at its default, n_heads
    }
    kv = next(f for f in report["spec"] if f["field"] == "n_kv_heads")
    assert (kv["a_default"], kv["b_default"]) == (True, False)
    m = modules(report)
    assert m["decoder.blocks"]["settings"] == {"length": [32, 80]}
    assert m["decoder.blocks.i.attn"]["settings"] == {"n_heads": [32, 64], "n_kv_heads": [32, 8]}
    assert m["decoder.blocks.i.attn.k"]["settings"] == {
        "shape": ["4096 × 4096", "1024 × 8192"],
        "copies": [32, 80],
    }
    assert m["decoder.blocks.i.mlp.gate"]["settings"]["shape"] == ["11008 × 4096", "28672 × 8192"]
    assert all(e["change"] == "changed" for e in report["modules"])
    assert report["total"] == {"a": 6_738_415_616, "b": 68_976_648_192, "delta": 62_238_232_576}
    groups = {g["group"]: g["delta"] for g in report["groups"]}
    assert groups["mlp"] == 80 * 3 * 28672 * 8192 - 32 * 3 * 11008 * 4096
    assert "active" not in report


def test_llama_to_mixtral_swaps_the_mlp_for_experts() -> None:
    report = diff("llama-2-7b", "mixtral-8x7b")
    changed = fields(report)
    assert changed["moe"] == (
        None,
        {
            "n_experts": 8,
            "top_k": 2,
            "router_bias": False,
            "router": "softmax",
            "dense_layers": 0,
            "d_ff": None,
            "normalize": True,
            "shared_d_ff": 0,
            "shared_gate": False,
            "groups": 1,
            "top_groups": 1,
            "routed_scale": 1.0,
            "expert_bias": False,
            "swiglu_limit": None,
            "swiglu_alpha": None,
        },
    )
    assert changed["n_kv_heads"] == (32, 8)
    assert changed["position.theta"] == (10000.0, 1000000.0)
    m = modules(report)
    assert m["decoder.blocks.i.mlp"]["change"] == "removed"
    assert m["decoder.blocks.i.moe"]["change"] == "added"
    assert m["decoder.blocks.i.moe"]["settings"] == {
        "n_experts": [None, 8],
        "top_k": [None, 2],
        "normalize": [None, True],
        "routed_scale": [None, 1.0],
        "groups": [None, 1],
        "top_groups": [None, 1],
        "router.kind": [None, "softmax"],
    }
    # Reported once, at the top of the new subtree: not its router and experts one by one.
    assert not any(k.startswith("decoder.blocks.i.moe.") for k in m)
    assert m["decoder.blocks.i.moe"]["b"] == 32 * (8 * 3 * 14336 * 4096 + 8 * 4096)
    assert report["active"] == {"a": 6_738_415_616, "b": 12_879_925_248, "delta": 6_141_509_632}


def test_bert_to_gpt2_changes_layout_and_heads() -> None:
    report = diff("bert-base", "gpt2")
    changed = fields(report)
    assert changed["layout"] == ("encoder", "decoder")
    assert changed["residual"] == ("post", "pre")
    assert changed["head.pooler"] == (True, False)
    assert changed["head.lm_head"] == (False, True)
    m = modules(report)
    assert {k: m[k]["change"] for k in ("encoder", "decoder", "pooler", "lm_head", "type_emb")} == {
        "encoder": "removed",
        "decoder": "added",
        "pooler": "removed",
        "lm_head": "added",
        "type_emb": "removed",
    }
    assert m["lm_head"]["settings"]["tied_to"] == [None, "tok_emb.weight"]
    assert m["lm_head"]["b"] == 0  # tied: no parameters of its own
    assert m["pooler"]["a"] == 768 * 768 + 768


def test_t5_to_flan_t5_gates_the_mlp_and_unties_the_head() -> None:
    report = diff("t5-small", "flan-t5-small")
    changed = fields(report)
    assert changed["mlp.gated"] == (False, True)
    assert changed["mlp.activation"] == ("relu", "gelu_tanh")
    assert changed["head.tied"] == (True, False)
    m = modules(report)
    assert m["encoder.blocks.i.mlp.gate"]["change"] == "added"
    assert m["lm_head"]["settings"]["tied_to"] == ["tok_emb.weight", None]
    # T5's relative bias table belongs to each stack, shared by its blocks.
    assert "encoder.rel_bias" in {m["module"] for m in diff("t5-small", "bart-base")["modules"]}


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("llama-2-7b", "llama-2-70b"),
        ("llama-2-7b", "mixtral-8x7b"),
        ("bert-base", "gpt2"),
        ("t5-small", "bart-base"),
        ("gpt2", "palm-8b"),
        ("bloom-560m", "gpt2-xl"),
    ],
)
def test_deltas_add_up(a: str, b: str) -> None:
    report = diff(a, b)
    for entry in [*report["modules"], *report["groups"], report["total"]]:
        assert entry["delta"] == entry["b"] - entry["a"]
    for entry in report["modules"]:
        if entry["change"] == "added":
            assert entry["a"] == 0
        if entry["change"] == "removed":
            assert entry["b"] == 0
    assert sum(g["delta"] for g in report["groups"]) == report["total"]["delta"]
    # Reversing the pair swaps added and removed, and negates every delta.
    back = diff(b, a)
    assert back["total"]["delta"] == -report["total"]["delta"]
    flip = {"added": "removed", "removed": "added", "changed": "changed"}
    assert {(m["module"], flip[m["change"]]) for m in report["modules"]} == {
        (m["module"], m["change"]) for m in back["modules"]
    }


def test_a_spec_and_itself_do_not_differ() -> None:
    report = diff("mixtral-8x7b", "mixtral-8x7b")
    assert report["spec"] == [] and report["modules"] == []
    assert report["total"]["delta"] == 0


def test_a_derived_spec_differs_only_where_it_says(tmp_path: Path) -> None:
    deeper = tmp_path / "gpt2-deeper.yaml"
    deeper.write_text("extends: gpt2\nn_layers: 24\n")
    report = diff("gpt2", deeper)
    assert fields(report) == {"n_layers": (12, 24)}
    m = modules(report)
    assert m["decoder.blocks"]["settings"] == {"length": [12, 24]}
    # Everything else that changed is a module inside the blocks, now in 24 copies.
    rest = {k: e["settings"] for k, e in m.items() if k != "decoder.blocks"}
    assert rest and all(k.startswith("decoder.blocks.i.") for k in rest)
    assert all(s == {"copies": [12, 24]} for s in rest.values())


def test_cli_diff_table_and_json() -> None:
    result = runner.invoke(app, ["diff", "llama-2-7b", "llama-2-70b"])
    assert result.exit_code == 0, result.output
    for text in ("n_kv_heads", "32 (default)", "decoder.blocks.i.attn.k", "+62.2B"):
        assert text in result.stdout
    data = json.loads(runner.invoke(app, ["diff", "gpt2", "gpt2-medium", "--json"]).stdout)
    assert (data["a"], data["b"]) == ("gpt2", "gpt2-medium")
    assert {"spec", "modules", "groups", "total"} <= set(data)


def test_cli_diff_user_error() -> None:
    result = runner.invoke(app, ["diff", "gpt2", "gtp2-xl"])
    assert result.exit_code == 2
    assert "did you mean 'gpt2-xl'?" in result.stderr
