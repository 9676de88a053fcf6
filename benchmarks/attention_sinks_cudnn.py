"""What cuDNN's fused attention costs with GPT-OSS's sinks: one layer's attention, forward and
backward, at GPT-OSS 120B's shape and NeMo's sequence, with and without a sink logit a head,
causal and over the 128-position window.

    pip install --no-deps nvidia-cudnn-frontend==1.19.1     # the graph API with sink_token
    python benchmarks/attention_sinks_cudnn.py --out benchmarks/gpu-h200-kernels/sinks_cudnn.json
    python benchmarks/attention_sinks_cudnn.py --dry-run --out /tmp/sinks.json  # CPU: the reference

Why: Transformer Engine runs a learnable softmax offset (GPT-OSS's sinks) only in its
FusedAttention, cuDNN's graph SDPA with `sink_token` (FlashAttention is disabled for
`softmax_type="learnable"`: transformer_engine/pytorch/attention/dot_product_attention/utils.py
at d0067d0), and no one here has timed that kernel. plan costs GPT-OSS's attention as cuDNN's
kernel without sinks (attention_kernels.py, window_tiles.py), and NeMo's published GPT-OSS 120B
steps on B200, B300 and GB300 are each about 1.5 s slower than predicted (docs/plan.md): a sink
kernel 2-3 times slower than the plain one would account for it. This measures the ratio.

The graphs are built as Transformer Engine builds them (fused_attn_f16_arbitrary_seqlen.cu):
bf16 input and output, fp32 softmax, stats for the backward; the causal mask as a diagonal band
with right bound 0, a window as left bound `window` (a query sees itself and the window - 1
positions before it, HF's `sliding_window`); with sinks a float32 (1, H, 1, 1) tensor forward
and its gradient backward. Each way's output is checked against an unfused reference (scores
materialised, the sink appended to the softmax as attention_sinks.py does) before it is timed:
forward and backward executions of the two graphs, CUDA events, median of `repeat`. The FLOPs
reported are the causal attention's, the same for every way, so TFLOP/s compare time alone.
"""

from __future__ import annotations

import json
import math

import torch
from attention_sinks import unfused
from kernel_shapes import kernel_cli, measurement, timed

# openai/gpt-oss-120b's config.json (archspec/specs/gpt-oss-120b.yaml): 64 query heads of 64,
# 8 key/value heads, 128-position windows; NeMo's GPT-OSS presets: sequence 4096, micro-batch 1.
GPU = {"batch": 1, "seq": 4096, "heads": 64, "kv_heads": 8, "head_dim": 64, "window": 128,
       "repeat": 20}  # fmt: skip
DRY = {"batch": 1, "seq": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "window": 8,
       "repeat": 2}  # fmt: skip
WAYS = [(False, None), (True, None), (False, "window"), (True, "window")]  # (sinks, mask)


def inputs(sizes: dict, device) -> dict:
    b, s, h, kv, d = (sizes[x] for x in ("batch", "seq", "heads", "kv_heads", "head_dim"))
    gen = torch.Generator(device=device).manual_seed(0)

    def normal(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device=device, dtype=dtype, generator=gen)

    return {"q": normal(b, h, s, d), "k": normal(b, kv, s, d), "v": normal(b, kv, s, d),
            "do": normal(b, h, s, d), "sinks": normal(1, h, 1, 1, dtype=torch.float32)}  # fmt: skip


def cudnn_step(x: dict, sinks: bool, window: int | None):
    """The forward and backward graphs of cuDNN's SDPA for `x`, built and ready: returns a
    function running both and the output buffer."""
    import cudnn

    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    q, k, v, do = x["q"], x["k"], x["v"], x["do"]
    b, h, s, d = q.shape
    o, dq, dk, dv = (torch.empty_like(t) for t in (q, q, k, v))
    stats = torch.empty(b, h, s, 1, device=q.device, dtype=torch.float32)
    sink, dsink = x["sinks"], torch.empty_like(x["sinks"])
    mask = {"diagonal_alignment": cudnn.diagonal_alignment.TOP_LEFT,
            "diagonal_band_right_bound": 0}  # fmt: skip
    if window is not None:
        mask["diagonal_band_left_bound"] = window
    scale = 1 / math.sqrt(d)

    def graph():
        return cudnn.pygraph(io_data_type=cudnn.data_type.BFLOAT16,
                             intermediate_data_type=cudnn.data_type.FLOAT,
                             compute_data_type=cudnn.data_type.FLOAT, handle=handle)  # fmt: skip

    def ready(g):
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        return g

    fwd = graph()
    tq, tk, tv = fwd.tensor_like(q), fwd.tensor_like(k), fwd.tensor_like(v)
    extra = {"sink_token": fwd.tensor_like(sink)} if sinks else {}
    to, tstats = fwd.sdpa(name="fwd", q=tq, k=tk, v=tv, attn_scale=scale, generate_stats=True,
                          **mask, **extra)  # fmt: skip
    to.set_output(True).set_dim(list(o.shape)).set_stride(list(o.stride()))
    tstats.set_output(True).set_data_type(cudnn.data_type.FLOAT)
    tstats.set_dim(list(stats.shape)).set_stride(list(stats.stride()))
    ready(fwd)
    forward_pack = {tq: q, tk: k, tv: v, to: o, tstats: stats}
    if sinks:
        forward_pack[extra["sink_token"]] = sink

    bwd = graph()
    bq, bk, bv, bo, bdo, bstats = (bwd.tensor_like(t) for t in (q, k, v, o, do, stats))
    extra = {}
    if sinks:
        extra = {"sink_token": bwd.tensor_like(sink), "dSink_token": bwd.tensor_like(dsink)}
        extra["dSink_token"].set_output(True)
    tdq, tdk, tdv = bwd.sdpa_backward(name="bwd", q=bq, k=bk, v=bv, o=bo, dO=bdo, stats=bstats,
                                      attn_scale=scale, **mask, **extra)  # fmt: skip
    for t, buffer in ((tdq, dq), (tdk, dk), (tdv, dv)):
        t.set_output(True).set_dim(list(buffer.shape)).set_stride(list(buffer.stride()))
    ready(bwd)
    backward_pack = {bq: q, bk: k, bv: v, bo: o, bdo: do, bstats: stats, tdq: dq, tdk: dk, tdv: dv}
    if sinks:
        backward_pack[extra["sink_token"]] = sink
        backward_pack[extra["dSink_token"]] = dsink
    size = max(fwd.get_workspace_size(), bwd.get_workspace_size(), 1)
    workspace = torch.empty(size, device=q.device, dtype=torch.uint8)

    def run():
        fwd.execute(forward_pack, workspace, handle=handle)
        bwd.execute(backward_pack, workspace, handle=handle)

    return run, o


def reference(x: dict, sinks: bool, window: int | None) -> torch.Tensor:
    """The unfused attention's output (attention_sinks.unfused); without sinks, a sink logit of
    -inf, which adds nothing to the softmax."""
    logits = x["sinks"].view(-1) if sinks else torch.full_like(x["sinks"].view(-1), -math.inf)
    return unfused(x["q"], x["k"], x["v"], logits, window)


def against_plan(result: dict) -> str:
    s = result["sizes"]
    flops = 3.5 * 4 * s["seq"] ** 2 * s["heads"] * s["head_dim"] / 2 * s["batch"]
    lines = [f"{result['device']}, torch {result['torch']}, cuDNN {result.get('cudnn', '?')}: "
             f"one layer's attention, forward and backward, B={s['batch']}, S={s['seq']}, "
             f"{s['heads']} heads of {s['head_dim']}, {s['kv_heads']} key/value heads; TFLOP/s "
             f"over the causal attention's {flops / 1e9:.0f} GFLOP; error: the output's largest "
             "difference from the unfused reference", "",
             "| sinks | mask | ms | TFLOP/s | × without sinks | error |",
             "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    plain = {r["mask"]: r["s"] for r in result["rows"] if not r["sinks"] and "s" in r}
    for r in result["rows"]:
        sinks = "yes" if r["sinks"] else "no"
        if "s" not in r:
            lines.append(f"| {sinks} | {r['mask']} | {r.get('error', '')} | | | |")
            continue
        ratio = f"{r['s'] / plain[r['mask']]:.2f}" if r["mask"] in plain else ""
        error = r["max_abs_error"]
        lines.append(f"| {sinks} | {r['mask']} | {r['s'] * 1e3:.3f} | "
                     f"{flops / r['s'] / 1e12:.0f} | {ratio} | {error:.3g} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    args = kernel_cli(__doc__, against_plan, dry_help="CPU, tiny: the reference alone")
    if args is None:
        return
    sizes, device, header = measurement(args, GPU, DRY)
    result = {**header, "sizes": sizes, "rows": []}
    if device.type == "cuda":
        import cudnn

        result["cudnn"] = str(cudnn.backend_version())
        result["cudnn_frontend"] = cudnn.__version__
    x = inputs(sizes, device)
    for sinks, mask in WAYS:
        window = sizes["window"] if mask else None
        row = {"sinks": sinks, "mask": "causal" if window is None else f"window {window}"}
        expected = reference(x, sinks, window)
        if device.type == "cuda":
            try:
                run, out = cudnn_step(x, sinks, window)
                run()
                torch.cuda.synchronize()
                row["max_abs_error"] = (out.float() - expected.float()).abs().max().item()
                row["s"] = timed(run, device, sizes["repeat"])
            except Exception as e:  # noqa: BLE001 (a graph this cuDNN does not support)
                row["error"] = (str(e).splitlines() or [type(e).__name__])[0][:300]
        else:
            row["reference_norm"] = expected.float().norm().item()
        result["rows"].append(row)
        args.out.write_text(json.dumps(result, indent=1))
        print(json.dumps(row), flush=True)
    if device.type == "cuda":
        print(against_plan(result), end="")


if __name__ == "__main__":
    main()
