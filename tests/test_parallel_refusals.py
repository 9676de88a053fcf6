"""What the generated `parallelize` refuses, without starting processes: tensor parallelism over
more ranks than key/value heads (multi-query attention as in gpt_bigcode and Falcon-7B, or GQA
with tp > n_kv_heads). Megatron-LM copies a kv head onto several ranks and sums the copies'
gradients (`count --tp` counts that layout); DTensor's column split cannot, so the generated code
and archspec's count of PyTorch's layout both refuse it, naming the values."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.layout import Parallelism, stage_params
from archspec.backends.count.torch_layout import torch_local_params
from archspec.backends.torchgen import generate_source
from archspec.errors import SpecError

TINY = ["n_layers=2", "d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16"]


class _Dim:
    """A mesh dimension as parallelize reads it before any collective: its size."""

    def __init__(self, size: int) -> None:
        self._size = size

    def size(self) -> int:
        return self._size


def _model(tmp_path, kv: int):
    ir = build_ir(load_spec("llama-2-7b", [*TINY, f"n_kv_heads={kv}"]))
    path = tmp_path / f"kv{kv}.py"
    path.write_text(generate_source(ir))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return ir, module


@pytest.mark.parametrize("kv,tp", [(1, 2), (2, 4)], ids=["mqa-tp2", "gqa2-tp4"])
def test_tp_beyond_kv_heads_is_refused(tmp_path, kv, tp):
    ir, module = _model(tmp_path, kv)
    mesh = {"tp": _Dim(tp), "dp": _Dim(1)}
    with pytest.raises(ValueError, match=f"tp={tp} does not divide the {kv} kv heads"):
        module.parallelize(module.Model(), mesh)
    with pytest.raises(SpecError, match=f"--tp {tp} does not divide the {kv} key/value heads"):
        torch_local_params(ir, Parallelism(gpus=tp, tp=tp), 0)


def test_count_copies_kv_heads_beyond_n_kv_heads():
    """`count --tp` is Megatron-LM's layout: beyond n_kv_heads ranks each rank keeps one whole
    kv head (a copy), so k and v are d_model × head_dim each per rank at tp = 2 with one kv
    head, while q and o are split (Shoeybi et al. 2019; Megatron-LM's GQA support)."""
    ir = build_ir(load_spec("llama-2-7b", [*TINY, "n_kv_heads=1"]))
    d, hd, ff, layers = 32, 8, 64, 2
    per_layer = 2 * d * d // 2 + 2 * d * hd + 3 * d * ff // 2 + 2 * d
    # Megatron-LM pads the vocabulary to 128·tp rows: 256 rows, 128 per rank, per table.
    expected = layers * per_layer + d + 2 * 128 * d
    (stage,) = stage_params(ir, Parallelism(gpus=2, tp=2))
    assert ir.value(stage.params) == expected
