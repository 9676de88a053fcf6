"""Per-op selective checkpointing (`--recompute op`) against torch running torchtitan's policy.

Each block of a generated model is wrapped as torchtitan wraps a transformer block for
`selective_ac_option = "op"` (torch's checkpoint_wrapper with a selective-checkpoint context;
the policy below is `_custom_policy` of torchtitan/parallelisms/parallelize_llama.py at
9dec370, lines 248-262, over its `_save_list`, lines 214-223). What the forward leaves alive is
measured as tests/test_recompute.py measures it (a dispatch mode following every storage), and
compared with what count keeps for `op`. On the CPU SDPA's fused kernel is
`_scaled_dot_product_flash_attention_for_cpu`, the CPU's name for the kernel the list names
for CUDA: it is on the list here, as the CUDA kernel is there.

The replayed forward is checked too: its FLOPs, measured by FlopCounterMode during the
backward pass, are what the plan replays (opcost.py's costs it marks replayed).
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import sympy as sp
import torch
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
from torch.utils.flop_counter import FlopCounterMode

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.flops import B, S
from archspec.bench.memory import LiveTensors, resident_tensors
from archspec.plan.opcost import pass_costs
from tests.test_memory import small_ir
from tests.tiny import built_model

SAVE_LIST = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
    torch.ops.aten.abs.default,
    torch.ops.aten.max.default,
}


def torchtitan_context():
    meta: dict[str, int] = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            meta[f"{mode}_mm_count"] += 1
        to_save = func in SAVE_LIST and not (
            func == torch.ops.aten.mm.default and meta[f"{mode}_mm_count"] % 2 == 0
        )
        return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


# Llama-2's bias-free projections (wk, wo and w3 replayed) under GQA and RoPE; GPT-2's biased
# ones, which run aten.addmm and are all replayed.
CASES = ["llama-2-70b", "gpt2"]
NO_DROPOUT = ("dropout.hidden=0", "dropout.attention=0")  # torchtitan does not preserve RNG


def wrapped(name: str):
    ir = small_ir(name, NO_DROPOUT)
    model = built_model(ir)
    blocks = model.decoder.blocks
    for i, block in enumerate(blocks):
        blocks[i] = checkpoint_wrapper(
            block, context_fn=torchtitan_context, preserve_rng_state=False
        )
    return ir, model


@pytest.mark.parametrize("name", CASES)
def test_kept_activations_equal_count(name: str) -> None:
    ir, model = wrapped(name)
    b, s = 2, 32
    with LiveTensors(resident_tensors(model)) as tracker:
        # Made inside: the embedding keeps the token ids, the loss its targets.
        tokens, targets = torch.randint(0, 100, (b, s)), torch.randint(0, 100, (b, s))
        loss = F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())
        kept = tracker.live - tracker.baseline - 4  # less the loss itself
    loss.backward()
    parts = activation_parts(ir, 4, "flash", "op", device="cpu")
    assert kept == (parts.total - parts.rebuilt).xreplace({**ir.env, B: b, S: s}), name


@pytest.mark.parametrize("name", CASES)
def test_replayed_flops_equal_the_plan(name: str) -> None:
    """FlopCounterMode over the backward pass of the wrapped model, less the backward of the
    plain model: the FLOPs of the replayed forward's matmuls (FlopCounterMode counts matmuls
    and attention kernels only; the replayed elementwise ops are timed by their bytes)."""
    b, s = 2, 32
    tokens = torch.randint(0, 100, (b, s))

    def backward_flops(model) -> int:
        out = model(tokens).float().sum()
        with FlopCounterMode(display=False) as counter:
            out.backward()
        return counter.get_total_flops()

    ir, model = wrapped(name)
    plain = built_model(small_ir(name, NO_DROPOUT))
    replayed = backward_flops(model) - backward_flops(plain)
    costs = pass_costs(ir, 4, "flash")
    # 2·M·N·K a replayed matmul, as FlopCounterMode counts one (addmm's bias add left out).
    planned = sum(
        n * 2 * sp.prod(c.shape)
        for n, block in costs.layers
        for c in block
        if c.kind == "matmul" and c.replayed_by_op_checkpoint
    )
    assert replayed == planned.xreplace({**ir.env, B: b, S: s})


def test_plan_takes_op_and_says_what_it_takes() -> None:
    """`plan --recompute op` times a pinned layout with the policy's replay; a policy it does
    not know is one clear error with a did-you-mean."""
    from typer.testing import CliRunner

    from archspec.cli import app

    base = ["plan", "llama-2-7b", "--gpu", "a100-80g", "--gpus", "8", "--global-batch", "16"]
    base += ["--batch", "2", "--zero", "3", "--engine", "fsdp", "--json"]
    times, flops = {}, {}
    for policy in ("none", "op", "full"):
        result = CliRunner().invoke(app, [*base, "--recompute", policy])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        times[policy] = report["breakdown"]["recompute"]
        flops[policy] = report["flops"]["hardware"]
    assert times["none"] == 0 < times["op"] < times["full"]
    assert flops["none"] < flops["op"] < flops["full"]
    result = CliRunner().invoke(app, [*base, "--recompute", "opp"])
    assert result.exit_code == 2 and "did you mean 'op'" in result.stderr
    assert "Traceback" not in result.output
