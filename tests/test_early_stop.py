"""Full recomputation's replay against torch: what the backward pass runs again of a block.

The generated code checkpoints with torch.utils.checkpoint(use_reentrant=False), whose replay
stops early (replay.py): FlopCounterMode over the backward of the checkpointed model, less the
backward of the plain one, is the replayed forward's matmul FLOPs, which count's
`--recompute full` gives. torch's reentrant checkpoint (what Megatron-LM, DeepSpeed, Composer
and metaseq run) replays each block whole: the same measurement with the blocks wrapped in it
adds the ops after the early stop, which plan replays for a reentrant stack.

The attention drops out its probabilities, so that SDPA takes its math path on the CPU, whose
batched matmuls FlopCounterMode counts (it does not count the CPU's fused kernel). Where the
residual stream drops out too, the dropout after the last projection saves its mask: the
replay runs to it, so through the projection, and both checkpoints replay the whole block.
"""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    checkpoint_wrapper,
)
from torch.utils.flop_counter import FlopCounterMode

from archspec.backends.count.conventions import get_convention
from archspec.backends.count.flops import B, S, flop_figures
from archspec.backends.count.replay import CHECKPOINTS, NON_REENTRANT, REENTRANT
from archspec.errors import SpecError
from archspec.plan import published
from archspec.plan.hardware import get_system
from archspec.plan.opcost import pass_costs
from archspec.plan.step import Layout, StepModel, Training
from tests.test_memory import small_ir
from tests.tiny import built_model

pytestmark = pytest.mark.usefixtures("one_thread")

b, s = 2, 32


def replayed_flops(ir, checkpoint: str) -> int:
    """Matmul FLOPs the backward pass replays, measured: each block checkpointed as the
    generated code does, or by torch's reentrant checkpoint."""
    tokens = torch.randint(0, 100, (b, s))

    def backward_flops(model) -> int:
        torch.manual_seed(0)
        out = model(tokens).float().sum()
        with FlopCounterMode(display=False) as counter:
            out.backward()
        return counter.get_total_flops()

    if checkpoint == NON_REENTRANT:
        model = built_model(ir, checkpoint="full")
    else:
        model = built_model(ir)
        blocks = model.decoder.blocks
        for i, block in enumerate(blocks):
            blocks[i] = checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.REENTRANT)
    return backward_flops(model) - backward_flops(built_model(ir))


# Llama-2: bias-free projections, GQA, SwiGLU; GPT-2: biased ones (addmm), a GELU MLP, and
# with dropout on the residual stream.
@pytest.mark.parametrize(("name", "hidden"), [("llama-2-70b", 0), ("gpt2", 0), ("gpt2", 0.1)])
def test_count_replays_what_torch_replays(name: str, hidden: float) -> None:
    ir = small_ir(name, (f"dropout.hidden={hidden}", "dropout.attention=0.1"))
    values = {**ir.env, B: b, S: s}
    full = flop_figures(ir, get_convention("executed"), "eager", "full")
    early = replayed_flops(ir, NON_REENTRANT)
    assert early == full.recomputed_matmul.xreplace(values)
    # Reentrant: the whole block, i.e. also the projections after the early stop (the down
    # projection), as plan's op costs mark them.
    costs = pass_costs(ir, 4, "eager")
    past = sp.Add(
        *(
            n * 2 * sp.prod(c.shape)
            for n, block in costs.layers
            for c in block
            if c.kind == "matmul" and c.past_early_stop
        )
    ).xreplace(values)
    assert (past > 0) == (hidden == 0)
    assert replayed_flops(ir, REENTRANT) == early + past


def test_plan_replays_per_stack() -> None:
    """torchtitan (the fsdp engine) replays less than a reentrant stack under the same
    profile; Megatron-LM's replay is the whole block, as a reentrant fsdp run's is."""
    ir = small_ir("llama-2-70b")
    system = get_system("a100-80g")
    layout = Layout(tp=2, sp=True, recompute="full", micro_batch=1)

    def recompute(engine: str, checkpoint: str | None = None) -> float:
        run = Training(4, 4, 64, engine=engine, checkpoint=checkpoint)
        return StepModel(ir, system, run).step(layout).breakdown["recompute"]

    torchtitan = recompute("fsdp")
    composer = recompute("fsdp", REENTRANT)
    assert 0 < torchtitan < composer
    assert recompute("fsdp", NON_REENTRANT) == torchtitan
    megatron = StepModel(ir, system, Training(4, 4, 64, engine="megatron"))
    reentrant = megatron.step(layout).breakdown["recompute"]
    early = StepModel(ir, system, Training(4, 4, 64, engine="megatron", checkpoint=NON_REENTRANT))
    assert early.step(layout).breakdown["recompute"] < reentrant


def test_published_rows_name_a_checkpoint_plan_knows() -> None:
    """A row's `checkpoint` is one plan knows; a misspelt one is refused, not taken as the
    non-reentrant default."""
    named = {r.checkpoint for r in published.dataset().runs if r.checkpoint is not None}
    assert named and named <= set(CHECKPOINTS)
    with pytest.raises(SpecError, match="reentrant"):
        StepModel(small_ir("gpt2"), get_system("a100-80g"), Training(4, 4, 64, checkpoint="re"))


def test_plan_checkpoint_option() -> None:
    """`plan --checkpoint` picks the replay of a run's full recomputation (the report says
    which ran); a misspelt value gets one error with a did-you-mean, exit 2."""
    import json

    from tests.hostile import cli

    args = ["plan", "llama-2-7b", "--gpu", "a100-80g", "--gpus", "8", "--global-batch", "8",
            "--seq", "2048", "--zero", "3", "--recompute", "full", "--batch", "1",
            "--engine", "fsdp", "--json"]  # fmt: skip
    recompute = {}
    for checkpoint in (None, *CHECKPOINTS):
        result = cli(*args, *(["--checkpoint", checkpoint] if checkpoint else []))
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert report["checkpoint"] == (checkpoint or NON_REENTRANT)  # the fsdp engine's
        recompute[checkpoint] = report["breakdown"]["recompute"]
    assert recompute[None] == recompute[NON_REENTRANT] < recompute[REENTRANT]
    wrong = cli(*args[:-1], "--checkpoint", "reentrnt")
    assert wrong.exit_code == 2 and "did you mean 'reentrant'" in wrong.output


def _replayed_projections(spec: str, sets: list[str], checkpoint: str) -> list[int]:
    """Where a block's replayed projections sit among its ops."""
    from archspec.backends.count.replay import full_replays
    from archspec.ir.build import build_ir
    from archspec.spec.resolve import load_spec

    costs = pass_costs(build_ir(load_spec(spec, sets)), 2, "flash")
    (_, block), *_ = costs.layers
    return [i for i, c in enumerate(block) if c.label.endswith(".linear")
            and full_replays(c.past_early_stop, checkpoint, c.unread)]  # fmt: skip


def test_a_pruned_replay_skips_what_the_backward_never_reads() -> None:
    """JAX's rematerialisation (the maxtext engine's `pruned` checkpoint) reruns what the
    backward reads: in a parallel block neither output projection (their outputs only meet the
    residual adds), where torch's early stop replays the attention's; in a sequential block the
    attention's output feeds the second norm, which keeps it, so the two agree.
    benchmarks/jax_remat_replay.py checks both against jax.grad's own jaxprs."""
    from archspec.backends.count.replay import PRUNED

    parallel = ["norm.kind=rmsnorm", "mlp.gated=false", "mlp.activation=relu"]
    pruned = _replayed_projections("palm-8b", parallel, PRUNED)
    early = _replayed_projections("palm-8b", parallel, NON_REENTRANT)
    assert len(pruned) == 4 and len(early) == 5  # q, k, v, up; and the attention's output
    assert set(pruned) < set(early)
    for spec in ("llama-2-7b", "gpt2", "mixtral-8x7b"):
        assert _replayed_projections(spec, [], PRUNED) == _replayed_projections(
            spec, [], NON_REENTRANT
        )
