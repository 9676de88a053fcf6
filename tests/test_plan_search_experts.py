"""The planner searches expert parallelism for a model with experts: ep over the powers of two
that divide its experts and the devices, and beside tp both ways of splitting the experts (over
the tp ranks, or held whole with ep folded over tp × cp × dp, `--etp 1`). A dense model's
search is unchanged, and a layout option still pins the whole layout."""

from __future__ import annotations

import json

import pytest

from archspec import build_ir, load_spec
from archspec.plan.hardware import get_system
from archspec.plan.search import FOLDED, expert_parallel_sizes, search
from archspec.plan.step import Training, expert_parallel_ranks
from tests.hostile import cli


def _ir(name: str, *sets: str):
    return build_ir(load_spec(name, list(sets)))


@pytest.mark.parametrize(
    ("model", "gpus", "sizes"),
    [("mixtral-8x7b", 64, [1, 2, 4, 8]),  # 8 experts
     ("mixtral-8x7b", 4, [1, 2, 4]),  # no more ranks than devices
     ("qwen3-30b-a3b", 16, [1, 2, 4, 8, 16]),  # 128 experts
     ("qwen3-30b-a3b", 24, [1, 2, 4, 8]),  # 16 does not divide 24 devices
     ("llama-2-7b", 64, [1])],  # dense
)  # fmt: skip
def test_the_expert_parallel_sizes_tried(model: str, gpus: int, sizes: list[int]) -> None:
    assert expert_parallel_sizes(_ir(model), gpus) == sizes


def test_a_searched_moe_layout_is_one_megatron_core_can_run() -> None:
    ir = _ir("mixtral-8x7b", "max_seq_len=4096")
    run = Training(64, 512, 4096, "bf16", "bf16", "flash", "nemo")
    result = search(ir, get_system("h100-sxm"), run)
    layouts = [c.time.layout for c in result.ranked]
    assert {lay.ep for lay in layouts} == {1, 2, 4, 8}
    # Folding is proposed only where it can run: no layout is left out for a reason the user
    # did not cause by an option.
    assert FOLDED not in result.dropped
    assert any(lay.etp == 1 for lay in layouts) and any(lay.etp is None for lay in layouts)
    for lay in layouts:
        dp = 64 // (lay.tp * lay.pp * lay.cp)
        assert expert_parallel_ranks(lay.tp, lay.cp, dp, lay.ep, lay.etp) % lay.ep == 0
        if lay.etp == 1:  # folded: experts whole beside tp, each rank routing its 1/tp
            assert lay.tp > 1 and lay.ep > 1 and lay.sp
    # Expert parallelism is what Mixtral's published recipes run (NeMo's: EP 8), and what
    # the search finds fastest here: each rank reads an eighth of the experts' weights.
    assert layouts[0].ep > 1


def test_the_searched_layout_given_back_is_timed_the_same() -> None:
    base = ["plan", "mixtral-8x7b", "--gpu", "h100-sxm", "--gpus", "64", "--global-batch",
            "512", "--seq", "4096", "--engine", "nemo", "--json"]  # fmt: skip
    searched = json.loads(cli(*base).stdout)
    lay = searched["layout"]
    given = [*base, "--tp", str(lay["tp"]), "--pp", str(lay["pp"]), "--ep", str(lay["ep"]),
             "--batch", str(lay["micro_batch"]), "--zero", str(lay["zero"]),
             "--interleave", str(lay["interleave"]), "--recompute", lay["recompute"]]  # fmt: skip
    if lay["sp"]:
        given.append("--sp")
    if lay["etp"] == 1 and lay["tp"] > 1:
        given += ["--etp", "1"]
    again = cli(*given)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["step_time_s"] == pytest.approx(searched["step_time_s"])


def test_a_dense_search_has_no_expert_parallelism() -> None:
    ir = _ir("llama-2-7b", "max_seq_len=4096")
    run = Training(16, 64, 4096, "bf16", "bf16", "flash", "megatron")
    result = search(ir, get_system("h100-sxm"), run)
    assert result.ranked and all(c.time.layout.ep == 1 and c.time.layout.etp is None
                                 for c in result.ranked)  # fmt: skip
