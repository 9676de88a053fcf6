"""What `archspec count` is asked, turned into the report it prints: the options checked, the
workload they describe (if any), and the parameter, FLOP and memory figures put together."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from archspec.errors import SpecError, did_you_mean
from archspec.safety.limits import check_sizes

if TYPE_CHECKING:
    from archspec.ir.nodes import IR


def check_options(names: str, by: str | None) -> None:
    if names not in ("ours", "hf"):
        raise SpecError(f"--names takes ours or hf, not {names!r}",
                        hint=did_you_mean(names, ("ours", "hf")))  # fmt: skip
    if by not in (None, "module", "component"):
        raise SpecError(f"--by takes module (or component, the default), not {by!r}",
                        hint=did_you_mean(by, ("module", "component")))  # fmt: skip


def requested_workload(by: str | None = None, engine: str | None = None, **options: Any):
    """The workload the FLOP and memory options describe (`count`'s option names: batch, seq,
    ..., gpus, tp, ...), or None when none was given and `--by module` did not ask for one.
    A None option is one not given. Parameters alone import no formulas (sympy)."""
    parallel_names = (
        "gpus", "tp", "pp", "cp", "ep", "zero", "sp", "interleave", "stage_layers",
        "mixed_precision", "loss_parallel", "schedule", "dp_replicate",
    )  # fmt: skip
    given = {k: v for k, v in options.items() if k not in parallel_names}
    parallel = {k: options.get(k) for k in parallel_names} | {"engine": engine}
    for flag in ("mixed_precision", "loss_parallel"):  # off: not given
        parallel[flag] = parallel[flag] or None
    nothing_given = all(v is None for v in (*given.values(), *parallel.values()))
    if nothing_given and by != "module":
        return None
    from archspec.backends.count.flops_report import Workload
    from archspec.backends.count.memory import Parallelism

    if nothing_given:
        return Workload()  # --by module alone: at max_seq_len, as --seq would default
    if parallel["stage_layers"] is not None:  # checked against the model's layers later
        from archspec.backends.count.stages import read_stage_layers

        parallel["stage_layers"] = read_stage_layers(parallel["stage_layers"])
    check_sizes({f"--{option.replace('_', '-')}": value
                 for option, value in (*given.items(), *parallel.items())})  # fmt: skip
    par = Parallelism(**{k: v for k, v in parallel.items() if v is not None})
    return Workload(**{k: v for k, v in given.items() if v is not None}, parallel=par)


def params_report(ir: IR, symbolic: bool, names: str) -> dict:
    """The parameter report (what was asked is in it: the IR names its overrides), and with
    `--names hf` each row's module name in the transformers class."""
    from archspec.backends.count.report import param_report

    report = param_report(ir, symbolic=symbolic)
    if names == "hf":
        from archspec.hf.names import hf_module_names

        hf_names = hf_module_names(ir)
        for row in report["params"]["rows"]:
            row["hf_name"] = hf_names[row["name"]]
    return report


def add_costs(
    report: dict[str, Any], ir: IR, workload, lengths: list[int] | None, symbolic: bool,
    by: str | None,
) -> None:  # fmt: skip
    """FLOPs and memory into `report`: a `sweep` list for several lengths, else the one
    workload's figures; `--by module` adds each module's forward FLOPs."""
    if lengths is not None and len(lengths) > 1:
        from archspec.backends.compare.sweep import seq_sweep

        report["sweep"] = seq_sweep(ir, workload, lengths)
    elif workload is not None:
        from archspec.backends.count.flops_report import flops_report

        extra = flops_report(ir, workload, symbolic=symbolic)
        if "symbolic" in extra:
            report.setdefault("symbolic", {}).update(extra.pop("symbolic"))
        report.update(extra)
    if by == "module":
        from archspec.backends.count.by_module import module_flops
        from archspec.backends.count.conventions import get_convention

        conv = get_convention(workload.convention)
        report["flops_by_module"] = module_flops(ir, conv, workload.values(ir))
