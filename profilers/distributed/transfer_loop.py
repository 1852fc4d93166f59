"""Async-SGD's transfers without the training: workers loop pull, busy, push on a real link.

Each worker repeats, as an Async-SGD worker does but with a fixed busy wait in place of the
model: receive ``nbytes`` from the server (the pull), spin ``busy_s`` on its core, send
``nbytes`` back (the push). The server serves every worker in a thread of its own and sends a
worker's next pull as soon as its push has arrived, as the parameter server of
:mod:`profilers.distributed` does. With no computation to vary, what remains is how the link
shares its two directions among the workers over time: whether they settle into pulling
while others push (pipelining), move together (a convoy), or drift between the two. The
simulator gets the same loop as a one-layer trace, so the two can be compared step for step
(``scenarios/async_link_loop.py``).

Times are ``time.perf_counter`` (one clock for the machine) from the server's leaving the first
barrier: a pull is in flight from the server's send (the arrival of the worker's previous push,
or the start) to the worker's receive, a push from the worker's send to the server's receive.

With two or more cores the server is pinned to the first core and the workers share the
others, as the validation's testbed places them; on the emulated cluster the ranks live in its
namespaces, otherwise they talk over loopback.
"""

from __future__ import annotations

import bisect
import itertools
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from profilers.distributed.spawn import join_gloo_group, run_rank_processes
from profilers.distributed.testbed import Testbed, available_cores
from profilers.netns_cluster import EmulatedCluster
from simcore.errors import ConfigError, SgdsimError
from simcore.sim.occupancy import PULL, PUSH, LinkOccupancy, TransferInterval, link_occupancy

__all__ = ["StateShares", "TransferLoop", "measure_transfer_loop", "state_shares"]

_GRACE_S = 10.0


@dataclass(frozen=True)
class TransferLoop:
    """One measured loop: every worker's pulls and pushes (workers 0 .. W-1, seconds from the
    start), ``steps`` of each."""

    nbytes: int
    busy_s: float
    steps: int
    intervals: tuple[TransferInterval, ...]

    @property
    def workers(self) -> int:
        return 1 + max(i.worker for i in self.intervals)

    def pull_ends(self, worker: int) -> list[float]:
        return sorted(i.end_s for i in self.intervals if i.worker == worker and i.direction == PULL)

    def cycle_s(self, warmup: int) -> float:
        """The median time between a worker's successive pulls' ends after ``warmup`` steps,
        over every worker: each worker's step time."""
        gaps = []
        for worker in range(self.workers):
            ends = self.pull_ends(worker)[warmup:]
            gaps += [b - a for a, b in itertools.pairwise(ends)]
        if not gaps:
            raise ConfigError(f"transfer loop: no step after {warmup} warm-up steps")
        return statistics.median(gaps)

    def transfer_s(self, warmup: int) -> float:
        """The median time a transfer was in flight after ``warmup`` steps (with one worker,
        one transfer alone on its direction of the link)."""
        start, _ = self.window(warmup)
        return statistics.median(i.end_s - i.start_s for i in self.intervals if i.start_s >= start)

    def occupancy(self, warmup: int) -> LinkOccupancy:
        """How the server's link was occupied from when every worker had done ``warmup`` steps
        until the first worker stopped (transfers cut to that window: no worker's absence at
        either end counts)."""
        start, end = self.window(warmup)
        inside = [
            TransferInterval(i.worker, i.direction, max(i.start_s, start), min(i.end_s, end))
            for i in self.intervals
            if i.end_s > start and i.start_s < end
        ]
        return link_occupancy(inside, self.workers)

    def window(self, warmup: int) -> tuple[float, float]:
        """From when every worker had done ``warmup`` steps until the first worker stopped."""
        if not 0 <= warmup < self.steps:
            raise ConfigError(f"transfer loop: warm-up {warmup} must be in 0..{self.steps - 1}")
        start = max(self.pull_ends(worker)[warmup] for worker in range(self.workers))
        end = min(
            max(i.end_s for i in self.intervals if i.worker == worker)
            for worker in range(self.workers)
        )
        return start, end


#: A state of the server's link: a transfer's direction (PULL or PUSH) and how many pulls and
#: pushes were in flight, itself included.
State = tuple[str, int, int]


@dataclass(frozen=True)
class StateShares:
    """The share of one flow's goodput a transfer got in each state (``shares``; with the
    seconds of transfers observed in it, ``seconds``), fitted to loops' transfers; and how far
    each transfer's fitted work strayed from one transfer alone (``residual_cv``)."""

    shares: Mapping[State, float]
    seconds: Mapping[State, float]
    residual_cv: float


def _in_flight(intervals: Sequence[TransferInterval], at_s: float) -> tuple[int, int]:
    pulls = sum(1 for i in intervals if i.direction == PULL and i.start_s <= at_s < i.end_s)
    pushes = sum(1 for i in intervals if i.direction == PUSH and i.start_s <= at_s < i.end_s)
    return pulls, pushes


def state_shares(loops: Sequence[TransferLoop], alone_s: float, warmup: int) -> StateShares:
    """Least squares over every transfer of ``loops`` after ``warmup`` steps: each moved the
    bytes one transfer alone moves in ``alone_s``, at a share of that rate that depends only on
    the state of the link while it was in flight. Where the fit has no data (or too little to
    pin a share down), the share it reports is not meaningful: weigh it by ``seconds``.
    ConfigError when no transfer is left or ``alone_s`` is not positive."""
    if not alone_s > 0:
        raise ConfigError(f"state shares: one transfer alone must take > 0 s, got {alone_s}")
    rows: list[dict[State, float]] = []
    for loop in loops:
        start, end = loop.window(warmup)
        # every stretch between two transfer edges, with how many pulls and pushes were in flight
        edges = sorted({t for i in loop.intervals for t in (i.start_s, i.end_s)})
        stretches = [
            (a, b, *_in_flight(loop.intervals, (a + b) / 2))
            for a, b in itertools.pairwise(edges)
            if b > a
        ]
        starts = [a for a, *_ in stretches]
        for transfer in loop.intervals:
            if transfer.start_s < start or transfer.end_s > end:
                continue
            row: dict[State, float] = {}
            first = bisect.bisect_left(starts, transfer.start_s)
            for a, b, pulls, pushes in stretches[first:]:
                if b > transfer.end_s:
                    break
                key = (transfer.direction, pulls, pushes)
                row[key] = row.get(key, 0.0) + (b - a)
            if row:
                rows.append(row)
    if not rows:
        raise ConfigError(f"state shares: no transfer after {warmup} warm-up steps")
    states = sorted({key for row in rows for key in row})
    matrix = np.array([[row.get(key, 0.0) for key in states] for row in rows])
    fitted, *_ = np.linalg.lstsq(matrix, np.full(len(rows), alone_s), rcond=None)
    work = matrix @ fitted / alone_s
    return StateShares(
        {key: float(v) for key, v in zip(states, fitted, strict=True)},
        {key: float(v) for key, v in zip(states, matrix.sum(axis=0), strict=True)},
        float(np.std(work) / np.mean(work)),
    )


def measure_transfer_loop(
    workers: int,
    *,
    nbytes: int,
    steps: int,
    busy_s: float = 0.005,
    cluster: EmulatedCluster | None = None,
    timeout_s: float = 120.0,
) -> TransferLoop:
    """Run the loop with ``workers`` workers for ``steps`` steps each on ``cluster`` (a server
    and ``workers`` workers; None: loopback). ConfigError for bad arguments,
    DistributedRunError when a rank fails or does not finish in time."""
    if workers < 1 or steps < 2 or nbytes < 4 or busy_s < 0:
        raise ConfigError(
            "transfer loop: needs workers >= 1, steps >= 2, transfers of >= 4 bytes and a busy "
            f"time >= 0; got {workers}, {steps}, {nbytes}, {busy_s}"
        )
    nbytes -= nbytes % 4
    world = workers + 1
    pinned = Testbed(cores=available_cores()).server_and_worker_cpus(1, workers)
    cpus: list[set[int] | None] = list(pinned) if pinned is not None else [None] * world
    per_rank = run_rank_processes(
        "transfer loop",
        _rank_main,
        [(world, nbytes, steps, busy_s, timeout_s, cluster, cpus[r]) for r in range(world)],
        timeout_s + _GRACE_S,
    )
    start, arrived = per_rank[0]  # worker -> when each of its pushes reached the server
    intervals = []
    for worker in range(workers):
        pushed = [t - start for t in arrived[worker + 1]]
        for k, (pull_end, push_start) in enumerate(per_rank[worker + 1]):
            pull_start = pushed[k - 1] if k else 0.0
            intervals.append(TransferInterval(worker, PULL, pull_start, pull_end - start))
            intervals.append(TransferInterval(worker, PUSH, push_start - start, pushed[k]))
    return TransferLoop(nbytes, busy_s, steps, tuple(intervals))


def _rank_main(
    rank: int,
    init: str,
    world: int,
    nbytes: int,
    steps: int,
    busy_s: float,
    timeout_s: float,
    cluster: EmulatedCluster | None,
    cpus: set[int] | None,
    results: Any,
) -> None:
    try:
        dist = join_gloo_group(rank, world, init, timeout_s, cluster, cpus)
        import torch

        dist.barrier()
        if rank == 0:  # the server's start is every rank's zero (one clock for the machine)
            out: Any = (time.perf_counter(), _serve(dist, torch, world, nbytes, steps))
        else:
            out = _work(dist, torch, nbytes, steps, busy_s)
        dist.barrier()
        dist.destroy_process_group()
        results.put(("times", rank, out))
    except (SgdsimError, RuntimeError, OSError) as err:
        results.put(("error", rank, str(err)))
        raise SystemExit(1) from err


def _serve(dist: Any, torch: Any, world: int, nbytes: int, steps: int) -> Any:
    """Every worker in a thread of its own: send its pull, wait for its push, again."""
    arrived: dict[int, list[float]] = {}
    errors: list[BaseException] = []

    def serve(worker: int) -> None:
        payload, inbox = torch.ones(nbytes // 4), torch.empty(nbytes // 4)
        times = arrived.setdefault(worker, [])
        try:
            for k in range(steps):
                dist.isend(payload, dst=worker, tag=2 * k).wait()
                dist.irecv(inbox, src=worker, tag=2 * k + 1).wait()
                times.append(time.perf_counter())
        except RuntimeError as err:  # a gloo error in a thread: the rank reports it below
            errors.append(err)

    threads = [threading.Thread(target=serve, args=(w,)) for w in range(1, world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"server: {errors[0]}")
    return arrived


def _work(dist: Any, torch: Any, nbytes: int, steps: int, busy_s: float) -> Any:
    """Pull, spin ``busy_s`` (a busy wait: the core is taken, as by a model's computation),
    push; each step's pull end and push start."""
    payload, inbox = torch.ones(nbytes // 4), torch.empty(nbytes // 4)
    times = []
    for k in range(steps):
        dist.irecv(inbox, src=0, tag=2 * k).wait()
        pulled = time.perf_counter()
        while time.perf_counter() - pulled < busy_s:
            pass
        times.append((pulled, time.perf_counter()))
        dist.isend(payload, dst=0, tag=2 * k + 1).wait()
    return times
