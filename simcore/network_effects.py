"""What a network profile records beyond the one-flow fit: the link's measured effects.

Schema version 2 of ``sgdsim.network`` (:mod:`simcore.network`) may carry optional
measurements, each with where it came from (``method``, ``created_utc``):

- :class:`FlowSharing`: how unevenly concurrent flows share the link, as the simulator's
  ``flow_weight_cv`` (lognormal per-transfer weights, SEMANTICS.md "Link sharing"), pooled over
  both directions and, where measured, per direction: ``pull`` (the server sending, downlink) and
  ``push`` (the server receiving, uplink);
- :class:`TransferCpu`: the CPU time the two ends spend per byte moved, the simulator's
  ``comm_cpu_s_per_byte``, and the cores of the host it was measured on (``host_cpu_cores``);
- :class:`RingGoodput`: the goodput of a gloo ring AllReduce per number of ranks W, the rate the
  ring's formula ``2(W-1)/W * bytes / time`` implies (below one flow's goodput);
- :class:`Duplex`: what a server's link carries with transfers in both directions at once, as a
  multiple of one direction's goodput (2: full duplex), the simulator's ``duplex_bps`` over its
  ``bandwidth_bps``;
- :class:`DuplexInterference` (version 5): the other model of those two directions, each
  keeping its bandwidth but slowed by the other's transfers (the simulator's
  ``duplex_interference``); where a profile has both, it replaces :class:`Duplex`.

This module is pure: the dataclasses and their JSON forms, checked field by field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from simcore.errors import TraceError
from simcore.sim.rate_link import interfered_capacity
from simcore.units import format_bandwidth

__all__ = [
    "EFFECT_KEYS",
    "Duplex",
    "DuplexInterference",
    "FieldChecker",
    "FlowSharing",
    "RingGoodput",
    "TransferCpu",
    "effect_from_dict",
    "effect_to_dict",
    "interference_text",
    "nearest_measured",
    "per_workers_text",
]


class FieldChecker:
    """Carries the source name so that every error says which file and field it is about."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> NoReturn:
        raise TraceError(f"{self.source}: {where}: {problem}")

    def number(
        self, obj: Mapping[str, Any], key: str, where: str, rule: str, ok: Callable[[float], bool]
    ) -> float:
        """``obj[key]`` as a finite float accepted by ``ok``; ``rule`` says what ``ok`` wants."""
        if key not in obj:
            self.fail(where, f"missing required field '{key}'")
        value = obj[key]
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if not (is_number and math.isfinite(value) and ok(float(value))):
            self.fail(where, f"field '{key}' must be a finite number {rule}, got {value!r}")
        return float(value)

    def optional_number(
        self, obj: Mapping[str, Any], key: str, where: str, rule: str, ok: Callable[[float], bool]
    ) -> float | None:
        """:meth:`number`, or None when ``key`` is absent or null."""
        return None if obj.get(key) is None else self.number(obj, key, where, rule, ok)

    def text(self, obj: Mapping[str, Any], key: str, where: str) -> str:
        value = obj.get(key, "")
        if not isinstance(value, str):
            self.fail(where, f"field '{key}' must be a string, got {value!r}")
        return value

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(where, f"expected a JSON object, got {value!r}")
        return value


def positive(value: float) -> bool:
    return value > 0


def non_negative(value: float) -> bool:
    return value >= 0


@dataclass(frozen=True)
class FlowSharing:
    """How unevenly concurrent flows share the link: the simulator's ``flow_weight_cv``.

    ``weight_cv`` pools both directions; ``pull_cv`` and
    ``push_cv`` are the directions' own, when they were measured apart (None otherwise): pull is
    the server sending (downlink), push the server receiving (uplink). ``fcfs_index`` (0: equal
    sharing, 1: one flow after another; None if not measured) shows how far from processor
    sharing the link is. ``warm_pull_cv`` and ``warm_push_cv`` (None if not measured): the same
    for a model's transfers started together over connections kept open, as training's are
    (``profilers.warm_sharing``), which share far less evenly than new flows; for reading and
    ``sgdsim validate --flow-sharing warm``, not what ``--network`` applies.
    """

    weight_cv: float
    pull_cv: float | None = None
    push_cv: float | None = None
    fcfs_index: float | None = None
    method: str = ""
    created_utc: str = ""
    warm_pull_cv: float | None = None
    warm_push_cv: float | None = None


@dataclass(frozen=True)
class TransferCpu:
    """CPU time the two ends spend per byte moved (core-seconds per byte, each end counted per
    byte it sends or receives) on a host of ``host_cpu_cores`` cores."""

    s_per_byte: float
    host_cpu_cores: float
    method: str = ""
    created_utc: str = ""


@dataclass(frozen=True)
class RingGoodput:
    """A ring AllReduce's goodput per number of ranks: ``points`` are ``(workers, bit/s)``,
    ascending in workers.

    Two optional terms (schema version 3) describe the ring as the validation predicts it, in
    place of the goodput, which folds a ring's per-message cost into a rate and so cannot carry
    it from the W measured to another: ``message_latency_s``, each of a ring's 2(W-1) messages
    per all-reduce's fixed cost beyond its bytes at the profile's bandwidth (measured with the
    smallest W); ``cpu_s_per_byte``, the CPU a rank spends per byte it sends or receives (the
    copies, the reduction, the network stack), done beside the messages on its host's cores;
    ``segment_bytes``, the largest message the ring's implementation sends (gloo's segments,
    ``SimulationConfig.ring_segment_bytes``), which the message count behind
    ``message_latency_s`` assumed (None: the paper's 2(W-1) messages per all-reduce).
    """

    points: tuple[tuple[int, float], ...]
    method: str = ""
    created_utc: str = ""
    message_latency_s: float | None = None
    cpu_s_per_byte: float | None = None
    segment_bytes: float | None = None
    # Optional, with message_latency_s, per W measured (a point's "bandwidth_bps"): the rate a
    # ring of W moved its bytes at once each message's fixed cost is taken out of its time. On
    # the testbed it falls with W at the faster links (a ring of four at 500 Mbit/s moved its
    # bytes at ~310 Mbit/s per link, a ring of two at ~450), which the cost per message of a
    # ring of two cannot carry to four. Empty: the profile's bandwidth for every W.
    bandwidths: tuple[tuple[int, float], ...] = ()

    def nearest(self, workers: int) -> tuple[int, float]:
        """The measured ``(W, bit/s)`` for ``workers``, else the nearest W measured (ties: the
        larger W, whose ring has at least as many hops)."""
        return nearest_measured(self.points, workers)

    def bandwidth(self, workers: int) -> tuple[int, float] | None:
        """The measured ``(W, bit/s)`` the bytes of a ring of ``workers`` move at (the W
        measured, else the nearest: beyond the largest W measured, the largest's); None when
        the profile carries none."""
        return nearest_measured(self.bandwidths, workers) if self.bandwidths else None


def per_workers_text(points: Iterable[tuple[int, float]]) -> str:
    """``W=2 431 Mbit/s, W=3 410 Mbit/s``: rates measured per W, in the given order."""
    return ", ".join(f"W={w} {format_bandwidth(bps)}" for w, bps in points)


def nearest_measured(points: tuple[tuple[int, float], ...], workers: int) -> tuple[int, float]:
    """The ``(W, value)`` of ``points`` measured at ``workers``, else at the nearest W (ties:
    the larger W, whose ring has at least as many hops)."""
    return min(points, key=lambda p: (abs(p[0] - workers), -p[0]))


@dataclass(frozen=True)
class Duplex:
    """What a parameter server's link carries in both directions together while pulls and
    pushes are both in flight, over what one direction carries alone (``ratio``: 2 is full
    duplex, 1 half duplex); ``profilers.distributed.link_duplex`` measures it."""

    ratio: float
    method: str = ""
    created_utc: str = ""


@dataclass(frozen=True)
class DuplexInterference:
    """How much each direction of a parameter server's link slows while the other carries
    transfers: with ``n`` transfers facing ``m`` the other way a direction carries
    ``efficiency * min(1, n / m) ** exponent`` of its bandwidth (``pull_exponent`` for the
    server sending, ``push_exponent`` for it receiving); the simulator's
    ``duplex_interference``. ``profilers.distributed.link_interference`` measures it."""

    efficiency: float
    pull_exponent: float
    push_exponent: float
    method: str = ""
    created_utc: str = ""

    @property
    def parameters(self) -> tuple[float, float, float]:
        """``SimulationConfig.duplex_interference``."""
        return (self.efficiency, self.pull_exponent, self.push_exponent)

    def share(self, direction: str, against: int) -> float:
        """The share of its bandwidth one transfer (``direction`` "pull" or "push") keeps
        against ``against`` >= 1 transfers the other way."""
        exponent = self.pull_exponent if direction == "pull" else self.push_exponent
        return interfered_capacity(1.0, 1, against, self.efficiency, exponent)

    def text(self) -> str:
        """The three numbers and what they mean at two transfers against one."""
        return interference_text(self.parameters)


def interference_text(parameters: tuple[float, float, float]) -> str:
    """``SimulationConfig.duplex_interference`` in words, with what it means at two against
    one."""
    efficiency, pull, push = parameters
    return (
        f"each direction slowed by the other's transfers (efficiency {efficiency:.2f}, pull "
        f"exponent {pull:.2f}, push exponent {push:.2f}: one pull against two pushes at "
        f"{interfered_capacity(1.0, 1, 2, efficiency, pull):.0%} of its bandwidth, one push "
        f"against two pulls at {interfered_capacity(1.0, 1, 2, efficiency, push):.0%})"
    )


Effect = FlowSharing | TransferCpu | RingGoodput | Duplex | DuplexInterference
# The JSON key of each effect, in the order they are written; with what a note calls it.
EFFECT_KEYS: dict[str, str] = {
    "flow_sharing": "flow weight cv",
    "transfer_cpu": "transfer CPU cost",
    "ring_goodput": "ring AllReduce goodput",
    "duplex": "duplex goodput",
    "duplex_interference": "duplex interference",
}


def effect_to_dict(effect: Effect) -> dict[str, Any]:
    """The JSON form of one effect (:func:`effect_from_dict` reads it back)."""
    data: dict[str, Any]
    if isinstance(effect, FlowSharing):
        data = {"weight_cv": effect.weight_cv}
        for key in ("pull_cv", "push_cv", "fcfs_index", "warm_pull_cv", "warm_push_cv"):
            if getattr(effect, key) is not None:
                data[key] = getattr(effect, key)
    elif isinstance(effect, TransferCpu):
        data = {"s_per_byte": effect.s_per_byte, "host_cpu_cores": effect.host_cpu_cores}
    elif isinstance(effect, Duplex):
        data = {"ratio": effect.ratio}
    elif isinstance(effect, DuplexInterference):
        data = {
            "efficiency": effect.efficiency,
            "pull_exponent": effect.pull_exponent,
            "push_exponent": effect.push_exponent,
        }
    else:
        bandwidths = dict(effect.bandwidths)
        data = {
            "points": [
                {"workers": w, "goodput_bps": bps}
                | ({"bandwidth_bps": bandwidths[w]} if w in bandwidths else {})
                for w, bps in effect.points
            ]
        }
        for key in ("message_latency_s", "cpu_s_per_byte", "segment_bytes"):
            if getattr(effect, key) is not None:
                data[key] = getattr(effect, key)
    data["method"] = effect.method
    data["created_utc"] = effect.created_utc
    return data


def effect_from_dict(check: FieldChecker, key: str, raw: Any) -> Effect:
    """Validate the JSON form of the effect stored under ``key`` (one of :data:`EFFECT_KEYS`)."""
    where = f"field '{key}'"
    data = check.mapping(raw, where)
    method, created = check.text(data, "method", where), check.text(data, "created_utc", where)
    if key == "flow_sharing":
        cv = "(a coefficient of variation) >= 0"
        return FlowSharing(
            check.number(data, "weight_cv", where, cv, non_negative),
            check.optional_number(data, "pull_cv", where, cv, non_negative),
            check.optional_number(data, "push_cv", where, cv, non_negative),
            check.optional_number(data, "fcfs_index", where, "(about 0..1)", lambda v: True),
            method,
            created,
            warm_pull_cv=check.optional_number(data, "warm_pull_cv", where, cv, non_negative),
            warm_push_cv=check.optional_number(data, "warm_push_cv", where, cv, non_negative),
        )
    if key == "transfer_cpu":
        return TransferCpu(
            check.number(data, "s_per_byte", where, ">= 0 (CPU seconds per byte)", non_negative),
            check.number(data, "host_cpu_cores", where, "> 0 (cores)", positive),
            method,
            created,
        )
    if key == "duplex":
        ratio = check.number(
            data,
            "ratio",
            where,
            "> 0 (both directions' goodput over one's; 2: full duplex)",
            positive,
        )
        return Duplex(ratio, method, created)
    if key == "duplex_interference":
        exponent = "0..10 (how fast a direction slows with the other's transfers)"
        return DuplexInterference(
            check.number(
                data,
                "efficiency",
                where,
                "in (0, 1] (the share each direction keeps)",
                lambda v: 0 < v <= 1,
            ),
            check.number(data, "pull_exponent", where, exponent, lambda v: 0 <= v <= 10),
            check.number(data, "push_exponent", where, exponent, lambda v: 0 <= v <= 10),
            method,
            created,
        )
    points, bandwidths = _ring_points(check, data, where)
    return RingGoodput(
        points,
        method,
        created,
        check.optional_number(
            data, "message_latency_s", where, ">= 0 (seconds per message)", non_negative
        ),
        check.optional_number(
            data, "cpu_s_per_byte", where, ">= 0 (CPU seconds per byte)", non_negative
        ),
        check.optional_number(
            data, "segment_bytes", where, ">= 4 (bytes per message)", lambda v: v >= 4
        ),
        bandwidths,
    )


def _ring_points(
    check: FieldChecker, data: Mapping[str, Any], where: str
) -> tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]:
    """The ``(W, goodput)`` points and the ``(W, bandwidth)`` of those that carry one."""
    raw = data.get("points")
    if not isinstance(raw, list) or not raw:
        check.fail(where, f"field 'points' must be a non-empty list, got {raw!r}")
    points: dict[int, float] = {}
    bandwidths: dict[int, float] = {}
    for i, item in enumerate(raw):
        at = f"{where}: points[{i}]"
        point = check.mapping(item, at)
        workers = point.get("workers")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
            check.fail(at, f"field 'workers' must be an integer >= 2, got {workers!r}")
        if workers in points:
            check.fail(at, f"workers {workers} appears twice")
        points[workers] = check.number(point, "goodput_bps", at, "> 0 (bits per second)", positive)
        bandwidth = check.optional_number(
            point, "bandwidth_bps", at, "> 0 (bits per second)", positive
        )
        if bandwidth is not None:
            bandwidths[workers] = bandwidth
    if bandwidths and data.get("message_latency_s") is None:
        check.fail(
            where,
            "a point's 'bandwidth_bps' needs the ring's 'message_latency_s' (the bandwidth is "
            "what the ring's time holds beyond its messages' cost)",
        )
    return tuple(sorted(points.items())), tuple(sorted(bandwidths.items()))
