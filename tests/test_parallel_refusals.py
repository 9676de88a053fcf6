"""What the generated `parallelize` refuses about key/value heads, without starting processes,
and what archspec counts for more ranks than kv heads.

Beyond n_kv_heads ranks (multi-query attention as in gpt_bigcode and Falcon-7B at tp=2, GQA with
2 kv heads at tp=4), Megatron-LM and the generated `parallelize` copy each kv head onto the
tp / n_kv_heads ranks whose query heads read it (tests/test_distributed.py runs that). A tp that
neither divides the kv heads nor is a multiple of them would split a kv head: refused, naming the
values, by the generated code, `count` and `bench`."""

from __future__ import annotations

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.layout import Parallelism, stage_params
from archspec.backends.count.memory import memory_figures
from archspec.backends.count.torch_layout import torch_local_params
from archspec.errors import SpecError
from tests.tiny import GQA_6_2, generated_module, tiny_sizes

TINY = tiny_sizes()


class _Dim:
    """A mesh dimension as parallelize reads it before any collective: its size."""

    def __init__(self, size: int) -> None:
        self._size = size

    def size(self) -> int:
        return self._size


class _Mesh(dict):
    """A DeviceMesh as parallelize reads it before any collective: named dimensions."""

    @property
    def mesh_dim_names(self) -> tuple[str, ...]:
        return tuple(self)


def test_tp_splitting_a_kv_head_is_refused(tmp_path):
    module = generated_module("llama-2-7b", [*TINY, *GQA_6_2], tmp_path)
    mesh = _Mesh(tp=_Dim(3), dp=_Dim(1))
    message = "tp=3 does not divide the 2 kv heads, nor is it a multiple of them"
    with pytest.raises(ValueError, match=message):
        module.parallelize(module.Model(), mesh)
    ir = build_ir(load_spec("llama-2-7b", [*TINY, *GQA_6_2]))
    for engine in ("megatron", "torch"):
        with pytest.raises(SpecError, match="--tp 3 and the 2 key/value heads do not divide"):
            memory_figures(ir, parallel=Parallelism(gpus=3, tp=3, engine=engine))


def test_count_copies_kv_heads_beyond_n_kv_heads():
    """Beyond n_kv_heads ranks each rank keeps one whole kv head (a copy), so k and v are
    d_model × head_dim each per rank at tp = 2 with one kv head, while q and o are split
    (Shoeybi et al. 2019; Megatron-LM's GQA support). Megatron-LM pads the vocabulary to 128·tp
    rows (`count`'s default engine); PyTorch's DTensor splits the 64 rows as they are."""
    ir = build_ir(load_spec("llama-2-7b", [*TINY, "n_kv_heads=1"]))
    d, hd, ff, layers = 32, 8, 64, 2
    per_layer = 2 * d * d // 2 + 2 * d * hd + 3 * d * ff // 2 + 2 * d
    # Two tables (embedding and head), each 256 rows padded, 128 per rank, or 32 per rank.
    (megatron,) = stage_params(ir, Parallelism(gpus=2, tp=2))
    assert ir.value(megatron.params) == layers * per_layer + d + 2 * 128 * d
    torch_layout = Parallelism(gpus=2, tp=2, engine="torch")
    for rank in (0, 1):
        assert torch_local_params(ir, torch_layout, rank) == layers * per_layer + d + 2 * 32 * d
