"""The generated file's module-level helpers: masks, the norms torch lacks, the functions the
position kinds bring (`archspec.kinds.positions`) and, for models that generate, the KV
cache and the decoding loops.

Each helper is emitted only when the model uses it, copied from `archspec.runtime` (where it is
tested) by its source.
"""

from __future__ import annotations

from archspec.backends.torchgen.copied import runtime_sources
from archspec.backends.torchgen.features import Features
from archspec.backends.torchgen.model import limited
from archspec.ir.nodes import MLP, MoE, Router
from archspec.ir.visit import walk


def helpers(f: Features) -> list[str]:
    """The module-level functions and classes the model's code calls, in reading order: masks,
    the norms torch lacks, attention helpers, what each position kind brings, dropout,
    checkpointing, the length check, then the KV cache and the decoding loops."""
    out = runtime_sources("masks", "padding_keys")
    if True in f.causalities:
        out += runtime_sources("masks", "hidden_keys")
    out += runtime_sources("masks", "mask_out")
    out += runtime_sources("norms", *sorted({n.entry.torch_class for n in f.norms if n.entry.own}))
    if False in f.window_sides:
        out += runtime_sources("masks", "sliding_window")
    if True in f.window_sides:
        out += runtime_sources("masks", "two_sided_window")
    if f.softcapped:
        out += runtime_sources("attention", "softcapped_attention")
    if f.sinks:
        out += runtime_sources("attention", "sink_attention")
    if f.model.logit_softcap is not None:
        out += runtime_sources("attention", "softcap")
    seen: set[str] = set()
    for stack in f.stacks:
        codes = [f.position_code(stack)]
        if stack.local_position is not None:  # the local layers' rotation (Gemma 3)
            codes.append(stack.local_position.code)
        for code in (text for c in codes for text in c.helpers(f.causalities)):
            if code not in seen:
                seen.add(code)
                out.append(code)
    if f.dropout:
        out += runtime_sources("dropout", "dropout")
    out += runtime_sources("checkpoint", "maybe_checkpoint")
    if any(isinstance(placed.node, MoE) for placed in walk(f.model)):
        out += runtime_sources("experts", "grouped_linear", "ExpertRows", "mix_experts")
    if any(isinstance(p.node, MLP) and p.node.clamped for p in walk(f.model)):
        out += runtime_sources("experts", "clamped_swiglu")
    routers = {p.node.entry for p in walk(f.model) if isinstance(p.node, Router)}
    for kind in sorted(routers, key=lambda r: r.name):
        out += runtime_sources("routing", *(n for n in (kind.module, kind.function) if n))
    if any(limited(stack) for stack in f.stacks):
        out += runtime_sources("lengths", "check_length")
    if f.cache:
        out += runtime_sources("kv_cache", "static_address", "KVCache")
        out += f.position_code(f.stacks[0]).generation_helpers()
        if f.windowed:
            out += runtime_sources("window_cache", "update_window")
        out += runtime_sources("sampling", "sampling_probs", "next_token")
        out += runtime_sources("decoding", "decode")
        out += runtime_sources("beam", "beam_search")
        out += runtime_sources("decoding", "generate_tokens")
    return [code.strip("\n") for code in out]
