"""Run test cases on spawned gloo processes, each rank writing what it measured to a JSON file
of its own: the harness the multi-process tests share (tests/distributed_steps.py,
tests/pipeline_worker.py, tests/pipeline_3d_worker.py each give it their `run_case`)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank: int, run_case: Callable, world: int, port: int, cases: list, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = {key: run_case(*case) for key, *case in cases}
    finally:
        dist.destroy_process_group()
    Path(out, f"rank{rank}.json").write_text(json.dumps(results))


def spawn_cases(run_case: Callable, world: int, cases: list, folder: Path) -> list[dict]:
    """`run_case(*case)` for every (key, *case) of `cases` on `world` spawned gloo processes,
    on a free port; each rank's {key: result}. `run_case` is a module-level function (spawn
    pickles it by name)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = (run_case, world, port, cases, str(folder))
    mp.spawn(_worker, args=args, nprocs=world, join=True)
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(world)]
