"""How much a parameter server's link carries when pulls and pushes are in flight at once.

The simulator gives each direction of a server's link its own bandwidth (full duplex) unless told
otherwise (``SimulationConfig.duplex_bps``). A real server falls short of that: one direction's
ACKs queue behind the other direction's data, and one host handles both directions' packets.
With Async-SGD the difference decides the throughput: workers that drift apart pull while others
push, and a prediction that counts both directions in full runs too fast (mlp at 500 Mbit/s on
the emulated cluster: the runs' transfers carried about 1.2x one direction's goodput in the
moments both directions were busy, where full duplex gives 2x).

This times gloo transfers the way a parameter server makes them: a server rank and ``workers``
worker ranks, first every worker sending ``nbytes`` to the server (pushes), then the server
sending ``nbytes`` to every worker (pulls), then both at once. Each repetition is timed from a
barrier to the last completion. The link's *duplex goodput* is the bits the simultaneous
repetitions moved over their total time; a one-way goodput, for comparison, from the one-way
repetitions. With two or more cores the server is pinned to the first core and the workers to
the others, as the validation's testbed places them (:class:`~profilers.distributed.testbed.
Testbed`). On the emulated cluster (:mod:`profilers.netns_cluster`) the server's link is shaped;
without one the ranks talk over loopback. From the shell (root for ``--rate``)::

    python -m profilers.distributed.link_duplex --rate 1Gbit/s [--add-to PROFILE.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from profilers.distributed.transfer_patterns import time_patterns
from profilers.netns_cluster import BURST_S, EmulatedCluster, emulated_cluster
from simcore.errors import ConfigError, SgdsimError
from simcore.units import format_bandwidth

__all__ = ["DuplexReport", "duplex_from_dict", "duplex_text", "duplex_to_dict", "measure_duplex"]

MODES = ("push", "pull", "both")


@dataclass(frozen=True)
class DuplexReport:
    """Timed repetitions of ``workers`` transfers of ``nbytes`` each way (see the module)."""

    workers: int
    nbytes: int  # per transfer
    push_s: tuple[float, ...]  # every worker to the server at once
    pull_s: tuple[float, ...]  # the server to every worker at once
    both_s: tuple[float, ...]  # both at once
    link_rate_bps: float | None = None  # the server's shaped link; None: loopback

    def one_way_bps(self) -> float:
        """Bits per second one direction carried alone (pushes and pulls pooled)."""
        times = self.push_s + self.pull_s
        return len(times) * self.workers * self.nbytes * 8 / sum(times)

    def duplex_bps(self) -> float:
        """Bits per second the two directions carried together: ``SimulationConfig.duplex_bps``
        (total bits over total time, so that a slow repetition weighs as it would in a run)."""
        return len(self.both_s) * 2 * self.workers * self.nbytes * 8 / sum(self.both_s)

    def ratio(self) -> float:
        """Duplex goodput over one direction's: 2 is full duplex, 1 half duplex."""
        return self.duplex_bps() / self.one_way_bps()


def duplex_to_dict(report: DuplexReport) -> dict[str, Any]:
    return {
        "workers": report.workers,
        "nbytes": report.nbytes,
        "push_s": list(report.push_s),
        "pull_s": list(report.pull_s),
        "both_s": list(report.both_s),
        "link_rate_bps": report.link_rate_bps,
    }


def duplex_from_dict(data: Any, source: str = "<memory>") -> DuplexReport:
    """Inverse of :func:`duplex_to_dict`. Raises ConfigError naming ``source`` on bad data."""
    try:
        report = DuplexReport(
            int(data["workers"]),
            int(data["nbytes"]),
            tuple(float(x) for x in data["push_s"]),
            tuple(float(x) for x in data["pull_s"]),
            tuple(float(x) for x in data["both_s"]),
            None if data.get("link_rate_bps") is None else float(data["link_rate_bps"]),
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{source}: duplex: not a duplex measurement ({err})") from None
    times = report.push_s + report.pull_s + report.both_s
    if report.workers < 1 or report.nbytes < 1 or not report.both_s or not report.push_s:
        raise ConfigError(f"{source}: duplex: needs workers, bytes and timed repetitions")
    if min(times) <= 0:
        raise ConfigError(f"{source}: duplex: every time must be positive")
    return report


def duplex_text(report: DuplexReport) -> str:
    where = (
        f"link shaped to {format_bandwidth(report.link_rate_bps)}"
        if report.link_rate_bps is not None
        else "loopback"
    )
    return (
        f"duplex ({where}, {report.workers} worker(s), {report.nbytes / 1e6:.2f} MB each way): "
        f"one way {format_bandwidth(report.one_way_bps())}, both ways together "
        f"{format_bandwidth(report.duplex_bps())} ({report.ratio():.2f}x one way; 2x is full "
        f"duplex); slowest simultaneous repetition {max(report.both_s) * 1e3:.0f} ms vs median "
        f"{statistics.median(report.both_s) * 1e3:.0f} ms"
    )


def measure_duplex(
    *,
    workers: int = 2,
    link_rate_bps: float | None = None,
    seconds_per_transfer: float = 0.15,
    nbytes: int | None = None,
    repeats: int = 8,
    warmup: int = 1,
    timeout_s: float = 60.0,
    burst_s: float = BURST_S,
) -> DuplexReport:
    """Time pushes, pulls and both at once between a server and ``workers`` workers (module).

    ``nbytes`` per transfer; None: ``seconds_per_transfer`` at ``link_rate_bps`` (at 1 Gbit/s
    on loopback). ``link_rate_bps``: on the emulated cluster (root) with the server's link
    shaped to it (its tbf bucket ``burst_s`` at the rate); None: over loopback.

    Raises
    ------
    ConfigError : bad arguments, or the emulated cluster is not permitted here.
    DistributedRunError : a rank failed or did not finish within ``timeout_s`` (plus a grace).
    """
    if nbytes is None:
        nbytes = round((link_rate_bps or 1e9) / 8 * seconds_per_transfer)
    if workers < 1 or repeats < 1 or warmup < 0 or nbytes < 4:
        raise ConfigError(
            f"duplex: needs workers >= 1, repeats >= 1, warmup >= 0 and transfers of >= 4 bytes; "
            f"got {workers}, {repeats}, {warmup}, {nbytes}"
        )
    nbytes -= nbytes % 4  # whole float32 elements
    if link_rate_bps is None:
        times = _run(workers, nbytes, None, repeats, warmup, timeout_s)
    else:
        with emulated_cluster(workers + 1, {0: link_rate_bps}, burst_s=burst_s) as cluster:
            times = _run(workers, nbytes, cluster, repeats, warmup, timeout_s)
    return DuplexReport(workers, nbytes, *times, link_rate_bps)


def _run(
    workers: int,
    nbytes: int,
    cluster: EmulatedCluster | None,
    repeats: int,
    warmup: int,
    timeout_s: float,
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The server's span of every timed repetition of each mode (every repetition ends at a
    barrier after every transfer has arrived: the server's times are the run's)."""
    both_ways = {"push": (True, False), "pull": (False, True), "both": (True, True)}
    timed = time_patterns(
        "duplex",
        {mode: (both_ways[mode],) * workers for mode in MODES},
        nbytes=nbytes,
        repeats=repeats,
        warmup=warmup,
        timeout_s=timeout_s,
        cluster=cluster,
    )
    push, pull, both = (timed[mode].span_s for mode in MODES)
    return push, pull, both


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m profilers.distributed.link_duplex``: measure, print, optionally add to a
    network profile (``--add-to FILE``, rewritten in place with its other fields kept)."""
    from profilers.network_measure import add_to_profile, duplex_effect
    from simcore.network_io import load_network_profile
    from simcore.units import parse_bandwidth

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    parser = argparse.ArgumentParser(
        prog="python -m profilers.distributed.link_duplex",
        description="What a parameter server's link carries with pulls and pushes at once.",
    )
    parser.add_argument("--rate", help="shape the server's link to RATE (root); default loopback")
    parser.add_argument("--repeats", type=int, default=12, help="repetitions of each (12)")
    parser.add_argument("--add-to", metavar="FILE", help="add it to this network profile")
    parser.add_argument("--note", default="", help="a note for the effect's method")
    args = parser.parse_args(argv)
    try:
        rate = None if args.rate is None else parse_bandwidth(args.rate, name="--rate")
        if args.add_to:
            load_network_profile(args.add_to)  # a bad file fails before the measurement
        duplex = duplex_effect(link_rate_bps=rate, repeats=args.repeats, note=args.note, say=say)
        if args.add_to:
            add_to_profile(args.add_to, say, duplex=duplex)
    except SgdsimError as err:
        print(f"link_duplex: error: {err}", file=sys.stderr)
        return 1
    print(f"both directions together: {duplex.ratio:.3f}x one direction")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
