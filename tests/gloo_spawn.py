"""Run test cases on spawned gloo processes, each rank writing what it measured to a JSON file
of its own: the one harness every multi-process test shares (tests/distributed_worker.py,
tests/distributed_steps.py, tests/pipeline_worker.py, tests/pipeline_3d_worker.py and
tests/test_tp_collectives.py each give it their `run_case`).

A CI run lost two spawns to rank 0 aborting ("terminate called without an active exception",
SIGABRT: a C++ thread destroyed while still joinable) with rank 1 alive; it did not recur in 20
runs of those files here. Three choices take away what can do that:
- The rendezvous store is served by the calling process, on a port the kernel picks when the
  store binds it. Picking a "free" port first and binding it later in a child races with
  every other socket the machine opens meanwhile (the other test worker's gloo pairs among
  them), and rank 0 would carry the store's server thread into its own teardown.
- The ranks meet at a barrier before they destroy the process group, so none tears its gloo
  pairs down while another still talks on them.
- A rank that has written its results leaves with `os._exit`, skipping the interpreter's
  teardown of torch's C++ threads, which the test does not need. A failure inside a case
  still reaches the caller as the rank's exception."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HOST = "127.0.0.1"
TIMEOUT = timedelta(minutes=5)
# Native aborts remain, rarely, under CI's two test workers: a CI run of November 27 lost a
# spawn of tests/test_distributed.py to 'free(): invalid pointer' (SIGABRT) in a rank; the same
# file passed 3 runs of 3 alone. A spawn whose rank dies of a signal runs once more.
NATIVE_ABORT_RETRIES = 1


def _worker(rank: int, run_case: Callable, world: int, port: int, cases: list, out: str) -> None:
    torch.set_num_threads(1)
    store = dist.TCPStore(HOST, port, is_master=False, timeout=TIMEOUT)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
    results = {key: run_case(*case) for key, *case in cases}
    dist.barrier()
    dist.destroy_process_group()
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn_cases(run_case: Callable, world: int, cases: list, folder: Path) -> list[dict]:
    """`run_case(*case)` for every (key, *case) of `cases` on `world` spawned gloo processes;
    each rank's {key: result}. `run_case` is a module-level function (spawn pickles it by
    name)."""
    for attempt in range(1 + NATIVE_ABORT_RETRIES):
        store = dist.TCPStore(HOST, 0, is_master=True, wait_for_workers=False, timeout=TIMEOUT)
        args = (run_case, world, store.port, cases, str(folder))
        try:
            mp.spawn(_worker, args=args, nprocs=world, join=True)
            break
        except mp.ProcessExitedException as exc:
            # A rank killed by a signal, not by a Python exception in a case (that one is
            # ProcessRaisedException, never retried): a native abort inside gloo under load.
            if exc.signal_name is None or attempt == NATIVE_ABORT_RETRIES:
                raise
            print(f"gloo_spawn: rank {exc.error_index} died of {exc.signal_name}; once more",
                  file=sys.stderr)  # fmt: skip
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(world)]
