"""How a parameter server's link was occupied: the share of time that ``i`` workers pulled and
``j`` pushed at once, for a simulated run or a measured one.

A worker's steps can line up in many ways with the same step-time spread and the same offsets
between step ends (:mod:`simcore.sim.phases`): the workers may pull together and push together
(a convoy: each direction busy in turn, the other idle), or one may pull while another pushes
(pipelined: both directions busy). Which of the two a run settles in decides Async-SGD's
throughput on a link that is fast in both directions, and it shows directly in this table. On
the emulated cluster, for example, mlp at 500 Mbit/s with three workers spent 34% of the time
with all three pulling and 40% with all three pushing, where the simulator had them in both
directions at once for 72% of the time and predicted the throughput 24% too high.

The input is a list of :class:`TransferInterval`: when a worker had a pull (the server's
downlink) or a push (its uplink) in flight. A worker's overlapping intervals in one direction
count once (it pulls several layers at a time over one connection).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from simcore.sim.results import Timeline

__all__ = [
    "PULL",
    "PUSH",
    "LinkOccupancy",
    "TransferInterval",
    "link_occupancy",
    "link_stretches",
    "occupancy_from_dict",
    "occupancy_text",
    "occupancy_to_dict",
    "pooled_occupancy",
    "short_occupancy_text",
    "timeline_intervals",
    "timeline_occupancy",
]

PULL, PUSH = "pull", "push"
_DIRECTIONS = (PULL, PUSH)


@dataclass(frozen=True)
class TransferInterval:
    """A worker's pull or push in flight from ``start_s`` to ``end_s`` (seconds)."""

    worker: int
    direction: str  # PULL or PUSH
    start_s: float
    end_s: float

    def __post_init__(self) -> None:
        if self.direction not in _DIRECTIONS:
            raise ValueError(f"direction: {self.direction!r} is not one of {_DIRECTIONS}")
        if not self.end_s >= self.start_s:
            raise ValueError(f"interval ends ({self.end_s}) before it starts ({self.start_s})")


@dataclass(frozen=True)
class LinkOccupancy:
    """``shares``: ``(pulling, pushing, share of time)`` for every combination that occurred,
    pulling then pushing ascending; the shares sum to 1 over ``span_s`` (0 when nothing moved).
    """

    workers: int
    span_s: float
    shares: tuple[tuple[int, int, float], ...]

    def share(self, pulling: int, pushing: int) -> float:
        """The share of time exactly ``pulling`` workers pulled and ``pushing`` pushed."""
        return sum(s for i, j, s in self.shares if i == pulling and j == pushing)

    @property
    def all_pulling(self) -> float:
        """Every worker pulling, none pushing."""
        return self.share(self.workers, 0)

    @property
    def all_pushing(self) -> float:
        """Every worker pushing, none pulling."""
        return self.share(0, self.workers)

    @property
    def both_directions(self) -> float:
        """Some worker pulling while another (or the same) pushes."""
        return sum(s for i, j, s in self.shares if i > 0 and j > 0)

    @property
    def idle(self) -> float:
        """Nothing in flight either way (every worker computing)."""
        return self.share(0, 0)


def link_occupancy(
    intervals: Iterable[TransferInterval],
    workers: int,
    start_s: float | None = None,
    end_s: float | None = None,
) -> LinkOccupancy:
    """The occupancy of ``workers`` workers' transfers between ``start_s`` and ``end_s``
    (default: the first interval's start and the last one's end); intervals are clipped to it.
    """
    if workers < 1:
        raise ValueError(f"workers: must be >= 1, got {workers}")
    stretches = link_stretches(intervals, start_s, end_s)
    if not stretches:
        return LinkOccupancy(workers, 0.0, ())
    lo, hi = stretches[0][0], stretches[-1][1]
    time_in: dict[tuple[int, int], float] = {}
    for a, b, pulling, pushing in stretches:
        key = (pulling, pushing)
        time_in[key] = time_in.get(key, 0.0) + (b - a)
    span = hi - lo
    shares = tuple((i, j, t / span) for (i, j), t in sorted(time_in.items()) if t / span > 0.0)
    return LinkOccupancy(workers, span, shares)


def link_stretches(
    intervals: Iterable[TransferInterval], start_s: float | None = None, end_s: float | None = None
) -> list[tuple[float, float, int, int]]:
    """The link's state over time: consecutive stretches ``(from_s, to_s, pulling, pushing)``
    between ``start_s`` and ``end_s`` (default: the first interval's start and the last one's
    end; intervals are clipped to it), each with how many workers pulled and pushed in it.
    Empty when no interval reaches that span."""
    merged = _merged(intervals)
    if not merged:
        return []
    lo = min(a for _, _, a, _ in merged) if start_s is None else start_s
    hi = max(b for _, _, _, b in merged) if end_s is None else end_s
    if not hi > lo:
        return []
    events: list[tuple[float, int, int]] = []  # (time, +-1 pulling, +-1 pushing)
    for _, direction, a, b in merged:
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        pull = direction == PULL
        events.append((a, int(pull), int(not pull)))
        events.append((b, -int(pull), -int(not pull)))
    events.sort()
    out: list[tuple[float, float, int, int]] = []
    pulling = pushing = 0
    last = lo
    for t, d_pull, d_push in events:
        if t > last:
            out.append((last, t, pulling, pushing))
            last = t
        pulling += d_pull
        pushing += d_push
    if hi > last:
        out.append((last, hi, 0, 0))
    return out


def pooled_occupancy(occupancies: Iterable[LinkOccupancy]) -> LinkOccupancy | None:
    """Several runs' occupancies as one, each weighted by its span (None: none with a span).
    Raises ValueError when they are of different numbers of workers."""
    runs = [o for o in occupancies if o.span_s > 0]
    if not runs:
        return None
    workers = {o.workers for o in runs}
    if len(workers) != 1:
        raise ValueError(f"occupancies of different numbers of workers: {sorted(workers)}")
    total = sum(o.span_s for o in runs)
    time_in: dict[tuple[int, int], float] = {}
    for o in runs:
        for i, j, share in o.shares:
            time_in[(i, j)] = time_in.get((i, j), 0.0) + share * o.span_s
    shares = tuple((i, j, t / total) for (i, j), t in sorted(time_in.items()))
    return LinkOccupancy(workers.pop(), total, shares)


def short_occupancy_text(occupancy: LinkOccupancy | None) -> str:
    """``34/40/16``: the percentages of time every worker pulled, every worker pushed, and both
    directions were busy; ``-`` for None."""
    if occupancy is None:
        return "-"
    return (
        f"{100 * occupancy.all_pulling:.0f}/{100 * occupancy.all_pushing:.0f}/"
        f"{100 * occupancy.both_directions:.0f}"
    )


def _merged(intervals: Iterable[TransferInterval]) -> list[tuple[int, str, float, float]]:
    """Each worker's intervals in one direction, overlapping ones joined."""
    by_key: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for iv in intervals:
        by_key.setdefault((iv.worker, iv.direction), []).append((iv.start_s, iv.end_s))
    out: list[tuple[int, str, float, float]] = []
    for (worker, direction), spans in by_key.items():
        spans.sort()
        cur_a, cur_b = spans[0]
        for a, b in spans[1:]:
            if a <= cur_b:
                cur_b = max(cur_b, b)
            else:
                out.append((worker, direction, cur_a, cur_b))
                cur_a, cur_b = a, b
        out.append((worker, direction, cur_a, cur_b))
    return out


def occupancy_text(occupancy: LinkOccupancy) -> str:
    """``all 3 workers pulling 42%, all 3 workers pushing 28%, both directions busy 23%, idle
    2%, fewer workers one way 5%`` (``the worker`` for one)."""
    who = "the worker" if occupancy.workers == 1 else f"all {occupancy.workers} workers"
    if occupancy.span_s <= 0:
        return "no transfers"
    parts = [
        f"{who} pulling {occupancy.all_pulling:.0%}",
        f"{who} pushing {occupancy.all_pushing:.0%}",
        f"both directions busy {occupancy.both_directions:.0%}",
        f"idle {occupancy.idle:.0%}",
    ]
    rest = 1.0 - occupancy.all_pulling - occupancy.all_pushing
    rest -= occupancy.both_directions + occupancy.idle
    if occupancy.workers > 1 and rest >= 0.005:
        parts.append(f"fewer workers one way {rest:.0%}")
    return ", ".join(parts)


def timeline_intervals(timeline: Timeline, from_step: int = 0) -> list[TransferInterval]:
    """A simulated run's transfers on the parameter servers' links (every server's downlink and
    uplink pooled), of steps ``from_step`` on."""
    out = []
    for record in timeline:
        if record.step < from_step:
            continue
        if record.resource.startswith("downlink"):
            out.append(TransferInterval(record.worker, PULL, record.start_s, record.end_s))
        elif record.resource.startswith("uplink"):
            out.append(TransferInterval(record.worker, PUSH, record.start_s, record.end_s))
    return out


def timeline_occupancy(
    timeline: Timeline, workers: int, from_step: int = 0
) -> LinkOccupancy | None:
    """The occupancy of a simulated run's servers' links from step ``from_step`` on
    (:func:`timeline_intervals`); None when no transfer reached them."""
    intervals = timeline_intervals(timeline, from_step)
    return link_occupancy(intervals, workers) if intervals else None


def occupancy_to_dict(occupancy: LinkOccupancy) -> dict[str, Any]:
    """JSON-ready: ``workers``, ``span_s`` and ``shares``, each ``{pulling, pushing, share}``."""
    return {
        "workers": occupancy.workers,
        "span_s": occupancy.span_s,
        "shares": [
            {"pulling": i, "pushing": j, "share": share} for i, j, share in occupancy.shares
        ],
    }


def occupancy_from_dict(raw: Any) -> LinkOccupancy:
    """Inverse of :func:`occupancy_to_dict`. Raises KeyError, TypeError or ValueError (saying
    what is wrong) on bad data; the caller names the file and the field."""
    workers = int(raw["workers"])
    shares = tuple((int(s["pulling"]), int(s["pushing"]), float(s["share"])) for s in raw["shares"])
    span_s = float(raw["span_s"])
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if not (math.isfinite(span_s) and span_s >= 0):
        raise ValueError(f"span_s must be a duration >= 0, got {span_s}")
    if any(not 0.0 <= share <= 1.0 for _, _, share in shares):
        raise ValueError(f"shares must be within 0..1, got {[s for _, _, s in shares]}")
    if any(not (0 <= i <= workers and 0 <= j <= workers) for i, j, _ in shares):
        raise ValueError(f"a share counts more workers than the run's {workers}")
    return LinkOccupancy(workers, span_s, shares)
