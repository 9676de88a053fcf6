"""The hardware catalogue: accelerators, and the nodes and networks they come in.

The built-in catalogue is package data (systems.yaml); `--system FILE` adds entries in the same
format, replacing built-in ones of the same name. Every entry needs its `source`; every file is
read and checked by catalogue_file.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from archspec.errors import SpecError, did_you_mean
from archspec.plan.catalogue_file import read_catalogue

GIB = 2**30


@dataclass(frozen=True)
class Accelerator:
    key: str
    name: str
    peak_tflops: dict[str, float]  # dense, per dtype
    memory_gib: float
    memory_bandwidth_gbs: float
    source: str
    # Dense FP16 tensor TFLOP/s accumulating in FP16 where that is faster than the fp16 peak
    # (which accumulates in FP32): None where the part lists one rate.
    fp16_accumulate_tflops: float | None = None
    kind: str = "gpu"  # or "tpu" (catalogue_file.KINDS)

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


# Parts with another part's tensor cores and clocks (systems.yaml's sources say so): a matmul
# reaches the same share of their peak, so they take its fitted plateaus (engines.py) and its
# GEMM half-size (roofline.half_size). The H100 96GB of Meta's Grand Teton has the SXM's tensor
# cores under a 500 W limit (systems.yaml): what the limit costs is left to the plateau fitted
# on the runs of both. The MI325X is the MI300X's CDNA 3 compute (the same 304 compute units
# and peaks) with more and faster HBM (systems.yaml's sources). Blackwell Ultra (B300, GB300)
# lists the dense BF16 and FP8 rates of the Blackwell part it follows (B200, GB200) but is new
# silicon at a higher power limit, and NeMo's runs on both do not reach the same share of them
# (docs/plan.md): it is no twin, and takes plateaus of its own.
SAME_TENSOR_CORES = {"h200": "h100-sxm", "h800": "h100-sxm", "h100-96g": "h100-sxm",
                     "a100-40g": "a100-80g", "mi325x": "mi300x"}  # fmt: skip


def tensor_core_twin(key: str) -> str:
    """The catalogue key of the part whose tensor cores and clocks this one has (its own key
    where it is that part)."""
    return SAME_TENSOR_CORES.get(key, key)


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
    # GB/s each way between an accelerator and its host's memory; None where the catalogue
    # has no figure (activation offloading is then refused, naming the field).
    host_link_gbs: float | None = None
    # The network above the nodes (collectives.py): nodes under one leaf switch, and the
    # leaf's links down over its links up; None and 1: a non-blocking fat tree.
    nodes_per_switch: int | None = None
    oversubscription: float = 1.0


@cache
def _built_in() -> tuple[dict[str, dict], dict[str, dict]]:
    """The built-in catalogue, read and checked once: every plan reads it (a tenth of a second
    each time), and nothing changes it while archspec runs. Its entries are only read."""
    return read_catalogue(None)


def _entries(extra: list[Path] | None) -> tuple[dict[str, Accelerator], dict[str, dict]]:
    """Accelerators and raw system entries: the built-in catalogue, then each `--system FILE`
    over it, each file read and checked by catalogue_file.py."""
    accels: dict[str, Accelerator] = {}
    systems: dict[str, dict] = {}
    for path in [None, *(extra or [])]:
        file_accels, file_systems = _built_in() if path is None else read_catalogue(path, accels)
        for key, a in file_accels.items():
            accels[key] = Accelerator(
                key,
                a["name"],
                {dtype: float(v) for dtype, v in a["peak_tflops"].items()},
                float(a["memory_gib"]),
                float(a["memory_bandwidth_gbs"]),
                a["source"],
                a.get("fp16_accumulate_tflops"),
                a.get("kind", "gpu"),
            )
        systems.update(file_systems)
    return accels, systems


def load_accelerators(extra: list[Path] | None = None) -> dict[str, Accelerator]:
    """The built-in accelerators by key, those no system names included (bench's MFU reads
    them), then each `--system FILE`'s over them."""
    return _entries(extra)[0]


def load_catalogue(extra: list[Path] | None = None) -> dict[str, System]:
    """Systems by name: the built-in catalogue, then each `--system FILE` over it."""
    accels, systems = _entries(extra)
    out = {}
    for key, entry in systems.items():
        fields = {f: v for f, v in entry.items() if f != "accelerator"}
        out[key] = System(key=key, accelerator=accels[entry["accelerator"]], **fields)
    return out


# Common spellings of the catalogue's names (one scheme: vendor part, form factor, memory where
# parts differ only in it). Looked up after lower-casing and turning spaces and underscores
# into hyphens, with a leading vendor or brand ("nvidia-", "amd-", "geforce-") dropped; a name
# that differs from one of these only in its hyphens ("rtx4090", "tpuv5p") is that one.
ALIASES = {
    "h100": "h100-sxm", "h100-80g": "h100-sxm", "h100-80gb": "h100-sxm", "h100-sxm5": "h100-sxm",
    "h100-sxm5-80gb": "h100-sxm", "h100-sxm-80gb": "h100-sxm", "dgx-h100": "h100-sxm",
    "a100": "a100-80g", "a100-80gb": "a100-80g", "a100-sxm4-80gb": "a100-80g",
    "a100-sxm-80gb": "a100-80g", "a100-40gb": "a100-40g", "a100-sxm4-40gb": "a100-40g",
    "dgx-a100": "a100-80g", "h200-sxm": "h200", "h200-141g": "h200", "hgx-h200": "h200",
    "b200-180g": "b200", "dgx-b200": "b200", "hgx-b200": "b200", "gb200": "gb200-nvl72",
    "dgx-b300": "b300", "hgx-b300": "b300", "b300-270g": "b300",
    "gb300": "gb300-nvl72",
    "instinct-mi300x": "mi300x", "h800-sxm": "h800", "h800-80g": "h800",
}  # fmt: skip


def canonical_name(name: str, catalogue: dict[str, Any]) -> str:
    """The catalogue's name for `name` as written, or a common spelling of it."""
    if name in catalogue:
        return name
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    for prefix in ("nvidia-", "amd-", "geforce-"):
        key = key.removeprefix(prefix)
    if key in catalogue:
        return key
    unhyphenated = {k.replace("-", ""): k for k in catalogue}
    unhyphenated |= {k.replace("-", ""): v for k, v in ALIASES.items() if v in catalogue}
    return ALIASES.get(key) or unhyphenated.get(key.replace("-", ""), name)


def get_system(name: str, extra: list[Path] | None = None) -> System:
    catalogue = load_catalogue(extra)
    name = canonical_name(name, catalogue)
    if name not in catalogue:
        raise SpecError(
            f"unknown system '{name}'",
            hint=did_you_mean(name, catalogue) or "see `archspec plan --list-systems`",
        )
    return catalogue[name]


def device_alone(key: str, accelerator: Accelerator) -> System:
    """One accelerator on its own, with no links: what a single device trains or serves on
    (nothing is exchanged, so no node or network figure is needed)."""
    return System(key, accelerator.name, accelerator, 1, 0.0, 0.0, 0.0, 0.0,
                  f"one device alone: {accelerator.source}")  # fmt: skip


def lone_devices(extra: list[Path] | None = None) -> dict[str, System]:
    """Each accelerator no system holds, as one device alone (what `--gpu` plans on for one)."""
    held = {s.accelerator.key for s in load_catalogue(extra).values()}
    return {k: device_alone(k, a) for k, a in load_accelerators(extra).items() if k not in held}


def system_or_device(name: str, extra: list[Path] | None = None, gpus: int = 1) -> System:
    """The system of that name; or, for an accelerator no system holds (an RTX 4090, a V100),
    that one device alone, when one is all the plan asks for. More than one needs the links
    between them, which only a system (a node and its network) gives."""
    try:
        return get_system(name, extra)
    except SpecError:
        accels = load_accelerators(extra)
        key = canonical_name(name, accels)  # "RTX 4090" is rtx-4090, as "H100" is h100-sxm
        if key not in accels:
            known = {**load_catalogue(extra), **accels}
            raise SpecError(
                f"unknown system or accelerator '{name}'",
                hint=did_you_mean(key, known) or "see `archspec plan --list-systems`",
            ) from None
        if gpus > 1:
            raise SpecError(
                f"--gpus {gpus} on {key}: the catalogue has this accelerator but no system "
                "(node and network) holding it, and more than one device needs the links "
                "between them",
                hint="plan one device (--gpus 1), or describe the cluster in a --system FILE "
                "(docs/plan.md, 'The hardware catalogue')",
            ) from None
        return device_alone(key, accels[key])


def with_node_size(system: System, node_size: int | None, gpus: int = 1) -> System:
    """The system with nodes of `node_size` accelerators: a TPU slice of fewer chips than the
    catalogue's node (slices join over the data-center network), a partition of a larger
    NVLink domain. A node is never made larger than the catalogue's."""
    if node_size is None:
        return system
    if node_size < 1:
        raise SpecError(f"--node-size must be at least 1 (got {node_size:,})")
    if node_size > system.gpus_per_node:
        raise SpecError(
            f"--node-size {node_size}: {system.key}'s nodes hold {system.gpus_per_node} "
            "accelerators",
            hint="a node can be given smaller than the catalogue's (1 to "
            f"{system.gpus_per_node}), not larger: a larger one is another system (--system)",
        )
    if gpus > node_size and gpus % node_size:
        raise SpecError(
            f"--gpus {gpus} is not a whole number of nodes of --node-size {node_size}",
            hint="give accelerators in whole nodes, or fewer than one node",
        )
    return replace(system, gpus_per_node=node_size)


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
            "fp16_accumulate_tflops": a.fp16_accumulate_tflops,
            "kind": a.kind,
            "memory_gib": a.memory_gib,
            "memory_bandwidth_gbs": a.memory_bandwidth_gbs,
            "gpus_per_node": s.gpus_per_node,
            "intra_node_gbs": s.intra_node_gbs,
            "inter_node_gbs": s.inter_node_gbs,
            "host_link_gbs": s.host_link_gbs,
            "nodes_per_switch": s.nodes_per_switch,
            "oversubscription": s.oversubscription,
            "accelerator_source": a.source,
            "system_source": s.source,
        })  # fmt: skip
    return rows
