"""Time gloo transfers between a parameter server and its workers, one pattern at a time.

A pattern says, for each worker, whether it pushes ``nbytes`` to the server, pulls ``nbytes``
from it, or both, all started together after a barrier. Each repetition is timed two ways: the
server's span from that barrier to the one after every transfer has arrived, and each transfer's
end where it is received (the server for a push, the worker for a pull), from the receiving
rank's own start of the repetition (after the same barrier), so that ranks on hosts without a
common clock time it alike. The duplex measurement
(:mod:`profilers.distributed.link_duplex`) reads the spans, the interference measurement
(:mod:`profilers.distributed.link_interference`) the ends.

With two or more cores the server is pinned to the first core and the workers to the others,
as the validation's testbed places them; on the emulated cluster the ranks live in its
namespaces, otherwise they talk over loopback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profilers.distributed.spawn import join_gloo_group, run_rank_processes
from profilers.distributed.testbed import Testbed, available_cores
from profilers.netns_cluster import EmulatedCluster
from simcore.errors import SgdsimError

__all__ = ["PatternTimes", "Plan", "pattern_times", "run_patterns", "time_patterns"]

_GRACE_S = 10.0

#: One ``(push, pull)`` per worker taking part (workers 1, 2, ... in order).
Plan = tuple[tuple[bool, bool], ...]


@dataclass(frozen=True)
class PatternTimes:
    """Every timed repetition of one pattern (seconds)."""

    span_s: tuple[float, ...]  # the server's, barrier to barrier
    push_end_s: Mapping[int, tuple[float, ...]]  # worker -> when its push arrived
    pull_end_s: Mapping[int, tuple[float, ...]]  # worker -> when its pull arrived


def time_patterns(
    what: str,
    patterns: Mapping[str, Plan],
    *,
    nbytes: int,
    repeats: int,
    warmup: int,
    timeout_s: float,
    cluster: EmulatedCluster | None,
) -> dict[str, PatternTimes]:
    """Run every pattern ``warmup + repeats`` times in one gloo group of a server and as many
    workers as the largest pattern has; the timed repetitions of each. ``what`` names the run
    in errors (DistributedRunError when a rank fails or does not finish in time)."""
    workers = max(len(plan) for plan in patterns.values())
    world = workers + 1
    pinned = Testbed(cores=available_cores()).server_and_worker_cpus(1, workers)
    cpus: list[set[int] | None] = list(pinned) if pinned is not None else [None] * world
    args = (world, dict(patterns), nbytes, repeats, warmup, timeout_s, cluster)
    per_rank = run_rank_processes(
        what,
        _rank_main,
        [(*args, cpus[rank]) for rank in range(world)],
        (timeout_s + _GRACE_S) * len(patterns),
    )
    return pattern_times(patterns, per_rank)


def pattern_times(
    patterns: Mapping[str, Plan], per_rank: Sequence[Mapping[str, Mapping[str, Sequence[float]]]]
) -> dict[str, PatternTimes]:
    """Every pattern's times from what :func:`run_patterns` returned on each rank (in rank
    order). A push ends on the server's clock, a pull on its worker's, each from that rank's
    own start of the repetition (the ranks may be on hosts without a common clock)."""
    out = {}
    for name, plan in patterns.items():
        times = [rank_times[name] for rank_times in per_rank]
        out[name] = PatternTimes(
            tuple(times[0]["span"]),
            {
                w: _since(times[0][f"push{w}"], times[0]["start"])
                for w, (push, _) in enumerate(plan, start=1)
                if push
            },
            {
                w: _since(times[w]["pull"], times[w]["start"])
                for w, (_, pull) in enumerate(plan, start=1)
                if pull
            },
        )
    return out


def _since(ends: Sequence[float], starts: Sequence[float]) -> tuple[float, ...]:
    return tuple(end - start for end, start in zip(ends, starts, strict=True))


def _rank_main(
    rank: int,
    init: str,
    world: int,
    patterns: Mapping[str, Plan],
    nbytes: int,
    repeats: int,
    warmup: int,
    timeout_s: float,
    cluster: EmulatedCluster | None,
    cpus: set[int] | None,
    results: Any,
) -> None:
    try:
        dist = join_gloo_group(rank, world, init, timeout_s, cluster, cpus)
        out = run_patterns(dist, rank, world, patterns, nbytes, repeats, warmup)
        dist.destroy_process_group()
        results.put(("times", rank, out))
    except (SgdsimError, RuntimeError, OSError) as err:
        results.put(("error", rank, str(err)))
        raise SystemExit(1) from err


def run_patterns(
    dist: Any,
    rank: int,
    world: int,
    patterns: Mapping[str, Plan],
    nbytes: int,
    repeats: int,
    warmup: int,
) -> dict[str, dict[str, list[float]]]:
    """In rank ``rank`` of a gloo group of ``world`` ranks (the server is rank 0; ranks beyond
    a pattern's workers only join its barriers): run every pattern ``warmup + repeats`` times;
    this rank's start, span and transfer ends (:func:`time.perf_counter`) of the timed ones,
    for :func:`pattern_times`. Every rank of the group must call it."""
    import torch

    payload = torch.ones(nbytes // 4)
    inbox = [torch.empty(nbytes // 4) for _ in range(world)]
    out: dict[str, dict[str, list[float]]] = {}
    for name, plan in patterns.items():
        times: dict[str, list[float]] = {}
        for repetition in range(warmup + repeats):
            dist.barrier()
            start = time.perf_counter()
            ends = _wait_each(_post(dist, rank, plan, payload, inbox))
            dist.barrier()  # the repetition ends when every transfer has arrived
            if repetition >= warmup:
                times.setdefault("start", []).append(start)
                times.setdefault("span", []).append(time.perf_counter() - start)
                for key, end in ends.items():
                    times.setdefault(key, []).append(end)
        out[name] = times
    return out


def _post(
    dist: Any, rank: int, plan: Plan, payload: Any, inbox: Sequence[Any]
) -> list[tuple[str | None, Any]]:
    """This rank's transfers of ``plan``, started; each with the key its end is kept under
    (None: a send, whose end says nothing about when its bytes arrived)."""
    works: list[tuple[str | None, Any]] = []
    if rank == 0:
        for peer, (push, pull) in enumerate(plan, start=1):
            if push:
                works.append((f"push{peer}", dist.irecv(inbox[peer], src=peer, tag=1)))
            if pull:
                works.append((None, dist.isend(payload, dst=peer, tag=2)))
    elif rank <= len(plan):
        push, pull = plan[rank - 1]
        if push:
            works.append((None, dist.isend(payload, dst=0, tag=1)))
        if pull:
            works.append(("pull", dist.irecv(inbox[0], src=0, tag=2)))
    return works


def _wait_each(works: Sequence[tuple[str | None, Any]]) -> dict[str, float]:
    """Wait for every transfer, each in a thread of its own so that every receive ends at its
    own time (a second wait on a gloo receive waits for another receive); the end times of
    those with a key."""
    ends: dict[str, float] = {}

    def finish(key: str | None, work: Any) -> None:
        work.wait()
        if key is not None:
            ends[key] = time.perf_counter()

    threads = [threading.Thread(target=finish, args=pair) for pair in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return ends
