"""Bisection for the fits of the validation: the value at which a simulated quantity that grows
with it meets a measured one (:mod:`~profilers.distributed.comm_cpu`,
:mod:`~profilers.distributed.transfer_latency`)."""

from __future__ import annotations

from collections.abc import Callable

RELATIVE_TOLERANCE = 1e-3  # of the target: far below the runs' own repeatability
MAX_BISECTIONS = 40


def bisect_increasing(
    simulated: Callable[[float], float], target: float, low: float, high: float
) -> tuple[float, float]:
    """``(x, simulated(x))`` for an ``x`` in ``[low, high]`` at which the non-decreasing
    ``simulated`` is within ``RELATIVE_TOLERANCE`` of ``target``; the caller has checked that
    ``simulated(low) < target <= simulated(high)``. After ``MAX_BISECTIONS`` halvings (a flat
    or jumping ``simulated``), the last value tried."""
    x, value = high, target
    for _ in range(MAX_BISECTIONS):
        x = 0.5 * (low + high)
        value = simulated(x)
        if abs(value - target) <= RELATIVE_TOLERANCE * target:
            break
        if value < target:
            low = x
        else:
            high = x
    return x, value
