"""What the commands ask their layers, called without the command line: count's workload from
its options and plan's given layout."""

from __future__ import annotations

import pytest

from archspec.backends.count.flops_report import Workload
from archspec.backends.count.memory import Parallelism
from archspec.backends.count.request import requested_workload
from archspec.cli.common import compile_spec
from archspec.errors import SpecError
from archspec.plan import request
from archspec.plan.hardware import get_system

NO_OPTIONS = dict.fromkeys(
    ("batch", "seq", "dtype", "gpus", "tp", "pp", "zero", "sp", "interleave"), None
)


def test_no_cost_option_means_parameters_only_unless_by_module() -> None:
    assert requested_workload(**NO_OPTIONS) is None
    assert requested_workload("module", **NO_OPTIONS) == Workload()


def test_options_given_become_the_workload_the_rest_its_defaults() -> None:
    options = NO_OPTIONS | {"seq": 256, "dtype": "bf16", "gpus": 4, "tp": 2}
    expected = Workload(seq=256, dtype="bf16", parallel=Parallelism(gpus=4, tp=2))
    assert requested_workload(**options) == expected


def test_an_option_beyond_the_size_limit_is_named() -> None:
    with pytest.raises(SpecError, match="--tp must be at most"):
        requested_workload(**NO_OPTIONS | {"tp": 10**20})


def test_plan_searches_when_no_layout_option_is_given() -> None:
    ir = compile_spec("gpt2", None)
    system = get_system("a100-80g")
    run = request.training_run(ir, 8, 64, None, "bf16", None, "flash")
    assert run.seq == ir.value(ir.root.max_seq_len)
    assert request.given_layout(ir, system, run, dict.fromkeys(request.LAYOUT_DEFAULTS)) is None
    only = request.given_layout(ir, system, run, dict.fromkeys(request.LAYOUT_DEFAULTS) | {"tp": 2})
    assert only == {k: [v] for k, v in request.LAYOUT_DEFAULTS.items()} | {"tp": [2]}
