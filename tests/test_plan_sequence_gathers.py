"""What sequence parallelism all-gathers in a block (opcost.CostCounter.gathered, step.py):
each sequence-sharded tensor the tensor-parallel side reads, once. The widths expected are the
models' own config.json fields, and the collectives they imply are Megatron-Core's (its MLA
gathers the latents and the rotary key, not the hidden state)."""

from __future__ import annotations

import pytest
import sympy as sp

from archspec.backends.count.passes import B, whole_sequences
from archspec.cli.common import resolve_spec
from archspec.hf.import_config import import_config
from archspec.ir.build import build_ir
from archspec.plan.collectives import all_gather, all_reduce, group_link, reduce_scatter
from archspec.plan.hardware import get_system
from archspec.plan.opcost import pass_costs
from archspec.plan.step import Layout, StepModel, Training
from tests.hf_reference import DEEPSEEK_V3, FAMILY_CONFIGS

SEQ = 64


def _gathered_per_token(ir) -> list[int]:
    """Elements gathered per position in one block of each run of layers."""
    values = {**whole_sequences(SEQ), B: 1}
    return [
        int(sum(sp.sympify(c.gathers).xreplace(values) for c in costs)) // SEQ
        for _, costs in pass_costs(ir, 2, "flash").layers
    ]


def _imported(family: str):
    return build_ir(import_config({"model_type": family, **FAMILY_CONFIGS[family]}).spec)


def test_a_block_of_the_usual_kind_gathers_its_two_normed_inputs() -> None:
    """Llama: the normed hidden state before the attention (one gather for q, k and v) and
    before the MLP (one for gate and up)."""
    config = FAMILY_CONFIGS["llama"]
    assert _gathered_per_token(_imported("llama")) == [2 * config["hidden_size"]]


def test_a_parallel_block_gathers_its_one_normed_input_once() -> None:
    """GPT-J's attention and MLP read the same normed hidden state: one gather, two
    reduce-scatters."""
    config = FAMILY_CONFIGS["gptj"]
    assert _gathered_per_token(_imported("gptj")) == [config["n_embd"]]


def test_latent_attention_gathers_its_latents_and_rotary_key() -> None:
    """DeepSeek-V3 (its config.json): the query latent, the key-value latent and the shared
    rotary key (q_lora_rank + kv_lora_rank + qk_rope_head_dim = 2,112 a position, not the
    hidden size's 7,168), then the MLP's (dense or shared expert's) normed input."""
    ir = build_ir(resolve_spec("deepseek-v3", []))
    c = DEEPSEEK_V3
    attention = c["q_lora_rank"] + c["kv_lora_rank"] + c["qk_rope_head_dim"]
    assert attention == 2112
    assert _gathered_per_token(ir) == [attention + c["hidden_size"]] * 2


def test_the_step_times_those_gathers_on_each_kind_of_layer() -> None:
    """DeepSeek-V3 at tp 2 with --sp (Megatron-LM's engine, which overlaps none of it): each
    layer's forward and backward gather the latents, the rotary key and the MLP's input apart
    (Megatron-Core's q_up and kv_up inputs, k_pos_emb) and reduce-scatter the hidden state
    after each row-parallel projection; the embedding and head all-reduce over the vocabulary.
    Its first `first_k_dense_replace` layers are dense (two row-parallel projections: the
    attention's output and the MLP's down); the MoE layers after them have a third, the
    experts', split over the tensor-parallel ranks (etp = tp, not folded), whose dispatcher
    gathers the hidden state before them and reduce-scatters their output."""
    ir = build_ir(resolve_spec("deepseek-v3", []))
    system = get_system("dgx-h100")
    model = StepModel(ir, system, Training(gpus=2, global_batch=1, seq=SEQ))
    step = model.step(Layout(tp=2, pp=1, interleave=1, micro_batch=1, sp=True,
                             recompute="none"))  # fmt: skip
    c, d = 2, DEEPSEEK_V3["hidden_size"]
    link = group_link(system, 2, 1, model.eff.network_peak)
    widths = [DEEPSEEK_V3["q_lora_rank"], DEEPSEEK_V3["kv_lora_rank"],
              DEEPSEEK_V3["qk_rope_head_dim"], d]  # fmt: skip
    dense = (sum(all_gather(SEQ * w * c, 2, link) for w in widths)
             + 2 * reduce_scatter(SEQ * d * c, 2, link))  # fmt: skip
    moe = dense + all_gather(SEQ * d * c, 2, link) + reduce_scatter(SEQ * d * c, 2, link)
    vocabulary = 2 * all_reduce(SEQ * d * c, 2, link)
    first = DEEPSEEK_V3["first_k_dense_replace"]
    later = DEEPSEEK_V3["num_hidden_layers"] - first
    assert (first, later) == (3, 58)
    expected = first * 2 * dense + later * 2 * moe + vocabulary
    assert step.breakdown["tp_comm"] == pytest.approx(expected)
