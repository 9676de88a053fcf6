"""What the analysis predicts for one benchmark step: its FLOPs, tokens and peak memory.

FLOPs are the `executed` convention's model FLOPs (every matmul and elementwise op of the
forward, twice that for the backward) *without* flash attention's recomputation in the
backward pass: that is the work the model needs, so achieved FLOP/s over peak is model FLOPs
utilisation (MFU) as Chowdhery et al. (PaLM, 2022) define it. The optimizer's few FLOPs per
parameter are left out, as usual.

Memory follows the run: SDPA's fused kernels keep no B·h·S² probabilities, so the analysis
runs with `attn="flash"`.
- train: the peak of a whole step (`count.step_peak`): weights and AdamW state, plus the
  largest moment of the step (the loss's backward with the logits' gradients, a block's
  backward, the end of the backward with every gradient). Activations are those of the
  kernel the step runs (on the CPU, SDPA's math path when attention has dropout or a bias).
  In bf16 and fp16 the run keeps fp32 weights under autocast, which count's bf16 figures (a
  model all in bf16) do not describe: `autocast_peak.py` counts that step (an fp32 residual
  stream, bf16 copies of each Linear's input and weight, an fp32 loss). Fused AdamW adds one
  fp32 step count per parameter tensor.
- forward: the weights in the dtype and the forward's largest transient moment
  (`inference_transient`: the widest MLP step, or the head's logits).
- generate: the weights, the KV cache at its final length and the prefill's transient.

In generate mode the prefill's head runs on the last position only (the generated `generate`
and transformers' both do so), so the head's FLOPs for the other prompt positions are left
out.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from archspec.backends.count.conventions import get_convention
from archspec.backends.count.flops import KV_LEN, S_DEC, B, S, flop_figures
from archspec.backends.count.flops_report import whole, whole_bytes
from archspec.backends.count.memory import COMPUTE_BYTES, memory_figures
from archspec.backends.count.step_peak import step_peak
from archspec.bench.autocast_peak import adamw_step_counters, autocast_step_peak
from archspec.ir.lower import rotary_width
from archspec.ir.nodes import IR, MLP, Attention
from archspec.ir.visit import walk


@dataclass(frozen=True)
class Prediction:
    flops: int  # per step
    tokens: int  # per step: processed (forward, train) or generated (generate)
    memory_bytes: int


def attention_kernel(ir: IR, device: str) -> str:
    """The SDPA kernel a training step runs: fused, except on the CPU with attention dropout
    (its fused kernel has none) or a mask it has no fused kernel for (ALiBi, T5's bias)."""
    if device != "cpu":
        return "flash"
    dropout = any(
        getattr(p.node, "dropout", 0) for p in walk(ir.root) if isinstance(p.node, Attention)
    )
    biased = any(s.position.entry.score_bias for s in ir.root.stacks)
    return "eager" if dropout or biased else "flash"


def buffer_bytes(ir: IR, dtype: str) -> sp.Expr:
    """The generated model's buffers (RoPE's cos and sin tables, built once per stack), in
    the model's dtype: memory beside the weights that no parameter count includes."""
    total = sp.Integer(0)
    for stack in ir.root.stacks:
        head = stack.block_variants[0].attn
        rotated = rotary_width(head, stack.position)
        for position in (stack.position, stack.local_position):
            if position is not None:  # a local rotation has tables of its own (Gemma 3)
                total += position.code.buffer_elements(stack.max_seq_len, rotated)
    return total * COMPUTE_BYTES[dtype]


def predict(
    ir: IR, mode: str, batch: int, seq: int, dtype: str, new_tokens: int, device: str = "cuda"
) -> Prediction:
    f = flop_figures(ir, get_convention("executed"), attn="eager")
    attn = attention_kernel(ir, device) if mode == "train" else "flash"
    m = memory_figures(ir, dtype=dtype, optimizer="adamw", attn=attn, device=device)
    env = {**ir.env, B: batch, S: seq, S_DEC: seq, KV_LEN: seq}
    if mode == "forward":
        buffers = buffer_bytes(ir, dtype)
        peak = whole_bytes(m.weights + buffers + inference_transient(ir, dtype, head=True), env)
        return Prediction(whole(f.forward, env), whole(f.tokens, env), peak)
    if mode == "train":
        if dtype == "fp32":
            peak, _ = step_peak(ir, m, "fused").at(env)  # the bench's AdamW is the fused one
        else:  # fp32 weights under autocast (autocast_peak.py)
            fp32 = memory_figures(ir, dtype="fp32", optimizer="adamw", attn=attn, device=device)
            peak, _ = autocast_step_peak(ir, fp32).at(env)
            dtype = "fp32"  # the model's buffers too
        peak += adamw_step_counters(ir)
        peak += whole_bytes(buffer_bytes(ir, dtype), env)
        return Prediction(whole(f.train_step, env), whole(f.tokens, env), peak)
    # generate: a prefill pass over the prompt, then one decode step per further token. In a
    # decode step kv_len counts the cached positions plus the new one.
    encoder_decoder = ir.root.layout == "encoder-decoder"
    first = 1 if encoder_decoder else seq  # decoder positions in the prefill
    prefill = {**env, S_DEC: first}
    flops = whole(f.forward, prefill)
    if "head" in f.components:
        head = sum(f.components["head"])
        flops -= whole(head, prefill) - whole(head, {**prefill, S: 1, S_DEC: 1})
    assert f.decode is not None
    for j in range(1, new_tokens):
        flops += whole(f.decode, {**env, KV_LEN: first + j})
    final = {**env, KV_LEN: first + new_tokens}
    # The prefill's transient on top of the cache (its head runs on the last position only).
    transient = inference_transient(ir, dtype, head=False)
    memory = whole_bytes(m.inference_total + buffer_bytes(ir, dtype) + transient, final)
    return Prediction(flops, batch * new_tokens, memory)


def inference_transient(ir: IR, dtype: str, head: bool) -> sp.Expr:
    """The largest moment of the generated model's inference forward over B·S tokens, above the
    weights: at the widest step of the last stack's MLP, five residual-width tensors are alive
    (the embeddings the model's call still holds, the block's input, the attention output, their
    sum and its norm) beside the MLP's hidden tensors (its two B·S·d_ff, three when gated);
    at the head, the final hidden states and the logits (`head`: the head runs on every
    position). Nothing is kept for a backward pass (inference mode frees each tensor as soon
    as no Python name holds it)."""
    model = ir.root
    c = COMPUTE_BYTES[dtype]
    tokens = B * (S_DEC if model.layout == "encoder-decoder" else S)
    mlp = next((p.node for p in walk(model.stacks[-1]) if isinstance(p.node, MLP)), None)
    hidden = (3 if mlp.gated else 2) * mlp.hidden if mlp is not None else 0
    moments = [tokens * (5 * model.d_model + hidden) * c]
    if head and model.lm_head is not None:
        moments.append(tokens * (model.d_model + model.vocab_size) * c)
    return sp.Max(*moments)
