"""Timestamps for the per-layer profiler: ``perf_counter`` on CPU, CUDA events on a GPU.

On a GPU, kernels run asynchronously: the host returns from a layer long before the device has
finished it, so host clocks would measure launch time, not compute time. A CUDA event recorded on
the current stream before and after a layer timestamps the device's own progress instead; the
events are resolved after the step, once the device has synchronized.

A clock hands out opaque marks and later turns pairs of marks into seconds. ``finish()`` must be
called after the step (it synchronizes the device) and before ``seconds``.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import torch


class Clock(Protocol):
    name: str

    def mark(self) -> Any:
        """A timestamp of 'now' on the device being profiled."""

    def finish(self) -> None:
        """Wait until every marked point has been reached (no-op on CPU)."""

    def seconds(self, start: Any, end: Any) -> float:
        """Elapsed seconds from mark ``start`` to mark ``end`` (after ``finish``)."""


class CpuClock:
    """Host wall clock; CPU ops run synchronously, so host time is compute time."""

    name = "time.perf_counter"

    def mark(self) -> float:
        return time.perf_counter()

    def finish(self) -> None:
        return None

    def seconds(self, start: float, end: float) -> float:
        return end - start


class CudaClock:
    """CUDA events on the current stream of ``device``; resolved after a device synchronize."""

    name = "torch.cuda.Event(enable_timing=True)"

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def mark(self) -> torch.cuda.Event:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def finish(self) -> None:
        torch.cuda.synchronize(self.device)

    def seconds(self, start: torch.cuda.Event, end: torch.cuda.Event) -> float:
        return float(start.elapsed_time(end)) / 1e3  # elapsed_time is in milliseconds


def clock_for(device: torch.device) -> Clock:
    """The clock that measures compute time correctly on ``device``."""
    if device.type == "cuda":
        return CudaClock(device)
    return CpuClock()
