"""Memory per device against Megatron-LM, as Korthikanti et al. 2022 count it.

"Reducing Activation Recomputation in Large Transformer Models" (arXiv:2205.05198) derives the
activation memory of one GPT layer in Megatron-LM (fp16 activations, one-byte dropout masks) and
checks it against the memory Megatron measures. Section 4.1, Equation 1, no parallelism:

    s·b·h·(34 + 5·a·s/h)

Section 4.2.1, Equation 2, tensor parallelism over t ranks (norm inputs, the inputs of the first
projections and the two residual dropout masks stay whole on every rank):

    s·b·h·(10 + 24/t + 5·a·s/(h·t))

Section 4.2.2, Equation 3, with sequence parallelism:

    s·b·h/t·(34 + 5·a·s/h)

Section 5 (Table 2): selective recomputation drops the 5·a·s/h term (the attention core is
recomputed); full recomputation keeps only each layer's input, 2·s·b·h (÷ t with sequence
parallelism). Section 4.2.3: under 1F1B the first pipeline stage keeps p micro-batches of L/p
layers, L layers' worth, times 1 + (p - 1)/(p·m) with m interleaved stages per device.

The models are the paper's four (Table 3): heads a, hidden size h, layers L, tensor- and
pipeline-parallel sizes, sequence length 2048, vocabulary 51,200, micro-batch 1 (the 22B: 4).
"""

from __future__ import annotations

import pytest
import sympy as sp

from archspec.backends.count.activations import activation_parts
from archspec.backends.count.memory import Parallelism, memory_figures
from archspec.backends.count.passes import B, S
from archspec.ir.build import build_ir
from archspec.spec.resolve import load_spec

# name: (a, h, L, t, p, micro-batch, global batch)
MODELS = {
    "22B": (64, 6144, 48, 8, 1, 4, 4),
    "175B": (96, 12288, 96, 8, 8, 1, 64),
    "530B": (128, 20480, 105, 8, 35, 1, 280),
    "1T": (160, 25600, 128, 8, 64, 1, 512),
}
SEQ = 2048
# (sequence parallelism, recompute): the paper's five settings.
SETTINGS = [
    (False, "none"),
    (True, "none"),
    (False, "selective"),
    (True, "selective"),
    (True, "full"),
]


def megatron_gpt(a: int, h: int, layers: int):
    """Megatron's GPT as an archspec spec: GPT-2's layer (pre-norm, GELU MLP of 4·h, learned
    positions, a tied head) at the paper's sizes, with its 0.1 dropouts."""
    return build_ir(
        load_spec(
            "gpt3-175b",
            [
                f"d_model={h}",
                f"n_heads={a}",
                f"head_dim={h // a}",
                f"d_ff={4 * h}",
                f"n_layers={layers}",
                "vocab_size=51200",
                f"max_seq_len={SEQ}",
                "dropout.attention=0.1",
                "dropout.hidden=0.1",
            ],
        )
    )


def paper_per_layer(s, b, h, a, t, sequence_parallel, recompute) -> float:
    """Table 2 of the paper: bytes of activations one layer keeps on one GPU."""
    if recompute == "full":
        return 2 * s * b * h / (t if sequence_parallel else 1)
    attention = 0 if recompute == "selective" else 5 * a * s / h
    if sequence_parallel:
        return s * b * h / t * (34 + attention)
    return s * b * h * (10 + 24 / t + attention / t)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("sequence_parallel, recompute", SETTINGS)
def test_one_layer_keeps_what_the_paper_counts(name, sequence_parallel, recompute) -> None:
    a, h, layers, t, p, b, _ = MODELS[name]
    ir = megatron_gpt(a, h, layers)
    parts = activation_parts(ir, 2, "eager", recompute, t, sequence_parallel)
    ours = parts.layers[0][1].xreplace({**ir.env, B: b, S: SEQ})
    expected = paper_per_layer(SEQ, b, h, a, t, sequence_parallel, recompute)
    # archspec also counts each layer norm's fp32 mean and 1/std per token (16 bytes beside
    # 34·h): far inside the 3% the issue asks for.
    assert float(ours) == pytest.approx(expected, rel=0.03)
    assert float(ours) == pytest.approx(expected, rel=1e-3)


def test_without_parallelism_the_layer_is_equation_1() -> None:
    a, h, layers = 96, 12288, 96
    ir = megatron_gpt(a, h, layers)
    parts = activation_parts(ir, 2, "eager")
    ours = parts.layers[0][1].xreplace({**ir.env, B: 1, S: SEQ})
    assert float(ours) == pytest.approx(SEQ * 1 * h * (34 + 5 * a * SEQ / h), rel=1e-3)


@pytest.mark.parametrize("name", ["175B", "530B", "1T"])
@pytest.mark.parametrize("interleave", [1, 3])
def test_first_pipeline_stage_keeps_L_layers_times_the_interleaving_factor(name, interleave):
    a, h, layers, t, p, b, global_batch = MODELS[name]
    if layers % (p * interleave):
        pytest.skip(f"{layers} layers do not split into {p}×{interleave} chunks")
    ir = megatron_gpt(a, h, layers)
    gpus = t * p
    micro_batches = global_batch // (b * (gpus // (t * p)))
    par = Parallelism(gpus, t, p, sp=True, interleave=interleave, micro_batches=micro_batches)
    m = memory_figures(ir, "fp16", "adamw", "selective", "eager", par, grad_dtype="fp32")
    ours = m.stages[0].activations.xreplace({**ir.env, B: b, S: SEQ})
    per_layer = paper_per_layer(SEQ, b, h, a, t, True, "selective")
    factor = 1 + (p - 1) / (p * interleave) if interleave > 1 else 1
    # Section 4.2.3: L layers' worth on the first stage (its embeddings' dropout mask and
    # positions are a further s·b·h·p/t, 0.02% here).
    assert float(ours) == pytest.approx(layers * per_layer * factor, rel=0.03)


def test_megatron_keeps_18_bytes_per_parameter() -> None:
    """fp16 weights (2), fp32 gradients (4), fp32 master weights and two Adam moments (12)."""
    ir = megatron_gpt(96, 12288, 96)
    par = Parallelism(gpus=64, tp=8, pp=8, micro_batches=64)
    m = memory_figures(ir, "fp16", "adamw", parallel=par, grad_dtype="fp32")
    for stage in m.stages:
        n = stage.params
        assert stage.weights + stage.gradients + stage.optimizer_states == 18 * n
    # Every stage holds 12 layers on 8 tensor-parallel ranks; the first adds the embedding
    # table (51,200 × 12,288 split 8 ways, and 2,048 positions whole), the last the final norm
    # and its own copy of the tied head.
    h = 12288
    layer = (
        2 * 2 * h  # two layer norms, whole on every rank
        + (3 * h * h + 3 * h) // 8  # q, k, v: column-parallel, biases split
        + h * h // 8
        + h  # the attention output: row-parallel, bias whole
        + (4 * h * h + 4 * h) // 8  # MLP up: column-parallel
        + 4 * h * h // 8
        + h  # MLP down: row-parallel
    )
    embeddings = 51200 // 8 * h + 2048 * h
    assert m.stages[0].params == 12 * layer + embeddings
    assert m.stages[-1].params == 12 * layer + 2 * h + 51200 // 8 * h
    assert all(stage.params == 12 * layer for stage in m.stages[1:-1])


def test_tensor_parallelism_beyond_the_kv_heads_replicates_them() -> None:
    """llama-2-70b has 8 kv heads: at tp=16 each rank holds one (copied on two ranks), so the
    KV cache per device is an eighth of the whole, not a sixteenth."""
    ir = build_ir(load_spec("llama-2-70b"))
    values = {**ir.env, B: 1, S: 4096, sp.Symbol("kv_len", positive=True, integer=True): 4096}
    whole = memory_figures(ir, "bf16").kv_cache.xreplace(values)
    split = memory_figures(ir, "bf16", parallel=Parallelism(gpus=16, tp=16)).kv_cache
    assert split.xreplace(values) == whole / 8
