"""What `archspec plan` is asked: its options checked (one clear message each, before any
work), turned into a training run or a given layout, and the answer assembled as a report."""

from __future__ import annotations

from math import isfinite
from pathlib import Path
from typing import Any

from archspec.backends.count.conventions import NO_RECOMPUTE
from archspec.backends.count.op_checkpoint import PLAN_RECOMPUTE
from archspec.backends.count.recompute_modules import CORE_ATTN, is_selective, selective
from archspec.backends.count.replay import CHECKPOINTS
from archspec.errors import SpecError, did_you_mean
from archspec.ir.nodes import IR
from archspec.plan.dispatch import DISPATCHERS
from archspec.plan.engines import DEFAULT_ENGINES, get_engine
from archspec.plan.hardware import System, system_or_device
from archspec.plan.mtp import check_mtp_layers
from archspec.plan.recompute_block import block_layers, is_full
from archspec.plan.search import SearchResult, usable_memory
from archspec.plan.step import Training, folds

# A given layout's options left out take these values (a search tries them all instead).
LAYOUT_DEFAULTS = {"tp": 1, "pp": 1, "interleave": 1, "sp": False, "micro_batch": 1,
                   "recompute": NO_RECOMPUTE, "zero": 0, "cp": 1,
                   "stage_layers": None, "ep": 1, "dp_replicate": 1,
                   "offload_layers": 0, "etp": None}  # fmt: skip

# The block-scaled formats the published tables name (NeMo's "MXFP8", "NVFP4"): MXFP8's
# matmuls run at the fp8 rate and are timed as fp8 (its per-block scales not counted, as
# docs/plan.md says); NVFP4's four-bit matmuls are not modelled.
BLOCK_SCALED = {
    "mxfp8": "MXFP8 (fp8 with a scale per 32 elements) is timed as --dtype fp8",
    "nvfp4": "NVFP4 (four-bit floats with block scales) is not modelled",
    "fp4": "four-bit floating-point matmuls (NVFP4, MXFP4) are not modelled",
    "mxfp4": "MXFP4 (four-bit floats with block scales) is not modelled",
}


# Whose activations the memory model counts, by the engine's kernels (fit.MemoryModel).
KEPT_BY = {
    "pytorch": "what the generated PyTorch code keeps; fused kernels keep less",
    "transformer_engine": "what Megatron-Core's Transformer Engine layers keep",
}


def checked_system(
    spec: str | None, gpu: str | None, system_files: list[Path] | None, mode: str, attn: str,
    dtype: str, gpus: int,
) -> System:  # fmt: skip
    """The system to plan on, once the options that need no spec are checked."""
    if spec is None:
        raise SpecError("give a spec (see `archspec list`), or --list-systems")
    if gpu is None:
        raise SpecError("--gpu names the system to plan on", hint="see --list-systems")
    if mode not in ("train", "serve"):
        raise SpecError(f"--mode takes train or serve (got '{mode}')",
                        hint=did_you_mean(mode, ("train", "serve")))  # fmt: skip
    if mode == "serve":  # one device of any accelerator serves: no system needed
        from archspec.plan.serve_engine import serving_system

        system = serving_system(gpu, system_files)
    else:  # one device of any accelerator trains alone; more need a system's links
        system = system_or_device(gpu, system_files, gpus)
    if attn not in ("flash", "eager"):
        raise SpecError(f"--attn takes flash or eager (got '{attn}')",
                        hint=did_you_mean(attn, ("flash", "eager")))  # fmt: skip
    served = ("int8", "int4") if mode == "serve" else ()
    dtypes = ("bf16", "fp16", "fp32", "fp8", *served)
    if dtype not in dtypes:
        also = ", or int8, int4 when serving" if mode == "train" else ", int8, int4"
        hint = BLOCK_SCALED.get(dtype.lower()) or did_you_mean(dtype, dtypes)
        raise SpecError(f"--dtype takes bf16, fp16, fp32, fp8{also} (got '{dtype}')", hint=hint)
    if dtype == "fp8" and "fp8" not in system.accelerator.peak_tflops:
        raise SpecError(
            f"--dtype fp8: {system.key} has no fp8 throughput in the catalogue",
            hint=f"it lists: {', '.join(system.accelerator.peak_tflops)}",
        )
    if gpus < 1:
        raise SpecError("--gpus must be at least 1")
    return system


def training_run(
    ir: IR, gpus: int, global_batch: int | None, seq: int | None, dtype: str,
    grad_dtype: str | None, attn: str, top: int = 1, engine: str | None = None,
    async_tp: bool = False, fp8_all_gather: bool = False, checkpoint: str | None = None,
    ep_dispatch: str | None = None, moe_imbalance: float | None = None,
    attn_kernel: str | None = None, accelerator: str | None = None, mtp_layers: int = 0,
    accelerator_kind: str = "gpu",
) -> Training:  # fmt: skip
    """The training run the options describe: the sequence length defaults to the context;
    gradients default to the dtype (bf16 under fp8, whose weights and gradients stay bf16);
    the engine to the accelerator kind's stack, megatron's on GPUs and MaxText's on TPUs
    (engines.DEFAULT_ENGINES; one --engine option serves both modes, so None means default);
    --async-tp is torchtitan's (engines.with_async_tp), so --engine fsdp's, and so is
    --fp8-all-gather (fp8_comm.py), which gathers float8 weights: --dtype fp8's."""
    from archspec.backends.count.memory import GRAD_BYTES

    engine = engine or DEFAULT_ENGINES[accelerator_kind]
    get_engine(engine)
    if async_tp and engine != "fsdp":
        raise SpecError(
            f"--async-tp is torchtitan's async tensor parallelism (--engine fsdp); --engine "
            f"{engine} " + ("overlaps its tensor-parallel collectives already" if
                            get_engine(engine).overlap_tp else "has no such overlap")
        )  # fmt: skip
    if fp8_all_gather and (engine != "fsdp" or dtype != "fp8"):
        raise SpecError(
            "--fp8-all-gather is torchtitan's FSDP float8 all-gather of the Float8Linear weights: "
            f"it needs --engine fsdp and --dtype fp8 (got --engine {engine}, --dtype {dtype})"
        )
    if checkpoint is not None and checkpoint not in CHECKPOINTS:
        raise SpecError(f"--checkpoint takes one of: {', '.join(CHECKPOINTS)}",
                        hint=did_you_mean(checkpoint, CHECKPOINTS))  # fmt: skip
    if ep_dispatch is not None and ep_dispatch not in DISPATCHERS:
        raise SpecError(f"--ep-dispatch takes one of: {', '.join(DISPATCHERS)}",
                        hint=did_you_mean(ep_dispatch, DISPATCHERS))  # fmt: skip
    if moe_imbalance is not None and not (isfinite(moe_imbalance) and moe_imbalance >= 1):
        raise SpecError(
            f"--moe-imbalance is the busiest expert-parallel rank's routed rows over the mean, "
            f"at least 1 (got {moe_imbalance}): 1 is perfectly even routing"
        )
    if top < 1:
        raise SpecError(f"--top must be at least 1 (got {top}): the layouts a search shows")
    check_attn_kernel(attn_kernel, attn, accelerator)
    check_mtp_layers(mtp_layers, ir)

    if global_batch is None:
        raise SpecError("--global-batch (sequences per optimizer step) is needed to train")
    if global_batch < 1:
        raise SpecError("--global-batch must be at least 1")
    grad_dtype = grad_dtype or (dtype if dtype in GRAD_BYTES else "bf16")
    if grad_dtype not in GRAD_BYTES:
        raise SpecError(f"--grad-dtype takes {', '.join(GRAD_BYTES)} (got '{grad_dtype}')",
                        hint=did_you_mean(grad_dtype, GRAD_BYTES))  # fmt: skip
    seq = seq if seq is not None else ir.value(ir.root.max_seq_len)
    if seq < 1:
        raise SpecError("--seq must be at least 1")
    return Training(gpus, global_batch, seq, dtype, grad_dtype, attn, engine, async_tp,
                    fp8_all_gather, checkpoint, ep_dispatch or "fused",
                    moe_imbalance, attn_kernel or "fa2", mtp_layers)  # fmt: skip


def check_attn_kernel(kernel: str | None, attn: str, accelerator: str | None) -> None:
    """--attn-kernel: fa2 or cudnn, a fused kernel (so --attn flash), and cuDNN's only on a
    part with an H100's tensor cores, where its throughput was measured."""
    from archspec.plan.attention_kernels import KERNELS, measured_on

    if kernel is None:
        return
    if kernel not in KERNELS:
        raise SpecError(f"--attn-kernel takes one of: {', '.join(KERNELS)} (got '{kernel}')",
                        hint=did_you_mean(kernel, KERNELS))  # fmt: skip
    if attn != "flash":
        raise SpecError(f"--attn-kernel {kernel} names a fused kernel: it needs --attn flash "
                        f"(got --attn {attn})")  # fmt: skip
    if kernel == "cudnn" and accelerator is not None and not measured_on(accelerator):
        raise SpecError(
            f"--attn-kernel cudnn: cuDNN's fused attention was measured on an H100 only, and "
            f"{accelerator} does not have its tensor cores",
            hint="--attn-kernel fa2 (the default) times the GEMM rule on any part",
        )


def recompute_setting(recompute: str | None, modules: str | None, run: Training) -> str | None:
    """--recompute with --recompute-modules as one setting (`selective:layernorm,moe_act`):
    the modules need selective recomputation, and beyond the attention core Transformer
    Engine's layers (the nemo engine), whose norms and fused activation they free."""
    if recompute is not None and recompute not in PLAN_RECOMPUTE and not block_layers(recompute):
        raise SpecError(f"--recompute takes one of: {', '.join(PLAN_RECOMPUTE)}, or full:N",
                        hint=did_you_mean(recompute, PLAN_RECOMPUTE))  # fmt: skip
    if modules is None:
        return recompute
    if recompute not in (None, "selective"):
        raise SpecError(f"--recompute-modules selects what --recompute selective replays; "
                        f"with --recompute {recompute} it has no meaning")  # fmt: skip
    setting = selective([m.strip() for m in modules.split(",") if m.strip()])
    if setting != "selective" and get_engine(run.engine).kernels != "transformer_engine":
        beyond = ", ".join(m for m in setting.split(":")[1].split(",") if m != CORE_ATTN)
        raise SpecError(
            f"--recompute-modules {beyond}: Megatron-Core's output-discarding recomputation of "
            f"Transformer Engine's layers, which --engine {run.engine} does not run",
            hint="--engine nemo",
        )
    return setting


def given_layout(
    ir: IR, system: System, run: Training, given: dict[str, Any]
) -> dict[str, list] | None:
    """The one layout the layout options give, as the search's `only`; None when no layout
    option was given (search them all)."""
    if all(v is None for v in given.values()):
        return None
    if given.get("stage_layers") is not None:
        from archspec.backends.count.stages import read_stage_layers

        given = {**given, "stage_layers": read_stage_layers(given["stage_layers"])}
    only = {k: [v if v is not None else LAYOUT_DEFAULTS[k]] for k, v in given.items()}
    check_given_layout(ir, system, run, only)
    return only


def check_stage_layers(ir: IR, pp: int, interleave: int, stage_layers: tuple[int, ...]) -> None:
    """The stages checked as count and bench check them. Interleaved, each stage's layers are
    dealt into `interleave` chunks, where the first stage's first chunk may hold the embedding
    alone and the last stage's last chunk the head alone (Llama 3's 405B run: 7, 8 × 14, 7
    layers over 16 stages of 8 chunks, Section 3.3.2 of the paper), so a stage needs at least
    as many layers as chunks, one fewer at either end."""
    from archspec.backends.count import stages
    from archspec.backends.count.layout import layer_count

    layers = sum(layer_count(s, ir) for s in ir.root.stacks)
    stages.check_stage_layers(stage_layers, pp, layers)
    for i, n in enumerate(stage_layers):
        slots = n + (i == 0) + (i == len(stage_layers) - 1)
        if slots < interleave:
            raise SpecError(
                f"--stage-layers: stage {i} holds {n} layers, too few for --interleave "
                f"{interleave} chunks",
                hint="each chunk holds at least one layer (the first and last stages' end "
                "chunks may hold the embedding or the head alone)",
            )


def check_given_layout(ir: IR, system: System, run: Training, only: dict[str, list]) -> None:
    """One clear message for a layout that cannot be: what the search would skip quietly."""
    from archspec.backends.count.layout import Parallelism, check_layout
    from archspec.backends.count.recompute_modules import check_modules
    from archspec.backends.count.split_checks import check_context_split

    for degree in ("tp", "pp", "cp", "ep", "interleave"):
        if only[degree][0] < 1:
            raise SpecError(f"--{degree} must be at least 1 (got {only[degree][0]})")
    tp, pp = only["tp"][0], only["pp"][0]
    cp, stage_layers = only["cp"][0], only["stage_layers"][0]
    engine = get_engine(run.engine)
    check_context_split(ir, cp, run.seq)
    check_modules(ir, only["recompute"][0] or "")
    if run.gpus % (tp * pp * cp):
        raise SpecError(f"--gpus {run.gpus} is not a multiple of --tp {tp} × --pp {pp} × "
                        f"--cp {cp}")  # fmt: skip
    if only["interleave"][0] > 1 and not engine.interleave:
        raise SpecError(f"--engine {engine.name} has no interleaved pipeline schedule: "
                        f"--interleave {only['interleave'][0]} cannot run")  # fmt: skip
    if stage_layers is not None:
        check_stage_layers(ir, pp, only["interleave"][0], stage_layers)
    check_expert_tp(ir, run.gpus, tp, pp, cp, only["ep"][0], only["etp"][0], only["sp"][0],
                    only["dp_replicate"][0])  # fmt: skip
    if run.async_tp and (tp == 1 or not only["sp"][0]):
        raise SpecError(
            f"--async-tp overlaps the sequence-parallel all-gathers and reduce-scatters with "
            f"the matmuls: it needs --tp above 1 and --sp (got --tp {tp}"
            + ("" if only["sp"][0] else ", no --sp")
            + ")"
        )
    if run.fp8_all_gather and only["zero"][0] < 2:
        raise SpecError(
            f"--fp8-all-gather gathers the weights FSDP shards: it needs --zero 2 or 3 (got "
            f"--zero {only['zero'][0]})"
        )
    if (only["recompute"][0] not in PLAN_RECOMPUTE and not is_selective(only["recompute"][0])
            and not block_layers(only["recompute"][0])):  # fmt: skip
        raise SpecError(f"--recompute takes one of: {', '.join(PLAN_RECOMPUTE)}",
                        hint=did_you_mean(only["recompute"][0], PLAN_RECOMPUTE))  # fmt: skip
    if only["micro_batch"][0] < 1:
        raise SpecError("--batch must be at least 1")
    check_offload(ir, system, run, only)
    # count's layout takes ep over the data-parallel ranks; folded (--etp 1), check_expert_tp
    # has checked it over tp × cp × dp.
    folded = folds(tp, only["ep"][0], only["etp"][0])
    par = Parallelism(run.gpus, tp, pp, only["zero"][0], only["sp"][0],
                      only["interleave"][0], cp=cp, ep=1 if folded else only["ep"][0],
                      dp_replicate=only["dp_replicate"][0])  # fmt: skip
    if tp > system.gpus_per_node:
        raise SpecError(
            f"--tp {tp} spans more than one node of {system.gpus_per_node} accelerators",
            hint="Megatron-LM keeps a tensor-parallel group inside a node",
        )
    if stage_layers is None:
        check_layout(ir, par)
    else:  # the heads, the kv heads and the MLP split by tp as count checks them
        check_layout(ir, Parallelism(tp, tp, 1, 0, par.sp))
    per_step = only["micro_batch"][0] * par.dp
    if run.global_batch % per_step:
        raise SpecError(
            f"--global-batch {run.global_batch} is not a whole number of micro-batches of "
            f"--batch {only['micro_batch'][0]} × {par.dp} data-parallel replicas"
        )
    m = run.global_batch // per_step
    if par.interleave > 1 and m % pp:
        raise SpecError(
            f"the interleaved schedule needs the {m} micro-batches per step to be a multiple "
            f"of --pp {pp}"
        )
    if pp > 1 and par.zero > engine.pipeline_zero:
        raise SpecError(
            f"--zero {par.zero} does not combine with pipeline parallelism (--pp) under "
            f"--engine {engine.name}",
            hint="Megatron-LM's distributed optimizer and DeepSpeed's pipelines shard only the "
            "optimizer states (--zero 1); FSDP keeps a stage's gathered weights through its "
            "micro-batches (--engine fsdp --zero 2)",
        )


def check_expert_tp(ir: IR, gpus: int, tp: int, pp: int, cp: int, ep: int, etp: int | None,
                    sp: bool, dp_replicate: int = 1) -> None:  # fmt: skip
    """--ep with --etp: the experts split over the tp ranks as the dense layers are (--etp
    the --tp, the default: ep groups of data-parallel ranks), or held whole (--etp 1: ep
    folded over tp × cp × dp, Megatron-Core's MoE parallel folding)."""
    from archspec.backends.count.split_checks import check_expert_split

    if etp is None or etp == tp:
        check_expert_split(ir, ep, gpus // (tp * pp * cp))
        return
    if etp != 1:
        raise SpecError(
            f"--etp {etp}: archspec splits the experts over 1 rank (each holds its experts "
            f"whole) or over the --tp {tp} ranks",
            hint="--etp 1, or leave it out (the --tp)",
        )
    check_expert_split(ir, ep)
    if ep > 1 and (gpus // pp) % ep:
        raise SpecError(
            f"--ep {ep} does not divide the {gpus // pp} ranks of a pipeline stage",
            hint="with --etp 1 the expert-parallel groups fold over tp × cp × dp",
        )
    if ep > 1 and not sp:
        raise SpecError(
            f"--etp 1 beside --tp {tp} needs --sp: each rank routes its 1/tp of the positions, "
            "as sequence parallelism leaves them"
        )
    if ep > 1 and dp_replicate > 1:
        raise SpecError("--etp 1 beside --tp folds ep over one data-parallel group: no "
                        f"--dp-replicate (got {dp_replicate})")  # fmt: skip


def check_offload(ir: IR, system: System, run: Training, only: dict[str, list]) -> None:
    """--offload-layers as Megatron-Core takes cpu_offloading_num_layers: under its engine
    (nemo: the schedule is Transformer Engine's, the other stacks offload otherwise or not at
    all), fewer than the model's layers, one stage, no recomputation
    (TransformerConfig.__post_init__ refuses the rest), and a host link the catalogue knows
    the bandwidth of."""
    from archspec.backends.count.layout import layer_count

    offload = only["offload_layers"][0]
    if offload == 0:
        return
    if run.engine != "nemo":
        raise SpecError(f"--offload-layers is Megatron-Core's activation offloading: it needs "
                        f"--engine nemo (got --engine {run.engine})")  # fmt: skip
    layers = sum(layer_count(s, ir) for s in ir.root.stacks)
    if not 0 < offload < layers:
        raise SpecError(f"--offload-layers takes 1 to {layers - 1} of the model's {layers} "
                        f"layers (got {offload})",
                        hint="Megatron-Core offloads fewer layers than the model has")  # fmt: skip
    if only["pp"][0] > 1:
        raise SpecError(f"--offload-layers {offload} with --pp {only['pp'][0]}: activation "
                        "offloading runs without pipeline stages, as Megatron-Core's")  # fmt: skip
    if only["recompute"][0] != NO_RECOMPUTE:
        raise SpecError(f"--offload-layers {offload} with --recompute {only['recompute'][0]}: "
                        "activation offloading keeps the activations it moves, and "
                        "Megatron-Core refuses it beside recomputation")  # fmt: skip
    if system.host_link_gbs is None:
        raise SpecError(
            f"--offload-layers: {system.key} has no host link bandwidth in the catalogue "
            "(host_link_gbs)",
            hint="give it in a --system file: the GB/s each way between an accelerator and "
            "its host's memory",
        )


def other_mode_options(options: dict[str, Any]) -> list[str]:
    """The options of the other mode given to a plan (training options to a serving plan,
    serving options to a training one), which change nothing there."""
    return [name for name, value in options.items() if value is not None]


def inert_checkpoint(checkpoint: str | None, recompute: str | None) -> str | None:
    """The note for a --checkpoint that changes nothing: it picks what full recomputation
    replays, and the given layout recomputes otherwise; None where it may matter."""
    if checkpoint is None or recompute is None or is_full(recompute):
        return None
    return f"ignored with --recompute {recompute}: --checkpoint (what full recomputation replays)"


def inert_expert_options(options: dict[str, Any], layout: dict[str, Any]) -> list[str]:
    """Of the options given that shape expert parallelism (--ep-dispatch, --moe-imbalance),
    those that change nothing: the layout has none."""
    if layout.get("ep", 1) > 1:
        return []
    return [name for name, value in options.items() if value is not None]


def checked_what_if(
    tokens: str | None, price: float | None, mfu: float | None, efficiency: float | None
) -> dict[str, Any]:
    """--tokens, --price, --mfu and --efficiency, checked before any work."""
    from archspec.plan.whatif import check_fraction, check_price, parse_tokens

    check_fraction("--mfu", mfu)
    check_fraction("--efficiency", efficiency)
    check_price(price, tokens)
    if mfu is not None and efficiency is not None:
        raise SpecError("--mfu and --efficiency are two what-ifs of one thing: give one")
    return {"tokens": parse_tokens(tokens) if tokens is not None else None, "price": price,
            "mfu": mfu, "efficiency": efficiency}  # fmt: skip


def efficiency_override(system: System, run: Training, efficiency: float | None):
    """The stack's fitted efficiencies, with --efficiency as the matmul plateau if given."""
    from dataclasses import replace

    if efficiency is None:
        return None
    fitted = get_engine(run.engine).efficiency(system.accelerator.key)
    return replace(fitted, matmul_peak=efficiency)


def training_report(
    ir: IR,
    system: System,
    run: Training,
    result: SearchResult,
    top: int,
    searching: bool,
    what_if: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The search's (or the given layout's) report; a clear message when nothing fits."""
    from archspec.plan.report import search_report

    usable = usable_memory(system.accelerator.memory_bytes)
    if not result.ranked:
        need = result.least_unfit
        if need is None:  # a given layout is checked before; a search always has some
            raise SpecError("no layout runs: " + "; ".join(result.dropped))
        raise SpecError(
            f"no layout fits: the leanest needs {need / 2**30:.1f} GiB per device; "
            f"{system.key} has {usable / 2**30:.1f} GiB usable",
            hint="more GPUs, a smaller micro-batch, recomputation or ZeRO shrink what a device "
            "holds",
        )
    from archspec.plan.whatif import training_time, with_mfu

    report = search_report(ir, system, run, result, top)
    report["searched"] = searching
    warnings = []
    if not report["fits"]:  # a given layout, timed though it does not fit
        warnings.append(
            f"the layout needs {report['memory']['total'] / 2**30:.1f} GiB per device; "
            f"{system.key} has {usable / 2**30:.1f} GiB usable: timed, but it would not "
            f"fit as archspec counts memory ({KEPT_BY[get_engine(run.engine).kernels]})"
        )
    what_if = what_if or {}
    if what_if.get("mfu") is not None:
        report = with_mfu(report, what_if["mfu"])
    if what_if.get("tokens") is not None:
        report["training"] = training_time(report, what_if["tokens"], what_if.get("price"))
    if what_if.get("mfu") is None and what_if.get("efficiency") is None:
        # A what-if is not the fitted model, whose errors the record holds.
        if record := track_record_of(ir, system, run):
            report["track_record"] = record.report()
    above = _above_the_peak(report, run)
    if above:
        warnings.append(above)
    if warnings:
        report["warning"] = "; ".join(warnings)
    return report


def track_record_of(ir: IR, system: System, run: Training):
    """The left-out errors of the published runs most like this one (track_record.py)."""
    from archspec.ir.nodes import MoE
    from archspec.ir.visit import walk
    from archspec.plan.hardware import tensor_core_twin
    from archspec.plan.track_record import training

    moe = any(isinstance(p.node, MoE) for p in walk(ir.root))
    return training(run.engine, tensor_core_twin(system.accelerator.key), moe, run.dtype == "fp8")


def _above_the_peak(report: dict[str, Any], run: Training) -> str | None:
    """Why the MFU or HFU shown is above 100%, where it is: the FLOPs' conventions (every
    query-key pair counted, fp8 against the bf16 peak) or a what-if's MFU that the layout's
    recomputation puts above the peak."""
    above = [name.upper() for name in ("mfu", "hfu") if report[name] > 1]
    if not above:
        return None
    which = f"{' and '.join(above)} above 100%"
    if "what_if" in report:
        return (f"{which}: --mfu {report['mfu']:g} with this layout's recomputation asks more "
                "FLOPs a second than the peak")  # fmt: skip
    if run.dtype == "fp8":
        return (f"{which}: an fp8 run's FLOPs count against the bf16 peak (only the "
                "projections run at fp8's; NeMo's model TFLOP/s read the same way)")  # fmt: skip
    if run.attn != "flash":
        return None  # a materialised attention computes every pair: no convention explains it
    return (f"{which}: the FLOPs count every query-key pair (Chowdhery et al. 2022, "
            "Appendix B), where a causal flash kernel computes half of them, and at "
            f"{run.seq:,} tokens attention is much of the step")  # fmt: skip
