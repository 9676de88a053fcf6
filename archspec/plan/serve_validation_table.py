"""The serving validation as docs/plan.md shows it (a markdown table of every figure's error,
the bracketed figures, the fitted profiles), as serve_engines.yaml stores the profiles and as
serve_track_record.yaml stores each figure's left-out errors (which `archspec plan` quotes,
track_record.py). `python -m archspec.plan.serve_validation` prints the one and `--write`
writes the others."""

from __future__ import annotations

import yaml

from archspec.plan.hardware import tensor_core_twin
from archspec.plan.serve_engine import PRECISION_CLASSES, ServeEngine, serving_system
from archspec.plan.serve_profiles import USABLE
from archspec.plan.serve_validation import TIMES, Bracket, Figure, Row, summary


def _pct(e: float | None) -> str:
    return "—" if e is None else f"{e:+.1%}"


def _span(bounds: tuple[int, int] | None, value: int) -> str:
    return f"{bounds[0]} to {bounds[1]}" if bounds else str(value)


def _in_metric(f: Figure, seconds: float) -> float:
    """A predicted time in the figure's own metric (a time scales with it, a rate inversely)."""
    ratio = seconds / f.published_s
    return f.value * ratio if f.metric in TIMES else f.value / ratio


def table(engines: dict[str, ServeEngine], rows: list[Row], brackets: list[Bracket]) -> str:
    lines = ["| engine | model | gpu × n | precision | batch | prompt → new | metric | published "
             "| fitted | left out | source left out | typical, engine left out |",
             "|---|---|---|---|---:|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in rows:
        f = r.figure
        precision = f.precision + (f" g{f.group}" if f.group else "") + (
            f", {f.kv} cache" if f.kv else "")  # fmt: skip
        batch = f"{f.batch} of {f.requests:,}" if f.requests else f"{f.batch}"
        lines.append(
            f"| {f.engine} | {f.model} | {f.gpu} × {f.gpus} | {precision} | {batch} "
            f"| {f.prompt} → {f.new_tokens} | {f.metric} | {f.value:g} | {_pct(r.fitted)} "
            f"| {_pct(r.held_out)} | {_pct(r.source_out)} | {_pct(r.engine_out)} |"
        )
    s = summary(rows)
    lines.append("")
    lines.append(
        f"{s['figures']} figures. Fitted: mean {s['fitted_mean']:.1%}, largest "
        f"{s['fitted_max']:.1%}. Left out one at a time ({s['held_out']} figures): mean "
        f"{s['held_out_mean']:.1%}, largest {s['held_out_max']:.1%}. Source left out "
        f"({s['source_out']} figures): mean {s['source_out_mean']:.1%}, largest "
        f"{s['source_out_max']:.1%}. The typical profile, each engine left out "
        f"({s['engine_out']} figures): mean {s['engine_out_mean']:.1%}, largest "
        f"{s['engine_out_max']:.1%}."
    )
    for b in brackets:
        f = b.figure
        lines.append("")
        lines.append(
            f"Not in the means: {f.model} in {f.engine} ({f.metric} {f.value:g}), decided by "
            f"lengths its source leaves open (prompt {_span(f.prompt_range, f.prompt)}, new "
            f"tokens {_span(f.new_tokens_range, f.new_tokens)}): its profile predicts "
            f"{_in_metric(f, b.low_s):.3g} to {_in_metric(f, b.high_s):.3g} over them, and the "
            f"published figure lies {'within' if b.within else 'OUTSIDE'} that range."
        )
    lines.append("")
    lines.append("| engine | bandwidth reached | experts (× dense) | grouped cache re-read "
                 "| matmuls (× calibrated) | per layer | host per layer | per all-reduce "
                 "| per request | host per sequence | head quantized | accumulates in fp16 "
                 "| GEMV pass |")  # fmt: skip
    lines.append("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|")
    for key, e in engines.items():
        eff = ", ".join(f"{c} {v:.0%}" for c, v in e.memory_efficiency.items())
        eff += f" | {e.expert_efficiency:.2f}" if e.expert_efficiency != 1 else " | —"
        eff += f" | {e.grouped_cache_reread:.2f}" if e.grouped_cache_reread else " | —"
        eff += " | " + (", ".join(f"{c} {v:.2f}" for c, v in e.compute_efficiency.items())
                        or "—")  # fmt: skip
        lines.append(
            f"| {key} | {eff} | {e.layer_overhead_us:.1f} µs | {e.host_layer_us:.1f} µs "
            f"| {e.allreduce_us or 0:.1f} µs | {e.request_overhead_ms:.2f} ms "
            f"| {e.sequence_us:.1f} µs "
            f"| {'yes' if e.quantizes_head else 'no'} | {'yes' if e.fp16_accumulation else 'no'} "
            f"| {e.gemv_pass_channels or '—'} |"
        )
    return "\n".join(lines)


def stored(engines: dict[str, ServeEngine]) -> str:
    out = {}
    for key, e in engines.items():
        out[key] = {
            "name": e.name,
            "memory_efficiency": {c: round(v, 3) for c, v in e.memory_efficiency.items()},
            "compute_efficiency": {c: round(v, 3) for c, v in e.compute_efficiency.items()},
            "layer_overhead_us": round(e.layer_overhead_us, 2),
            "host_layer_us": round(e.host_layer_us, 2),
            "allreduce_us": round(e.allreduce_us or 0.0, 2),
            "request_overhead_ms": round(e.request_overhead_ms, 3),
            "sequence_us": round(e.sequence_us, 2),
            "usable_memory": e.usable_memory,
            "reserves_whole_sequence": e.reserves_whole_sequence,
            "max_batch": e.max_batch,
            "quantizes_head": e.quantizes_head,
            "fp16_accumulation": e.fp16_accumulation,
            "gemv_pass_channels": e.gemv_pass_channels,
            "expert_efficiency": round(e.expert_efficiency, 3),
            "grouped_cache_reread": round(e.grouped_cache_reread, 3),
            "calibrated_on": e.calibrated_on,
            "note": USABLE[key][1],
        }
    header = (
        "# Serving engine profiles, fitted on published_serving.yaml by\n"
        "# `python -m archspec.plan.serve_validation --write` (not edited by hand).\n"
    )
    return header + yaml.safe_dump(out, sort_keys=False, allow_unicode=True)


def track_record_rows(rows: list[Row]) -> list[dict]:
    """Each figure's errors left out of its engine's profile and with its engine left out of
    the typical profile, filed as track_record.py narrows them."""

    def rounded(e: float | None) -> float | None:
        return None if e is None else round(e, 6)

    out = []
    for r in rows:
        f = r.figure
        name = (f"{f.engine} {f.model} {f.gpu} × {f.gpus} {f.precision} batch {f.batch} "
                f"{f.prompt} → {f.new_tokens} {f.metric}")  # fmt: skip
        out.append({"name": name, "source": f.source, "engine": f.engine,
                    "accelerator": tensor_core_twin(serving_system(f.gpu).accelerator.key),
                    "precision": PRECISION_CLASSES[f.precision], "metric": f.metric,
                    "left_out": rounded(r.held_out),
                    "typical_left_out": rounded(r.engine_out)})  # fmt: skip
    return out
