"""Fit the CPU cost of communication: how much a worker's transfers slow its own computation.

In a one-worker parameter-server run the worker's core also runs gloo's transfer thread and the
kernel's network stack while the layers' pulls and pushes are in flight; on the emulated cluster
that made the computation 1.5-2.5x slower than in a run without transfers (more at higher rates).
The simulator models the work as ``SimulationConfig.comm_cpu_s_per_byte``: CPU time per byte,
wanted at the pace the bytes move and shared fairly with the computation (SEMANTICS.md). This
module finds the value for which the simulator, replaying the computation alone
(:func:`~profilers.distributed.to_trace.with_compute_of`) with that one worker, computes for as
long per step as the real worker did.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from profilers.distributed.bisection import bisect_increasing
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.trace.cpu import computation_s_per_step as compute_s_per_step
from simcore.trace.model import Resource, Trace

__all__ = [
    "CommCpuFit",
    "RingCpuWork",
    "compute_s_per_step",
    "fit_comm_cpu",
    "ring_cpu_work",
    "ring_cpu_work_s_per_byte",
    "simulated_compute_s_per_step",
]

FIT_STEPS = 60
FIT_WARMUP_STEPS = 10


@dataclass(frozen=True)
class CommCpuFit:
    """The fitted cost and what it was fitted to (seconds of computation per step)."""

    s_per_byte: float
    measured_compute_s: float  # per step, in the run with transfers
    alone_compute_s: float  # per step, in the run without
    simulated_compute_s: float  # per step, the simulator's replay with ``s_per_byte``
    cores_at_full_rate: float  # what one transfer at the link's full rate keeps busy

    @property
    def slowdown(self) -> float:
        """Computation with transfers over computation alone, as measured."""
        return self.measured_compute_s / self.alone_compute_s


def simulated_compute_s_per_step(trace: Trace, config: SimulationConfig) -> float:
    """The computation per step (s) of worker 0 in one simulated replication of ``config``:
    how long its computations ran, from start to end, slowed by whatever shared the CPU."""
    run = dataclasses.replace(
        config,
        workers=1,
        steps=FIT_STEPS,
        warmup_steps=FIT_WARMUP_STEPS,
        replications=1,
        timeline=True,
    )
    timeline = simulate(trace, run).timeline
    assert timeline is not None  # asked for
    worker_slots = np.array([name == Resource.WORKER.value for name in timeline.slot_names])
    measured = worker_slots[timeline.slot] & (timeline.step >= FIT_WARMUP_STEPS)
    busy = float(np.sum(timeline.end_s[measured] - timeline.start_s[measured]))
    return busy / (FIT_STEPS - FIT_WARMUP_STEPS)


def fit_comm_cpu(alone: Trace, measured_compute_s: float, config: SimulationConfig) -> CommCpuFit:
    """The ``comm_cpu_s_per_byte`` for which one simulated worker of ``config`` (which must have
    ``host_cpu_cores``), replaying ``alone``, computes ``measured_compute_s`` per step.

    The simulated computation grows with the cost, so bisection finds it. When the measured
    computation is no longer than the computation alone, the cost is 0. When no cost is enough
    (the transfers overlap too little of the computation), the largest one is returned: a
    transfer at full rate then takes every core.

    Raises
    ------
    ConfigError : ``config`` has no ``host_cpu_cores``.
    """
    cores = config.host_cpu_cores
    if cores is None:
        raise ConfigError("fit_comm_cpu: the configuration needs host_cpu_cores")
    base = dataclasses.replace(config, workers=1, colocated_workers=1)
    full_rate_bps = min(base.bandwidth_bps, base.nic_bps)
    highest = 8.0 * cores / full_rate_bps  # a transfer at the full rate takes every core

    def simulated(s_per_byte: float) -> float:
        cfg = dataclasses.replace(base, comm_cpu_s_per_byte=s_per_byte)
        return simulated_compute_s_per_step(alone, cfg)

    def fit(s_per_byte: float, simulated_s: float) -> CommCpuFit:
        per_bps = dataclasses.replace(base, comm_cpu_s_per_byte=s_per_byte).comm_cpu_cores_per_bps
        return CommCpuFit(
            s_per_byte,
            measured_compute_s,
            compute_s_per_step(alone),
            simulated_s,
            per_bps * full_rate_bps,
        )

    none = simulated(0.0)
    if measured_compute_s <= none:
        return fit(0.0, none)
    top = simulated(highest)
    if top <= measured_compute_s:
        return fit(highest, top)
    return fit(*bisect_increasing(simulated, measured_compute_s, 0.0, highest))


def ring_cpu_work_s_per_byte(trace: Trace, alone: Trace) -> float:
    """The CPU work a worker's transfers cost per byte it sends or receives, from its one-worker
    parameter-server run: that run's computation per step beside its transfers (``trace``) less
    the computation alone (``alone``), over the bytes it pulled and pushed per step.

    What a ring's workers then pay, per byte they send or receive, on their own cores: the
    copies, the reduction, the network stack. On the 2-core VM the rings ran short of CPU with
    two to four workers (examples/s flat in W), which this work, counted in full rather than
    only while a transfer runs (``comm_cpu_s_per_byte``), reproduces; the one-worker run holds
    it, since there the transfers' work could only slow the computation.
    """
    moved = trace.transfer_nbytes
    if moved <= 0:
        return 0.0
    extra = compute_s_per_step(trace) - compute_s_per_step(alone)
    return max(extra, 0.0) / moved


@dataclass(frozen=True)
class RingCpuWork:
    """A ring rank's CPU work per byte it sends or receives (``s_per_byte``), the larger of two
    measurements of it, each of which can only see part of the work:

    - ``from_runs_s_per_byte``: how much the one-worker parameter-server run's transfers slowed
      its computation, per byte (:func:`ring_cpu_work_s_per_byte`). It sees only the work done
      while the worker computed: mlp's transfers take 15x its computation, and its runs show
      0.4-2 ns/B, where the ring's ranks alone spend 5;
    - ``from_ring_s_per_byte``: the ring of two nodes' ranks' own CPU time per byte, timed alone
      (:meth:`~profilers.distributed.ring_goodput.RingGoodput.cpu_costs`; None: not measured). It
      sees nothing of what the computation beside it adds: the one-worker runs of resnet8 (many
      small transfers) show 8-18 ns/B where its ring alone shows 3-6.
    """

    from_runs_s_per_byte: float
    from_ring_s_per_byte: float | None = None

    @property
    def s_per_byte(self) -> float:
        return max(self.from_runs_s_per_byte, self.from_ring_s_per_byte or 0.0)

    @property
    def from_ring(self) -> bool:
        """Whether the ring's own CPU time is the larger (the value used)."""
        own = self.from_ring_s_per_byte
        return own is not None and own > self.from_runs_s_per_byte

    def text(self) -> str:
        """Where the value came from, for the validation's report and a profile's method."""
        runs = (
            f"the one-worker run's computation beside its transfers, less alone, per byte moved: "
            f"{self.from_runs_s_per_byte * 1e9:.3g} ns"
        )
        if self.from_ring_s_per_byte is None:
            return runs
        own = f"the ring of two's ranks' CPU time alone: {self.from_ring_s_per_byte * 1e9:.3g} ns"
        return f"the larger of {runs}, and {own}"


def ring_cpu_work(trace: Trace, alone: Trace, ring_s_per_byte: float | None = None) -> RingCpuWork:
    """A ring rank's CPU work per byte (:class:`RingCpuWork`) from the one-worker
    parameter-server run (``trace`` beside its transfers, ``alone`` without) and the ring of
    two's own CPU per byte, if measured (``RingGoodput.cpu_costs().s_per_byte``)."""
    if ring_s_per_byte is not None and not ring_s_per_byte >= 0:
        raise ConfigError(f"ring_s_per_byte: must be >= 0; got {ring_s_per_byte!r}")
    return RingCpuWork(ring_cpu_work_s_per_byte(trace, alone), ring_s_per_byte)
