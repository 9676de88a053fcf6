"""The hardware catalogue: accelerators, and the nodes and networks they come in.

The built-in catalogue is package data (systems.yaml); `--system FILE` adds entries in the same
format, replacing built-in ones of the same name. Every entry needs its `source`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from archspec.errors import SpecError, did_you_mean

GIB = 2**30


@dataclass(frozen=True)
class Accelerator:
    key: str
    name: str
    peak_tflops: dict[str, float]  # dense, per dtype
    memory_gib: float
    memory_bandwidth_gbs: float
    source: str

    def peak(self, dtype: str) -> float:
        """Dense peak in FLOP/s for a compute dtype (fp32 training uses fp32's, not TF32's)."""
        if dtype not in self.peak_tflops:
            raise SpecError(
                f"{self.key} has no {dtype} throughput in the catalogue",
                hint=f"it lists: {', '.join(self.peak_tflops)}",
            )
        return self.peak_tflops[dtype] * 1e12

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB

    @property
    def bandwidth(self) -> float:
        return self.memory_bandwidth_gbs * 1e9


@dataclass(frozen=True)
class System:
    key: str
    name: str
    accelerator: Accelerator
    gpus_per_node: int
    intra_node_gbs: float
    inter_node_gbs: float
    intra_node_latency_us: float
    inter_node_latency_us: float
    source: str


_ACCEL_FIELDS = ("name", "peak_tflops", "memory_gib", "memory_bandwidth_gbs", "source")
_SYSTEM_FIELDS = (
    "accelerator",
    "name",
    "gpus_per_node",
    "intra_node_gbs",
    "inter_node_gbs",
    "intra_node_latency_us",
    "inter_node_latency_us",
    "source",
)


def _read(text: str, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise SpecError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not set(data) <= {"accelerators", "systems"}:
        raise SpecError(f"{where}: expected a mapping with `accelerators:` and/or `systems:`")
    return data


def _check(entry: Any, fields: tuple[str, ...], what: str, where: str) -> None:
    if not isinstance(entry, dict):
        raise SpecError(f"{where}: {what} must be a mapping")
    missing = [f for f in fields if f not in entry]
    if missing:
        raise SpecError(
            f"{where}: {what} lacks {', '.join(missing)}",
            hint="every number needs its `source`" if "source" in missing else None,
        )
    unknown = [f for f in entry if f not in fields]
    if unknown:
        raise SpecError(f"{where}: {what} has unknown field(s) {', '.join(unknown)}")


def _entries(extra: list[Path] | None) -> tuple[dict[str, Accelerator], dict[str, dict]]:
    """Accelerators and raw system entries: the built-in catalogue, then each `--system FILE`
    over it."""
    texts = [(resources.files("archspec.plan").joinpath("systems.yaml").read_text(), "systems")]
    for path in extra or []:
        if not Path(path).is_file():
            raise SpecError(f"--system {path}: no such file")
        texts.append((Path(path).read_text(), str(path)))
    accels: dict[str, Accelerator] = {}
    systems: dict[str, dict] = {}
    for text, where in texts:
        data = _read(text, where)
        for key, a in (data.get("accelerators") or {}).items():
            _check(a, _ACCEL_FIELDS, f"accelerator '{key}'", where)
            accels[key] = Accelerator(
                key,
                a["name"],
                {k: float(v) for k, v in a["peak_tflops"].items()},
                float(a["memory_gib"]),
                float(a["memory_bandwidth_gbs"]),
                a["source"],
            )
        for key, entry in (data.get("systems") or {}).items():
            _check(entry, _SYSTEM_FIELDS, f"system '{key}'", where)
            systems[key] = entry
    return accels, systems


def load_accelerators() -> dict[str, Accelerator]:
    """The built-in accelerators by key, those no system names included (bench's MFU reads
    them)."""
    return _entries(None)[0]


def load_catalogue(extra: list[Path] | None = None) -> dict[str, System]:
    """Systems by name: the built-in catalogue, then each `--system FILE` over it."""
    accels, systems = _entries(extra)
    out = {}
    for key, entry in systems.items():
        if entry["accelerator"] not in accels:
            raise SpecError(f"system '{key}' names an unknown accelerator '{entry['accelerator']}'")
        fields = {f: entry[f] for f in _SYSTEM_FIELDS if f != "accelerator"}
        out[key] = System(key=key, accelerator=accels[entry["accelerator"]], **fields)
    return out


def get_system(name: str, extra: list[Path] | None = None) -> System:
    catalogue = load_catalogue(extra)
    if name not in catalogue:
        raise SpecError(
            f"unknown system '{name}'",
            hint=did_you_mean(name, catalogue) or "see `archspec plan --list-systems`",
        )
    return catalogue[name]


def catalogue_rows(catalogue: dict[str, System]) -> list[dict[str, Any]]:
    """`plan --list-systems --json`: one row per system, its accelerator's figures beside the
    node's, with both sources."""
    rows = []
    for key, s in catalogue.items():
        a = s.accelerator
        rows.append({
            "name": key,
            "accelerator": a.name,
            "peak_tflops": a.peak_tflops,
            "memory_gib": a.memory_gib,
            "memory_bandwidth_gbs": a.memory_bandwidth_gbs,
            "gpus_per_node": s.gpus_per_node,
            "intra_node_gbs": s.intra_node_gbs,
            "inter_node_gbs": s.inter_node_gbs,
            "accelerator_source": a.source,
            "system_source": s.source,
        })  # fmt: skip
    return rows
