"""Timing one step, and the statistics of many.

On a GPU the host only queues kernels, so a host clock around a step measures how fast work is
queued, not how fast it runs. Each step is therefore bracketed by CUDA events recorded on the
stream, and the host waits for the end event (synchronises) before reading the time between
them and starting the next step: a step's time is the GPU's, and the next step starts on an
idle GPU, as a training loop that reads its loss does. On CPU, work runs when called, and
`time.perf_counter` around the call is the step's time.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


def time_step(step: Callable[[], None], device: torch.device) -> float:
    """Seconds one call of `step` takes on `device`."""
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3  # elapsed_time is in milliseconds
    begin = time.perf_counter()
    step()
    return time.perf_counter() - begin


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Times:
    """Step times in seconds. The median is the headline: one slow step (a page fault, a
    background process, a recompilation) moves it less than the mean."""

    steps: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.steps)

    @property
    def min(self) -> float:
        return min(self.steps)

    @property
    def max(self) -> float:
        return max(self.steps)
