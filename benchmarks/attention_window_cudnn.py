"""What cuDNN's fused attention costs over a sliding window: GPT-OSS 120B's attention, one layer
forward and backward, causal and over its 128-position window, through JAX.

    python benchmarks/attention_window_cudnn.py --out benchmarks/gpu-h200-kernels/window.json
    python benchmarks/attention_window_cudnn.py --dry-run --out /tmp/window.json  # CPU, XLA

Transformer Engine, whose layers NeMo's GPT-OSS runs call, gives a windowed layer's
`window_size` to cuDNN's fused attention, which skips the key blocks outside the window.
PyTorch's scaled_dot_product_attention passes no window to its cuDNN backend;
`jax.nn.dot_product_attention(implementation="cudnn", local_window_size=...)` does, so this
times cuDNN's windowed kernel through JAX (no sinks: JAX passes none). Shapes as
attention_sinks.py (benchmarks/attention_sinks.py): B=1, S=4,096, 64 query heads of 64,
8 key/value heads; the window keeps a query's 128 latest positions, itself included (HF's
`sliding_window: 128`), so 127 to its left. Each way is compiled once (jax.jit over
jax.grad), then timed as the median of `repeat` calls; the FLOPs reported are the causal
attention's, as in attention_sinks.py, so the columns compare time alone.

Needs JAX with a CUDA plugin on the GPU (the dry run: JAX on CPU, XLA's attention, tiny).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

GPU = {"batch": 1, "seq": 4096, "heads": 64, "kv_heads": 8, "head_dim": 64, "window": 128,
       "repeat": 20}  # fmt: skip
# --sweep: cuDNN alone over windows of 128 to 2,048 positions and the causal mask, at two
# sequence lengths and two head widths (64 query heads over 8 key/value heads throughout).
SWEEP = {"seq": [4096, 8192], "head_dim": [64, 128], "window": [128, 256, 512, 1024, 2048, None]}
# --scaling: how the times scale with the batch and the heads (a key/value head for eight query
# heads), at S = 4,096 and head width 64, windowed and causal.
SCALING = {"batch_heads": [(1, 16), (1, 32), (1, 64), (2, 64), (4, 64)], "window": [128, None]}
DRY = {"batch": 1, "seq": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "window": 8,
       "repeat": 2}  # fmt: skip


def seconds(sizes: dict, implementation: str, window: int | None) -> float:
    import jax
    import jax.numpy as jnp

    b, s, h, kv, d = (sizes[x] for x in ("batch", "seq", "heads", "kv_heads", "head_dim"))
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q = jax.random.normal(keys[0], (b, s, h, d), jnp.bfloat16)
    k = jax.random.normal(keys[1], (b, s, kv, d), jnp.bfloat16)
    v = jax.random.normal(keys[2], (b, s, kv, d), jnp.bfloat16)
    grad = jax.random.normal(keys[3], (b, s, h, d), jnp.bfloat16)
    local = None if window is None else (window - 1, 0)

    def loss(q, k, v):
        out = jax.nn.dot_product_attention(q, k, v, is_causal=True, local_window_size=local,
                                           implementation=implementation)  # fmt: skip
        return jnp.sum(out.astype(jnp.float32) * grad.astype(jnp.float32))

    step = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    jax.block_until_ready(step(q, k, v))  # compile, and one warm-up
    jax.block_until_ready(step(q, k, v))
    times = []
    for _ in range(sizes["repeat"]):
        start = time.perf_counter()
        jax.block_until_ready(step(q, k, v))
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def agreement(sizes: dict, window: int | None) -> float:
    """The largest difference between cuDNN's forward and XLA's with the window written out as
    a mask (each query's `window` latest positions, itself included), over the largest
    output: what shows the window was applied as HF's `sliding_window` means it."""
    import jax
    import jax.numpy as jnp

    b, s, h, kv, d = (sizes[x] for x in ("batch", "seq", "heads", "kv_heads", "head_dim"))
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    q = jax.random.normal(keys[0], (b, s, h, d), jnp.bfloat16)
    k = jax.random.normal(keys[1], (b, s, kv, d), jnp.bfloat16)
    v = jax.random.normal(keys[2], (b, s, kv, d), jnp.bfloat16)
    pos = jnp.arange(s)
    allowed = pos[None, :] <= pos[:, None]
    if window is not None:
        allowed &= pos[None, :] > pos[:, None] - window
    local = None if window is None else (window - 1, 0)
    fused = jax.nn.dot_product_attention(q, k, v, is_causal=True, local_window_size=local,
                                         implementation="cudnn")  # fmt: skip
    masked = jax.nn.dot_product_attention(q, k, v, mask=allowed[None, None],
                                          implementation="xla")  # fmt: skip
    diff = jnp.max(jnp.abs(fused.astype(jnp.float32) - masked.astype(jnp.float32)))
    return float(diff / jnp.max(jnp.abs(masked.astype(jnp.float32))))


def table(result: dict) -> str:
    s = result["sizes"]
    flops = 3.5 * 4 * s["seq"] ** 2 * s["heads"] * s["head_dim"] / 2 * s["batch"]
    lines = [f"{result['device']}, jax {result['jax']}: one layer's attention through "
             f"jax.nn.dot_product_attention, forward and backward, B={s['batch']}, "
             f"S={s['seq']}, {s['heads']} heads of {s['head_dim']}, {s['kv_heads']} key/value "
             f"heads; TFLOP/s over the causal attention's {flops / 1e9:.0f} GFLOP"]  # fmt: skip
    if result.get("rows"):
        lines += ["", "| implementation | mask | ms | TFLOP/s |", "|---|---|---:|---:|"]
    for r in result.get("rows", []):
        if "s" not in r:
            lines.append(f"| {r['implementation']} | {r['mask']} | {r['error']} | |")
            continue
        lines.append(f"| {r['implementation']} | {r['mask']} | {r['s'] * 1e3:.3f} "
                     f"| {flops / r['s'] / 1e12:.0f} |")  # fmt: skip
    parts = (("sweep", ("seq", "head_dim", "window"), "B = 1, 64 heads"),
             ("scaling", ("batch", "heads", "window"), "S = 4,096, head width 64"))  # fmt: skip
    for part, keys, fixed in parts:
        if not result.get(part):
            continue
        lines += ["", f"{part}: cuDNN, forward and backward, ms ({fixed})", "",
                  "| " + " | ".join(keys) + " | ms |", "|" + "---:|" * (len(keys) + 1)]  # fmt: skip
        for r in result[part]:
            cells = [str(r[k] or "causal") for k in keys]
            time = f"{r['s'] * 1e3:.3f}" if "s" in r else r.get("error", "")
            lines.append("| " + " | ".join(cells) + f" | {time} |")
    return "\n".join(lines) + "\n"


def sweep(sizes: dict, dry: bool) -> list[tuple[dict, dict]]:
    """(the row's columns, the sizes it runs at) over windows, sequence lengths and head widths
    (a dry run: the tiny sizes, windowed and causal)."""
    grid = {"seq": [sizes["seq"]], "head_dim": [sizes["head_dim"]],
            "window": [sizes["window"], None]} if dry else SWEEP  # fmt: skip
    return [({"seq": seq, "head_dim": d, "window": w}, {**sizes, "seq": seq, "head_dim": d})
            for seq in grid["seq"] for d in grid["head_dim"] for w in grid["window"]]  # fmt: skip


def scaling(sizes: dict, dry: bool) -> list[tuple[dict, dict]]:
    """As sweep, over batches and head counts (a key/value head for eight query heads)."""
    grid = {"batch_heads": [(2, 4)], "window": [sizes["window"], None]} if dry else SCALING
    runs = []
    for batch, heads in grid["batch_heads"]:
        at = {**sizes, "batch": batch, "heads": heads, "kv_heads": max(heads // 8, 1)}
        for window in grid["window"]:
            columns = {k: at[k] for k in ("batch", "heads", "kv_heads", "seq", "head_dim")}
            runs.append(({**columns, "window": window}, at))
    return runs


def measure_grid(part: str, runs: list[tuple[dict, dict]], result: dict, out: Path,
                 implementation: str) -> None:  # fmt: skip
    """Each run's forward and backward, written to `out` as it is measured."""
    result[part] = []
    for row, at in runs:
        try:
            row["s"] = seconds(at, implementation, row["window"])
        except Exception as e:  # noqa: BLE001 (a shape the device or JAX lacks)
            row["error"] = (str(e).splitlines() or [type(e).__name__])[0][:200]
        result[part].append(row)
        out.write_text(json.dumps(result, indent=1))
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="JAX on CPU, XLA, tiny")
    parser.add_argument("--sweep", action="store_true",
                        help="cuDNN over windows, sequence lengths and head widths")  # fmt: skip
    parser.add_argument("--scaling", action="store_true",
                        help="cuDNN over batches and head counts, windowed and causal")  # fmt: skip
    parser.add_argument("--against-plan", type=Path, metavar="RESULTS",
                        help="print a results file's table (no GPU needed)")  # fmt: skip
    args = parser.parse_args()
    if args.against_plan:
        print(table(json.loads(args.against_plan.read_text())), end="")
        return
    if args.out is None:
        parser.error("--out is required to measure")
    import jax

    sizes = DRY if args.dry_run else GPU
    ways = ["xla"] if args.dry_run else ["cudnn", "xla"]
    result = {"device": jax.devices()[0].device_kind, "jax": jax.__version__, "sizes": sizes,
              "rows": []}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for part, runs in (("sweep", sweep), ("scaling", scaling)):
        if getattr(args, part):
            implementation = "xla" if args.dry_run else "cudnn"
            measure_grid(part, runs(sizes, args.dry_run), result, args.out, implementation)
            return
    for implementation in ways:
        for window in (None, sizes["window"]):
            row = {"implementation": implementation,
                   "mask": "causal" if window is None else f"window {window}"}  # fmt: skip
            try:
                row["s"] = seconds(sizes, implementation, window)
                if implementation == "cudnn":
                    row["max_relative_difference_to_masked_xla"] = agreement(sizes, window)
            except Exception as e:  # noqa: BLE001 (a way the device or JAX lacks)
                row["error"] = (str(e).splitlines() or [type(e).__name__])[0][:200]
            result["rows"].append(row)
            args.out.write_text(json.dumps(result, indent=1))
            print(json.dumps(row), flush=True)
    print(table(result), end="")


if __name__ == "__main__":
    main()
