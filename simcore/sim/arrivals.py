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
simulated timeline; ``RunResult.pull_arrival_times`` reads them from a real run's spans.

What the arrival order does to the workers' computation is the other half: a worker whose pull
arrives first computes while the others still receive theirs, and where workers share a core it
shares it with whatever their transfers cost it. :func:`computations_by_arrival` gives, for the
first worker to have its pull, the second, ..., the median over steps of its computation in the
step (the sum of its forward and backward ops' wall times, waits between them left out) in units
of the computation alone; :func:`timeline_computations` reads them from a simulated timeline,
``RunResult.computation_times`` from a real run's spans. Pure.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence

from simcore.sim.results import Timeline

__all__ = [
    "arrivals_text",
    "computations_by_arrival",
    "position_medians",
    "pull_arrivals",
    "timeline_computations",
    "timeline_pull_arrivals",
    "timeline_pull_ends",
]

COMPUTATION_KINDS = frozenset({"forward", "backward"})  # what a computation is, in spans too


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
    _check_units(workers, unit_s)
    rows = []
    for step, keys in _pulled_steps(pull_ends, workers, from_step):
        if step - 1 in releases:
            release = releases[step - 1]
            rows.append(sorted((pull_ends[key] - release) / unit_s for key in keys))
    return position_medians(rows)


def timeline_pull_arrivals(
    timeline: Timeline, workers: int, unit_s: float, from_step: int = 0
) -> tuple[float, ...] | None:
    """:func:`pull_arrivals` of a simulated Sync-SGD run (:func:`timeline_pull_ends`)."""
    return pull_arrivals(*timeline_pull_ends(timeline), workers, unit_s, from_step)


def timeline_pull_ends(
    timeline: Timeline,
) -> tuple[dict[tuple[int, int], float], dict[int, float]]:
    """Each worker's last transfer on a server's downlink in a step (``(step, worker)``), and
    the end of the servers' last update of each step (the release of the next)."""
    pull_ends: dict[tuple[int, int], float] = {}
    releases: dict[int, float] = {}
    for record in timeline:
        if record.resource.startswith("downlink"):
            key = (record.step, record.worker)
            pull_ends[key] = max(pull_ends.get(key, record.end_s), record.end_s)
        elif record.resource.startswith("ps") and record.kind == "update":
            releases[record.step] = max(releases.get(record.step, record.end_s), record.end_s)
    return pull_ends, releases


def computations_by_arrival(
    pull_ends: Mapping[tuple[int, int], float],
    computations: Mapping[tuple[int, int], float],
    workers: int,
    unit_s: float,
    from_step: int = 0,
) -> tuple[float, ...] | None:
    """The median over steps of the computation of the first worker to have its pull, the
    second, ...: ``computations[(step, worker)]`` is the worker's computation in the step (s),
    ``pull_ends[(step, worker)]`` when it had the step's whole model; ``unit_s`` the
    computation alone. Steps before ``from_step`` or without every worker's pull and
    computation are left out; None when none is left.

    Raises
    ------
    ValueError : ``workers`` < 1 or ``unit_s`` not > 0.
    """
    _check_units(workers, unit_s)
    rows = []
    for _, keys in _pulled_steps(pull_ends, workers, from_step):
        if all(key in computations for key in keys):
            in_order = sorted(keys, key=lambda key: (pull_ends[key], key[1]))
            rows.append([computations[key] / unit_s for key in in_order])
    return position_medians(rows)


def _pulled_steps(
    pull_ends: Mapping[tuple[int, int], float], workers: int, from_step: int
) -> Iterator[tuple[int, list[tuple[int, int]]]]:
    """Each step from ``from_step`` on in which every worker's pull ended, in order, with its
    ``(step, worker)`` keys."""
    for step in sorted({s for s, _ in pull_ends}):
        keys = [(step, w) for w in range(workers)]
        if step >= from_step and all(key in pull_ends for key in keys):
            yield step, keys


def position_medians(rows: Sequence[Sequence[float]]) -> tuple[float, ...] | None:
    """Each position's median over ``rows`` (all of one length); None without rows."""
    if not rows:
        return None
    return tuple(statistics.median(column) for column in zip(*rows, strict=True))


def _check_units(workers: int, unit_s: float) -> None:
    if workers < 1 or not unit_s > 0:
        raise ValueError(f"workers must be >= 1 and unit_s > 0, got {workers}, {unit_s}")


def timeline_computations(timeline: Timeline) -> dict[tuple[int, int], float]:
    """Each worker's computation per step in a simulated timeline: its forward and backward
    ops' wall times summed, by ``(step, worker)``."""
    computations: dict[tuple[int, int], float] = {}
    for record in timeline:
        if record.resource == "worker" and record.kind in COMPUTATION_KINDS:
            key = (record.step, record.worker)
            computations[key] = computations.get(key, 0.0) + (record.end_s - record.start_s)
    return computations


def arrivals_text(arrivals: tuple[float, ...] | None) -> str:
    """``1.02 1.98 3.01 4.00``, or ``-`` when not known."""
    return "-" if arrivals is None else " ".join(f"{a:.2f}" for a in arrivals)
