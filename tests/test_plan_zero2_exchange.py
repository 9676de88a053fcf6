"""The data-parallel exchange under ZeRO-2 in `archspec plan` (step.py's StepModel.exchange):
the gradients reduce-scattered in their reduce dtype, the updated weights all-gathered in
theirs, measured on torch's own FSDP2 as torchtitan runs it beside a pipeline
(`reshard_after_forward=False`, MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32),
the micro-batches' backwards without gradient sync but the last, as torch.distributed.pipelining
sets them: `backward_maybe_with_nosync`) on a fake process group of 4 ranks (the buffers are
made and the collectives called as on a real one; no data moves); and, for the stacks that
cannot run here, which collectives in which dtypes the plan counts for each (the lines of
Megatron-LM and DeepSpeed that do them are cited in StepModel.exchange)."""

from __future__ import annotations

import pytest
import torch

from archspec.plan import step as step_module
from archspec.plan.hardware import get_system
from archspec.plan.step import Layout, StepModel, Training
from tests.test_plan_fp8_comm import SIZES, WORLD, hf_llama

MICRO_BATCHES = 2


def fsdp2_exchange(model: torch.nn.Module, monkeypatch) -> dict[str, int]:
    """Bytes one rank's all-gathers receive and its reduce-scatters send in, over a step of
    MICRO_BATCHES micro-batches."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    moved = {"all_gather": 0, "reduce_scatter": 0}
    gather, scatter = dist.all_gather_single, dist.reduce_scatter_single

    def gathering(output, input, *args, **kwargs):
        moved["all_gather"] += output.numel() * output.element_size()
        return gather(output, input, *args, **kwargs)

    def scattering(output, input, *args, **kwargs):
        moved["reduce_scatter"] += input.numel() * input.element_size()
        return scatter(output, input, *args, **kwargs)

    monkeypatch.setattr(dist, "all_gather_single", gathering)
    monkeypatch.setattr(dist, "reduce_scatter_single", scattering)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    try:
        mesh = init_device_mesh("cpu", (WORLD,))
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.model.layers:  # torchtitan's apply_fsdp: each block, then the root
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
        fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
        tokens = torch.randint(0, SIZES["vocab_size"], (1, SIZES["max_seq_len"]))
        for micro in range(MICRO_BATCHES):
            last = micro == MICRO_BATCHES - 1
            model.set_is_last_backward(last)
            model.set_reshard_after_backward(last)
            model.set_requires_gradient_sync(last)
            model(tokens).logits.float().sum().backward()
    finally:
        dist.destroy_process_group()
    return moved


def planned_exchange(
    engine: str, zero: int, monkeypatch, dtype: str = "bf16"
) -> tuple[dict[str, float], int]:
    """Bytes of the collectives `plan` times over the data-parallel ranks for the same model."""
    from archspec import build_ir, load_spec

    counted: dict[str, float] = {}

    def recording(name, collective):
        def record(size, n, link):
            if n == WORLD and size:
                counted[name] = counted.get(name, 0.0) + size
            return collective(size, n, link)

        return record

    for name in ("all_gather", "reduce_scatter", "all_reduce"):
        monkeypatch.setattr(step_module, name, recording(name, getattr(step_module, name)))
    ir = build_ir(load_spec("llama-3-8b", [f"{k}={v}" for k, v in SIZES.items()]))
    run = Training(WORLD, WORLD * MICRO_BATCHES, SIZES["max_seq_len"], dtype, "fp32", "flash",
                   engine)  # fmt: skip
    model = StepModel(ir, get_system("grand-teton-h100"), run)
    result = model.step(Layout(zero=zero))
    assert result.micro_batches == MICRO_BATCHES
    (params,) = model.params_per_device(1, 1)
    return counted, params


def test_fsdp2_under_a_pipeline_moves_the_bytes_the_plan_counts(monkeypatch) -> None:
    model = hf_llama().float()  # fp32 parameters, gathered in bf16
    params = sum(p.numel() for p in model.parameters())
    measured = fsdp2_exchange(model, monkeypatch)
    # Once a step: bf16 weights gathered, fp32 gradients reduce-scattered.
    assert measured == {"all_gather": 2 * params, "reduce_scatter": 4 * params}
    counted, planned_params = planned_exchange("fsdp", 2, monkeypatch)
    assert planned_params == params  # the same model
    assert counted == measured


@pytest.mark.parametrize(
    ("engine", "zero", "dtype", "collectives"),
    [
        ("megatron", 0, "bf16", {"all_reduce": 4}),  # plain data parallelism: fp32 gradients
        ("nemo", 1, "bf16", {"reduce_scatter": 4, "all_gather": 2}),  # distributed optimizer
        ("deepspeed", 1, "bf16", {"all_reduce": 4, "all_gather": 2}),  # BF16_Optimizer
        ("deepspeed", 1, "fp16", {"reduce_scatter": 4, "all_gather": 2}),  # stage_1_and_2.py
    ],
)
def test_each_stack_exchanges_gradients_and_weights_in_their_own_dtypes(
    engine, zero, dtype, collectives, monkeypatch
) -> None:
    counted, params = planned_exchange(engine, zero, monkeypatch, dtype)
    assert counted == {name: per * params for name, per in collectives.items()}
