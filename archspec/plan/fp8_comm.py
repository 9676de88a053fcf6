"""What torchtitan's float8 training sends in one byte an element, and what stays in bf16.

torchtitan trains in float8 through torchao's `Float8Linear` (tensorwise scaling): every
`nn.Linear` of the blocks is swapped, the output head is not (`module_filter_fn=lambda mod, fqn:
fqn != "output"`, torchtitan/float8.py:101 at 3faaa1a0d, :99 at 9dec370; `filter_fqns =
["output"]` in llama3_8b.toml and llama3_70b.toml at 820504e and e7c0cae), and a linear whose
dimensions are not multiples of 16 is never swapped (torch._scaled_mm's requirement;
components/quantization/utils.py:19-22 at 820504e). Embeddings and norms stay bf16.

FSDP's weight all-gather (`enable_fsdp_float8_all_gather`, off by default: config_manager.py's
`--float8.enable_fsdp_float8_all_gather` store_true at 3faaa1a0d and 9dec370, `Float8.
enable_fsdp_float8_all_gather: bool = False` at 820504e; on only where FSDP shards,
`parallel_dims.dp_shard_enabled and ...`, float8.py:51-54 at 9dec370): a swapped weight is
wrapped in torchao's `WeightWithDynamicFloat8CastTensor`, whose `fsdp_pre_all_gather` casts
the local shard to float8_e4m3fn and hands FSDP2 its one-byte data to gather, the scale kept
as metadata, not gathered (torchao/float8/fsdp_utils.py:203-220 at 68e46436b, the torchao of
August 2024). FSDP2 gathers the weights before every forward and again before the backward
of a resharded block, each time through the same hook, so both gathers carry one byte per
swapped weight; the other parameters gather in bf16. The gradients' reduce-scatter is not
touched: it runs in `mixed_precision_reduce` (fp32 in torchtitan's defaults). The scales
cost one all-reduce of a vector of amaxes a step (`precompute_float8_dynamic_scale_for_fsdp`,
fsdp_utils.py:30-72), or a scalar's all-reduce per weight without it: left out (latency only).
Beside a pipeline FSDP keeps the gathered weights through the micro-batches (`--zero 2`), and
step.py times the exchange as the gradients' reduce-scatter (fp32) and the weights' all-gather
(bf16, once a step): the float8 all-gather takes one byte an element off the latter for each
swapped weight.

Tensor parallelism with float8 (`apply_tp(..., enable_float8=...)`, parallelize_llama.py:59
and :132-144 at 3faaa1a0d; `enable_float8_tensorwise_tp = enable_float8_linear and not
float8_is_rowwise`, models/llama3/parallelize_llama.py:65 at 820504e and e7c0cae: no option of
its own) uses torchao's Float8ColwiseParallel, Float8RowwiseParallel and
PrepareFloat8ModuleInput (torchao/float8/float8_tensor_parallel.py at 68e46436b). With
sequence parallelism:
- forward, the all-gather of a block's attention and MLP input: PrepareFloat8ModuleInput casts
  the sequence shard to float8 before redistributing it (`hp_tensor_to_float8_dynamic` then
  `redistribute`, lines 202-209): one byte;
- forward, the reduce-scatter after wo and w2: the partial bf16 outputs (line 122): two bytes;
- backward, the all-gather of the gradient of wo's and w2's outputs: `NoopFwToFloat8E5M2Bw
  Dynamic`, applied after the forward's reduce-scatter (line 125), casts the gradient to
  float8_e5m2 before the backward's all-gather: one byte;
- backward, the reduce-scatter of the gradient of the gathered input: the scaled matmul's bf16
  output: two bytes;
- a recomputed forward gathers as the forward does.
So every sequence-parallel all-gather of the blocks moves one byte an element, every
reduce-scatter two. The head's gather stays bf16 (the head is not swapped). Without sequence
parallelism the inputs are replicated and the outputs all-reduced in bf16: nothing changes.
Rowwise scaling ("rowwise" recipes, 2025) gathers in bf16 (the comment above line 65 at
820504e): archspec's fp8 is tensorwise's (its fp8 factor is fitted on tensorwise runs).
"""

from __future__ import annotations

from archspec.backends.count.memory import COMPUTE_BYTES
from archspec.plan.layers import stage_runs
from archspec.plan.opcost import PassCosts

FLOAT8_BYTES = 1  # float8_e4m3fn and float8_e5m2
# What a float8 element saves over the bf16 one FSDP gathers otherwise.
SAVED_PER_ELEMENT = COMPUTE_BYTES["bf16"] - FLOAT8_BYTES
# torch._scaled_mm takes dimensions that are multiples of 16 (torchtitan's module_filter_fn).
SCALED_MM_MULTIPLE = 16
SPLIT_BY_TP = ("column", "row", "split")


def float8_weights(costs: PassCosts, first: int, last: int, tp: int) -> float:
    """Elements of the swapped (Float8Linear) weights one device of a tensor-parallel group
    holds for layers `first` to `last`: the blocks' linears with both dimensions multiples of
    16, a column- or row-parallel one's 1/tp. Routed experts' weights are not `nn.Linear`s
    (grouped GEMMs: torchao's float8 all-gather does not reach them) and stay bf16."""
    total = 0.0
    for n, ops in stage_runs(costs.layers, costs.spans, first, last):
        for op in ops:
            if op.kind != "matmul" or not op.label.endswith(".linear") or op.expert:
                continue
            out_features, in_features = (int(x) for x in op.shape[1:])
            if out_features % SCALED_MM_MULTIPLE or in_features % SCALED_MM_MULTIPLE:
                continue
            share = tp if op.tp in SPLIT_BY_TP else 1
            total += n * float(op.weights) / share
    return total
