"""Measure the hardware constants of the Yan et al. (KDD'15) model with small torch kernels.

The paper estimates its per-operation costs by timing "canonical" kernels on one worker:

- C_muladd, seconds per multiply-add: a single-threaded float32 matrix product of n x n
  matrices does n^3 multiply-adds;
- C_act, seconds per activation: a sigmoid over a vector (the paper's f);
- C_err, seconds per error term: delta * f'(a) = delta * a * (1 - a) over a vector (Eq. 3),
  as one fused kernel (torch's sigmoid backward);
- C_interf(H): H threads each run the same product on their own matrices (one batched product
  with ``torch.set_num_threads(H)``); C_interf(H) is its time over the one-thread time of one
  product, so 1.0 means no interference, and it grows once H passes the free cores.

Every figure is the fastest of a few repeats, after one warm-up run. Network latency and
bandwidth are not measured here: pass the ones of a network profile (``sgdsim network
measure``); the defaults describe the paper's 10 Gbit/s Ethernet.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch

from simcore.analytic.yan.model import HardwareConstants, validate_hardware

DEFAULT_LATENCY_S = 50e-6
DEFAULT_BANDWIDTH_BPS = 10e9


def best_time_s(run: Callable[[], object], repeats: int) -> float:
    """Fastest wall time of ``repeats`` calls of ``run``, after one warm-up call."""
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def measure_hardware_constants(
    *,
    max_threads: int | None = None,
    latency_s: float = DEFAULT_LATENCY_S,
    bandwidth_bps: float = DEFAULT_BANDWIDTH_BPS,
    matmul_size: int = 256,
    vector_size: int = 1 << 18,
    repeats: int = 5,
    seed: int = 0,
) -> HardwareConstants:
    """Time the canonical kernels and return validated :class:`HardwareConstants`.

    Parameters
    ----------
    max_threads : H up to which C_interf(H) is measured (the cores K); default: the CPUs.
    latency_s, bandwidth_bps : network figures passed through (not measured here).
    matmul_size, vector_size : problem sizes; the defaults take about a second.
    repeats : timed runs per kernel; the fastest counts.
    seed : seeds the random operands.

    Raises
    ------
    simcore.errors.ConfigError
        when a measured or given constant is not positive and finite.
    """
    k = max_threads or os.cpu_count() or 1
    generator = torch.Generator().manual_seed(seed)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        muladd_s, single_s = _muladd(matmul_size, repeats, generator)
        act_s, err_s = _elementwise(vector_size, repeats, generator)
        interference = [1.0]
        for h in range(2, k + 1):
            interference.append(_batched(h, matmul_size, repeats, generator) / single_s)
    finally:
        torch.set_num_threads(before)
    hw = HardwareConstants(
        muladd_s=muladd_s,
        act_s=act_s,
        err_s=err_s,
        interference=tuple(interference),
        latency_s=latency_s,
        bandwidth_bps=bandwidth_bps,
    )
    validate_hardware(hw)
    return hw


def _muladd(n: int, repeats: int, generator: torch.Generator) -> tuple[float, float]:
    """(seconds per multiply-add, seconds per n x n product) on one thread."""
    a = torch.rand(n, n, generator=generator)
    b = torch.rand(n, n, generator=generator)
    seconds = best_time_s(lambda: torch.mm(a, b), repeats)
    return seconds / n**3, seconds


def _elementwise(n: int, repeats: int, generator: torch.Generator) -> tuple[float, float]:
    """(seconds per sigmoid, seconds per error term delta * a * (1 - a)) on one thread."""
    x = torch.randn(n, generator=generator)
    delta = torch.randn(n, generator=generator)
    a = torch.sigmoid(x)
    out = torch.empty(n)
    act = best_time_s(lambda: torch.sigmoid(x, out=out), repeats)
    err = best_time_s(lambda: torch.ops.aten.sigmoid_backward(delta, a, grad_input=out), repeats)
    return act / n, err / n


def _batched(h: int, n: int, repeats: int, generator: torch.Generator) -> float:
    """Seconds for ``h`` threads to run one n x n product each, at the same time."""
    a = torch.rand(h, n, n, generator=generator)
    b = torch.rand(h, n, n, generator=generator)
    torch.set_num_threads(h)
    try:
        return best_time_s(lambda: torch.bmm(a, b), repeats)
    finally:
        torch.set_num_threads(1)
