"""The generated `parallelize` on 2 gloo processes, trained 3 SGD steps against the same model
on one process (tests/distributed_steps.py): the loss of every step within 1e-4 and the first
step's gradients equal.

- Falcon-7B's multi-query attention at tp=2: each rank computes a copy of the one kv head
  (Megatron-LM's layout).
- DeepSeek-V2's latent attention at tp=2, with and without a query latent: the latents whole
  on every rank, kv_up, q and o split by heads (torchtitan's DeepSeek-V3 plan).
- Expert parallelism at ep=2 (Mixtral; DeepSeek-V2 with its dense first layer and shared
  experts; gpt-oss's MoE pieces, the experts' biases cut with their weights): each rank
  trains on half the batch with half the experts, tokens exchanged with all_to_all_single
  on gloo, the routing the model's own.
- gpt-oss's MoE pieces at tp=2 (the experts' gate and up biases split, down's whole and
  added once to the summed output) and under FSDP2 (dp_shard=2: the biases sharded with
  their experts).
- Attention sinks at tp=2 (each rank its heads' sinks) and cp=2 (every rank's queries over
  the gathered keys and their heads' sinks).
- Context parallelism at cp=2 (llama's RoPE, gpt2's learned positions, DeepSeek-V2's latent
  attention): 8 positions in 4 chunks, rank 0 holding chunks 0 and 3, rank 1 chunks 1 and 2
  (causal load balancing), keys and values all-gathered; llama again with left padding (the
  stack's mask, its rows and key columns taken per shard).
- On 4 processes (`long`): cp=2 with tp=2 (llama; Falcon's MQA with its kv head copied);
  FSDP2 over dp_shard=2 beside cp=2 (the blocks' gradients summed over cp, averaged over
  dp_shard) and beside ep=2 (the experts sharded over dp_shard); ep=2 with tp=2 (each
  expert split over tp; gpt-oss's pieces too); HSDP (dp_replicate=2 of dp_shard=2).

All cases run in one spawn of two processes: starting torch is most of the cost."""

from __future__ import annotations

import subprocess
import sys

import pytest

from archspec import build_ir, load_spec
from archspec.backends.count.torch_layout_mesh import covered, mesh_local_params
from archspec.backends.torchgen import generate_source
from tests.distributed_steps import STEPS, train_on_ranks
from tests.tiny import tiny_sizes

pytestmark = pytest.mark.slow

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
GPT_OSS_MOE = [
    "moe.n_experts=4",
    "moe.top_k=2",
    "moe.router=topk_softmax",
    "moe.router_bias=true",
    "moe.expert_bias=true",
    "moe.swiglu_limit=7.0",
    "moe.swiglu_alpha=1.702",
]
MODELS = {
    "falcon-mqa": ("falcon-7b", tiny_sizes()),
    "deepseek-mla": ("deepseek-v2-lite", tiny_sizes(*LATENT)),
    "deepseek-mla-q": ("deepseek-v2-lite", tiny_sizes(*LATENT, "attention.latent.q_rank=16")),
    "llama": ("llama-2-7b", tiny_sizes()),
    "llama-sinks": ("llama-2-7b", tiny_sizes("n_kv_heads=2", "attention.sinks=true")),
    "gpt2": ("gpt2", tiny_sizes()),
    "mixtral": ("mixtral-8x7b", tiny_sizes("n_kv_heads=2", "moe.n_experts=4", "moe.top_k=2")),
    # gpt-oss's MoE pieces: the topk_softmax router, biased experts, the clamped SwiGLU
    "gpt-oss-moe": ("mixtral-8x7b", tiny_sizes("n_kv_heads=2", *GPT_OSS_MOE)),
}
# (case, model, mesh dims)
CASES = [
    ("falcon-mqa tp=2", "falcon-mqa", {"tp": 2}),
    ("deepseek-mla tp=2", "deepseek-mla", {"tp": 2}),
    ("deepseek-mla-q tp=2", "deepseek-mla-q", {"tp": 2}),
    ("mixtral ep=2", "mixtral", {"ep": 2}),
    ("deepseek ep=2", "deepseek-mla", {"ep": 2}),
    ("gpt-oss-moe ep=2", "gpt-oss-moe", {"ep": 2}),
    ("gpt-oss-moe dp_shard=2", "gpt-oss-moe", {"dp_shard": 2}),  # FSDP2 shards the biases
    ("gpt-oss-moe tp=2", "gpt-oss-moe", {"tp": 2}),  # down's bias whole, added once
    ("llama cp=2", "llama", {"cp": 2}),
    ("llama-sinks tp=2", "llama-sinks", {"tp": 2}),
    ("llama-sinks cp=2", "llama-sinks", {"cp": 2}),
    ("gpt2 cp=2", "gpt2", {"cp": 2}),
    ("deepseek-mla cp=2", "deepseek-mla", {"cp": 2}),
    ("llama cp=2 padded", "llama", {"cp": 2}, True),
]
# On 4 processes (a `long` test): context and tensor parallelism together.
CASES_4 = [
    ("llama cp=2 tp=2", "llama", {"cp": 2, "tp": 2}),
    ("falcon-mqa cp=2 tp=2", "falcon-mqa", {"cp": 2, "tp": 2}),
    ("llama dp_shard=2 cp=2", "llama", {"dp_shard": 2, "cp": 2}),
    ("mixtral dp_shard=2 ep=2", "mixtral", {"dp_shard": 2, "ep": 2}),
    ("gpt-oss-moe dp_shard=2 ep=2", "gpt-oss-moe", {"dp_shard": 2, "ep": 2}),
    ("mixtral ep=2 tp=2", "mixtral", {"ep": 2, "tp": 2}),
    ("gpt-oss-moe ep=2 tp=2", "gpt-oss-moe", {"ep": 2, "tp": 2}),
    ("llama dp_replicate=2 dp_shard=2", "llama", {"dp_replicate": 2, "dp_shard": 2}),
]


def _train(folder, world: int, cases: list[tuple]) -> list[dict]:
    paths = {}
    for key, (spec, overrides) in MODELS.items():
        path = folder / f"{key.replace('-', '_')}.py"
        path.write_text(generate_source(build_ir(load_spec(spec, overrides))))
        subprocess.run([sys.executable, "-m", "ruff", "check", "-q", str(path)], check=True)
        paths[key] = str(path)
    return train_on_ranks(world, [(name, paths[key], *rest) for name, key, *rest in cases], folder)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("cp_ep"), 2, CASES)


@pytest.fixture(scope="module")
def runs_4(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("cp_tp"), 4, CASES_4)


@pytest.mark.parametrize("name", [case[0] for case in CASES])
def test_every_step_as_one_process(runs, name):
    _check(runs, name)


def _split(cases: list[tuple]) -> list[tuple]:
    """The cases laid out with cp or ep that count covers: (name, model, dims)."""
    out = []
    for name, key, dims, *_ in cases:
        mesh = {dim: dims.get(dim, 1) for dim in ("pp", "dp_shard", "ep", "cp", "tp")}
        if (mesh["cp"] > 1 or mesh["ep"] > 1) and covered(mesh):
            out.append((name, key, dims))
    return out


@pytest.mark.parametrize("name,key,dims", _split(CASES))
def test_local_bytes_equal_prediction(runs, name, key, dims):
    """Each rank's parameter bytes are count's (`mesh_local_params`) for the mesh."""
    _local_bytes(runs, name, key, dims)


def test_local_bytes_with_sinks_split_over_tp(runs):
    """Each tp rank holds its heads' sinks, as count's tp rule says (`tp_share`)."""
    _local_bytes(runs, "llama-sinks tp=2", "llama-sinks", {"tp": 2})


@pytest.mark.parametrize("name,key", [("deepseek-mla tp=2", "deepseek-mla"),
                                      ("deepseek-mla-q tp=2", "deepseek-mla-q")])  # fmt: skip
def test_local_bytes_of_latent_attention_over_tp(runs, name, key):
    """Each tp rank holds the latents' down projections and norms whole, and its heads' share
    of q (or q_up), kv_up and o, as count's tp rule says (`tp_share`)."""
    _local_bytes(runs, name, key, {"tp": 2})


@pytest.mark.long
@pytest.mark.parametrize("name,key,dims", _split(CASES_4))
def test_local_bytes_on_4_processes(runs_4, name, key, dims):
    _local_bytes(runs_4, name, key, dims)


def _local_bytes(runs: list[dict], name: str, key: str, dims: dict[str, int]) -> None:
    spec, overrides = MODELS[key]
    ir = build_ir(load_spec(spec, overrides))
    mesh = {dim: dims.get(dim, 1) for dim in ("pp", "dp_shard", "ep", "cp", "tp")}
    order = {dim: mesh[dim] for dim in dims}  # the mesh as the ranks built it
    order.update((dim, 1) for dim in mesh if dim not in order)
    for rank, got in enumerate(runs):
        assert got[name]["local_bytes"] == 4 * mesh_local_params(ir, order, rank)


@pytest.mark.long
@pytest.mark.parametrize("name", [case[0] for case in CASES_4])
def test_cp_and_tp_on_4_processes(runs_4, name):
    _check(runs_4, name)


def _check(runs: list[dict], name: str) -> None:
    for rank in runs:
        got = rank[name]
        assert len(got["losses"]) == STEPS
        assert got["losses"] == pytest.approx(got["ref_losses"], abs=1e-4)
        assert got["missing_grads"] == []
        assert got["grad_diff"] < 1e-5
