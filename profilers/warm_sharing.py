"""How a link shares concurrent transfers over connections kept open, as training's are.

:mod:`profilers.link_sharing` opens a fresh TCP connection for every flow and finds the
emulated testbed's link close to processor sharing (flow weight cv 0.02-0.2). Training does not
open connections: gloo keeps one per pair of ranks for the whole run, and each carries a
transfer, idles while the worker computes, and carries the next. On those warm connections the
same link shares far less evenly: when a Sync-SGD server releases a step, its W pulls start
together, and on the 2-core testbed the first of four ended at 2.5-3.5 times one pull's time
alone where processor sharing ends all four at 4 (the kept validations' runs, 200-500 Mbit/s).

This measures that directly: ``flows`` connections out of node 0 (a server's pulls) or into it
(pushes), kept open; each *round* sends ``nbytes`` on every connection at once, waits until all
have arrived, then idles ``gap_s`` (the worker's computation), and repeats. Rounds of one
transfer on one of the connections, in turn, give the time ``T`` one takes alone.

Under discriminatory processor sharing with weights ``w_1 >= ... >= w_k`` (the simulator's
``flow_weight_cv`` draws them), equal transfers started together end at ``t_1 <= ... <= t_k``
(in units of ``T``) with ``t_m = m + (w_{m+1} + ... + w_k) / w_m``; from the completion times
alone the weights follow one by one (:func:`share_weights`), and the spread of their logarithms
within each round estimates the weights' cv (:meth:`WarmSharingReport.weight_cv`), as the
two-flow trials of :mod:`profilers.link_sharing` do for fresh connections.

From the shell (root)::

    python -m profilers.warm_sharing --rate 200Mbit/s --bytes 2.5MB
"""

from __future__ import annotations

import argparse
import contextlib
import math
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from profilers.link_sharing import CHUNK, DIRECTIONS, link_where, receive_exactly
from profilers.netns import enter_namespace
from profilers.netns_cluster import BURST_S, emulated_cluster
from simcore.errors import ConfigError, ProfilingError, SgdsimError
from simcore.units import parse_bandwidth, parse_size

__all__ = [
    "WarmRound",
    "WarmSharingReport",
    "measure_warm_sharing",
    "share_weights",
    "warm_sharing_from_dict",
    "warm_sharing_text",
    "warm_sharing_to_dict",
]

_WEIGHT_MIN = 0.01  # weights relative to the heaviest are clamped to [1/100, 1] (a starved flow)
_ALONE_ROUNDS = 6  # rounds of one transfer per direction, the first two left out (warm-up)
_WARMUP_ROUNDS = 2  # rounds of every transfer at once left out


@dataclass(frozen=True)
class WarmRound:
    """One round: when each of the transfers started together arrived (s, ascending)."""

    direction: str
    completion_s: tuple[float, ...]

    @property
    def flows(self) -> int:
        return len(self.completion_s)


@dataclass(frozen=True)
class WarmSharingReport:
    """Every round of one measurement (:func:`measure_warm_sharing`); ``alone_s``: one
    transfer's time alone in each direction (median of the rounds of one)."""

    rate_bps: float
    nbytes: int
    gap_s: float
    alone_s: dict[str, float]
    rounds: tuple[WarmRound, ...]
    shaped: bool = True

    def _rounds(self, direction: str | None) -> list[WarmRound]:
        return [r for r in self.rounds if direction in (None, r.direction)]

    def weight_cv(self, direction: str | None = None) -> float:
        """The simulator's ``flow_weight_cv`` for transfers in ``direction`` (one of
        :data:`~profilers.link_sharing.DIRECTIONS`) or both (None): lognormal weights whose
        log-variance is the mean over rounds of the sample variance of ln w within a round
        (a round's common factor cancels; :func:`share_weights` gives the w)."""
        rounds = [r for r in self._rounds(direction) if r.flows > 1]
        if not rounds:
            raise ConfigError("warm sharing: no round of several transfers was measured")
        sigma2 = statistics.fmean(
            statistics.variance([math.log(w) for w in share_weights(r.completion_s)])
            for r in rounds
        )
        return math.sqrt(math.expm1(sigma2))

    def first_end(self, direction: str) -> float:
        """The median over rounds of when the first transfer ended, in units of one alone
        (processor sharing: the number of transfers; FCFS: 1)."""
        rounds = self._rounds(direction)
        if not rounds or direction not in self.alone_s:
            raise ConfigError(f"warm sharing: no round {direction} the node")
        return statistics.median(r.completion_s[0] for r in rounds) / self.alone_s[direction]

    @property
    def flows(self) -> int:
        return max((r.flows for r in self.rounds), default=0)


def share_weights(completion_s: Sequence[float]) -> tuple[float, ...]:
    """The weights, heaviest first and relative to it, under which discriminatory processor
    sharing of a work-conserving link ends equal transfers started together at ``completion_s``.

    The times are put on the scale where the last ends at k (the link busy throughout, each
    transfer one unit of work), so that a link slower than one transfer alone suggests does not
    read as unequal shares. With ``S_m`` the summed weights of the transfers after the m-th,
    ``t_m = m + S_m / w_m`` and ``S_{m-1} = w_m + S_m``, so ``w_1 = 1``, ``S_1 = t_1 - 1`` and
    ``w_m = S_{m-1} / (t_m - m + 1)``. Each weight is clamped to [1/100, 1] (measured times
    need not be consistent with the model). ConfigError for fewer than one time or a time not
    positive.
    """
    times = sorted(completion_s)
    if not times or times[0] <= 0 or not all(math.isfinite(t) for t in times):
        raise ConfigError(f"share_weights: positive finite completion times, got {completion_s!r}")
    k = len(times)
    scaled = [t * k / times[-1] for t in times]
    weights = [1.0]
    rest = max(scaled[0] - 1.0, 0.0)  # S_1
    for m in range(2, k + 1):
        w = rest / max(scaled[m - 1] - m + 1, 1e-12)
        w = min(max(w, _WEIGHT_MIN), 1.0)
        weights.append(w)
        rest = max(rest - w, 0.0)
    return tuple(weights)


def measure_warm_sharing(
    rate_bps: float,
    *,
    nbytes: int | None = None,
    flows: int = 4,
    rounds: int = 16,
    gap_s: float = 0.3,
    timeout_s: float = 60.0,
    shaped: bool = True,
    burst_s: float = BURST_S,
) -> WarmSharingReport:
    """Shape node 0's link to ``rate_bps`` and time rounds of ``flows`` transfers of ``nbytes``
    over connections kept open, out of node 0 and then into it (module doc).

    ``nbytes`` None: 0.1 s at the rate. ``rounds`` rounds of every transfer at once per
    direction follow two left out; ``gap_s`` idle after each. ``shaped=False``: over loopback,
    unshaped (no root), the rate only sizing the transfers.

    Raises
    ------
    ConfigError : bad arguments, or the testbed is not permitted here.
    ProfilingError : a transfer failed or timed out.
    """
    size = round(rate_bps / 8 * 0.1) if nbytes is None else nbytes
    for name, value, ok, want in (
        ("rate", rate_bps, rate_bps > 0, "> 0 bit/s"),
        ("bytes", size, size >= 1, ">= 1"),
        ("flows", flows, flows >= 2, ">= 2 (transfers at once)"),
        ("rounds", rounds, rounds >= 1, ">= 1"),
        ("gap", gap_s, gap_s >= 0, ">= 0 s"),
        ("timeout", timeout_s, timeout_s > 0, "> 0 s"),
    ):
        if not ok:
            raise ConfigError(f"warm sharing: {name} must be {want}, got {value!r}")
    if not shaped:
        addrs = ("127.0.0.1",) * (flows + 1)
        return _measure(addrs, None, rate_bps, size, flows, rounds, gap_s, timeout_s, False)
    with emulated_cluster(flows + 1, {0: rate_bps}, burst_s=burst_s) as cluster:
        return _measure(
            cluster.addrs, cluster.namespaces, rate_bps, size, flows, rounds, gap_s, timeout_s, True
        )


def _measure(
    addrs: Sequence[str],
    namespaces: Sequence[str] | None,
    rate_bps: float,
    nbytes: int,
    flows: int,
    rounds: int,
    gap_s: float,
    timeout_s: float,
    shaped: bool,
) -> WarmSharingReport:
    alone: dict[str, float] = {}
    measured: list[WarmRound] = []
    for direction in DIRECTIONS:
        pairs = [(0, p) if direction == "out of" else (p, 0) for p in range(1, flows + 1)]
        with _Connections(addrs, namespaces, pairs, nbytes, timeout_s) as conns:
            singles = []
            for r in range(_ALONE_ROUNDS):
                singles.append(conns.round([r % flows])[0])
                time.sleep(gap_s)
            alone[direction] = statistics.median(singles[_WARMUP_ROUNDS:])
            for r in range(_WARMUP_ROUNDS + rounds):
                ends = conns.round(list(range(flows)))
                if r >= _WARMUP_ROUNDS:
                    measured.append(WarmRound(direction, tuple(ends)))
                time.sleep(gap_s)
    return WarmSharingReport(rate_bps, nbytes, gap_s, alone, tuple(measured), shaped)


class _Connections:
    """One TCP connection per (sender node, receiver node) pair, each end a thread of its own
    in its node's namespace for as long as the connections are open; :meth:`round` sends
    ``nbytes`` on the given connections at once and returns their arrival times (ascending,
    from the round's start)."""

    def __init__(
        self,
        addrs: Sequence[str],
        namespaces: Sequence[str] | None,
        pairs: Sequence[tuple[int, int]],
        nbytes: int,
        timeout_s: float,
    ) -> None:
        self.addrs, self.namespaces, self.pairs = addrs, namespaces, list(pairs)
        self.nbytes, self.timeout_s = nbytes, timeout_s
        parties = 2 * len(pairs) + 1
        # The round's clock starts as the last party arrives, before any is released: a
        # transfer on a fast link can arrive before the main thread runs again.
        self._t0 = 0.0
        self._start = threading.Barrier(parties, action=self._started, timeout=timeout_s)
        self._end = threading.Barrier(parties, timeout=timeout_s)
        self._active: set[int] = set()
        self._arrived: dict[int, float] = {}
        self._closing = False
        self._errors: list[BaseException] = []
        self._ports: dict[int, int] = {}
        self._listening = threading.Barrier(len(pairs) + 1, timeout=timeout_s)
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> _Connections:
        for flow, (_, receiver) in enumerate(self.pairs):
            self._spawn(self._receive, flow, receiver)
        self._wait(self._listening)
        for flow, (sender, _) in enumerate(self.pairs):
            self._spawn(self._send, flow, sender)
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        if not self._errors:
            with contextlib.suppress(threading.BrokenBarrierError):
                self._start.wait()  # every end thread sees _closing and returns
        self._start.abort()
        for thread in self._threads:
            thread.join(self.timeout_s)

    def round(self, active: Sequence[int]) -> list[float]:
        self._active, self._arrived = set(active), {}
        self._wait(self._start)
        self._wait(self._end)
        if len(self._arrived) != len(self._active):
            raise ProfilingError(f"warm sharing: {self._errors or 'a transfer did not arrive'}")
        return sorted(t - self._t0 for t in self._arrived.values())

    def _started(self) -> None:
        self._t0 = time.perf_counter()

    def _wait(self, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise ProfilingError(
                f"warm sharing: transfers failed or timed out: {self._errors or 'timeout'}"
            ) from None

    def _spawn(self, body: Callable[..., None], *args: Any) -> None:
        def guarded() -> None:
            try:
                body(*args)
            except BaseException as err:  # reported by the caller's barrier wait
                self._errors.append(err)
                for barrier in (self._listening, self._start, self._end):
                    barrier.abort()

        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _enter(self, node: int) -> None:
        if self.namespaces is not None:
            enter_namespace(self.namespaces[node])

    def _receive(self, flow: int, node: int) -> None:
        self._enter(node)
        with socket.create_server((self.addrs[node], 0)) as server:
            server.settimeout(self.timeout_s)
            self._ports[flow] = server.getsockname()[1]
            self._listening.wait()
            conn, _ = server.accept()
        with conn:
            conn.settimeout(self.timeout_s)
            buf = bytearray(CHUNK)
            while True:
                self._start.wait()
                if self._closing:
                    return
                if flow in self._active:
                    receive_exactly(conn, self.nbytes, buf, f"flow {flow}")
                    self._arrived[flow] = time.perf_counter()
                self._end.wait()

    def _send(self, flow: int, node: int) -> None:
        self._enter(node)
        payload = bytes(self.nbytes)
        receiver = self.pairs[flow][1]
        address = (self.addrs[receiver], self._ports[flow])
        with socket.create_connection(address, self.timeout_s) as conn:
            while True:
                self._start.wait()
                if self._closing:
                    return
                if flow in self._active:
                    conn.sendall(payload)
                self._end.wait()


def warm_sharing_to_dict(report: WarmSharingReport) -> dict[str, Any]:
    """The report as JSON-ready data."""
    return {
        "rate_bps": report.rate_bps,
        "nbytes": report.nbytes,
        "gap_s": report.gap_s,
        "shaped": report.shaped,
        "alone_s": dict(report.alone_s),
        "rounds": [
            {"direction": r.direction, "completion_s": list(r.completion_s)} for r in report.rounds
        ],
    }


def warm_sharing_from_dict(data: Any, source: str = "<memory>") -> WarmSharingReport:
    """The report :func:`warm_sharing_to_dict` wrote; ConfigError naming ``source`` if
    malformed."""
    try:
        rounds = tuple(
            WarmRound(str(r["direction"]), tuple(float(c) for c in r["completion_s"]))
            for r in data["rounds"]
        )
        alone = {str(d): float(t) for d, t in data["alone_s"].items()}
        report = WarmSharingReport(
            float(data["rate_bps"]),
            int(data["nbytes"]),
            float(data["gap_s"]),
            alone,
            rounds,
            bool(data.get("shaped", True)),
        )
    except KeyError as err:
        raise ConfigError(f"{source}: warm sharing: missing field {err}") from None
    except (TypeError, ValueError, AttributeError) as err:
        raise ConfigError(f"{source}: warm sharing: {err}") from None
    directions = {r.direction for r in rounds} | set(alone)
    bad = sorted(directions - set(DIRECTIONS))
    if bad or any(not r.completion_s or min(r.completion_s) <= 0 for r in rounds):
        what = f"direction {bad[0]!r}" if bad else "a round without positive completion times"
        raise ConfigError(f"{source}: warm sharing: {what}")
    return report


def warm_sharing_text(report: WarmSharingReport) -> str:
    """Per direction: one transfer alone, when the first of the round ended, and the cv."""
    where = link_where(report.rate_bps, report.shaped)
    lines = [
        f"{where}: {report.flows} transfers of {report.nbytes / 1e6:.2f} MB at once over "
        f"connections kept open, {report.gap_s * 1e3:.0f} ms apart"
    ]
    for direction in DIRECTIONS:
        if not any(r.direction == direction for r in report.rounds):
            continue
        lines.append(
            f"  {direction} the node: one alone {report.alone_s[direction] * 1e3:.1f} ms; "
            f"the first of {report.flows} ends at {report.first_end(direction):.2f} of it "
            f"(processor sharing: {report.flows}); flow weight cv "
            f"{report.weight_cv(direction):.2f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 on an sgdsim error)."""
    parser = argparse.ArgumentParser(
        prog="python -m profilers.warm_sharing",
        description="How a tc-shaped link shares transfers that start together over TCP "
        "connections kept open between them, as training's are (emulated cluster; needs root).",
    )
    parser.add_argument("--rate", default="200Mbit/s", help="shaped rate (default 200Mbit/s)")
    parser.add_argument("--bytes", help="bytes per transfer, e.g. 2.5MB (default: 0.1 s)")
    parser.add_argument("--flows", type=int, default=4, help="transfers at once (4)")
    parser.add_argument("--rounds", type=int, default=16, help="rounds per direction (16)")
    parser.add_argument("--gap", type=float, default=0.3, help="idle between rounds, s (0.3)")
    args = parser.parse_args(argv)
    try:
        nbytes = None if args.bytes is None else round(parse_size(args.bytes, name="--bytes"))
        report = measure_warm_sharing(
            parse_bandwidth(args.rate, name="--rate"),
            nbytes=nbytes,
            flows=args.flows,
            rounds=args.rounds,
            gap_s=args.gap,
        )
    except SgdsimError as err:
        print(f"warm_sharing: error: {err}", file=sys.stderr)
        return 2
    print(warm_sharing_text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
