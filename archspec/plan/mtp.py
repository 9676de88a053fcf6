"""Multi-token prediction in training (`plan --mtp-layers N`, Megatron-Core's `mtp_num_layers`):
DeepSeek-V3's extra depths, each predicting one more token ahead (arXiv:2412.19437, Section
2.2), which NeMo's DeepSeek-V3 recipes train with one depth.

What one depth runs, after the main model's last layer, as Megatron-Core builds it
(megatron/core/transformer/multi_token_prediction.py at Megatron-LM d98e8a6,
`MultiTokenPredictionLayer`): the embedding of the tokens shifted by one more (the model's own
table), `enorm` over it and `hnorm` over the hidden states the depth before left, the two
side by side (2·d) through `eh_proj` to d, one transformer layer of the decoder's own spec
(DeepSeek-V3's: a MoE layer), its `final_layernorm`, then the model's output layer and a loss.
The depths run on the last pipeline stage (`mtp_process`), which then holds a copy of the
embedding table as well (GPTModel builds the embedding where `pre_process or mtp_process`) when
the output layer is not tied to it; the head is the model's own.

What plan adds on the last stage, for each depth:
- time: the layer, as the decoder's last layer runs it; the final norm, the head and the loss
  again; the lookup, the two norms (each the final norm's cost) and eh_proj, a 2·d → d
  projection, column-parallel, in bf16 (the fp8 context covers the transformer layers);
- parameters: the layer (one of the decoder's last run), eh_proj's 2·d·d over tp, the three
  norms' d each, and the embedding table over tp where the stage did not hold it;
- activations: the layer's and the head's and loss's, as the main model's, and the inputs of
  the two norms and of eh_proj: 4·d values a position (the embedding and the hidden states,
  then the two normalised side by side).

A model trained with multi-token prediction is not a different architecture: the spec stays
the model transformers loads (DeepSeek-V3's config.json lists num_nextn_predict_layers, whose
weights its DeepseekV3ForCausalLM does not build).
"""

from __future__ import annotations

from archspec.errors import SpecError
from archspec.plan.opcost import OpCost

# Values a position keeps for a depth's two norms and eh_proj: the embedding and the hidden
# states (d each, the norms' inputs), then the two normalised side by side (2·d, eh_proj's).
NORM_INPUTS_PER_POSITION = 4


def check_mtp_layers(layers: int, ir) -> None:
    """Depths need a decoder-only language model (one causal stack) of three layers or more
    (a depth's layer is costed as one of the last run's)."""
    from archspec.backends.count.layout import layer_count

    if layers < 0:
        raise SpecError(f"--mtp-layers must be 0 or more (got {layers})")
    if not layers:
        return
    stacks = ir.root.stacks
    if len(stacks) != 1 or stacks[0].role != "decoder" or not stacks[0].causal:
        raise SpecError(f"--mtp-layers {layers}: multi-token prediction extends a decoder-only "
                        "language model; this model is not one")  # fmt: skip
    model_layers = layer_count(stacks[0], ir)
    if model_layers < 3:
        raise SpecError(f"--mtp-layers {layers}: a depth repeats the decoder's last layer, "
                        f"which needs a model of 3 layers or more (this one has "
                        f"{model_layers})")  # fmt: skip


def depth_items(before: list, after: list, d_model: float, compute_bytes: int,
                positions: float) -> list:  # fmt: skip
    """The ops one depth runs beside its transformer layer, as (cost, flops, bytes, shape)
    numbers: the lookup, the two norms, eh_proj, and the final norm, head and loss again."""
    lookup = [item for item in before if item[0].label == "embeddings.lookup"]
    norms = [item for item in after if item[0].label == "normop"][:1] * 2
    d, c = d_model, compute_bytes
    flops = 2 * positions * 2 * d * d
    moved = c * (positions * 2 * d + 2 * d * d + positions * d)
    eh_proj = OpCost("mtp.eh_proj", "matmul", flops, moved, tp="column", in_fp8=False)
    return [*lookup, *norms, (eh_proj, flops, moved, (positions, d, 2 * d)), *after]


def depth_flops(ir, compute_bytes: int, attn: str):
    """One depth's forward FLOPs, a formula in B and the lengths: its layer (one of the
    decoder's last run), eh_proj (2·d·d a position, two FLOPs a multiply-add), the two norms
    (each the final norm's) and the final norm, head and loss again."""
    from archspec.plan.opcost import pass_costs

    costs = pass_costs(ir, compute_bytes, attn)
    _, layer = costs.layers[-1]
    head = next(c for c in costs.after if c.label == "head.linear")
    norm = next(c for c in costs.after if c.label == "normop")
    d, vocab = ir.value(ir.root.d_model), ir.value(ir.root.vocab_size)
    eh_proj = head.flops * 2 * d / vocab  # the head's positions, 2·d in and d out
    return (
        sum((c.flops for c in layer), 0)
        + eh_proj
        + 2 * norm.flops
        + sum((c.flops for c in costs.after), 0)
    )
