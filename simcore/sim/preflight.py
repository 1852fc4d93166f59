"""Before a simulation starts: how much memory and work it will take, and whether it fits.

The engine keeps per worker a constant part and a part per op of the step (its DAG state, its
ready queues), and with ``timeline`` one record per simulated op. The byte costs below were
measured with ``tracemalloc`` on the peak of :func:`simcore.sim.simulate` (cnn-b8, 43 ops, and
resnet50-b32, 673 ops, W = 50 to 800) and rounded up: an estimate errs on the large side.

Pure: the caller says how much memory there is (the CLI reads it from the machine).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from simcore.errors import ConfigError
from simcore.sim.config import SimulationConfig
from simcore.sim.dag import compile_trace
from simcore.trace.model import Trace

#: Bytes each worker holds whatever the trace: its random generator, slots, statistics.
WORKER_BYTES = 4096
#: Bytes each worker holds per op of its step: waiting counts, ready queues, pending events.
WORKER_OP_BYTES = 128
#: Extra bytes per worker and op when durations are drawn per step (``jitter``, ``jitter_cv``).
JITTER_OP_BYTES = 40
#: Bytes per timeline record (one simulated op): the recorder's columns and the result's copy.
RECORD_BYTES = 96
#: Bytes per op of each compiled DAG and profiled step (the shared duration tables).
TABLE_BYTES = 40
#: The share of the available memory a simulation may plan to use; the rest is left for the
#: rest of the machine, the export of results, and the estimate's error.
MEMORY_FRACTION = 0.5


@dataclass(frozen=True)
class Footprint:
    """What one configuration costs: peak memory (bytes) and simulated ops.

    ``memory_bytes = fixed_bytes + workers * (worker_bytes + steps * step_record_bytes)``.
    """

    workers: int
    steps: int
    fixed_bytes: float
    worker_bytes: float  # per worker, without the timeline
    step_record_bytes: float  # per worker and step: the timeline's records (0 without one)
    ops: int  # ops simulated in all (every worker, step, replication and hybrid part)

    @property
    def memory_bytes(self) -> float:
        per_worker = self.worker_bytes + self.steps * self.step_record_bytes
        return self.fixed_bytes + self.workers * per_worker

    def max_workers(self, budget_bytes: float) -> int:
        """The largest worker count whose footprint stays within ``budget_bytes`` (0: none)."""
        per_worker = self.worker_bytes + self.steps * self.step_record_bytes
        return max(0, math.floor((budget_bytes - self.fixed_bytes) / per_worker))

    def max_steps(self, budget_bytes: float) -> int | None:
        """The most steps that fit in ``budget_bytes`` at this W; None if steps cost no memory."""
        if self.step_record_bytes == 0:
            return None
        left = budget_bytes - self.fixed_bytes - self.workers * self.worker_bytes
        return max(0, math.floor(left / (self.workers * self.step_record_bytes)))


def footprint(traces: Sequence[Trace], config: SimulationConfig) -> Footprint:
    """The estimated peak memory and the ops of simulating ``config`` on ``traces``.

    Takes time linear in the traces' sizes, not in W or the steps: it compiles each trace once.
    Assumes ``config`` fits the traces (worker types name traces that exist).
    """
    used = sorted(set(config.worker_types)) if config.worker_types is not None else [0]
    if config.worker_types is None and len(traces) > 1:
        used = list(range(min(len(traces), config.workers)))
    n_ops = [compile_trace(traces[i], config).n_ops for i in used]
    ops = max(n_ops)  # per worker: the largest step any worker has
    jitter = config.jitter != "none" or config.jitter_cv > 0.0
    op_bytes = WORKER_OP_BYTES + (JITTER_OP_BYTES if jitter else 0)
    runs_bytes = 8 * config.replication_count * (config.batches + 6)  # each run's per-worker arrays
    worker = WORKER_BYTES + ops * op_bytes + runs_bytes
    fixed = sum(TABLE_BYTES * n * traces[i].n_steps for i, n in zip(used, n_ops, strict=True))
    return Footprint(
        workers=config.workers,
        steps=config.steps,
        fixed_bytes=float(fixed),
        worker_bytes=float(worker),
        step_record_bytes=float(RECORD_BYTES * ops) if config.timeline else 0.0,
        ops=config.workers * config.steps * ops * config.runs,
    )


def check_memory(
    traces: Sequence[Trace],
    config: SimulationConfig,
    available_bytes: float,
    fraction: float = MEMORY_FRACTION,
) -> Footprint:
    """The footprint of ``config``, or ConfigError if it needs more than ``fraction`` of
    ``available_bytes``.

    The error starts with the parameter to change (``workers``, or ``steps`` when the timeline's
    records are what does not fit) and gives its value, the estimate, the budget and the largest
    value that fits.
    """
    cost = footprint(traces, config)
    budget = fraction * available_bytes
    if cost.memory_bytes <= budget:
        return cost
    limit = (
        f"more than the {_size(budget)} ({fraction:.0%} of the {_size(available_bytes)} "
        "available) a simulation may use on this machine"
    )
    ops = f"(and {cost.ops:,} ops to simulate)"
    max_steps = cost.max_steps(budget)
    if max_steps is not None and config.workers * cost.worker_bytes <= budget / 2:
        raise ConfigError(
            f"steps: {config.steps:,} steps with a timeline need about "
            f"{_size(cost.memory_bytes)} of memory ({_size(cost.step_record_bytes)} of records "
            f"per worker and step), {limit}; at most {max_steps:,} steps fit at "
            f"{config.workers:,} workers, or leave out the timeline {ops}"
        )
    each = f"{_size(cost.worker_bytes)} each"
    if config.timeline:
        each += f" and {_size(cost.step_record_bytes)} of records per step"
    raise ConfigError(
        f"workers: {config.workers:,} workers need about {_size(cost.memory_bytes)} of memory "
        f"({each}), {limit}; at most {cost.max_workers(budget):,} workers fit {ops}"
    )


def _size(nbytes: float) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"
