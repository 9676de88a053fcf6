"""torchtitan's float8 communication in `archspec plan` (fp8_comm.py): the bytes FSDP2 gathers
with torchao's float8 all-gather, measured on torch's own FSDP2 (a fake process group of 4
ranks: the buffers are made and the collectives called as on a real one, no data moves); the
published rows that set `fp8_all_gather`; and `--fp8-all-gather` refused where it cannot run."""

from __future__ import annotations

import json

import pytest
import torch
from torch.utils import _pytree as pytree
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan import published
from archspec.plan.hardware import get_system
from archspec.plan.step import Layout, StepModel, Training

runner = CliRunner()
aten = torch.ops.aten

# A Llama 3 shape, small: grouped-query attention, every projection a multiple of 16.
SIZES = dict(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=176, vocab_size=256,
             max_seq_len=16)  # fmt: skip
WORLD = 4

# The ops FSDP2 runs on a parameter while it shards it, which must keep the wrapper (torchao's
# `_ops_to_preserve_subclass`, torchao/float8/fsdp_utils.py at 68e46436b, and the detach that
# nn.Parameter runs).
PRESERVED = {aten.empty_like.default, aten.new_zeros.default, aten.slice.Tensor,
             aten.copy_.default, aten.view.default, aten.as_strided.default,
             aten._to_copy.default, aten._pin_memory.default, aten.split.Tensor,
             aten.clone.default, aten.detach.default}  # fmt: skip


class Float8AllGather(torch.Tensor):
    """A bf16 weight that FSDP2 gathers in float8, as torchao's WeightWithDynamicFloat8CastTensor
    (fsdp_utils.py:125-250 at 68e46436b): fsdp_pre_all_gather casts the local shard to
    float8_e4m3fn with its scale and hands FSDP the one-byte data, the scale as metadata."""

    @staticmethod
    def __new__(cls, tensor: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, tensor.size(), strides=tensor.stride(), storage_offset=tensor.storage_offset(),
            dtype=tensor.dtype, layout=tensor.layout, device=tensor.device,
            requires_grad=tensor.requires_grad,
        )  # fmt: skip

    def __init__(self, tensor: torch.Tensor) -> None:
        self._tensor = tensor

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        def unwrap(t):
            return t._tensor if isinstance(t, cls) else t

        out = func(*pytree.tree_map(unwrap, args), **pytree.tree_map(unwrap, kwargs or {}))
        if func not in PRESERVED:
            return out
        return pytree.tree_map_only(torch.Tensor, cls, out)

    def __tensor_flatten__(self):
        return ["_tensor"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return Float8AllGather(inner["_tensor"])

    def fsdp_pre_all_gather(self, mesh):
        amax = self._tensor.abs().max().float().clamp(min=1e-12)
        scale = torch.finfo(torch.float8_e4m3fn).max / amax
        data = (self._tensor.float() * scale).to(torch.float8_e4m3fn)
        return (data,), (scale,)

    def fsdp_post_all_gather(self, outputs, metadata, param_dtype, *, out=None):
        (data,), (scale,) = outputs, metadata
        if out is not None:
            return None
        return (data.float() / scale).to(param_dtype or torch.bfloat16), (data,)


def hf_llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=SIZES["d_model"], num_hidden_layers=SIZES["n_layers"],
                         num_attention_heads=SIZES["n_heads"],
                         num_key_value_heads=SIZES["n_kv_heads"],
                         intermediate_size=SIZES["d_ff"], vocab_size=SIZES["vocab_size"],
                         max_position_embeddings=SIZES["max_seq_len"],
                         tie_word_embeddings=False)  # fmt: skip
    return LlamaForCausalLM(config).to(torch.bfloat16)


def to_float8_all_gather(model: torch.nn.Module) -> int:
    """torchtitan's conversion: every nn.Linear but the output head, both dimensions multiples
    of 16 (float8.py:101 at 3faaa1a0d; components/quantization/utils.py:19-22 at 820504e),
    its weight gathered in float8. The elements so wrapped."""
    wrapped = 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name == "lm_head":
            continue
        if any(size % 16 for size in module.weight.shape):
            continue
        module.weight = torch.nn.Parameter(Float8AllGather(module.weight.data))
        wrapped += module.weight.numel()
    return wrapped


def gathered_bytes(model: torch.nn.Module, monkeypatch) -> int:
    """Bytes one rank receives while FSDP2 (torchtitan's apply_fsdp: each block a unit, then
    the root) gathers every unit once, as before a forward."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    sizes: list[int] = []
    gather = dist.all_gather_single

    def recording(output, input, *args, **kwargs):
        sizes.append(output.numel() * output.element_size())
        return gather(output, input, *args, **kwargs)

    monkeypatch.setattr(dist, "all_gather_single", recording)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    try:
        mesh = init_device_mesh("cpu", (WORLD,))
        for block in model.model.layers:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        model.unshard()
        for block in model.model.layers:
            block.unshard()
    finally:
        dist.destroy_process_group()
    return sum(sizes)


def planned(dtype: str, fp8_all_gather: bool) -> tuple[StepModel, Layout]:
    from archspec import build_ir, load_spec

    ir = build_ir(load_spec("llama-3-8b", [f"{k}={v}" for k, v in SIZES.items()]))
    run = Training(WORLD, WORLD, 16, dtype, "fp32", "flash", "fsdp",
                   fp8_all_gather=fp8_all_gather)  # fmt: skip
    return StepModel(ir, get_system("grand-teton-h100"), run), Layout(zero=3)


@pytest.mark.parametrize("float8", [False, True], ids=["bf16", "float8"])
def test_fsdp2_gathers_the_bytes_the_plan_counts(float8, monkeypatch) -> None:
    model = hf_llama()
    params = sum(p.numel() for p in model.parameters())
    wrapped = to_float8_all_gather(model) if float8 else 0
    measured = gathered_bytes(model, monkeypatch)
    step, layout = planned("fp8" if float8 else "bf16", float8)
    (counted,) = step.params_per_device(1, 1)
    assert counted == params  # the same model
    # Two bytes an element, one for each weight gathered in float8.
    assert measured == 2 * params - wrapped
    if float8:
        assert step.float8_weights(layout) == wrapped
        assert wrapped / params > 0.5  # the blocks' projections, not the embeddings or head


def test_the_float8_all_gather_shortens_only_the_fsdp_exchange() -> None:
    (bf16, layout), (fp8, _) = planned("fp8", False), planned("fp8", True)
    a, b = bf16.step(layout).breakdown, fp8.step(layout).breakdown
    assert b["dp_comm"] < a["dp_comm"]
    assert {k: v for k, v in a.items() if k != "dp_comm"} == {
        k: v for k, v in b.items() if k != "dp_comm"
    }


# The rows whose source configs turn FSDP's float8 all-gather on (published.yaml's comments
# cite the lines): torchtitan's 405B preset at 3faaa1a0d (the August 2024 page's Float8 rows)
# and at 9dec370 (the December 2024 page's 405B rows, Tables 5 and 6), Trainy's command.
GATHERING = {"torchtitan_405b": 2, "torchtitan_h100": 6, "trainy2025": 2}


def test_exactly_the_rows_whose_configs_gather_in_float8() -> None:
    rows = [r for r in published.dataset().runs if r.fp8_all_gather]
    assert {s: sum(r.source == s for r in rows) for s in GATHERING} == GATHERING
    assert len(rows) == sum(GATHERING.values())
    assert all(r.dtype == "fp8" and r.engine == "fsdp" and r.zero >= 2 for r in rows)
    assert all(r.model == "llama-3-405b" for r in rows if r.source == "torchtitan_h100")


BASE = ["plan", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "32",
        "--seq", "4096", "--batch", "1", "--fp8-all-gather"]  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--engine", "fsdp", "--zero", "3"], "needs --engine fsdp and --dtype fp8"),
        (["--engine", "nemo", "--dtype", "fp8", "--zero", "3"], "got --engine nemo"),
        (["--dtype", "fp8", "--zero", "3"], "got --engine megatron, --dtype fp8"),
        (["--engine", "fsdp", "--dtype", "fp8", "--zero", "1"], "needs --zero 2 or 3"),
        (["--engine", "fsdp", "--dtype", "fp8", "--tp", "2"], "(got --zero 0)"),
    ],
)
def test_fp8_all_gather_is_refused_where_it_cannot_run(extra, says) -> None:
    result = runner.invoke(app, [*BASE, *extra, "--json"])
    assert result.exit_code == 2
    assert says in result.output and "--fp8-all-gather" in result.output
    assert "Traceback" not in result.output


def test_fp8_all_gather_is_reported_and_searched_only_where_fsdp_shards() -> None:
    args = ["plan", "llama-2-7b", "--gpu", "h100-sxm", "--gpus", "16", "--global-batch", "32",
            "--seq", "4096", "--engine", "fsdp", "--dtype", "fp8", "--fp8-all-gather",
            "--top", "50", "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["fp8_all_gather"] is True
    assert all(r["layout"]["zero"] >= 2 for r in report["ranked"])


def test_fp8_all_gather_is_ignored_when_serving() -> None:
    result = runner.invoke(app, ["plan", "llama-2-7b", "--mode", "serve", "--gpu", "h100-sxm",
                                 "--fp8-all-gather", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--fp8-all-gather" in json.loads(result.stdout)["ignored"]
