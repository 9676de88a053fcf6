"""The dataset of published training runs (archspec/plan/published.yaml) and how far `archspec
plan` lands from each, fitted and cross-validated leaving one source out (docs/plan.md shows
the table; `python -m archspec.plan.published` prints it)."""

from __future__ import annotations

from statistics import mean

import pytest

from archspec.plan import published, track_record
from archspec.plan.engines import (
    ENGINES,
    FITTED_ATTENTION,
    FITTED_FP8,
    FITTED_HALF,
)
from archspec.plan.hardware import get_system, load_catalogue


def test_the_dataset_spans_sources_stacks_accelerators_and_precisions() -> None:
    data = published.dataset()
    runs = data.runs
    assert len(runs) >= 30
    assert len({r.source for r in runs}) >= 8
    assert len({data.sources[r.source]["stack"] for r in runs}) >= 4
    catalogue = load_catalogue()
    accelerators = {catalogue[r.system].accelerator.key for r in runs}
    assert {"a100-80g", "h100-sxm", "b200", "gb200"} <= accelerators
    assert {"bf16", "fp16", "fp8"} <= {r.dtype for r in runs}
    assert any(r.ep > 1 for r in runs)  # mixture-of-experts runs (Mixtral, Qwen3-30B-A3B)
    assert min(r.gpus for r in runs) == 8 and max(r.gpus for r in runs) >= 16384


def test_every_run_cites_a_source_that_says_where_it_was_read() -> None:
    data = published.dataset()
    for key, source in data.sources.items():
        assert source["cite"] and source["read"] and source["url"].startswith("https://"), key
    names = [r.name for r in data.runs]
    assert len(names) == len(set(names))
    for run in data.runs:
        assert run.source in data.sources and run.where, run.name
        assert run.model in data.models, run.name
        assert run.figure[0] in published.FIGURES and run.figure[1] > 0, run.name
        if run.figure[0] == "tflops_per_gpu":
            assert run.flops in ("megatron", "megatron-core", "palm", "maxtext"), run.name


def test_figures_convert_to_the_step_they_imply() -> None:
    run = next(r for r in published.dataset().runs if r.name == "MPT 7B, 8 A100, 2K")
    # 96 sequences of 2048 tokens at 4641 tokens/s on each of 8 GPUs.
    assert published.published_step(run, published.cands_ir(run)) == pytest.approx(
        96 * 2048 / (4641 * 8)
    )


def test_runs_that_cannot_be_expressed_say_why() -> None:
    for run in published.dataset().runs:
        if run not in published.expressible():
            assert run.not_expressible()


@pytest.mark.long  # about 15 minutes of one core: every run at every point of the fit's grid,
# then the fit over every run (test_cross_validated_errors refits without each source too)
def test_the_shipped_constants_are_the_fit_on_every_run() -> None:
    fit = published.fit(published.expressible())
    assert fit.half == FITTED_HALF and fit.fp8 == FITTED_FP8
    assert fit.attention == FITTED_ATTENTION
    assert fit.interference == {name: e.interference for name, e in ENGINES.items()}
    assert fit.host == {name: e.host_moe_expert for name, e in ENGINES.items()}
    assert fit.peaks == {name: e.matmul_peak for name, e in ENGINES.items()}
    assert fit.on == {(name, acc): p for name, e in ENGINES.items() for acc, p in e.on}


def test_the_shipped_constants_time_a_run_of_every_source() -> None:
    """The default suite's cheap check (about 3 s): the first run of every source, timed as
    `archspec plan` times it (the engine's shipped plateau on that accelerator), lands within
    24% of its published figure (docs/plan.md reports 55.4% at most fitted on all; the largest
    first run is Megatron-Bridge 25.11's Llama 3 8B on 8 H100s, −23.7% since its preset's
    recomputation of 5 layers is timed, `full:5`)."""
    firsts = {}
    for run in published.expressible():
        firsts.setdefault(run.source, run)
    assert len(firsts) >= 12
    for run in firsts.values():
        accelerator = get_system(run.system).accelerator.key
        error = published.error(run, ENGINES[run.engine].efficiency(accelerator))
        assert abs(error) < 0.24, (run.name, error)


@pytest.mark.long  # about 18 minutes of one core: the grid, then a fit for each source left out
def test_cross_validated_errors() -> None:
    rows = [r for r in published.table() if "cv_error" in r]
    assert len(rows) >= 45
    errors = [abs(r["cv_error"]) for r in rows]
    # What docs/plan.md reports (a regression guard): mean 7.8% (7.82%), under the issue's
    # target of 8%, largest 32.6% (NeMo's GPT-OSS 120B on 64 B300s), far above its 15%, over 172
    # runs; 7.48% over the 148 before MaxText's v5e table (its v5p rows, left out, now timed
    # with the v5e's plateau); 7.73% and 38.7% before cuDNN's time per row for sinks was
    # charged; 7.97% before
    # BLOOM's cluster had an SXM A100's NVLink (MT-NLG left out +22..27%);
    # 8.08% before a pair only MoE runs reached took its engine's plateau; 8.14% before a
    # parallel block's input was gathered once (MaxText's rows); 8.2% and
    # 38.7% over the 145 before NeMo 26.04.01's DeepSeek-V3 rows; 7.8% and 36.3%
    # over the 137 before NeMo 26.04.01's B300 and GB300 rows (the 137 alone now
    # 7.7%); 7.6% and 29.4% before a windowed layer's fused attention was costed by its tiles
    # (window_tiles.py: the GPT-OSS rows faster, which were already fast); 7.5% and 26.8%
    # (MT-NLG on 3360 A100s) over 135 runs before the two GPT-OSS rows (8.1% with a
    # host term for the all-to-all dispatcher's runs alone); 7.2% over 131 runs before four
    # Qwen3 rows joined and expert parallelism's matmuls, dispatch and host were timed; 7.4% over
    # 128 (NeMo 26.04.01's offloaded GB200 FSDP row without its Qwen3 rows), 7.2% over the 127
    # before; 7.1% over the 119 runs
    # before MaxText's two-slice rows (hybrid sharding), 7.5% before an H200 took its H100
    # twin's GEMM half-size; 7.3% and 26.8% over the 111
    # runs before MaxText's TPU v5p table (eight runs; 7.6% with its rematerialisation timed as
    # torch's early stop), 6.5% and 26.8% over the 102
    # runs before Megatron-LM's H100 table (nine bf16 runs), 6.9% and 26.8% before each
    # stack fitted its own overlap interference, 7.3% and 27.9% before fp8
    # runs timed the output head in bf16, 7.2% and 26.8% before full recomputation replayed
    # as each stack's checkpoint does (replay.py), 7.1%
    # and 24.7% before BLOOM's inherited dropout was counted (its DeepSpeed plateau, alone,
    # then sets MT-NLG's),
    # 8.3% and 29.4% before torchtitan's per-op checkpointing was timed as it runs (`--recompute
    # op`), 8.8% and 31.5% before ZeRO-1/2's weight all-gather was counted in bf16
    # (step.py's exchange), 9.1% and 38.7% before torchtitan's float8 all-gathers were
    # costed in one byte (fp8_comm.py), 7.0% and 29.0% over the 70 runs before torchtitan's
    # and NVIDIA's other rows were added.
    assert len(rows) == len(published.dataset().runs)  # every published layout is timed
    # What `archspec plan` quotes (track_record.yaml) is this fit's left-out errors.
    stored = {r["name"]: r["left_out"] for r in track_record.stored()}
    assert stored == {r["run"]: pytest.approx(r["cv_error"], abs=1e-6) for r in rows}
    assert mean(errors) < 0.079
    assert max(errors) < 0.33
    megatron = [
        abs(r["cv_error"]) for r in rows if r["source"].startswith(("Narayanan", "Korthikanti"))
    ]
    assert max(megatron) < 0.09


def test_every_published_layout_is_expressible() -> None:
    assert published.expressible() == published.dataset().runs


def test_palm_flops_give_palm_its_own_mfu() -> None:
    """`flops: palm` (the Llama 3 rows' TFLOP/s) against PaLM's Appendix B, as
    blog.heim.xyz/palm-training-cost quotes it: 238.3K tokens/s on 6144 TPU v4 chips of 275
    TFLOP/s is a model FLOPs utilization of 45.7% without self-attention (6 × 540B a token) and
    46.2% with it; 46.2% of the peak, counted so, is 238.3K tokens/s again."""
    from dataclasses import replace

    from archspec import build_ir, load_spec

    llama3 = next(r for r in published.dataset().runs if r.flops == "palm")
    palm = replace(llama3, seq=2048, gpus=6144, global_batch=1024,
                   figure=("tflops_per_gpu", 0.462 * 275))  # fmt: skip
    ir = build_ir(load_spec("palm-540b", ["max_seq_len=2048"]))
    tokens_per_s = palm.global_batch * palm.seq / published.published_step(palm, ir)
    assert tokens_per_s == pytest.approx(238.3e3, rel=0.002)


def test_the_interference_changes_nothing_where_nothing_overlaps() -> None:
    """The fit evaluates the interference grid only for runs with overlapped communication
    (`published._overlaps`); for every other run it must change nothing, or the fit would
    skip a constant that moves it."""
    from dataclasses import replace

    for run in published.expressible():
        if published._overlaps(run):
            continue
        accelerator = get_system(run.system).accelerator.key
        eff = ENGINES[run.engine].efficiency(accelerator)
        none, full = (published.predict(run, replace(eff, overlap_interference=i))[0]
                      for i in (0.0, 1.0))  # fmt: skip
        assert none == full, run.name


def test_megatron_core_flops_are_the_logged_formula() -> None:
    """`flops: megatron-core` (Megatron-LM's num_floating_point_operations at f2e5db402c)
    for GPT-3's block reduces to 72·B·s·l·h²·(1 + s/6h + V/12lh): the 1.7B row of the README's
    H100 table, from the IR's heads, widths and vocabulary."""
    run = next(r for r in published.dataset().runs if r.flops == "megatron-core")
    ir = published.cands_ir(run)
    b, s, layers, h, v = run.global_batch, run.seq, 24, 2048, 131072
    expected = 72 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
    assert published.megatron_core_flops(ir, b, s, layers) == pytest.approx(expected)
    # Not a check of the formula (the step is derived from it): of the row's dtype, which the
    # README leaves to its MFU column. 408.8 TFLOP/s is its 41% of the H100's bf16 peak (of
    # fp8's it would be 21%).
    step = published.published_step(run, ir)
    peak = get_system(run.system).accelerator.peak("bf16")
    assert expected / (step * run.gpus) / peak == pytest.approx(0.413, abs=0.001)


def test_megatron_core_flops_refuse_a_mixture() -> None:
    from archspec import build_ir, load_spec
    from archspec.errors import SpecError

    with pytest.raises(SpecError, match="dense MLPs"):
        published.megatron_core_flops(build_ir(load_spec("mixtral-8x7b")), 1, 4096, 32)


def test_maxtext_rows_have_the_sizes_and_utilisation_their_readme_names() -> None:
    """The MaxText rows (MaxText/configs/v5p/README.md at 76bd53b0f) against what the README
    states beside each TFLOP/s: its size label (32B ... 1024B: parameters within 3%, from
    base.yml's widths scaled by pyconfig's get_individual_scales) and its MFU column (the
    TFLOP/s over the v5p's bf16 peak, each TFLOP/s rounded to a whole number: 71.47% for 328).
    `flops: maxtext` turns the TFLOP/s into the step: 6·N·T·B plus the causal half of PaLM's
    attention term, 6·L·H·d·T²·B with heads of d = 256."""
    from archspec.backends.count.params import parameter_count

    mfu = {328: 0.7147, 323: 0.7031, 315: 0.6868, 316: 0.6883, 308: 0.6709, 294: 0.6399,
           254: 0.5535, 297: 0.6480,  # one slice ('1x')
           319: 0.6943, 309: 0.6726, 305: 0.6634, 274: 0.5966, 289: 0.6299, 282: 0.6145,
           237: 0.5155, 279: 0.6083}  # two slices ('2x')  # fmt: skip
    runs = [r for r in published.dataset().runs if r.flops == "maxtext"]
    assert len(runs) == 16
    # A '2x' row is its '1x' row on two slices: the same model, twice the chips and batch.
    for one, two in zip(runs[::2], runs[1::2], strict=True):
        assert (two.sets, two.gpus, two.global_batch) == (one.sets, 2 * one.gpus,
                                                          2 * one.global_batch)  # fmt: skip
        assert (two.dp_replicate, two.node_size) == (2, one.gpus)
    for run in runs:
        ir = published.cands_ir(run)
        n = ir.value(parameter_count(ir.root))
        label = float(run.name.split()[1].rstrip(",B")) * 1e9
        assert n == pytest.approx(label, rel=0.03), run.name
        peak = get_system(run.system).accelerator.peak("bf16")
        assert run.figure[1] * 1e12 / peak == pytest.approx(mfu[int(run.figure[1])], abs=1.2e-3)
        sets = dict(x.split("=") for x in run.sets)
        heads, layers = int(sets["n_heads"]), int(sets["n_layers"])
        b, s = run.global_batch, run.seq
        flops = 6 * n * b * s + 6 * layers * heads * 256 * s * s * b
        step = flops / (run.figure[1] * 1e12 * run.gpus)
        assert published.published_step(run, ir) == pytest.approx(step), run.name


def test_maxtext_v5e_rows_have_the_sizes_and_utilisation_their_table_names() -> None:
    """MaxText's v5e rows (v5e_high_performance.md at e47fa1b5d) against what the table states
    beside each TFLOP/s: the size label (16B ... 128B: parameters within 3%), its MFU column
    (the TFLOP/s over the v5e's 197 bf16 TFLOP/s, each TFLOP/s rounded to a whole number), one
    to 32 slices of 256 chips with each chip's batch kept; `flops: palm` turns the TFLOP/s into
    the step as that commit's train.py counts: 6·N·T·B plus 12·L·H·d·T²·B, every query-key
    pair, heads of d = 256."""
    from archspec.backends.count.params import parameter_count

    mfu = {  # the table's MFU column, by (size, slices)
        ("16B", 1): 0.6110, ("16B", 2): 0.5937, ("16B", 4): 0.5914, ("16B", 8): 0.5827,
        ("16B", 16): 0.5656, ("16B", 32): 0.5465, ("32B", 1): 0.6686, ("32B", 2): 0.6481,
        ("32B", 4): 0.6410, ("32B", 8): 0.6367, ("32B", 16): 0.6226, ("32B", 32): 0.6040,
        ("64B", 1): 0.5990, ("64B", 2): 0.5666, ("64B", 4): 0.5585, ("64B", 8): 0.5496,
        ("64B", 16): 0.5329, ("64B", 32): 0.5018, ("128B", 1): 0.5606, ("128B", 2): 0.5582,
        ("128B", 4): 0.5493, ("128B", 8): 0.5293, ("128B", 16): 0.5086, ("128B", 32): 0.4625,
    }  # fmt: skip
    runs = [r for r in published.dataset().runs if r.source == "maxtext2023v5e"]
    assert len(runs) == 24
    for run in runs:
        size = run.name.split()[1].rstrip(",")
        slices = run.gpus // 256
        assert run.dp_replicate == slices and run.gpus == 256 * slices
        assert run.global_batch == {"16B": 6, "32B": 4, "64B": 2, "128B": 1}[size] * run.gpus
        ir = published.cands_ir(run)
        n = ir.value(parameter_count(ir.root))
        assert n == pytest.approx(float(size.rstrip("B")) * 1e9, rel=0.03), run.name
        peak = get_system(run.system).accelerator.peak("bf16")
        # The TFLOP/s is rounded to a whole number: within half a TFLOP/s of the MFU's.
        assert run.figure[1] == pytest.approx(mfu[(size, slices)] * peak / 1e12, abs=0.5)
        sets = dict(x.split("=") for x in run.sets)
        heads, layers = int(sets["n_heads"]), int(sets["n_layers"])
        b, s = run.global_batch, run.seq
        flops = 6 * n * b * s + 12 * layers * heads * 256 * s * s * b
        step = flops / (run.figure[1] * 1e12 * run.gpus)
        assert published.published_step(run, ir) == pytest.approx(step), run.name
