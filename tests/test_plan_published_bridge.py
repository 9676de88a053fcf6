"""The NeMo and Megatron-Bridge rows of published.yaml beyond the first few read from each
table, and those of later Megatron-Bridge tables: every layout is one `archspec plan` accepts
and times as the harness does, and its pipeline split is the one Megatron-Core makes of it."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from archspec.cli import app
from archspec.plan import published
from archspec.plan.engines import ENGINES
from archspec.plan.hardware import get_system
from tests.test_plan_published_cli import command

runner = CliRunner()

# The rows read from the tables' other pre-training lines (the NeMo 24.07 table, Megatron-
# Bridge's 25.11 tables).
ADDED = (
    "GPT-3 5B fp8, 64 H100 (NeMo)",
    "GPT-3 20B fp8, 64 H100 (NeMo)",
    "Nemotron 8B fp8, 64 H100 (NeMo)",
    "Nemotron 22B fp8, 64 H100 (NeMo)",
    "Nemotron 340B fp8, 128 H100 (NeMo)",
    "Llama 3.1 405B fp8, 256 GB200 (NeMo 25.11)",
    "Llama 3.1 405B fp8, 128 B200 (NeMo 25.11)",
)


# Later Megatron-Bridge tables, every row of theirs.
LATER_SOURCES = ("bridge2604", "bridge2606")


def added() -> list[published.Run]:
    runs = published.dataset().runs
    return [r for r in runs if r.name in ADDED] + [r for r in runs if r.source in LATER_SOURCES]


@pytest.mark.parametrize("run", added(), ids=lambda r: r.name)
def test_the_command_times_each_added_row_as_the_harness_does(run) -> None:
    assert run.not_expressible() is None
    accelerator = get_system(run.system).accelerator.key
    seconds, layout = published.predict(run, ENGINES[run.engine].efficiency(accelerator))
    assert (layout.micro_batch, layout.interleave) == (run.micro_batch, run.interleave or 1)
    result = runner.invoke(app, command(run, layout.micro_batch, layout.interleave))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["step_time_s"] == pytest.approx(seconds, rel=1e-9)


def megatron_stage_layers(layers: int, pp: int, vp: int, embedding_and_loss: bool) -> list[int]:
    """Megatron-Core's split (get_transformer_layer_offset, transformer_layer.py): with
    account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split the
    embedding and the loss take a layer's slot each, in the first and the last chunk; the
    slots are divided evenly over pp × vp chunks, chunk c of stage s at position c·pp + s."""
    slots = layers + 2 if embedding_and_loss else layers
    chunks = pp * vp
    assert slots % chunks == 0
    per_chunk = [slots // chunks] * chunks
    if embedding_and_loss:
        per_chunk[0] -= 1
        per_chunk[-1] -= 1
    return [sum(per_chunk[c * pp + s] for c in range(vp)) for s in range(pp)]


# DeepSeek-V3's rows are laid out by name (Megatron-Core's pipeline_model_parallel_layout: E
# the embedding, t a layer, m a multi-token-prediction depth, L the loss, | between chunks):
# GB300's preset pp_layout (deepseek_workload_base_configs.py at 21d102f5e) and
# set_deepseek_v3_pipeline_model_parallel_layout's (4, 4) and (8, 1) entries (deepseek_v3.py),
# written in the same notation.
PIPELINE_LAYOUTS = {
    "DeepSeek-V3 mxfp8, 256 GB300 (NeMo 26.04.01)": "Et*4|(t*4|)*14tmL",
    "DeepSeek-V3 mxfp8, 256 GB200 (NeMo 26.04.01)": "Et*4|(t*4|)*14tmL",
    "DeepSeek-V3 mxfp8, 256 B300 (NeMo 26.04.01)": "Et*8|(t*8|)*6t*5mL",
}


def laid_out(layout: str, pp: int) -> tuple[list[int], int]:
    """The layers a stage holds under a pipeline layout (chunk c on stage c mod pp), and the
    depths of multi-token prediction."""
    while "(" in layout:
        layout = re.sub(r"\(([^()]*)\)\*(\d+)", lambda m: m[1] * int(m[2]), layout)
    layout = re.sub(r"([a-zA-Z])\*(\d+)", lambda m: m[1] * int(m[2]), layout)
    stages = [0] * pp
    for c, chunk in enumerate(layout.split("|")):
        stages[c % pp] += chunk.count("t")
    return stages, layout.count("m")


@pytest.mark.parametrize("run", added(), ids=lambda r: r.name)
def test_each_added_pipeline_is_split_as_megatron_core_splits_it(run) -> None:
    if run.name in PIPELINE_LAYOUTS:
        stages, depths = laid_out(PIPELINE_LAYOUTS[run.name], run.pp)
        assert (list(run.stage_layers or ()), run.mtp_layers) == (stages, depths)
        return
    layers = published.model_layers(published.cands_ir(run))
    # The Llama 3.1 405B and Qwen3-235B-A22B recipes count the embedding and the loss
    # (llama31_405b.py, qwen3_moe.py); the others do not.
    counted = run.model in ("llama-3-405b", "qwen3-235b-a22b")
    expected = megatron_stage_layers(layers, run.pp, run.interleave or 1, counted)
    assert list(run.stage_layers or [layers // run.pp] * run.pp) == expected


# Each table's "Model TFLOP / sec / GPU" beside its "Tokens / sec / GPU" (the same files and
# lines as the rows): NVIDIA's model FLOPs a token, which fix the shape the row was run at.
# With it, whether the shape's input embedding is a table of its own (Nemotron's head is
# untied; GPT-3's is the embedding).
MODEL_TFLOPS = {
    "GPT-3 5B fp8, 64 H100 (NeMo)": (736, False),
    "GPT-3 20B fp8, 64 H100 (NeMo)": (750, False),
    "Nemotron 8B fp8, 64 H100 (NeMo)": (653, True),
    "Nemotron 22B fp8, 64 H100 (NeMo)": (554, True),
    "Nemotron 340B fp8, 128 H100 (NeMo)": (678, True),
}


@pytest.mark.parametrize("name", MODEL_TFLOPS)
def test_each_added_dense_shape_has_the_model_flops_the_table_prints(name) -> None:
    """PaLM's 6N + 12·L·H·Q·T a token (published.py's `flops: palm`) less an untied input
    embedding's 6·V·d, which multiplies nothing: NVIDIA's count."""
    tflops, untied = MODEL_TFLOPS[name]
    run = next(r for r in added() if r.name == name)
    ir = published.cands_ir(run)
    palm = published.published_step(replace(run, figure=("tflops_per_gpu", 1.0), flops="palm"), ir)
    per_token = palm * 1e12 * run.gpus / (run.global_batch * run.seq)
    if untied:
        per_token -= 6 * ir.value(ir.root.vocab_size) * ir.value(ir.root.d_model)
    assert per_token == pytest.approx(tflops * 1e12 / run.figure[1], rel=5e-3)


# The same for the mixture rows: NVIDIA counts a token's active parameters (its top_k
# experts), 6 a parameter less the input embedding, and PaLM's 12·L·H·Q·T halved for causal
# attention (the table's Qwen3-235B-A22B lines: 840 TFLOP/s at 5,680 tokens/s on GB200, 560 at
# 3,776 on B200).
MOE_MODEL_TFLOPS = {
    "Qwen3 235B-A22B mxfp8, 256 GB200 (NeMo 26.04.01)": 840,
    "Qwen3 235B-A22B mxfp8, 256 B200 (NeMo 26.04.01)": 560,
}


@pytest.mark.parametrize("name", MOE_MODEL_TFLOPS)
def test_each_mixture_shape_has_the_model_flops_the_table_prints(name) -> None:
    run = next(r for r in added() if r.name == name)
    entry = published.dataset().models[run.model]
    sets = [a for s in [*entry["set"], f"max_seq_len={run.seq}"] for a in ("--set", s)]
    result = runner.invoke(app, ["count", entry["spec"], *sets, "--seq", str(run.seq),
                                 "--batch", "1", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    params = json.loads(result.stdout)["params"]
    ir = published.cands_ir(run)
    embedding = ir.value(ir.root.vocab_size) * ir.value(ir.root.d_model)
    assert params["total"] == pytest.approx(235.1e9, rel=1e-3)  # "235B"
    attention = 12 * published.model_layers(ir) * 64 * 128 * run.seq / 2
    per_token = 6 * (params["active"] - embedding) + attention
    assert per_token == pytest.approx(MOE_MODEL_TFLOPS[name] * 1e12 / run.figure[1], rel=5e-3)


# DeepSeek-V3's table (26.04.01): "Model TFLOP / sec / GPU" over "Tokens / sec / GPU".
DEEPSEEK_MODEL_TFLOPS = {
    "DeepSeek-V3 mxfp8, 256 GB300 (NeMo 26.04.01)": 1298,
    "DeepSeek-V3 mxfp8, 256 GB200 (NeMo 26.04.01)": 1106,
    "DeepSeek-V3 mxfp8, 256 B300 (NeMo 26.04.01)": 898,
}


def _active(*sets: str) -> int:
    args = [a for s in sets for a in ("--set", s)]
    result = runner.invoke(app, ["count", "deepseek-v3", *args, "--seq", "4096", "--batch", "1",
                                 "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["params"]["active"]


@pytest.mark.parametrize("name", DEEPSEEK_MODEL_TFLOPS)
def test_deepseek_rows_count_their_multi_token_prediction(name) -> None:
    """NVIDIA's FLOPs a token, as for the mixtures above (6 an active parameter less the input
    embedding, the causal half of the attention core: 6·h·(qk + v head widths)·S/2 a layer),
    come to the table's only with the row's one multi-token-prediction depth: one more MoE
    layer (count's model with 62 layers against 61), its attention, eh_proj's 2·d·d and a
    second logit (Megatron-LM's num_floating_point_operations adds the same); without it
    they are 3.6% short."""
    from tests.hf_reference import DEEPSEEK_V3 as c

    run = next(r for r in added() if r.name == name)
    d, vocab, h = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    widths = c["qk_nope_head_dim"] + c["qk_rope_head_dim"] + c["v_head_dim"]
    attention = 6 * h * widths * run.seq / 2
    active = _active()
    model = 6 * (active - vocab * d) + c["num_hidden_layers"] * attention
    depth = 6 * (_active("n_layers=62") - active) + attention + 6 * 2 * d * d + 6 * d * vocab
    table = DEEPSEEK_MODEL_TFLOPS[name] * 1e12 / run.figure[1]
    assert run.mtp_layers == 1
    assert model + depth == pytest.approx(table, rel=5e-3)
    assert model < 0.97 * table
