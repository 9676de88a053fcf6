"""A prompt's attention: every slot of a preallocated KV cache under a mask, or its own keys
with SDPA's causal flag.

    python benchmarks/prompt_attention.py                 # llama-1b's heads, a 1024 prompt
    python benchmarks/prompt_attention.py --prompt 128 --new 16

The generated `generate` preallocates each layer's cache for prompt + new tokens. A decode
step reads the whole cache under a mask (fixed shapes, one compiled graph); the prompt,
written into empty caches without padding, attends only its own keys with `is_causal=True`,
which lets the CPU's flash kernel skip the blocks above the diagonal. This script times the
two ways of attending for one layer, alternately, on one thread, and prints the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--new", type=int, default=16, help="new tokens: the cache's extra slots")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    s, slots = args.prompt, args.prompt + args.new
    q = torch.randn(1, args.heads, s, args.head_dim)
    k_cache = torch.zeros(1, args.heads, slots, args.head_dim)
    v_cache = torch.zeros_like(k_cache)
    k_cache[:, :, :s] = k = torch.randn(1, args.heads, s, args.head_dim)
    v_cache[:, :, :s] = v = torch.randn(1, args.heads, s, args.head_dim)
    later = torch.arange(slots) > torch.arange(s)[:, None]  # the keys a query must not see
    mask = torch.zeros(s, slots).masked_fill(later, torch.finfo(torch.float32).min)

    def whole_cache() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)

    def own_keys() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    torch.testing.assert_close(whole_cache(), own_keys(), atol=1e-5, rtol=1e-5)  # same result
    runs = [("whole cache, masked", whole_cache), ("own keys, causal", own_keys)]
    times: dict[str, list[float]] = {name: [] for name, _ in runs}
    with torch.no_grad():
        for i in range(args.repeats):
            for name, run in runs if i % 2 == 0 else runs[::-1]:
                began = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - began)
    masked, causal = (statistics.median(times[name]) for name, _ in runs)
    print(f"one layer: {args.heads} heads of {args.head_dim}, a prompt of {s} into {slots} "
          f"slots, 1 thread, torch {torch.__version__}")  # fmt: skip
    print(f"whole cache, masked: {masked * 1e3:.2f} ms   own keys, causal: {causal * 1e3:.2f} ms")
    print(f"own keys take {causal / masked:.3f} of the time (median of {args.repeats})")


if __name__ == "__main__":
    main()
