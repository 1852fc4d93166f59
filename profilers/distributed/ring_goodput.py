"""How fast a gloo ring AllReduce moves a model's gradients over a link, with nothing else running.

The simulator's ring AllReduce moves 2(W-1)/W of a layer's bytes over each worker's link at the
link's bandwidth (TPDS'22 3.2.2, Patarasuk and Yuan's bound). A real ring stays below one TCP
flow's goodput: each link carries the ACKs of the flow coming the other way, and each of the
ring's 2(W-1) steps waits for its chunk to arrive before passing it on. This times all-reduces
alone, the model's layers one after another as a training step issues them, and reports the
rate the ring's formula implies::

    goodput = 2(W-1)/W * 8 * bytes / time

On the emulated cluster (:mod:`profilers.netns_cluster`) every node's link is shaped, as for the
validation's ring runs; without one the ranks talk over loopback. With two workers it needs no
more machines than measuring one link does.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from profilers.distributed.spawn import join_gloo_group, run_rank_processes
from profilers.netns_cluster import BURST_S, EmulatedCluster, emulated_cluster
from simcore.errors import ConfigError, SgdsimError
from simcore.sim.dag import ring_message_count
from simcore.units import format_bandwidth, format_seconds

__all__ = [
    "GLOO_SEGMENT_BYTES",
    "RingCpuCost",
    "RingGoodput",
    "RingModelTerms",
    "measure_ring_goodput",
    "ring_goodput_text",
    "ring_model_terms",
    "time_ring",
]

_GRACE_S = 10.0  # beyond gloo's own timeout, before the parent gives up on a silent rank
# gloo's ring all-reduce sends a layer in segments of at most this many bytes, at least two per
# rank (gloo/allreduce.h, kMaxSegmentSize; torch's ProcessGroupGloo leaves it as it is).
GLOO_SEGMENT_BYTES = 1 << 20


@dataclass(frozen=True)
class RingCpuCost:
    """What a ring's all-reduces cost a rank's CPU (its gloo threads, the copies and the
    reduction, the kernel's network stack): per byte it sends or receives, and per message."""

    s_per_byte: float
    s_per_message: float
    layered_cpu_s: float  # per repetition (median): one all-reduce per layer
    flat_cpu_s: float  # per repetition (median): one all-reduce of the same bytes


@dataclass(frozen=True)
class RingGoodput:
    """Timed ring all-reduces of ``layer_nbytes`` (one repetition: every layer, back to back)."""

    workers: int
    layer_nbytes: tuple[int, ...]
    times_s: tuple[float, ...]  # per repetition, the slowest rank's
    link_rate_bps: float | None = None  # each node's shaped link; None: loopback
    # Per repetition, a rank's CPU time (its process, every thread; the mean over ranks): the
    # layers one all-reduce each, and the same bytes as one all-reduce. Empty: not measured
    # (before the measurement recorded it).
    cpu_s: tuple[float, ...] = ()
    flat_cpu_s: tuple[float, ...] = ()

    @property
    def messages(self) -> int:
        """Messages each rank sends per repetition: gloo's segments of each layer
        (:func:`~simcore.sim.dag.ring_message_count`, at least 4(W-1) per layer)."""
        return self.message_count(GLOO_SEGMENT_BYTES)

    def message_count(self, segment_bytes: float | None) -> int:
        """Messages each rank sends per repetition with segments of at most ``segment_bytes``
        (None: the paper's 2(W-1) per layer)."""
        return sum(ring_message_count(n, self.workers, segment_bytes) for n in self.layer_nbytes)

    def cpu_costs(self) -> RingCpuCost | None:
        """A rank's CPU work per byte it sends or receives and per message, from the two ways
        of all-reducing the same bytes: one all-reduce per layer and one for them all, each in
        gloo's segments (:attr:`messages`). Their difference is the cost of the extra
        messages; what the single all-reduce took beyond its messages is the bytes'. None
        when the CPU time was not measured."""
        if not self.cpu_s or not self.flat_cpu_s:
            return None
        layered, flat = statistics.median(self.cpu_s), statistics.median(self.flat_cpu_s)
        flat_messages = ring_message_count(sum(self.layer_nbytes), self.workers, GLOO_SEGMENT_BYTES)
        extra = self.messages - flat_messages
        per_message = max(layered - flat, 0.0) / extra if extra else 0.0
        per_byte = max(flat - flat_messages * per_message, 0.0) / self.nbytes_moved
        return RingCpuCost(per_byte, per_message, layered, flat)

    @property
    def bits_per_link(self) -> float:
        """Bits each worker sends in one repetition: 2(W-1)/W of the layers' bytes."""
        return 2 * (self.workers - 1) / self.workers * 8 * sum(self.layer_nbytes)

    @property
    def nbytes_moved(self) -> float:
        """Bytes each rank sends and receives in one repetition (twice :attr:`bits_per_link`'s
        bytes): what a rank's CPU cost per byte is over."""
        return 2 * self.bits_per_link / 8

    def goodput_bps(self) -> float:
        """The bandwidth the ring's formula implies: bits per link over the median time."""
        return self.bits_per_link / statistics.median(self.times_s)

    def message_latency_s(
        self, link_bps: float, segment_bytes: float | None = GLOO_SEGMENT_BYTES
    ) -> float:
        """The fixed cost of one of the ring's messages, given the link's one-flow goodput: what
        the median time holds beyond the bytes at ``link_bps``, over the messages each layer's
        all-reduce sends one after another (the alpha of the alpha-beta cost
        ``n alpha + 2(W-1)/W M/B``, TPDS'22 Eq. 11 with a latency); 0 when the bytes alone take
        as long. ``n``: gloo's segments of at most ``segment_bytes`` (None: the paper's 2(W-1)
        messages; :func:`simcore.sim.dag.ring_message_count`), which the simulator must then
        send as well (``SimulationConfig.ring_segment_bytes``).

        The goodput folds both terms into one rate, which then grows with W as 2(W-1)/W; the
        messages grow as 2(W-1) (for small layers). A ring of two nodes thus says how a ring of
        four behaves only through the two terms: for 19 small layers (resnet8) the messages are
        most of the time.
        """
        beyond = statistics.median(self.times_s) - self.bits_per_link / link_bps
        return max(beyond, 0.0) / self.message_count(segment_bytes)

    def bytes_bandwidth_bps(
        self,
        link_bps: float,
        message_latency_s: float,
        segment_bytes: float | None = GLOO_SEGMENT_BYTES,
    ) -> float:
        """The rate this ring moved its bytes at once its messages' fixed cost (``message_
        latency_s`` each, as measured with the fewest ranks) is out of its median time: the B
        of ``n alpha + 2(W-1)/W M / B`` given alpha; at most ``link_bps`` (one flow's goodput).

        On the testbed a ring of four at 500 Mbit/s took 1.6x what its bytes take at the
        link's rate, where a ring of two took 1.07x; the cost per message of a ring of two
        would have to grow fivefold to explain it, while resnet8's many small all-reduces cost
        no more per message with four ranks than with two. A rate per W carries the first
        without breaking the second."""
        beyond = statistics.median(self.times_s) - self.message_count(segment_bytes) * (
            message_latency_s
        )
        if beyond <= 0:
            return link_bps  # the messages' cost is all of the time: nothing says the bytes slowed
        return min(link_bps, self.bits_per_link / beyond)


@dataclass(frozen=True)
class RingModelTerms:
    """What the simulator's ring takes from rings timed alone (``network_effects.RingGoodput``'s
    version 3 and 4 terms): the fixed cost of each of its messages, gloo's segments that cost
    was counted over, and the rate each W's bytes moved at given that cost (empty with one
    ring)."""

    message_latency_s: float
    segment_bytes: float
    bandwidths: tuple[tuple[int, float], ...]


def ring_model_terms(rings: Sequence[RingGoodput], link_bps: float) -> RingModelTerms:
    """The terms of ``rings`` (timed alone, fewest ranks first) over a link whose one flow
    moves ``link_bps``: the ring of fewest ranks' time beyond its bytes at that rate, per
    message (:meth:`RingGoodput.message_latency_s`), and with more than one ring each one's
    bytes' rate given that cost (:meth:`RingGoodput.bytes_bandwidth_bps`, at most
    ``link_bps``). The validation and ``sgdsim network measure`` derive them alike."""
    if not rings:
        raise ConfigError("ring model terms: no ring was timed")
    latency = rings[0].message_latency_s(link_bps, GLOO_SEGMENT_BYTES)
    bandwidths: tuple[tuple[int, float], ...] = ()
    if len(rings) > 1:
        bandwidths = tuple(
            (r.workers, r.bytes_bandwidth_bps(link_bps, latency, GLOO_SEGMENT_BYTES)) for r in rings
        )
    return RingModelTerms(latency, GLOO_SEGMENT_BYTES, bandwidths)


def ring_goodput_text(ring: RingGoodput, one_flow_bps: float | None = None) -> str:
    """One line: the ring's goodput, and what fraction of one flow's it is."""
    layers = len(ring.layer_nbytes)
    text = (
        f"ring AllReduce of {sum(ring.layer_nbytes) / 1e6:.2f} MB in {layers} layer(s) over "
        f"{ring.workers} nodes: {format_bandwidth(ring.goodput_bps())} per link (median of "
        f"{len(ring.times_s)})"
    )
    if one_flow_bps:
        text += f", {ring.goodput_bps() / one_flow_bps:.2f} of one flow's goodput"
    cost = ring.cpu_costs()
    if cost is not None:
        text += (
            f"; a rank's CPU {cost.s_per_byte * 1e9:.3g} ns per byte sent or received and "
            f"{format_seconds(cost.s_per_message)} per message"
        )
    return text


def measure_ring_goodput(
    layer_nbytes: Sequence[int],
    *,
    workers: int = 2,
    link_rate_bps: float | None = None,
    repeats: int = 10,
    warmup: int = 2,
    timeout_s: float = 60.0,
    burst_s: float = BURST_S,
) -> RingGoodput:
    """All-reduce float32 buffers of ``layer_nbytes`` among ``workers`` ranks, ``warmup`` +
    ``repeats`` times, and time each repetition (see the module).

    ``link_rate_bps``: on the emulated cluster (root) with every node's link shaped to it;
    None: over loopback. ``burst_s``: the shaping's tbf bucket as time at that rate (the
    cluster's default; :func:`profilers.netns.tbf_segments_gso` says when it is too small for
    one GSO packet, which makes every transfer cost its ranks far more CPU).

    Raises
    ------
    ConfigError : bad arguments, or the emulated cluster is not permitted here.
    DistributedRunError : a rank failed or did not finish within ``timeout_s`` (plus a grace).
    """
    sizes = tuple(int(n) for n in layer_nbytes)
    if workers < 2 or repeats < 1 or warmup < 0 or not sizes or min(sizes) < 4:
        raise ConfigError(
            f"ring goodput: needs workers >= 2, repeats >= 1, warmup >= 0 and layers of >= 4 "
            f"bytes; got {workers}, {repeats}, {warmup}, {list(sizes)}"
        )
    if link_rate_bps is None:
        times, cpu, flat_cpu = _run(sizes, workers, None, repeats, warmup, timeout_s)
    else:
        shaped = dict.fromkeys(range(workers), link_rate_bps)
        with emulated_cluster(workers, shaped, burst_s=burst_s) as cluster:
            times, cpu, flat_cpu = _run(sizes, workers, cluster, repeats, warmup, timeout_s)
    return RingGoodput(workers, sizes, times, link_rate_bps, cpu, flat_cpu)


def _run(
    sizes: tuple[int, ...],
    workers: int,
    cluster: EmulatedCluster | None,
    repeats: int,
    warmup: int,
    timeout_s: float,
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Per repetition: the slowest rank's time, and the ranks' mean CPU time layer by layer
    and as one all-reduce."""
    args = (workers, sizes, repeats, warmup, timeout_s, cluster)
    per_rank = run_rank_processes(
        "ring goodput", _rank_main, [args] * workers, timeout_s + _GRACE_S
    )
    times = tuple(max(rank[0][i] for rank in per_rank) for i in range(repeats))
    cpu = tuple(statistics.fmean(rank[1][i] for rank in per_rank) for i in range(repeats))
    flat = tuple(statistics.fmean(rank[2][i] for rank in per_rank) for i in range(repeats))
    return times, cpu, flat


def _rank_main(
    rank: int,
    init: str,
    workers: int,
    sizes: tuple[int, ...],
    repeats: int,
    warmup: int,
    timeout_s: float,
    cluster: EmulatedCluster | None,
    results: Any,
) -> None:
    try:
        dist = join_gloo_group(rank, workers, init, timeout_s, cluster)
        times, cpu, flat_cpu = time_ring(dist, sizes, repeats, warmup)
        dist.barrier()
        dist.destroy_process_group()
        results.put(("times", rank, (times, cpu, flat_cpu)))
    except (SgdsimError, RuntimeError, OSError) as err:
        results.put(("error", rank, str(err)))
        raise SystemExit(1) from err


def time_ring(
    dist: Any, sizes: Sequence[int], repeats: int, warmup: int, group: Any = None
) -> tuple[list[float], list[float], list[float]]:
    """In a rank of ``group`` (None: the whole gloo group): all-reduce float32 buffers of
    ``sizes`` back to back, then the same bytes as one buffer, ``warmup + repeats`` times;
    this rank's time of each timed repetition of the layers, and its CPU time (all threads)
    of the layers' and of the single buffer's. Every rank of ``group`` must call it."""
    import torch

    buffers = [torch.ones(n // 4) for n in sizes]
    flat = [torch.ones(sum(n // 4 for n in sizes))]  # the same bytes in one all-reduce
    times: list[float] = []
    cpu: list[float] = []
    flat_cpu: list[float] = []
    for repetition in range(warmup + repeats):
        for reduced, cpus in ((buffers, cpu), (flat, flat_cpu)):
            dist.barrier(group=group)
            start, start_cpu = time.perf_counter(), time.process_time()
            pending = [dist.all_reduce(b, async_op=True, group=group) for b in reduced]
            for work in pending:
                work.wait()
            if repetition >= warmup:
                cpus.append(time.process_time() - start_cpu)
                if reduced is buffers:
                    times.append(time.perf_counter() - start)
    return times, cpu, flat_cpu
