"""A worker's CPU beyond its trace's computation, from the CPU time its steps recorded.

A trace made from a one-worker run beside a real parameter server (its transfers' durations
measured) replays the computation as it ran there: slowed by whatever shared the worker's core
with it. What its communication threads (gloo's copies and sockets, the kernel's network stack on
the worker's behalf) did while the computation was not running is in no op. When the run recorded
its process's CPU time per step (``StepProfile.cpu_s``, schema version 3), that rest is the CPU
per step less the computation the trace replays; on cores shared by several workers it is work
they compete for (``SimulationConfig.comm_thread_s_per_step``).

A trace of the computation alone (``sgdsim profile``: no measured transfers) has no such threads
to speak of: its CPU beyond the wall time is torch's intra-op threads, which the host model
counts through the cores one worker's computation holds (``worker_cpu_cores``): its CPU time
over its wall time (:func:`measured_worker_cores`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.trace.model import OpKind, Resource, Trace

__all__ = [
    "CommThreadCpu",
    "computation_s_per_step",
    "forward_backward_s_per_step",
    "measured_comm_thread",
    "measured_transfers",
    "measured_worker_cores",
]


@dataclass(frozen=True)
class CommThreadCpu:
    """A worker's CPU per step beyond its trace's computation, as its runs measured.

    The worker process's CPU time per step (every thread) less the computation its trace
    replays. The share of the communication threads' work that ran during the computation is in
    the computation's measured time already; this is the rest, which the simulator puts on the
    worker's communication thread (``SimulationConfig.comm_thread_s_per_step``).
    """

    cpu_s_per_step: float  # the process's CPU per step, measured
    compute_s_per_step: float  # the trace's computation per step (what the replay charges)

    @property
    def beyond_s(self) -> float:
        """The CPU per step the trace's computation does not hold (never negative)."""
        return max(self.cpu_s_per_step - self.compute_s_per_step, 0.0)


def computation_s_per_step(trace: Trace) -> float:
    """Mean over the trace's steps of its worker's computation per step (s)."""
    worker = [i for i, op in enumerate(trace.ops) if op.resource is Resource.WORKER]
    total = math.fsum(sum(step.duration_s[i] or 0.0 for i in worker) for step in trace.steps)
    return total / len(trace.steps)


def forward_backward_s_per_step(trace: Trace) -> float:
    """Mean over the trace's steps of its forward and backward ops' durations (s): the
    computation a real run's spans time, without the step's fixed costs."""
    total = math.fsum(
        trace.phase_time_s(i, OpKind.FORWARD) + trace.phase_time_s(i, OpKind.BACKWARD)
        for i in range(len(trace.steps))
    )
    return total / len(trace.steps)


def measured_transfers(trace: Trace) -> bool:
    """Whether the trace's transfers carry measured durations: it was made beside a real
    parameter server rather than from the computation alone."""
    network = [i for i, op in enumerate(trace.ops) if op.is_communication]
    return bool(network) and any(
        step.duration_s[i] is not None for step in trace.steps for i in network
    )


def measured_comm_thread(trace: Trace) -> CommThreadCpu | None:
    """The trace's CPU per step beyond its computation; None unless every step recorded its CPU
    time and the trace ran beside its transfers (:func:`measured_transfers`)."""
    cpu = [step.cpu_s for step in trace.steps]
    if not cpu or any(c is None for c in cpu) or not measured_transfers(trace):
        return None
    mean = math.fsum(c for c in cpu if c is not None) / len(cpu)
    return CommThreadCpu(mean, computation_s_per_step(trace))


def measured_worker_cores(trace: Trace) -> float | None:
    """The cores the profiled computation held on average: its steps' CPU time over their wall
    time (every thread's, so torch's intra-op threads count, spinning or not: 1.0 with one
    thread, about 2 with two on the 2-core VM). None unless every step recorded both, or for a
    trace made beside its transfers, whose CPU time holds its communication threads too."""
    if measured_transfers(trace):
        return None
    cpu = [step.cpu_s for step in trace.steps]
    wall = [step.wall_s for step in trace.steps]
    if not cpu or any(c is None for c in cpu) or any(w is None for w in wall):
        return None
    total_wall = math.fsum(w for w in wall if w is not None)
    total_cpu = math.fsum(c for c in cpu if c is not None)
    return total_cpu / total_wall if total_wall > 0 and total_cpu > 0 else None
