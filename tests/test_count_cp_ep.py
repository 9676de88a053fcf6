"""`archspec count --cp C --ep E`: each device's parameters against the generated model's under
expert parallelism (the `ExpertParallel` runtime that `parallelize` copies, in one process),
the torch engine's saved tensors against autograd's on that rank and against the bench's
2-process measurements, and the refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from archspec import build_ir, load_spec
from archspec.backends.count.layout import Parallelism, stage_params
from archspec.backends.count.torch_layout_mesh import mesh_local_params
from archspec.bench.mesh_layout import mesh_dims
from archspec.cli import app
from tests.test_expert_load import OneRankOfTwo, _peer
from tests.tiny import built_model, tiny_sizes

pytestmark = pytest.mark.usefixtures("one_thread")

LATENT = [
    "attention.latent.kv_rank=16",
    "attention.latent.nope_dim=8",
    "attention.latent.rope_dim=8",
    "attention.latent.v_dim=8",
    "moe.d_ff=32",
    "moe.shared_d_ff=32",
    "moe.n_experts=4",
    "moe.top_k=2",
]
# DeepSeek's first layer is a dense MLP, the others mixtures with shared experts: the experts
# a stage holds depend on which layers it has, not on an average per layer. Vocabulary 128:
# Megatron-LM pads nothing at tp = 1.
DEEPSEEK = tiny_sizes("n_layers=4", "vocab_size=128", *LATENT)
NO_DROPOUT = ["dropout.attention=0", "dropout.hidden=0"]
# tests/test_rank_peak.py's models, which benchmarks/RESULTS.md's measurements ran.
SIZES = ["d_model=32", "n_heads=4", "d_ff=64", "vocab_size=64", "max_seq_len=16", *NO_DROPOUT]
LLAMA = ["n_layers=2", "n_kv_heads=4", *SIZES]
MIXTRAL = ["n_layers=2", *SIZES, "n_kv_heads=2"]
BATCH, SEQ = 4, 8


def _count(spec: str, sets: list[str], *options: str) -> dict:
    args = ["count", spec, *(a for s in sets for a in ("--set", s)), *options, "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _expert_parallel(model, ranks: int = 2) -> None:
    """Each mixture's experts as rank 0 of `ranks` expert-parallel ranks holds them."""
    from archspec.runtime.expert_parallel import ExpertParallel

    for module in list(model.modules()):
        if hasattr(getattr(module, "experts", None), "n_experts"):
            module.experts = ExpertParallel(module.experts, OneRankOfTwo(), ranks)


def test_each_stage_holds_its_own_layers_experts_over_ep():
    """Uneven stages (1 layer, then 3) under --ep 2: each stage's parameters are the generated
    model's in its layers, with rank 0's half of each mixture's experts (the dense first layer
    has none; the shared experts stay whole)."""
    model = built_model("deepseek-v2-lite", DEEPSEEK)
    _expert_parallel(model)
    held = {0: 0, 1: 0}
    for name, param in model.named_parameters():
        layer = int(name.split(".")[2]) if name.startswith("decoder.blocks.") else None
        if layer is None:
            stage = 0 if name.startswith("tok_emb") else 1
        else:
            stage = 0 if layer < 1 else 1
        held[stage] += param.numel()
    r = _count("deepseek-v2-lite", DEEPSEEK, "--seq", "8", "--batch", "2", "--gpus", "4",
               "--pp", "2", "--stage-layers", "1,3", "--ep", "2")  # fmt: skip
    assert [s["params"] for s in r["memory"]["stages"]] == [held[0], held[1]]
    assert r["workload"]["ep"] == 2 and r["workload"]["dp"] == 2


def test_zero_shards_experts_over_the_ranks_holding_them():
    """--ep 2 of 4 data ranks with ZeRO-1 (Megatron-Core's distributed optimizer): the dense
    weights' states over all 4 ranks, each expert's over the 2 that hold it."""
    ir = build_ir(load_spec("deepseek-v2-lite", DEEPSEEK))
    (stage,) = stage_params(ir, Parallelism(gpus=4, ep=2))
    r = _count("deepseek-v2-lite", DEEPSEEK, "--seq", "8", "--batch", "4", "--gpus", "4",
               "--ep", "2", "--zero", "1")  # fmt: skip
    dense, experts = stage.params - stage.experts, stage.experts
    assert r["memory"]["optimizer"] == 8 * (dense / 4 + experts / 2)
    assert r["memory"]["weights"] == 4 * stage.params


def test_torch_engine_ep_rank_keeps_what_autograd_saves():
    """count --engine torch --ep 2: rank 0's parameters are the `ExpertParallel` model's, with
    FSDP2's share of the rest as count's mesh layout has it (which the 2-process runs of
    tests/test_distributed_cp_ep.py hold to the bytes), and its saved tensors are autograd's
    when its experts receive as many rows as its tokens send (the peer's rows chosen so)."""
    import torch

    from archspec.backends.count.memory import memory_figures
    from archspec.backends.count.passes import B, S
    from archspec.backends.count.rank_activations import balanced_routed_rows
    from archspec.bench.distributed_rank import ReceivedRows, SavedTensors
    from archspec.bench.training_data import training_loss

    ir = build_ir(load_spec("mixtral-8x7b", MIXTRAL))
    model = built_model(ir)
    _expert_parallel(model)
    r = _count("mixtral-8x7b", MIXTRAL, "--engine", "torch", "--gpus", "2", "--ep", "2",
               "--zero", "3", "--batch", str(2 * BATCH), "--seq", str(SEQ))  # fmt: skip
    assert r["memory"]["params"] == sum(p.numel() for p in model.parameters())
    assert r["memory"]["weights"] == 4 * mesh_local_params(ir, mesh_dims(2, ep=2), 0)

    balanced = balanced_routed_rows(ir, BATCH * SEQ)
    par = Parallelism(gpus=2, ep=2, zero=3, engine="torch")
    m = memory_figures(ir, attn="flash", parallel=par, device="cpu")
    predicted = int(m.activations.xreplace({**ir.env, B: BATCH, S: SEQ}))
    assert predicted == r["memory"]["activations"]  # no dropout: the same on a GPU

    def step(ids, targets, from_peer) -> tuple[int, int]:
        peer = _peer(from_peer)

        def all_to_all_single(*args, **kwargs):
            # The stand-in's noise drawn alike whatever the peer sends, so the rank's own
            # tokens (their rows back from the peer) route alike in the next layer.
            torch.manual_seed(0)
            peer(*args, **kwargs)

        saved = SavedTensors(model)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(torch.distributed, "all_to_all_single", all_to_all_single)
            with saved.hooks, ReceivedRows(model) as received:
                training_loss(model(ids), targets, 64)
        return received.rows, saved.bytes

    for seed in range(20):  # a batch whose own rows leave an even number to balance
        ids, targets = torch.randint(0, 64, (2, BATCH, SEQ),
                                     generator=torch.Generator().manual_seed(seed))  # fmt: skip
        own, _ = step(ids, targets, [0, 0, 0, 0])
        if (balanced - own) % 2 == 0:
            break
    # Each of the 2 layers receives the peer's rows on top of the rank's own.
    rows, saved = step(ids, targets, [(balanced - own) // 2, 0, 0, 0])
    assert rows == balanced
    assert saved == predicted


@pytest.mark.parametrize(
    ("spec", "sets", "option", "measured"),
    [
        # benchmarks/RESULTS.md, "Each rank's peak, five layouts": saved tensors per rank of
        # `bench --nproc 2` (B=4 per data rank, S=8), measured 2026-11-26.
        ("llama-2-7b", LLAMA, "--cp", [104_196, 104_196]),
        # With attention sinks (their core written out: the gathered keys and values kept
        # once, the mask by nothing), `bench --nproc 2 --cp 2`, measured 2026-11-28; the
        # same with 2 and with 1 kv heads.
        ("llama-2-7b", [*LLAMA, "attention.sinks=true"], "--cp", [109_188, 109_188]),
        # Under ep the measurement is for the routing taken; balanced routing is the mean.
        ("mixtral-8x7b", MIXTRAL, "--ep", [314_772, 256_372]),
    ],
)
def test_torch_engine_saved_tensors_are_the_bench_measurements(spec, sets, option, measured):
    data_ranks = 2 if option == "--ep" else 1
    r = _count(spec, sets, "--engine", "torch", "--gpus", "2", option, "2",
               "--zero", "3", "--batch", str(BATCH * data_ranks), "--seq", str(SEQ))  # fmt: skip
    assert r["memory"]["activations"] == sum(measured) // 2
    assert [p["rank"] for p in r["memory"]["rank_peaks"]] == [0, 1]


@pytest.mark.parametrize(
    ("spec", "sets", "dims", "options"),
    [
        ("llama-2-7b", LLAMA, {"dp_shard": 2, "cp": 2}, ["--cp", "2", "--batch", "2"]),
        ("mixtral-8x7b", MIXTRAL, {"dp_shard": 2, "ep": 2}, ["--ep", "2", "--batch", "4"]),
    ],
)
def test_torch_engine_fsdp_shards_as_the_generated_parallelize(spec, sets, dims, options):
    """FSDP2 beside cp (over dp_shard × cp) and beside ep (the experts over dp_shard, the rest
    over dp_shard × ep): rank 0's weights are count's mesh layout's, which the 4-process runs
    of tests/test_distributed_cp_ep.py (`-m long`) hold to the generated model's bytes."""
    ir = build_ir(load_spec(spec, sets))
    r = _count(spec, sets, "--engine", "torch", "--gpus", "4", "--zero", "3", "--seq", "8",
               *options)  # fmt: skip
    dims = mesh_dims(4, cp=dims.get("cp", 1), ep=dims.get("ep", 1))
    assert r["memory"]["weights"] == 4 * mesh_local_params(ir, dims, 0)


def test_megatron_cp_runs_each_rank_on_its_chunk():
    """Megatron-Core under --cp 2: its distributed optimizer shards the states over the
    dp × cp ranks (megatron/core/optimizer/__init__.py: `intra_dp_cp_group`)."""
    base = ["--seq", "8192", "--batch", "4", "--dtype", "bf16", "--zero", "1"]
    r = _count("llama-2-7b", [], *base, "--gpus", "8", "--cp", "2")
    assert r["workload"]["dp"] == 4 and r["workload"]["cp"] == 2
    params = r["memory"]["params"]
    assert r["memory"]["optimizer"] == 12 * params / 8


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("llama-2-7b", ["--cp", "3", "--gpus", "3", "--seq", "4096"],
         "--cp 3: the 4096 positions do not split into 6 equal chunks"),
        ("llama-2-7b", ["--cp", "2", "--gpus", "3"],
         "--gpus 3 is not a multiple of --tp 1 × --pp 1 × --cp 2"),
        ("bert-base", ["--cp", "2", "--gpus", "2"], "only a causal decoder is split over cp"),
        ("llama-2-7b", ["--ep", "2", "--gpus", "2"], "llama-2-7b has no experts"),
        ("mixtral-8x7b", ["--ep", "3", "--gpus", "3"], "--ep 3 does not divide the 8 experts"),
        ("mixtral-8x7b", ["--ep", "4", "--gpus", "4", "--tp", "2"],
         "--ep 4 does not divide the 2 data-parallel ranks"),
        ("llama-2-7b", ["--cp", "2", "--gpus", "2", "--attn", "eager"],
         "--cp 2 with --attn eager"),
        ("mixtral-8x7b", ["--engine", "torch", "--ep", "2", "--cp", "2", "--gpus", "4",
                          "--zero", "3"], "not context parallelism"),
        ("mixtral-8x7b", ["--engine", "torch", "--ep", "2", "--tp", "2", "--gpus", "4",
                          "--zero", "3"], "beside --tp 2 are not counted"),
        ("llama-2-7b", ["--engine", "torch", "--cp", "2", "--pp", "2", "--gpus", "4"],
         "counts the generated pipeline() alone"),
        ("llama-2-7b", ["--cp", "0"], "--cp must be at least 1"),
    ],
)  # fmt: skip
def test_refusals(spec, options, message):
    gpus = options[options.index("--gpus") + 1] if "--gpus" in options else "1"
    result = CliRunner().invoke(app, ["count", spec, "--batch", gpus, *options])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output
