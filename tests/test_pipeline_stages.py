"""Pipeline stages split from the IR, chained in one process: stage 0 from the token ids, each
later stage from its predecessor's output, give the whole generated model's output and
gradients (families with tied heads, learned and rotary positions, segment tables, an encoder
with a pooler, alternating windowed layers, a mixture of experts, Granite's multipliers),
each stage holds only its own parameters, which `count --engine torch --pp --stage-layers` counts,
and what the stages cannot carry is refused.
The same stages under torch.distributed.pipelining's schedules: tests/test_pipeline.py."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.layout import Parallelism, stage_params
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.pipeline import placement
from archspec.cli import app
from archspec.runtime.pipeline import PipelineStageModel, stage_layer_ranges
from tests.tiny import as_sets, generated_module, scaled_down, tiny_sizes

pytestmark = pytest.mark.usefixtures("one_thread")

NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0"]
SPECS = {
    "gpt2": ("gpt2", tiny_sizes(n_layers=3)),
    "llama": ("llama-2-7b", tiny_sizes(n_layers=3)),
    "bert": ("bert-base", tiny_sizes(n_layers=3)),
    "gemma-2": ("gemma-2-2b", scaled_down("gemma-2-2b", tiny_sizes(n_layers=3), head_dim=8)),
    "mixtral": (
        "mixtral-8x7b",
        scaled_down("mixtral-8x7b", tiny_sizes(n_layers=3), experts=(4, 2)),
    ),
    "granite": ("granite-3-2b", scaled_down("granite-3-2b", tiny_sizes(n_layers=3))),
}


def _stages(name: str, layers: list[int]):
    spec, sizes = SPECS[name]
    ir = build_ir(load_spec(spec, [*sizes, *NO_DROPOUT]))
    module = generated_module(ir)
    where = placement(Features(ir))
    torch.manual_seed(0)
    whole = module.Model().train()
    ranges = stage_layer_ranges(len(layers) and sum(layers), len(layers), layers)
    parts = (where["embedding"], where["tables"], where["head"])
    stages = []
    for i, run in enumerate(ranges):
        torch.manual_seed(0)
        model = module.Model().train()
        first, last = i == 0, i == len(ranges) - 1
        stages.append(PipelineStageModel(model, where["stack"], run, first, last, *parts))
    return ir, whole, stages, where


def _scalar(out) -> torch.Tensor:
    """A scalar of every output (an encoder's hidden states and its pooled first token)."""
    outs = out if isinstance(out, tuple) else (out,)
    return sum((o * torch.linspace(-1, 1, o.size(-1))).square().mean() for o in outs)


@pytest.mark.parametrize("name", list(SPECS))
def test_chained_stages_are_the_whole_model(name):
    _, whole, stages, where = _stages(name, [1, 2])
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    expected = whole(ids)
    _scalar(expected).backward()
    x = ids
    for stage in stages:
        x = stage(x)
    torch.testing.assert_close(x, expected, rtol=0, atol=1e-6)
    _scalar(x).backward()
    reference = dict(whole.named_parameters())
    grads: dict[str, torch.Tensor] = {}
    for stage in stages:
        for path, p in stage.model.named_parameters():
            assert p.grad is not None, path
            grads[path] = p.grad
    if where["tied"]:  # the embedding's and the head's copy: each has its own part
        embedding, head = where["tied"]
        grads[embedding] = grads[embedding] + grads.pop(head)
    assert grads.keys() == reference.keys()
    for path, grad in grads.items():
        torch.testing.assert_close(grad, reference[path].grad, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", list(SPECS))
def test_each_stage_holds_its_own_parameters(name):
    """The blocks of a stage keep their names in the whole model; every parameter of the whole
    model is on exactly one stage, a tied head's copy on the last besides."""
    _, whole, stages, where = _stages(name, [2, 1])
    held = [name for stage in stages for name, _ in stage.model.named_parameters()]
    expected = [name for name, _ in whole.named_parameters()]
    if where["tied"]:
        expected.append(where["tied"][1])
    assert sorted(held) == sorted(expected)
    assert [n for n, _ in stages[1].model.named_parameters() if ".blocks." in n][0].startswith(
        f"{where['stack']}.blocks.2."
    )


@pytest.mark.parametrize(
    "layers,n,stages,message",
    [
        (None, 5, 2, "2 pipeline stages do not divide the 5 layers"),
        ([2, 2], 5, 2, "must give each stage one layer or more and add up to the 5 layers"),
        ([5, 0], 5, 2, "must give each stage one layer or more"),
        ([5], 5, 2, "stage_layers lists 1 stages, not 2"),
    ],
)
def test_layouts_that_do_not_divide_are_refused(layers, n, stages, message):
    with pytest.raises(ValueError, match=message):
        stage_layer_ranges(n, stages, layers)


def test_uneven_stages():
    assert stage_layer_ranges(22, 4, [5, 6, 6, 5]) == [
        range(0, 5),
        range(5, 11),
        range(11, 17),
        range(17, 22),
    ]


@pytest.mark.parametrize(
    "spec,overrides,message",
    [
        ("t5-small", [], "encoder-decoder is not written: every decoder block reads the encoder"),
        ("albert-base-v2", [], "blocks sharing weights"),
    ],
)
def test_what_stages_cannot_carry_is_refused(spec, overrides, message):
    module = generated_module(spec, [*tiny_sizes(), *overrides])
    with pytest.raises(ValueError, match=message):
        module.pipeline(module.Model(), None, None, 1)


def test_full_recomputation_is_refused():
    _, _, stages, where = _stages("gpt2", [1, 2])
    model = stages[0].model
    model.set_checkpoint("full")
    with pytest.raises(ValueError, match="checkpoint='full'"):
        PipelineStageModel(model, where["stack"], range(0, 1), True, False, (), (), ())


@pytest.mark.parametrize("name", list(SPECS))
def test_count_says_what_each_stage_holds(name):
    """`count --engine torch --pp 2 --stage-layers 2,1`: each stage's parameters, a tied head's
    copy on the last (the whole vocabulary) included."""
    ir, _, stages, _ = _stages(name, [2, 1])
    par = Parallelism(gpus=2, pp=2, engine="torch", stage_layers=(2, 1))
    counted = [ir.value(stage.params) for stage in stage_params(ir, par)]
    assert counted == [sum(p.numel() for p in stage.parameters()) for stage in stages]


@pytest.mark.parametrize(
    "options,message",
    [
        (["--stage-layers", "1,1"], "--stage-layers 1,1 adds up to 2 layers, not the model's 3"),
        (["--stage-layers", "3"], "--stage-layers 3 lists 1 stages, not the layout's 2"),
        (["--stage-layers", "x"], "as whole numbers"),
        (["--tp", "2", "--gpus", "4"], "counts the generated pipeline() alone, not beside --tp 2"),
    ],
)
def test_count_refuses_stages_that_do_not_fit(options, message):
    args = ["count", "gpt2", *as_sets(tiny_sizes(n_layers=3)), "--seq", "8", "--pp", "2"]
    args += ["--gpus", "2", "--engine", "torch"]
    result = CliRunner().invoke(app, [*args, *options])
    assert result.exit_code == 2, result.output
    assert message in result.output
