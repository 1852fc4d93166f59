"""How much one direction of a parameter server's link slows while the other carries transfers.

A TCP transfer is clocked by the ACKs coming back the other way, and those ACKs wait in the
other direction's queue. On the emulated cluster (:mod:`profilers.netns_cluster`, tbf with a
50 ms queue) a queue stands the longer, the more transfers share its direction, so a direction
facing more transfers the other way slows down, and one facing as many loses only a little.
Measured with 2.48 MB transfers (receiver-side completion times, medians of 16 repetitions,
in units of one transfer alone; two measurements at each rate, minutes apart):

==============================  ===========  ===========  ===========
pattern                          200 Mbit/s   300 Mbit/s   500 Mbit/s
==============================  ===========  ===========  ===========
one pull beside one push, pull   1.06, 1.15   1.09, 1.08   1.09, 1.18
one pull beside one push, push   1.02, 1.02   1.01, 1.01   1.01, 1.02
one pull against two pushes      1.54, 1.54   1.56, 1.62   1.56, 1.67
one pull against three pushes    2.29, 2.50   2.71, 2.68   2.22, 2.54
one push against two pulls       1.08, 1.08   1.02, 1.03   1.10, 1.10
one push against three pulls     1.55, 1.50   1.35, 1.39   1.17, 1.29
==============================  ===========  ===========  ===========

Pulls suffer more, most likely (the queues were not looked at) because the pushes' queue is
tbf's on the bridge side, where it fills to its limit, while the pulls' queue is on the server's
own interface, where TCP's small-queue limit keeps it short. Two pulls beside two pushes from
other workers took 2.0-2.3 alone-times, as two transfers sharing one direction take anyway.

The simulator's ``duplex_interference`` model (:func:`simcore.sim.rate_link.
interfered_capacity`) gives a direction with ``n`` transfers facing ``m`` the other way
``efficiency * min(1, n / m) ** exponent`` of its bandwidth. :func:`measure_interference` times
the patterns above on a shaped link and :func:`fit_interference` derives the three numbers:
the efficiency from one transfer each way, each direction's exponent by least squares in log
space from one transfer against two and three. The shared limit of
:mod:`profilers.distributed.link_duplex` is the other model; it times every worker pulling and
pushing at once and slows one pull beside one push by a quarter where this link loses 5-10%.

From the shell (root)::

    python -m profilers.distributed.link_interference --rate 300Mbit/s [--add-to PROFILE.json]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profilers.distributed.transfer_patterns import Plan, time_patterns
from profilers.netns_cluster import BURST_S, EmulatedCluster, emulated_cluster
from simcore.errors import ConfigError, SgdsimError
from simcore.network_effects import DuplexInterference
from simcore.units import format_bandwidth, parse_bandwidth

__all__ = [
    "PATTERNS",
    "TESTBED_INTERFERENCE",
    "InterferenceReport",
    "fit_interference",
    "interference_from_dict",
    "interference_report_text",
    "interference_to_dict",
    "measure_interference",
    "measured_interference",
]

_GRACE_S = 10.0

#: Each pattern: one (push, pull) pair per worker, from distinct workers but for "one each".
PATTERNS: Mapping[str, Plan] = {
    "pull alone": ((False, True),),
    "push alone": ((True, False),),
    "one each": ((True, False), (False, True)),
    "pull against 2": ((True, False), (True, False), (False, True)),
    "pull against 3": ((True, False), (True, False), (True, False), (False, True)),
    "push against 2": ((True, False), (False, True), (False, True)),
    "push against 3": ((True, False), (False, True), (False, True), (False, True)),
}


#: What the emulated testbed's link showed at 200, 300 and 500 Mbit/s: fit_interference of the
#: table's slowdowns averaged over its six measurements (each alone gave efficiency 0.91-0.96,
#: pull exponent 0.65-0.79, push exponent 0.08-0.27, with no trend in the rate). The validation
#: uses it for the kept runs, whose measurements predate this one.
TESTBED_INTERFERENCE = DuplexInterference(
    0.94, 0.72, 0.17, "the emulated testbed's, measured at 200-500 Mbit/s (link_interference)"
)


@dataclass(frozen=True)
class InterferenceReport:
    """Receiver-side completion times (s, from the repetition's start) of every pattern: for
    each repetition the pull's and the push's of the transfer the pattern is about."""

    nbytes: int
    pull_s: Mapping[str, tuple[float, ...]]  # pattern -> the lone (or first) pull's times
    push_s: Mapping[str, tuple[float, ...]]  # pattern -> the lone (or first) push's times
    link_rate_bps: float | None = None

    def slowdowns(self) -> dict[str, float]:
        """Each pattern's median time of the transfer it is about over one alone."""
        pull, push = (
            statistics.median(self.pull_s["pull alone"]),
            statistics.median(self.push_s["push alone"]),
        )
        out = {
            "pull beside one push": statistics.median(self.pull_s["one each"]) / pull,
            "push beside one pull": statistics.median(self.push_s["one each"]) / push,
        }
        for k in (2, 3):  # as many as were timed (a cluster of few ranks has fewer workers)
            for direction, times, alone in (
                ("pull", self.pull_s, pull),
                ("push", self.push_s, push),
            ):
                key = f"{direction} against {k}"
                if key in times:
                    out[key] = statistics.median(times[key]) / alone
        return out


def interference_to_dict(report: InterferenceReport) -> dict[str, Any]:
    """The JSON form (:func:`interference_from_dict` reads it back)."""
    return {
        "nbytes": report.nbytes,
        "pull_s": {name: list(times) for name, times in report.pull_s.items()},
        "push_s": {name: list(times) for name, times in report.push_s.items()},
        "link_rate_bps": report.link_rate_bps,
    }


def interference_from_dict(data: Any, source: str = "<memory>") -> InterferenceReport:
    """Inverse of :func:`interference_to_dict`; ConfigError naming ``source`` on bad data
    (every pattern of :data:`PATTERNS` timed, every time positive)."""
    try:
        rate = data.get("link_rate_bps")
        report = InterferenceReport(
            int(data["nbytes"]),
            {str(k): tuple(float(x) for x in v) for k, v in data["pull_s"].items()},
            {str(k): tuple(float(x) for x in v) for k, v in data["push_s"].items()},
            None if rate is None else float(rate),
        )
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        raise ConfigError(
            f"{source}: interference: not an interference measurement ({err})"
        ) from None
    wanted_pulls = {n for n, plan in PATTERNS.items() if any(pull for _, pull in plan)}
    wanted_pushes = {n for n, plan in PATTERNS.items() if any(push for push, _ in plan)}
    if set(report.pull_s) != wanted_pulls or set(report.push_s) != wanted_pushes:
        raise ConfigError(
            f"{source}: interference: needs the patterns {', '.join(PATTERNS)}, timed"
        )
    times = [t for ts in (*report.pull_s.values(), *report.push_s.values()) for t in ts]
    if report.nbytes < 4 or not times or not all(math.isfinite(t) and t > 0 for t in times):
        raise ConfigError(f"{source}: interference: needs bytes and positive times")
    return report


def fit_interference(
    slowdowns: Mapping[str, float], method: str, created_utc: str = ""
) -> DuplexInterference:
    """The model's three numbers from slowdowns (as :meth:`InterferenceReport.slowdowns`):
    the efficiency is the mean share one transfer each way kept (at most 1), each exponent the
    least-squares slope through the origin of ``ln(share / efficiency)`` on ``ln(1 / k)``
    (at least 0). ConfigError when a slowdown is missing or not positive."""
    try:
        each = [slowdowns["pull beside one push"], slowdowns["push beside one pull"]]
        against = {
            d: [(k, slowdowns[key]) for k in (2, 3) if (key := f"{d} against {k}") in slowdowns]
            for d in ("pull", "push")
        }
    except KeyError as err:
        raise ConfigError(f"interference: no slowdown measured for {err}") from None
    values = each + [s for pairs in against.values() for _, s in pairs]
    if not all(math.isfinite(v) and v > 0 for v in values):
        raise ConfigError(f"interference: slowdowns must be positive, got {values}")
    if not against["pull"] or not against["push"]:
        raise ConfigError("interference: needs each direction against two or three transfers")
    efficiency = min(1.0, statistics.fmean(1 / s for s in each))
    exponents = []
    for direction in ("pull", "push"):
        xs = [math.log(1 / k) for k, _ in against[direction]]
        ys = [math.log((1 / s) / efficiency) for _, s in against[direction]]
        slope = sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)
        exponents.append(max(0.0, slope))
    return DuplexInterference(efficiency, exponents[0], exponents[1], method, created_utc)


def measure_interference(
    *,
    link_rate_bps: float | None = None,
    nbytes: int = 2_480_000,
    repeats: int = 8,
    timeout_s: float = 60.0,
    burst_s: float = BURST_S,
) -> InterferenceReport:
    """Time every pattern of :data:`PATTERNS` between a server and up to four workers,
    ``repeats`` times after one warm-up each, ``nbytes`` per transfer; on the emulated cluster
    with the server's link shaped to ``link_rate_bps`` (root), or over loopback (None).

    Raises
    ------
    ConfigError : bad arguments, or the emulated cluster is not permitted here.
    DistributedRunError : a rank failed or did not finish in time.
    """
    if repeats < 1 or nbytes < 4:
        raise ConfigError(
            f"interference: needs repeats >= 1 and transfers of >= 4 bytes; got {repeats}, {nbytes}"
        )
    nbytes -= nbytes % 4
    workers = max(len(plan) for plan in PATTERNS.values())
    if link_rate_bps is None:
        return _measure(nbytes, None, repeats, timeout_s, None)
    with emulated_cluster(workers + 1, {0: link_rate_bps}, burst_s=burst_s) as cluster:
        return _measure(nbytes, cluster, repeats, timeout_s, link_rate_bps)


def measured_interference(report: InterferenceReport) -> DuplexInterference:
    """The model fitted to a validation's own measurement (:func:`fit_interference`)."""
    where = (
        "loopback"
        if report.link_rate_bps is None
        else f"the testbed's link shaped to {format_bandwidth(report.link_rate_bps)}"
    )
    return fit_interference(report.slowdowns(), f"measured on {where} (link_interference)")


def _measure(
    nbytes: int,
    cluster: EmulatedCluster | None,
    repeats: int,
    timeout_s: float,
    link_rate_bps: float | None,
) -> InterferenceReport:
    timed = time_patterns(
        "interference",
        PATTERNS,
        nbytes=nbytes,
        repeats=repeats,
        warmup=1,
        timeout_s=timeout_s,
        cluster=cluster,
    )
    # each pattern is about its first pull and its first push (the lone one, where it has one)
    pulls = {name: t.pull_end_s[min(t.pull_end_s)] for name, t in timed.items() if t.pull_end_s}
    pushes = {name: t.push_end_s[min(t.push_end_s)] for name, t in timed.items() if t.push_end_s}
    return InterferenceReport(nbytes, pulls, pushes, link_rate_bps)


def interference_report_text(report: InterferenceReport, fitted: DuplexInterference) -> str:
    where = (
        f"link shaped to {format_bandwidth(report.link_rate_bps)}"
        if report.link_rate_bps is not None
        else "loopback"
    )
    slow = ", ".join(f"{k} {v:.2f}x" for k, v in report.slowdowns().items())
    return (
        f"interference ({where}, {report.nbytes / 1e6:.2f} MB a transfer): {slow}; {fitted.text()}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m profilers.distributed.link_interference``: measure and print."""
    parser = argparse.ArgumentParser(
        prog="python -m profilers.distributed.link_interference",
        description="How much each direction of a server's link slows beside the other's "
        "transfers.",
    )
    parser.add_argument("--rate", help="shape the server's link to RATE (root); default loopback")
    parser.add_argument("--repeats", type=int, default=8, help="repetitions of each pattern (8)")
    parser.add_argument("--add-to", metavar="FILE", help="add it to this network profile")
    parser.add_argument("--note", default="", help="a note for the effect's method")
    args = parser.parse_args(argv)
    from profilers.network_measure import add_to_profile, interference_effect
    from simcore.network_io import load_network_profile

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    try:
        rate = None if args.rate is None else parse_bandwidth(args.rate, name="--rate")
        if args.add_to:
            load_network_profile(args.add_to)  # a bad file fails before the measurement
        effect = interference_effect(
            link_rate_bps=rate, repeats=args.repeats, note=args.note, say=say
        )
        if args.add_to:
            add_to_profile(args.add_to, say, duplex_interference=effect)
    except SgdsimError as err:
        print(f"link_interference: error: {err}", file=sys.stderr)
        return 1
    print(effect.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
