"""Fit the fixed cost of a parameter server's transfers: what a pull or push takes beyond its
bytes, from the one-worker runs.

A transfer between a worker and the server is more than its bytes at the link's rate: the
request, the server's thread waking up and answering, the wake-up of the waiting worker. For a
model of many small layers these costs add up (resnet8, 38 transfers a step: its one-worker runs
were 8-14% slower than the replay of their own trace with transfers at the link's rate, the
other models within 2%). The simulator has a latency per transfer for them
(``SimulationConfig.latency_s``: a delay after each transfer that occupies no resource); this
module finds the value for which one simulated worker, replaying the profile, takes as long per
step as the one-worker runs did.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from profilers.distributed.bisection import RELATIVE_TOLERANCE, bisect_increasing
from simcore.sim import SimulationConfig, simulate
from simcore.trace.model import Trace

__all__ = ["LatencyFit", "fit_transfer_latency"]

FIT_WARMUP_STEPS = 5


@dataclass(frozen=True)
class LatencyFit:
    """The fitted latency per transfer and what it was fitted to (seconds per step)."""

    latency_s: float
    measured_step_s: float  # the one-worker runs' mean step
    replayed_step_s: float  # the simulator's replay of their trace, transfers at the link's rate
    simulated_step_s: float  # ... and with ``latency_s`` after each transfer


def fit_transfer_latency(
    trace: Trace, measured_step_s: float, config: SimulationConfig
) -> LatencyFit:
    """The latency per transfer for which one simulated worker of ``config``, replaying
    ``trace`` (every profiled step once, after a warm-up), takes ``measured_step_s`` per step.

    The fitted value includes ``config.latency_s``, where the search starts. The simulated step
    grows with the latency, so bisection finds it; when the replay with ``config``'s latency is
    already as slow as measured, that latency is returned (the replay's shortfall is then not a
    transfer's to explain). A latency longer than the shortfall itself cannot be needed: some
    transfer is on every step's critical path (the first forward waits for a pull).
    """
    base = dataclasses.replace(
        config,
        workers=1,
        colocated_workers=1,
        mode="async",
        steps=FIT_WARMUP_STEPS + len(trace.steps),
        warmup_steps=FIT_WARMUP_STEPS,
        replications=1,
        jitter="none",
        jitter_cv=0.0,
        timeline=False,
    )

    def step_s(latency_s: float) -> float:
        result = simulate(trace, dataclasses.replace(base, latency_s=latency_s))
        return 1.0 / result.steps_per_s.value

    start = config.latency_s
    replayed = step_s(start)
    shortfall = measured_step_s - replayed
    if shortfall <= RELATIVE_TOLERANCE * measured_step_s:  # as close as the fit gets
        return LatencyFit(start, measured_step_s, replayed, replayed)
    latency_s, value = bisect_increasing(step_s, measured_step_s, start, start + shortfall)
    return LatencyFit(latency_s, measured_step_s, replayed, value)
