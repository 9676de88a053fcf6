"""An expert-parallel rank's saved tensors for the routing it takes
(archspec/backends/count/rank_activations.py's `load`) against autograd's saved-tensor hooks
on the generated model, in one process: the rank is `ExpertParallel` (the runtime that
`parallelize` copies) holding half of a tiny Mixtral's experts, and the other rank of ep=2 is
played by `all_to_all_single` itself, whose tokens are forced onto this rank's experts (or
away from them). A rank's saved tensors depend on its own tensors' shapes alone, so the
stand-in's rows may be any numbers; the 2-process runs are tests/test_rank_peak.py's (`-m
long`)."""

from __future__ import annotations

import pytest
import sympy as sp

from archspec import build_ir, load_spec
from archspec.backends.count.rank_activations import balanced_routed_rows, expert_load
from archspec.backends.count.rank_peak import rank_peaks
from archspec.bench.mesh_layout import mesh_dims

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = ["d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16"]
MIXTRAL = ["n_layers=2", *SIZES, "n_kv_heads=2", "dropout.attention=0", "dropout.hidden=0"]
BATCH, SEQ = 4, 8


class OneRankOfTwo:
    """Rank 0 of a 1-D mesh of 2 ("ep"), for ExpertParallel."""

    def size(self) -> int:
        return 2

    def get_local_rank(self) -> int:
        return 0

    def get_group(self) -> None:
        return None


def _peer(from_peer: list[int]):
    """all_to_all_single between this rank and a peer whose tokens send `from_peer[i]`
    rows to this rank's expert i (in each layer), and rows of noise the other way."""
    import torch

    def all_to_all_single(out, x, output_split_sizes=None, input_split_sizes=None, group=None):
        if output_split_sizes is None:  # each expert's count: this rank's, then the peer's
            mine = x.numel() // 2
            out[:mine] = x[:mine]
            out[mine:] = torch.tensor(from_peer)
            return
        own = input_split_sizes[0]  # the rows this rank keeps for itself
        assert output_split_sizes[0] == own
        out[:own] = x[:own]
        out[own:] = torch.randn_like(out[own:])

    return all_to_all_single


def test_saved_tensors_for_the_routing_taken(monkeypatch):
    """The peer's tokens sent to this rank's experts (more rows than balanced routing's),
    then none (fewer)."""
    import torch

    from archspec.bench.distributed_rank import ReceivedRows, SavedTensors
    from archspec.bench.training_data import training_loss
    from archspec.runtime.expert_parallel import ExpertParallel
    from tests.tiny import built_model

    ir = build_ir(load_spec("mixtral-8x7b", MIXTRAL))
    model = built_model(ir)
    for module in list(model.modules()):
        if hasattr(getattr(module, "experts", None), "n_experts"):
            module.experts = ExpertParallel(module.experts, OneRankOfTwo(), 2)
    ids, targets = torch.randint(0, 64, (2, BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    balanced = balanced_routed_rows(ir, BATCH * SEQ)
    assert balanced == 2 * 2 * BATCH * SEQ  # 2 layers, top_k 2 per token
    (balanced_rank, _) = rank_peaks(ir, mesh_dims(2, ep=2), BATCH, SEQ)
    steps = []
    for from_peer in ([20, 9, 0, 3], [0, 0, 0, 0]):
        monkeypatch.setattr(torch.distributed, "all_to_all_single", _peer(from_peer))
        saved = SavedTensors(model)
        with saved.hooks, ReceivedRows(model) as received:
            training_loss(model(ids), targets, 64)
        assert len(received.by_layer) == 2 and len(received.experts) == 2
        # The peer's rows come on top of this rank's own tokens' share.
        assert received.rows >= 2 * sum(from_peer)
        load = expert_load(ir, BATCH * SEQ, received.by_layer)
        assert load.step == sp.Rational(received.rows, balanced)
        assert load.last == sp.Rational(received.by_layer[-1], balanced // 2)
        # Rank 1's figures are not read (alike to rank 0's, they are worked out once).
        mine, _ = rank_peaks(ir, mesh_dims(2, ep=2), BATCH, SEQ, expert_loads=[load, load])
        assert saved.bytes == mine.activations
        # Not what balanced routing keeps: the routing taken is what the prediction needs.
        assert saved.bytes != balanced_rank.activations
        steps.append(load.step)
    assert steps[0] > 1 > steps[1]


def test_one_process_peak_in_the_experts_gate_backward():
    """The stacked experts' moments (block_backward.py) on one process, where the backward
    of the first block's experts' gate projection peaks: every expert gradient made, the
    gate's beside the two projections' gradients of the input rows. Measured 1,811,592
    bytes against 1,811,584 predicted (before that moment was counted: 1,747,456)."""
    import torch

    from archspec.backends.count.memory import memory_figures
    from archspec.backends.count.passes import B, S
    from archspec.backends.count.step_peak import step_peak
    from tests.test_train_peak import measured_peak

    torch.manual_seed(0)
    ir = build_ir(load_spec("mixtral-8x7b", MIXTRAL))
    measured = measured_peak(ir, "fused", BATCH, SEQ, "none")
    m = memory_figures(ir, "fp32", "adamw", "none", attn="flash")
    predicted, moment = step_peak(ir, m, "fused").at({**ir.env, B: BATCH, S: SEQ})
    assert moment == "first block's backward"
    assert measured == pytest.approx(predicted, rel=0.002)
