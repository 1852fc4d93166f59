"""How a shaped link shares its bandwidth between concurrent flows: FCFS-like or PS-like?

The simulator offers both policies for a parameter server's link (TPDS'22 Algorithm 1): FCFS
serves one transfer at a time, processor sharing (PS) splits the rate evenly among the transfers
in progress. Which one a real link resembles decides which to predict with. This measures it on
the emulated cluster (:mod:`profilers.netns_cluster`): node 0's link is shaped with ``tc tbf``,
and k flows of ``nbytes`` each start together, one TCP connection per flow (as gloo opens one per
pair of ranks), either into node 0 from nodes 1..k (a server receiving pushes) or out of node 0
to them (a server sending pulls).

With equal flows started together, completion times tell the policies apart. Under PS all k end
together at about k * T (T: one flow alone); under FCFS they end at T, 2T, ..., kT. The *FCFS
index* of a trial puts the spread of its completion times on that scale::

    fcfs_index = (t_last - t_first) / (t_last * (k - 1) / k)      0: PS, 1: FCFS

Flows in training rarely start together, and TCP shares unevenly when they do not: a flow
joining one in progress may get more or less than half. So each direction also has *staggered*
pairs, the second flow starting when the first would be half done alone. Every two-flow trial
gives the ratio r of the two flows' shares (under discriminatory processor sharing, from when
the first one ends: with d the second's delay and T one flow's time alone, the first ends at
``d + (T - d)(1 + r)``); the spread of ln r over the trials is the simulator's
``flow_weight_cv`` (:meth:`LinkSharingReport.weight_cv`).

Every flow is a thread of this process; each thread enters its node's namespace before opening
its socket (a network namespace belongs to a thread), so no process is started. With
``shaped=False`` the flows run over loopback instead (no namespaces, no root, no shaping): how a
host's own TCP stack and scheduler share concurrent flows. From the shell (root)::

    python -m profilers.link_sharing --rate 100Mbit/s
"""

from __future__ import annotations

import argparse
import math
import queue
import socket
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from profilers.netns import enter_namespace
from profilers.netns_cluster import BURST_S, emulated_cluster
from simcore.errors import ConfigError, ProfilingError, SgdsimError
from simcore.units import format_bandwidth, parse_bandwidth

__all__ = [
    "DIRECTIONS",
    "LinkSharingReport",
    "SharingTrial",
    "link_sharing_text",
    "link_where",
    "measure_link_sharing",
    "receive_exactly",
    "sharing_from_dict",
    "sharing_to_dict",
]

DIRECTIONS = ("into", "out of")  # the shaped node receiving (pushes) or sending (pulls)
CHUNK = 1 << 20  # bytes a receiver reads at a time
_PS_LIKE_BELOW = 0.5  # an FCFS index below this reads as processor sharing
_RATIO_MIN = 0.01  # share ratios are clamped to [1/100, 100] (a flow nearly starved)


@dataclass(frozen=True)
class SharingTrial:
    """k equal flows through the shaped link: when each one finished.

    ``delay_s`` 0: all started together (``completion_s`` ascending); otherwise two flows, the
    second started ``delay_s`` after the first (``completion_s`` in that order).
    """

    direction: str
    nbytes: int  # per flow
    completion_s: tuple[float, ...]  # from the first flow's start
    delay_s: float = 0.0

    @property
    def flows(self) -> int:
        return len(self.completion_s)

    def share_ratio(self, alone_s: float) -> float | None:
        """Two flows: the ratio of their shares while both ran (1 = equal), from when the first
        of them ended and ``alone_s``, one flow's time alone; None if it cannot be told.

        Together: the heavier ends at ``T (1 + r)`` with r <= 1 the lighter's share over the
        heavier's. Staggered by d: if the first flow ends first, at ``d + (T - d)(1 + r)``, r is
        the second's share over the first's; if the second ends first, at ``d + T (1 + r) / r``.
        """
        if self.flows != 2 or not alone_s > self.delay_s:
            return None
        first, second = self.completion_s
        d, t = self.delay_s, alone_s
        if d == 0:
            ratio = min(first, second) / t - 1
        elif first <= second:
            ratio = (first - d) / (t - d) - 1
        else:
            ratio = t / max(second - d - t, 1e-9)
        return min(max(ratio, _RATIO_MIN), 1 / _RATIO_MIN)

    @property
    def goodput_bps(self) -> float:
        """Payload bits of all flows over the time until the last one finished."""
        return 8.0 * self.nbytes * self.flows / max(self.completion_s)

    @property
    def fcfs_index(self) -> float:
        """0 when all flows end together (PS), 1 when they end one flow-time apart (FCFS);
        NaN for one flow."""
        k = self.flows
        if k < 2 or self.delay_s:
            return math.nan
        first, last = min(self.completion_s), max(self.completion_s)
        return (last - first) / (last * (k - 1) / k)


@dataclass(frozen=True)
class LinkSharingReport:
    """Every trial of one measurement, and the link's nominal rate (``shaped``: by tc on the
    emulated cluster; otherwise over loopback, the rate the flows were sized by)."""

    rate_bps: float
    trials: tuple[SharingTrial, ...]
    shaped: bool = True

    def goodput_bps(self) -> float:
        """Mean payload rate of one flow alone (both directions): the bandwidth to predict with.

        Below the nominal rate by the TCP/IP/Ethernet headers tbf counts (about 4.5% at MTU 1500).
        """
        single = [t.goodput_bps for t in self.trials if t.flows == 1]
        if not single:
            raise ConfigError("link sharing: no one-flow trial was measured")
        return statistics.fmean(single)

    def fcfs_index(self, direction: str | None = None) -> float:
        """Mean FCFS index over the trials of several flows (in one direction, or both)."""
        indices = [
            t.fcfs_index
            for t in self.trials
            if t.flows > 1 and not t.delay_s and direction in (None, t.direction)
        ]
        if not indices:
            raise ConfigError("link sharing: no trial of several flows was measured")
        return statistics.fmean(indices)

    def alone_s(self, direction: str) -> float:
        """Mean time of one flow alone in ``direction``, s."""
        single = [
            t.completion_s[0] for t in self.trials if t.flows == 1 and t.direction == direction
        ]
        if not single:
            raise ConfigError(f"link sharing: no one-flow trial {direction} the node")
        return statistics.fmean(single)

    def share_ratios(self, direction: str | None = None) -> list[float]:
        """The share ratio of every two-flow trial (together and staggered) in ``direction``,
        or both directions (None)."""
        ratios = (
            t.share_ratio(self.alone_s(t.direction))
            for t in self.trials
            if t.flows == 2 and direction in (None, t.direction)
        )
        return [r for r in ratios if r is not None]

    def implausible_ratios(self) -> int:
        """Two-flow trials whose share ratio hit the clamp (1/100 or 100): a flow that ended
        before it could have on a shared link, or starved. On a link the flows share, none do;
        on a loaded host's loopback, where flows compete for cores and not for a link, they do,
        and the cv from them is meaningless."""
        return sum(1 for r in self.share_ratios() if r <= _RATIO_MIN or r >= 1 / _RATIO_MIN)

    def weight_cv(self, direction: str | None = None) -> float:
        """The simulator's ``flow_weight_cv``: lognormal weights with the measured spread, from
        the two-flow trials in ``direction`` (one of :data:`DIRECTIONS`) or both (None).

        A ratio of two independent weights has ``var(ln r) = 2 sigma^2``; the mean of (ln r)^2
        (which keeps any bias of late or early flows as spread) estimates it, and a lognormal's
        coefficient of variation is ``sqrt(exp(sigma^2) - 1)``.
        """
        ratios = self.share_ratios(direction)
        if not ratios:
            raise ConfigError("link sharing: no two-flow trial to estimate the weights from")
        sigma2 = statistics.fmean(math.log(r) ** 2 for r in ratios) / 2
        return math.sqrt(math.expm1(sigma2))

    @property
    def policy(self) -> str:
        """The simulator's sharing policy the link resembles more: ``ps`` or ``fcfs``."""
        return "ps" if self.fcfs_index() < _PS_LIKE_BELOW else "fcfs"


def sharing_to_dict(report: LinkSharingReport) -> dict[str, Any]:
    """The report as JSON-ready data: the nominal rate and every trial."""
    return {
        "rate_bps": report.rate_bps,
        "shaped": report.shaped,
        "trials": [
            {
                "direction": t.direction,
                "nbytes": t.nbytes,
                "completion_s": list(t.completion_s),
                "delay_s": t.delay_s,
            }
            for t in report.trials
        ],
    }


def sharing_from_dict(data: Any, source: str = "<memory>") -> LinkSharingReport:
    """The report :func:`sharing_to_dict` wrote; ConfigError naming ``source`` if malformed."""
    try:
        trials = tuple(
            SharingTrial(
                str(t["direction"]),
                int(t["nbytes"]),
                tuple(float(c) for c in t["completion_s"]),
                float(t["delay_s"]),
            )
            for t in data["trials"]
        )
        report = LinkSharingReport(float(data["rate_bps"]), trials, bool(data.get("shaped", True)))
    except KeyError as err:
        raise ConfigError(f"{source}: link sharing: missing field {err}") from None
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{source}: link sharing: {err}") from None
    bad = [t.direction for t in trials if t.direction not in DIRECTIONS or not t.completion_s]
    if bad:
        raise ConfigError(f"{source}: link sharing: trials with direction {bad[0]!r} or no flows")
    return report


def measure_link_sharing(
    rate_bps: float,
    *,
    flows: Sequence[int] = (1, 2, 4),
    seconds_per_flow: float = 0.5,
    repeats: int = 3,
    timeout_s: float = 60.0,
    shaped: bool = True,
    burst_s: float = BURST_S,
) -> LinkSharingReport:
    """Shape a node's link to ``rate_bps`` and time concurrent flows through it (module doc).

    Parameters
    ----------
    rate_bps : float
        The shaped rate of each direction, bit/s (``shaped=False``: the rate the flows are
        sized by, e.g. one flow's measured goodput).
    flows : sequence of int
        Numbers of concurrent flows to try (1 gives the one-flow goodput).
    seconds_per_flow : float
        Size of every flow, as the time it takes alone at the nominal rate.
    repeats : int
        Trials per direction and number of flows, and staggered pairs per direction.
    timeout_s : float
        Limit on every socket operation.
    shaped : bool
        True: on the emulated cluster (root), node 0's link shaped to ``rate_bps``. False: over
        loopback, unshaped (anyone, anywhere).
    burst_s : float
        The shaped link's tbf bucket, as time at ``rate_bps`` (the cluster's default).

    Raises
    ------
    ConfigError : bad arguments, or the testbed is not permitted here.
    ProfilingError : a flow failed or timed out.
    """
    if not flows or min(flows) < 1 or repeats < 1 or not seconds_per_flow > 0:
        raise ConfigError(
            f"flows must be >= 1, repeats >= 1 and seconds_per_flow > 0; got {list(flows)}, "
            f"{repeats}, {seconds_per_flow}"
        )
    nbytes = max(round(rate_bps / 8 * seconds_per_flow), 1)
    nodes = 1 + max(*flows, 2)
    if not shaped:
        loopback = _Nodes(("127.0.0.1",) * nodes)
        trials = _trials(loopback, flows, nbytes, repeats, timeout_s, seconds_per_flow)
        return LinkSharingReport(rate_bps, trials, shaped=False)
    with emulated_cluster(nodes, {0: rate_bps}, burst_s=burst_s) as cluster:
        in_cluster = _Nodes(cluster.addrs, cluster.namespaces)
        trials = _trials(in_cluster, flows, nbytes, repeats, timeout_s, seconds_per_flow)
    return LinkSharingReport(rate_bps, trials)


@dataclass(frozen=True)
class _Nodes:
    """Where flows run: node i's address, and its network namespace (None: this one)."""

    addrs: tuple[str, ...]
    namespaces: tuple[str, ...] | None = None

    def enter(self, node: int) -> None:
        """Move the calling thread into node ``node``'s namespace (if nodes have their own)."""
        if self.namespaces is not None:
            enter_namespace(self.namespaces[node])


def _trials(
    nodes: _Nodes,
    flows: Sequence[int],
    nbytes: int,
    repeats: int,
    timeout_s: float,
    seconds_per_flow: float,
) -> tuple[SharingTrial, ...]:
    """Every trial of :func:`measure_link_sharing`: k flows together, then staggered pairs."""
    trials = []
    for direction in DIRECTIONS:
        for k in flows:
            pairs = _pairs(direction, k)
            for _ in range(repeats):
                times = _concurrent_flows(nodes, pairs, nbytes, timeout_s)
                trials.append(SharingTrial(direction, nbytes, tuple(sorted(times))))
        pairs = _pairs(direction, 2)
        for _ in range(repeats):
            # The second flow starts when the first would be half done alone (as measured;
            # without a one-flow trial, at the nominal rate).
            delay = (_mean_alone_s(trials, direction) or seconds_per_flow) / 2
            times = _concurrent_flows(nodes, pairs, nbytes, timeout_s, (0.0, delay))
            trials.append(SharingTrial(direction, nbytes, tuple(times), delay))
    return tuple(trials)


def _mean_alone_s(trials: Sequence[SharingTrial], direction: str) -> float:
    single = [t.completion_s[0] for t in trials if t.flows == 1 and t.direction == direction]
    return statistics.fmean(single) if single else 0.0


def _pairs(direction: str, k: int) -> list[tuple[int, int]]:
    """(sender, receiver) nodes of k flows into node 0 from nodes 1..k, or out of it to them."""
    return [(p, 0) if direction == "into" else (0, p) for p in range(1, k + 1)]


def _concurrent_flows(
    nodes: _Nodes,
    pairs: Sequence[tuple[int, int]],
    nbytes: int,
    timeout_s: float,
    delays_s: Sequence[float] | None = None,
) -> list[float]:
    """Send ``nbytes`` over each (sender node, receiver node) pair, flow f ``delays_s[f]`` after
    a common start; each flow's completion time from that start, in flow order."""
    ports: queue.Queue[tuple[int, int]] = queue.Queue()
    done: queue.Queue[tuple[int, float]] = queue.Queue()
    errors: list[BaseException] = []
    start = threading.Barrier(len(pairs))
    started: list[float] = []

    def receive(flow: int, node: int) -> None:
        nodes.enter(node)
        with socket.create_server((nodes.addrs[node], 0)) as server:
            server.settimeout(timeout_s)
            ports.put((flow, server.getsockname()[1]))
            conn, _ = server.accept()
        with conn:
            conn.settimeout(timeout_s)
            receive_exactly(conn, nbytes, bytearray(CHUNK), f"flow {flow}")
            done.put((flow, time.perf_counter()))

    def send(flow: int, node: int, receiver: int, port: int) -> None:
        nodes.enter(node)
        payload = bytes(nbytes)
        with socket.create_connection((nodes.addrs[receiver], port), timeout_s) as s:
            start.wait(timeout_s)
            t0 = time.perf_counter()
            started.append(t0)
            delay = delays_s[flow] if delays_s else 0.0
            if delay > 0:
                time.sleep(max(delay - (time.perf_counter() - t0), 0.0))
            s.sendall(payload)

    def guarded(target: object, *args: object) -> threading.Thread:
        def body() -> None:
            try:
                target(*args)  # type: ignore[operator]
            except BaseException as err:  # reported below, in the caller's thread
                errors.append(err)
                start.abort()

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        return thread

    threads = [guarded(receive, f, r) for f, (_, r) in enumerate(pairs)]
    for _ in pairs:
        try:
            flow, port = ports.get(timeout=timeout_s)
        except queue.Empty:
            raise ProfilingError(f"link sharing: a receiver did not listen: {errors}") from None
        threads.append(guarded(send, flow, *pairs[flow], port))
    for thread in threads:
        thread.join(timeout_s * 2)
    if errors or any(t.is_alive() for t in threads) or done.qsize() != len(pairs):
        raise ProfilingError(f"link sharing: flows failed or timed out: {errors or 'timeout'}")
    t0 = min(started)  # the barrier's release, within microseconds for every sender
    ends = dict(done.get() for _ in pairs)
    return [ends[flow] - t0 for flow in range(len(pairs))]


def receive_exactly(conn: socket.socket, nbytes: int, buf: bytearray, what: str) -> None:
    """Read ``nbytes`` from ``conn`` into ``buf`` (reused, at most its size at a time);
    ProfilingError naming ``what`` if the peer closes first."""
    left = nbytes
    while left > 0:
        got = conn.recv_into(buf, min(left, len(buf)))
        if got == 0:
            raise ProfilingError(f"{what}: closed with {left} bytes to go")
        left -= got


def link_where(rate_bps: float, shaped: bool) -> str:
    """Where flows ran: ``link shaped to R (tc tbf)`` or ``loopback``."""
    return f"link shaped to {format_bandwidth(rate_bps)} (tc tbf)" if shaped else "loopback"


def link_sharing_text(report: LinkSharingReport) -> str:
    """A table of the trials' mean completion times, goodput and FCFS index, and the verdict."""
    where = link_where(report.rate_bps, report.shaped)
    lines = [
        f"{where}, flows of "
        f"{report.trials[0].nbytes / 1e6:.2f} MB started together, one TCP connection each",
        f"{'direction':>9} {'flows':>5} {'first s':>8} {'last s':>8} {'goodput':>14} "
        f"{'FCFS index':>10}",
    ]
    groups: dict[tuple[str, int], list[SharingTrial]] = {}
    for trial in report.trials:
        if not trial.delay_s:
            groups.setdefault((trial.direction, trial.flows), []).append(trial)
    for (direction, k), trials in groups.items():
        first = statistics.fmean(t.completion_s[0] for t in trials)
        last = statistics.fmean(t.completion_s[-1] for t in trials)
        goodput = statistics.fmean(t.goodput_bps for t in trials)
        index = statistics.fmean(t.fcfs_index for t in trials) if k > 1 else math.nan
        index_text = "-" if k == 1 else f"{index:.2f}"
        lines.append(
            f"{direction:>9} {k:>5d} {first:>8.3f} {last:>8.3f} "
            f"{format_bandwidth(goodput):>14} {index_text:>10}"
        )
    index = report.fcfs_index()
    lines.append(
        f"FCFS index {index:.2f} (0: processor sharing, 1: FCFS): the link shares like "
        f"{'processor sharing' if report.policy == 'ps' else 'FCFS'}; one flow alone gets "
        f"{format_bandwidth(report.goodput_bps())}"
        + (f" of {format_bandwidth(report.rate_bps)}" if report.shaped else "")
    )
    staggered = [t for t in report.trials if t.delay_s]
    if staggered:
        late = [t.share_ratio(report.alone_s(t.direction)) for t in staggered]
        known = sorted(r for r in late if r is not None)
        lines.append(
            f"a second flow starting half-way gets {_ratios_text(known)} times the first's "
            f"share; from all pairs, flow weight cv {report.weight_cv():.2f}"
        )
    return "\n".join(lines)


def _ratios_text(ratios: Sequence[float]) -> str:
    if not ratios:
        return "an unknown multiple of"
    return f"{ratios[0]:.2f}-{ratios[-1]:.2f} (median {statistics.median(ratios):.2f})"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 on an sgdsim error)."""
    parser = argparse.ArgumentParser(
        prog="python -m profilers.link_sharing",
        description="How a tc-shaped link shares its bandwidth between concurrent TCP flows "
        "(emulated cluster of network namespaces; needs root).",
    )
    parser.add_argument("--rate", default="100Mbit/s", help="shaped rate (default 100Mbit/s)")
    parser.add_argument("--flows", default="1,2,4", help="concurrent flows to try (1,2,4)")
    parser.add_argument("--seconds", type=float, default=0.5, help="one flow alone, s (0.5)")
    parser.add_argument("--repeats", type=int, default=3, help="trials per case (3)")
    args = parser.parse_args(argv)
    try:
        try:
            flows = [int(k) for k in args.flows.split(",")]
        except ValueError:
            raise ConfigError(
                f"--flows: a comma-separated list of counts, got {args.flows!r}"
            ) from None
        report = measure_link_sharing(
            parse_bandwidth(args.rate, name="--rate"),
            flows=flows,
            seconds_per_flow=args.seconds,
            repeats=args.repeats,
        )
    except SgdsimError as err:
        print(f"link_sharing: error: {err}", file=sys.stderr)
        return 2
    print(link_sharing_text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
