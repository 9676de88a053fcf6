"""OPT-175B's row of published.yaml against what it was read from: its shape against
transformers' OPTForCausalLM at the paper's Table 1 shape (metaseq's launcher gives the FFN
width, 4 × d_model; the model cards the vocabulary), and its FLOP count against the OPT
chronicles' own total (final_update.md: "~4.30E+23 FLOPs of compute, or roughly ~33 days of
continuous training on 1024 80GB A100s" for 300B tokens), which is how the row reads the
paper's 147 TFLOP/s as Megatron's Equation 3."""

from __future__ import annotations

import pytest

from archspec.backends.count.params import parameter_count
from archspec.plan import published


def opt_run() -> published.Run:
    (run,) = [r for r in published.dataset().runs if r.source == "opt2022"]
    return run


def test_the_shape_has_the_parameters_of_transformers_opt_175b() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.OPTConfig(
        hidden_size=12288, num_hidden_layers=96, num_attention_heads=96, ffn_dim=4 * 12288,
        vocab_size=50272, max_position_embeddings=2048, word_embed_proj_dim=12288,
    )  # fmt: skip
    with torch.device("meta"):
        model = transformers.OPTForCausalLM(config)
    expected = sum(p.numel() for p in model.parameters())
    run = opt_run()
    ir = published.cands_ir(run)
    assert ir.value(parameter_count(ir.root)) == expected


def test_the_figure_counts_flops_as_the_chronicles_do() -> None:
    run = opt_run()
    seconds = published.published_step(run, published.cands_ir(run))
    tokens = run.global_batch * run.seq
    flops_per_token = seconds * 147e12 * run.gpus / tokens
    assert flops_per_token * 300e9 == pytest.approx(4.30e23, rel=0.005)
    # and the chronicles' total over 33 days of 1024 GPUs is the paper's 147 TFLOP/s
    assert 4.30e23 / (33 * 86400 * 1024) == pytest.approx(147e12, rel=0.005)
