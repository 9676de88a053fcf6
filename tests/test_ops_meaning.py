"""The lowered ops carry their own meaning: what an interpreter needs is a field of the op.

The FLOP, activation and memory counters, the plan's op costs and the code generator read the
ops `archspec.ir.lower` writes; none of them looks back at the `Attention` node an op came
from. So no op holds a composite node (only `Call` and `Blocks`, which run one through its
own lowering), and a fact such as "a windowed layer's cache keeps only its window" is stated
once, by the lowering, as the capacity of the layer's `Cached` ops.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import sympy as sp

from archspec.backends.count import activations, flops
from archspec.backends.count.passes import KV_LEN, B, decode_pass, forward_pass
from archspec.ir import nodes, ops
from archspec.ir.build import build_ir
from archspec.ir.lower import lower, lower_block, lower_model, lower_stack
from archspec.ir.visit import walk
from archspec.plan import opcost
from archspec.spec.resolve import builtin_names, load_spec

# The modules a leaf op runs: one PyTorch built-in each, with no meaning left to work out.
LEAVES = (nodes.Linear, nodes.Norm, nodes.Embedding)


def all_ops(model: nodes.Model):
    """Every op of the model's forward, sublayers' and experts' included, once per distinct
    module: the ops each interpreter walks."""
    for segment in lower_model(model):
        stack_ops, ctx = lower_stack(segment.stack, segment.x, segment.memory)
        pending = [*segment.embed, *stack_ops.ops, *segment.heads]
        while pending:
            op = pending.pop()
            yield op
            if isinstance(op, ops.Blocks):
                for run in op.repeat.runs:
                    assert isinstance(run.node, nodes.Block)
                    pending += lower_block(run.node).ops
            elif isinstance(op, ops.Call):
                pending += lower(op.module, op.args[0], ctx).ops


@pytest.mark.parametrize("name", builtin_names())
def test_no_op_holds_a_composite_node(name):
    model = build_ir(load_spec(name)).root
    for op in all_ops(model):
        for field in dataclasses.fields(op):
            value = getattr(op, field.name)
            if not isinstance(value, nodes.Node):
                continue
            structure = (isinstance(op, ops.Call) and field.name == "module") or (
                isinstance(op, ops.Blocks) and field.name == "repeat"
            )
            assert structure or isinstance(value, LEAVES), (
                f"{name}: {type(op).__name__}.{field.name} holds {type(value).__name__}"
            )


@pytest.mark.parametrize("module", [flops, activations, opcost])
def test_interpreters_do_not_know_the_attention_node(module):
    """They interpret ops alone: the Attention class is not even a name they see."""
    assert "Attention" not in vars(module)
    assert ".attention" not in inspect.getsource(module).replace("conv.attention", "")


def _attention_ops(model, op_type):
    return [op for op in all_ops(model) if isinstance(op, op_type)]


def test_a_windowed_layer_caches_its_window_once():
    """Gemma 2 alternates windowed and full layers: the windowed layers' two Cached ops (keys
    and values) carry the window as capacity, the full layers' none; the mask of the same
    layer hides the keys beyond it."""
    spec = load_spec("gemma-2-2b")
    window = spec.attention.sliding_window
    model = build_ir(spec).root
    cached = _attention_ops(model, ops.Cached)
    attends = _attention_ops(model, ops.Attend)
    assert {c.capacity for c in cached} == {window, None}
    assert {a.masking.window for a in attends} == {window, None}
    for attend in attends:
        assert attend.k.capacity == attend.v.capacity == attend.masking.window
    # A decode step reads at most the window from the ring, a prefill every key.
    windowed = next(a for a in attends if a.masking.window is not None)
    step = decode_pass(model.layout).lengths("decoder")
    assert step.attended(windowed.k) == sp.Min(KV_LEN, window)
    assert step.rows(windowed.k) == B * sp.Min(KV_LEN, window)
    prefill = forward_pass(model.layout).lengths("decoder")
    assert prefill.attended(windowed.k) == prefill.keys


def test_cross_attention_reads_the_encoder_output():
    """An encoder-decoder's cross-attention caches the encoder's keys and values (rows
    `memory`) and attends over them; its self-attention over its own cached keys."""
    model = build_ir(load_spec("t5-small")).root
    attends = _attention_ops(model, ops.Attend)
    assert sorted(a.from_memory for a in attends) == [False, False, True]
    for attend in attends:
        rows = "memory" if attend.from_memory else "keys"
        assert attend.k.rows == attend.v.rows == rows


def test_latent_attention_caches_its_latent_and_rotated_key():
    """DeepSeek-V2's cache holds the normalised latent and the one rotated key all heads
    share, not each head's keys and values: per position, the layer's kv_rank + rope_dim."""
    model = build_ir(load_spec("deepseek-v2-lite")).root
    attn = next(p.node for p in walk(model) if isinstance(p.node, nodes.Attention))
    assert attn.latent is not None
    widths = {c.out.width for c in _attention_ops(model, ops.Cached)}
    assert widths == {attn.latent.kv_rank, attn.latent.rope_dim}
    attend = _attention_ops(model, ops.Attend)[0]
    assert attend.v_head_dim == attn.latent.v_dim
    assert attend.own_scale and attend.softcap is None
