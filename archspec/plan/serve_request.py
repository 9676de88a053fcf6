"""What `archspec plan --mode serve` is asked: its serving options checked (one clear message
each), turned into a prediction (plain, speculative, or continuously batched) and a report."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from archspec.errors import SpecError
from archspec.ir.nodes import IR, Linear
from archspec.ir.visit import walk
from archspec.plan.hardware import System


def speculation(draft: str | None, k: int, accept: float | None) -> Any:
    """The speculative decoding `--draft`, `--speculate` and `--accept` ask for, or None."""
    if draft is None:
        if accept is not None:
            raise SpecError("--accept is for speculative decoding: give --draft SPEC too")
        return None
    if accept is None:
        raise SpecError(
            "--draft needs --accept: the probability each drafted token is accepted",
            hint="it depends on the two models and the text; measure it, or try 0.6-0.8",
        )
    from archspec.cli.common import compile_spec
    from archspec.plan.serve_speculative import Speculation

    return Speculation(compile_spec(draft, None), k, accept)


def _continuous(
    ir: IR, system: System, gpus: int, tp: int, batch: int | None, prompt: int,
    new_tokens: int, dtype: str, engine: Any, group: int | None, kv_dtype: str | None,
    speculation: Any, rate: float | None, concurrency: int | None, plot: Path | None,
    force: bool,
) -> tuple[dict[str, Any] | None, int]:  # fmt: skip
    """Continuous batching at `--rate` or `--concurrency` (and its `--plot`): the point, and the
    batch the rest of the report is for."""
    from archspec.plan.serve import Precision
    from archspec.plan.serve_batching import Server

    if rate is not None and concurrency is not None:
        raise SpecError("give --rate or --concurrency, not both")
    if batch != 1:
        raise SpecError("--batch is found by continuous batching: leave it out with --rate, "
                        "--concurrency or --plot")  # fmt: skip
    if speculation is not None:
        raise SpecError("speculative decoding (--draft) with continuous batching is not "
                        "modelled")  # fmt: skip
    if plot is not None:
        from archspec.backends.compare.plot import check_path

        check_path(plot)  # before any work
    server = Server(ir, system, prompt, new_tokens, tp, gpus, Precision(dtype, group, kv_dtype),
                    engine)  # fmt: skip
    point = None
    if rate is not None:
        point = server.at_rate(rate)
    elif concurrency is not None:
        point = server.at_concurrency(concurrency)
    if plot is not None:
        from archspec.cli.common import say
        from archspec.plan.serve_plot import plot_serving

        title = (f"{ir.name} on {system.key} × {gpus} (tp {tp}), {prompt} → {new_tokens} "
                 f"tokens, {dtype}, engine {engine.key}")  # fmt: skip
        plot_serving(title, [p.as_dict() for p in server.sweep()], plot, force)
        say(f"wrote {plot}")
    if point is None:
        return None, 1
    mode = {"rate": rate} if rate is not None else {"concurrency": concurrency}
    # How the cache holds a sequence: its whole length reserved, or its positions so far (paged).
    held = "whole length" if engine.reserves_whole_sequence else "paged, mean"
    return {**mode, **point.as_dict(), "cache_held": held}, point.batch


def without_cache(kv_dtype: str | None, speculation: Any, rate: float | None,
                  concurrency: int | None, plot: Path | None) -> None:  # fmt: skip
    """`--no-kv-cache` with the options that need a cache: one clear message each."""
    if kv_dtype is not None:
        raise SpecError(f"--kv-dtype {kv_dtype} is the KV cache's dtype: --no-kv-cache keeps none")
    if speculation is not None:
        raise SpecError("speculative decoding (--draft) verifies against a KV cache: "
                        "leave out --no-kv-cache")  # fmt: skip
    if rate is not None or concurrency is not None or plot is not None:
        raise SpecError("continuous batching (--rate, --concurrency, --plot) pages a KV cache: "
                        "leave out --no-kv-cache")  # fmt: skip


def cached_prompt(kv_cache: bool, speculation: Any, rate: float | None,
                  concurrency: int | None, plot: Path | None) -> None:  # fmt: skip
    """`--prompt-cached` with the options it is not modelled with: one clear message each."""
    if not kv_cache:
        raise SpecError("--prompt-cached finds the prompts in a KV cache, which --no-kv-cache "
                        "does not keep")  # fmt: skip
    if speculation is not None:
        raise SpecError("--prompt-cached is not modelled with speculative decoding (--draft): "
                        "leave one out")  # fmt: skip
    if rate is not None or concurrency is not None or plot is not None:
        raise SpecError("--prompt-cached times one static batch: continuous batching (--rate, "
                        "--concurrency, --plot) prefills each joining prompt")  # fmt: skip


def serving_track_record(engine: str, system: System, dtype: str):
    """The left-out errors of the published serving figures most like this plan
    (track_record.py); None under the ideal profile, which no figure was fitted to."""
    from archspec.plan.hardware import tensor_core_twin
    from archspec.plan.serve_engine import PRECISION_CLASSES
    from archspec.plan.serve_profiles import TYPICAL
    from archspec.plan.track_record import serving

    accelerator = tensor_core_twin(system.accelerator.key)
    return serving(engine, TYPICAL, accelerator, PRECISION_CLASSES.get(dtype, dtype))


def check_group(ir: IR, group: int) -> None:
    """An int4 group is that many consecutive weights of one row (one output's inputs), so
    it must divide the input width of every quantized linear, the blocks' (GPTQ, AWQ and
    gpt-fast's int4 linears refuse other sizes)."""
    for stack in ir.root.stacks:
        for placed in walk(stack.blocks):
            node = placed.node
            if type(node) is Linear and ir.value(node.in_features) % group:
                width = ir.value(node.in_features)
                usual = [str(g) for g in (32, 64, 128) if width % g == 0]
                raise SpecError(
                    f"--group {group} does not divide the {width} inputs of "
                    f"{stack.name}.{placed.path}: an int4 group is consecutive weights of one row",
                    hint=f"a group that divides {width}"
                    + (f", e.g. {', '.join(usual)}" if usual else ""),
                )


def serving_report(
    ir: IR, system: System, gpus: int, tp: int | None, batch: int | None, prompt: int,
    new_tokens: int, dtype: str, engine: str | None = None, group: int | None = None,
    kv_dtype: str | None = None, speculation: Any = None, rate: float | None = None,
    concurrency: int | None = None, plot: Path | None = None, force: bool = False,
    kv_cache: bool = True, prompt_cached: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Prefill and per-token decode for `--mode serve` (tp and batch default to 1).
    `kv_cache=False` (`--no-kv-cache`): a generate loop that never hands the model its cache.
    `prompt_cached` (`--prompt-cached`): the prompts' keys and values already in the prefix
    cache, so the first token costs one decode step."""
    from archspec.plan.report import serve_report
    from archspec.plan.serve import check_counts, predict_serving
    from archspec.plan.serve_engine import get_engine

    # Left out, each is 1; given, each is checked (0 is not "left out").
    tp = 1 if tp is None else tp
    batch = 1 if batch is None else batch
    check_counts(tp, batch, prompt, new_tokens)
    if gpus % tp:
        raise SpecError(f"--gpus {gpus} is not a multiple of --tp {tp}")
    if group is not None and group < 1:
        raise SpecError("--group must be at least 1")
    if group is not None:
        check_group(ir, group)
    if not kv_cache:
        without_cache(kv_dtype, speculation, rate, concurrency, plot)
    if prompt_cached:
        cached_prompt(kv_cache, speculation, rate, concurrency, plot)
    profile = get_engine(engine or "ideal")
    batching = None
    if rate is not None or concurrency is not None or plot is not None:
        batching, batch = _continuous(ir, system, gpus, tp, batch, prompt, new_tokens, dtype,
                                      profile, group, kv_dtype, speculation, rate, concurrency,
                                      plot, force)  # fmt: skip
    p = predict_serving(ir, system, batch, prompt, new_tokens, tp, gpus, dtype,
                        engine=profile, group=group, kv_dtype=kv_dtype,
                        kv_cache=kv_cache, prompt_cached=prompt_cached)  # fmt: skip
    if batching is not None:
        # A paged cache under continuous batching holds each sequence's positions so far, the
        # prompt and half the new tokens on average, unless the engine reserves each one's whole
        # length (serve_batching.Server sizes the batch so): the memory reported is that.
        from archspec.plan.serve_batching import held_cache_share

        share = held_cache_share(ir, profile, prompt, new_tokens)
        p = replace(p, kv_cache_bytes=p.kv_cache_bytes * share)
    # On the plain decode step: a speculative round also runs the draft's layers.
    host = host_bound_warning(profile, p.decode_token_s, p.decode_layers)
    draft = None
    if speculation is not None:
        from archspec.plan.serve import Precision
        from archspec.plan.serve_speculative import with_speculation

        p = with_speculation(p, ir, speculation, system, batch, prompt, new_tokens, tp,
                             Precision(dtype, group, kv_dtype), profile)  # fmt: skip
        draft = {"model": speculation.draft.name, "speculate": speculation.k,
                 "accept": speculation.accept,
                 "tokens_per_round": speculation.tokens_per_round}  # fmt: skip
    settings = {"gpus": gpus, "tp": tp, "batch": batch, "prompt": prompt,
                "new_tokens": new_tokens, "dtype": dtype, "group": group,
                "kv_dtype": kv_dtype, "kv_cache": kv_cache, "prompt_cached": prompt_cached,
                "engine": profile.key, "draft": draft,
                "batching": batching}  # fmt: skip
    report = serve_report(ir, system, p, settings)
    if record := serving_track_record(profile.key, system, dtype):
        report["track_record"] = record.report()
    warnings = []
    if not p.fits:  # the batch given is timed all the same, as published runs were
        warnings.append(
            f"weights and KV cache need {(p.weights_bytes + p.kv_cache_bytes) / 2**30:.1f} GiB "
            f"per device; {system.key} has {p.capacity_bytes / 2**30:.1f} GiB usable "
            f"({profile.usable_memory:.0%}, engine {profile.key}): timed, but it would not fit"
        )
    if host:
        warnings.append(host)
    if speculation is not None:
        ours, theirs = (
            ir.value(ir.root.vocab_size),
            speculation.draft.value(speculation.draft.root.vocab_size),
        )
        if ours != theirs:
            # Not refused: a family's sizes may pad one tokenizer's embedding table to
            # different row counts, and archspec cannot see tokenizers.
            warnings.append(
                f"the draft's vocabulary ({theirs:,}) is not the model's ({ours:,}): "
                "speculative decoding verifies the draft's tokens, so both need one tokenizer"
            )
    if warnings:
        report["warning"] = "; ".join(warnings)
    return report


def host_bound_warning(profile, decode_token_s: float, layers: int) -> str | None:
    """Why an eager engine's decode step may be slower than predicted: its profile counts no
    host time, and the step's device time a layer is below what an eager host was measured to
    take (serve_engine.EAGER_HOST_LAYER_S)."""
    from archspec.plan.serve_engine import EAGER, EAGER_HOST_LAYER_S

    least, most = EAGER_HOST_LAYER_S
    if profile.key not in EAGER or profile.host_layer_us or not layers:
        return None
    per_layer = decode_token_s / layers
    if per_layer >= least:
        return None
    return (
        f"engine {profile.key} issues every kernel from Python and its profile counts no host "
        f"time (its figures were bound by their GPU): this decode step is "
        f"{per_layer * 1e6:.0f} us a layer on the device, below what eager hosts were measured "
        f"to take ({least * 1e6:.0f}-{most * 1e6:.0f} us a layer on an H100 machine, docs/"
        f"plan.md, 'Against the generated code on an H100'), so the host may set its pace"
    )
