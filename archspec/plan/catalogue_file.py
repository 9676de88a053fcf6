"""Reading a hardware catalogue (the built-in systems.yaml, a `--system FILE`): the reader of
every YAML file archspec takes (spec/yaml_loader.py: its size, depth, alias and encoding limits
and line numbers), and every field checked where it enters, with its file, line and YAML path:
text is text, and every number finite, positive and in range. A negative peak gave a negative
MFU, an infinite one an MFU of 0, and a billion accelerators per node hung the search.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from archspec.errors import SpecError, did_you_mean
from archspec.safety.text import shortened
from archspec.spec.yaml_loader import KEY, YamlPath, format_path, load_yaml_file, load_yaml_text

# The most accelerators one node may have: a rack-scale NVLink domain has 72 (GB200 NVL72); the
# search tries every power of two up to it.
MAX_GPUS_PER_NODE = 4096


@dataclass(frozen=True)
class Number:
    """A figure of the catalogue: above zero (or zero, when `zero_ok`), at least `low` where
    it has one, at most `high`."""

    unit: str
    high: float
    zero_ok: bool = False
    whole: bool = False
    # The least a figure may be: below it the arithmetic leaves the range of a float (a
    # bandwidth of 1e-200 GB/s divides a step into infinity) or, for memory, nothing is usable.
    low: float = 0.0


TEXT = str
PEAKS = "peaks"  # a mapping of dtype to TFLOP/s
KIND = "kind"  # one of KINDS
# What an accelerator is, which picks the training stack `plan` assumes when no --engine is
# given (engines.DEFAULT_ENGINES): GPUs run megatron's, TPUs MaxText's.
KINDS = ("gpu", "tpu")

ACCELERATOR_FIELDS: dict[str, Any] = {
    "name": TEXT,
    "peak_tflops": PEAKS,
    # Under 2 GiB the CUDA context and the allocator's reserve leave nothing usable
    # (search.usable_memory).
    "memory_gib": Number("GiB", 1e6, low=2),
    "memory_bandwidth_gbs": Number("GB/s", 1e7, low=1e-3),
    "source": TEXT,
    # Dense FP16 tensor throughput accumulating in FP16, where the part runs that faster than
    # with FP32 accumulation (GeForce parts: twice); optional, the other parts list one rate.
    "fp16_accumulate_tflops": Number("TFLOP/s", 1e6, low=1e-3),
    # gpu (left out) or tpu.
    "kind": KIND,
}
SYSTEM_FIELDS: dict[str, Any] = {
    "accelerator": TEXT,
    "name": TEXT,
    "gpus_per_node": Number("accelerators", MAX_GPUS_PER_NODE, whole=True),
    "intra_node_gbs": Number("GB/s", 1e7, low=1e-3),
    "inter_node_gbs": Number("GB/s", 1e7, low=1e-3),
    "intra_node_latency_us": Number("µs", 1e6, zero_ok=True),
    "inter_node_latency_us": Number("µs", 1e6, zero_ok=True),
    "source": TEXT,
    # Between an accelerator and its host's memory, each way (what activation offloading
    # moves): optional, since few plans need it and few spec sheets print it per accelerator.
    "host_link_gbs": Number("GB/s", 1e7, low=1e-3),
    # The network above the nodes (optional; left out, a non-blocking fat tree): how many
    # nodes share a leaf switch (a rail-optimised fabric's rail group, DGX SuperPOD's scalable
    # unit), and the leaf's oversubscription, its links down over its links up.
    "nodes_per_switch": Number("nodes", 1e7, whole=True),
    "oversubscription": Number("× (down:up)", 1e3, low=1),
}
OPTIONAL = {
    "host_link_gbs",
    "nodes_per_switch",
    "oversubscription",
    "fp16_accumulate_tflops",
    "kind",
}
# A million TFLOP/s: far above any chip (B200: 4,500 at FP8); a GFLOP/s at least.
PEAK = Number("TFLOP/s", 1e6, low=1e-3)


class _File:
    """One catalogue file's data and the place of each value in it, for the messages."""

    def __init__(self, data: Any, locations: dict, name: str) -> None:
        self.data, self.locations, self.name = data, locations, name

    def error(self, message: str, path: YamlPath, hint: str | None = None) -> SpecError:
        location = self.locations.get(path) or self.locations.get(())
        # A path ending in KEY locates the key itself; the field it names is the path before.
        shown = path[:-1] if path and path[-1] == KEY else path
        return SpecError(message, location=location, path=format_path(shown) or None, hint=hint)

    def text(self, value: Any, path: YamlPath) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"expected text, got {_words(value)}", path)
        return value

    def number(self, value: Any, rule: Number, path: YamlPath) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"expected a number of {rule.unit}, got {_words(value)}", path)
        # Echoed shortened: an integer of YAML may have thousands of digits.
        shown = shortened(repr(value), 30)
        if rule.whole and not isinstance(value, int):
            raise self.error(f"expected a whole number of {rule.unit}, got {shown}", path)
        # A float may be inf or nan; an int is finite at any size (and too large for isfinite).
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(f"expected a finite number of {rule.unit}, got {shown}", path)
        if value < 0 or (value == 0 and not rule.zero_ok):
            least = "zero or more" if rule.zero_ok else "above zero"
            raise self.error(f"expected {least} {rule.unit}, got {shown}", path)
        if value < rule.low:
            raise self.error(f"{shown} {rule.unit} is under the least of {rule.low:g}", path)
        if value > rule.high:
            raise self.error(f"{shown} {rule.unit} is over the limit of {rule.high:g}", path)
        return value

    def kind(self, value: Any, path: YamlPath) -> str:
        if value not in KINDS:
            shown = shortened(repr(value), 30) if isinstance(value, str) else _words(value)
            raise self.error(f"expected one of {', '.join(KINDS)}, got {shown}", path,
                             hint=did_you_mean(str(value), KINDS))  # fmt: skip
        return value

    def mapping(self, value: Any, path: YamlPath, what: str) -> dict:
        if not isinstance(value, dict):
            raise self.error(f"{what} must be a mapping, got {_words(value)}", path)
        return value

    def entry(self, value: Any, fields: dict[str, Any], path: YamlPath, what: str) -> dict:
        """An accelerator's or a system's fields, each checked."""
        value = self.mapping(value, path, what)
        for key in value:
            if key not in fields:
                raise self.error(
                    f"{what} has an unknown field '{key}'",
                    (*path, key, KEY) if (*path, key, KEY) in self.locations else (*path, key),
                    hint=did_you_mean(key, fields) or f"its fields: {', '.join(fields)}",
                )
        missing = [f for f in fields if f not in value and f not in OPTIONAL]
        if missing:
            raise self.error(
                f"{what} lacks {', '.join(missing)}",
                path,
                hint="every number needs its `source`" if "source" in missing else None,
            )
        out = {}
        for key, rule in fields.items():
            at = (*path, key)
            if key not in value:  # an optional field left out
                continue
            if rule is TEXT:
                out[key] = self.text(value[key], at)
            elif rule is KIND:
                out[key] = self.kind(value[key], at)
            elif rule is PEAKS:
                peaks = self.mapping(value[key], at, "peak_tflops (TFLOP/s by dtype)")
                if not peaks:
                    raise self.error("peak_tflops lists no dtype", at)
                out[key] = {
                    self.text(dtype, at): self.number(v, PEAK, (*at, dtype))
                    for dtype, v in peaks.items()
                }
            else:
                out[key] = self.number(value[key], rule, at)
        return out


def _words(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"true/false ({value})"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return f"{type(value).__name__} {value!r}"


def read_catalogue(
    path: Path | None, known: Iterable[str] = ()
) -> tuple[dict[str, dict], dict[str, dict]]:
    """The accelerators and systems of one catalogue file (None: the built-in one), every field
    checked, each system's accelerator among `known` (earlier files') or this file's:
    (accelerators by key, systems by key), as plain field mappings."""
    if path is None:
        from importlib import resources

        text = resources.files("archspec.plan").joinpath("systems.yaml").read_text()
        file = _File(*load_yaml_text(text, "systems.yaml"), "systems.yaml")
    else:
        file = _File(*load_yaml_file(Path(path), "a hardware catalogue"), str(path))
    data = file.data if file.data is not None else {}
    data = file.mapping(data, (), "a hardware catalogue")
    for key in data:
        if key not in ("accelerators", "systems"):
            raise file.error(
                f"unknown section '{key}': a catalogue has `accelerators:` and `systems:`",
                (key, KEY) if (key, KEY) in file.locations else (key,),
                hint=did_you_mean(key, ("accelerators", "systems")),
            )
    found: list[dict[str, dict]] = []
    for section, fields, what in (
        ("accelerators", ACCELERATOR_FIELDS, "accelerator"),
        ("systems", SYSTEM_FIELDS, "system"),
    ):
        entries = data.get(section)
        entries = {} if entries is None else file.mapping(entries, (section,), section)
        found.append({
            file.text(key, (section,)): file.entry(e, fields, (section, key), f"{what} '{key}'")
            for key, e in entries.items()
        })  # fmt: skip
    accelerators, systems = found
    for key, a in accelerators.items():
        # An FP16-accumulate rate is the faster one, or it has no reason to be listed.
        acc16, fp16 = a.get("fp16_accumulate_tflops"), a["peak_tflops"].get("fp16")
        if acc16 is not None and (fp16 is None or acc16 < fp16):
            raise file.error(
                f"accelerator '{key}': fp16_accumulate_tflops ({acc16:g}) is for a part whose "
                "FP16 tensor rate accumulating in FP16 exceeds its fp16 peak (FP32 accumulate)",
                ("accelerators", key, "fp16_accumulate_tflops"),
                hint="list peak_tflops.fp16 at or under it"
                if fp16 is not None
                else "peak_tflops lists no fp16",
            )
    names = {*known, *accelerators}
    for key, system in systems.items():
        if system["accelerator"] not in names:
            raise file.error(
                f"system '{key}' names an unknown accelerator '{system['accelerator']}'",
                ("systems", key, "accelerator"),
                hint=did_you_mean(system["accelerator"], names),
            )
    return accelerators, systems
