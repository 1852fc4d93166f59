"""When a Sync-SGD step's pulls arrive after the server releases it, measured or simulated.

A Sync-SGD parameter server sends the next step's parameters once every worker's gradients are
in and applied: its release. How the W pulls that follow share the server's link decides when
each worker can start computing, and shows how the link shares concurrent transfers more
directly than any throughput: under equal sharing (processor sharing with equal weights) all W
whole-model pulls end together, W one-pull times after the release; one after another (FCFS)
the k-th ends after k; uneven shares land in between, the first earlier and the last at W.

:func:`pull_arrivals` takes, per step, each worker's last pull end and the server's release
(the end of its last update of the step before) and gives, for each order statistic (first of
the W to arrive, second, ...), its median over the steps, in units of one pull alone (the
model's bytes at the link's one-flow goodput). :func:`timeline_pull_arrivals` reads both from a
simulated timeline; ``RunResult.pull_arrival_times`` reads them from a real run's spans. Pure.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping

from simcore.sim.results import Timeline

__all__ = ["arrivals_text", "pull_arrivals", "timeline_pull_arrivals"]


def pull_arrivals(
    pull_ends: Mapping[tuple[int, int], float],
    releases: Mapping[int, float],
    workers: int,
    unit_s: float,
    from_step: int = 0,
) -> tuple[float, ...] | None:
    """The median over steps of each worker-order statistic of ``(pull end - release) /
    unit_s``: ``pull_ends[(step, worker)]`` is when the worker had the step's whole model,
    ``releases[step]`` when the server finished the step (the next step's pulls follow it).
    Steps before ``from_step``, without a release before them or without every worker's pull
    are left out; None when none is left.

    Raises
    ------
    ValueError : ``workers`` < 1 or ``unit_s`` not > 0.
    """
    if workers < 1 or not unit_s > 0:
        raise ValueError(f"workers must be >= 1 and unit_s > 0, got {workers}, {unit_s}")
    rows = []
    for step in sorted({s for s, _ in pull_ends}):
        if step < from_step or step - 1 not in releases:
            continue
        ends = [pull_ends.get((step, w)) for w in range(workers)]
        if any(end is None for end in ends):
            continue
        release = releases[step - 1]
        rows.append(sorted((end - release) / unit_s for end in ends if end is not None))
    if not rows:
        return None
    return tuple(statistics.median(row[i] for row in rows) for i in range(workers))


def timeline_pull_arrivals(
    timeline: Timeline, workers: int, unit_s: float, from_step: int = 0
) -> tuple[float, ...] | None:
    """:func:`pull_arrivals` of a simulated Sync-SGD run: each worker's last transfer on a
    server's downlink in a step, and the end of the servers' last update of the step before."""
    pull_ends: dict[tuple[int, int], float] = {}
    releases: dict[int, float] = {}
    for record in timeline:
        if record.resource.startswith("downlink"):
            key = (record.step, record.worker)
            pull_ends[key] = max(pull_ends.get(key, record.end_s), record.end_s)
        elif record.resource.startswith("ps") and record.kind == "update":
            releases[record.step] = max(releases.get(record.step, record.end_s), record.end_s)
    return pull_arrivals(pull_ends, releases, workers, unit_s, from_step)


def arrivals_text(arrivals: tuple[float, ...] | None) -> str:
    """``1.02 1.98 3.01 4.00``, or ``-`` when not known."""
    return "-" if arrivals is None else " ".join(f"{a:.2f}" for a in arrivals)
