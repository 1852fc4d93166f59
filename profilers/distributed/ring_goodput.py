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

import os
import queue
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from profilers.distributed.config import DistributedRunError
from profilers.distributed.spawn import rank_process_context, stop_processes
from profilers.netns import enter_namespace
from profilers.netns_cluster import EmulatedCluster, emulated_cluster
from simcore.errors import ConfigError, SgdsimError
from simcore.units import format_bandwidth

__all__ = ["RingGoodput", "measure_ring_goodput", "ring_goodput_text"]

_GRACE_S = 10.0  # beyond gloo's own timeout, before the parent gives up on a silent rank


@dataclass(frozen=True)
class RingGoodput:
    """Timed ring all-reduces of ``layer_nbytes`` (one repetition: every layer, back to back)."""

    workers: int
    layer_nbytes: tuple[int, ...]
    times_s: tuple[float, ...]  # per repetition, the slowest rank's
    link_rate_bps: float | None = None  # each node's shaped link; None: loopback

    @property
    def bits_per_link(self) -> float:
        """Bits each worker sends in one repetition: 2(W-1)/W of the layers' bytes."""
        return 2 * (self.workers - 1) / self.workers * 8 * sum(self.layer_nbytes)

    def goodput_bps(self) -> float:
        """The bandwidth the ring's formula implies: bits per link over the median time."""
        return self.bits_per_link / statistics.median(self.times_s)

    def message_latency_s(self, link_bps: float) -> float:
        """The fixed cost of one of the ring's messages, given the link's one-flow goodput: what
        the median time holds beyond the bytes at ``link_bps``, over the 2(W-1) messages each
        layer's all-reduce sends one after another (the alpha of the alpha-beta cost
        ``2(W-1) alpha + 2(W-1)/W M/B``, TPDS'22 Eq. 11 with a latency); 0 when the bytes
        alone take as long.

        The goodput folds both terms into one rate, which then grows with W as 2(W-1)/W; the
        messages grow as 2(W-1). A ring of two nodes thus says how a ring of four behaves only
        through the two terms: for 19 small layers (resnet8) the messages are most of the time.
        """
        messages = 2 * (self.workers - 1) * len(self.layer_nbytes)
        beyond = statistics.median(self.times_s) - self.bits_per_link / link_bps
        return max(beyond, 0.0) / messages


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
    return text


def measure_ring_goodput(
    layer_nbytes: Sequence[int],
    *,
    workers: int = 2,
    link_rate_bps: float | None = None,
    repeats: int = 10,
    warmup: int = 2,
    timeout_s: float = 60.0,
) -> RingGoodput:
    """All-reduce float32 buffers of ``layer_nbytes`` among ``workers`` ranks, ``warmup`` +
    ``repeats`` times, and time each repetition (see the module).

    ``link_rate_bps``: on the emulated cluster (root) with every node's link shaped to it;
    None: over loopback.

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
        times = _run(sizes, workers, None, repeats, warmup, timeout_s)
    else:
        with emulated_cluster(workers, dict.fromkeys(range(workers), link_rate_bps)) as cluster:
            times = _run(sizes, workers, cluster, repeats, warmup, timeout_s)
    return RingGoodput(workers, sizes, times, link_rate_bps)


def _run(
    sizes: tuple[int, ...],
    workers: int,
    cluster: EmulatedCluster | None,
    repeats: int,
    warmup: int,
    timeout_s: float,
) -> tuple[float, ...]:
    ctx = rank_process_context()
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="sgdsim-ring-") as folder:
        init = f"file://{os.path.join(folder, 'store')}"
        procs = [
            ctx.Process(
                target=_rank_main,
                args=(rank, workers, init, sizes, repeats, warmup, timeout_s, cluster, results),
                daemon=True,
            )
            for rank in range(workers)
        ]
        try:
            for proc in procs:
                proc.start()
            per_rank = _collect(results, procs, workers, timeout_s + _GRACE_S)
        finally:
            stop_processes(procs)
            results.close()
            results.join_thread()
    return tuple(max(times[i] for times in per_rank) for i in range(repeats))


def _collect(results: Any, procs: list[Any], workers: int, limit_s: float) -> list[list[float]]:
    deadline = time.monotonic() + limit_s
    per_rank: dict[int, list[float]] = {}
    while len(per_rank) < workers:
        try:
            kind, rank, payload = results.get(timeout=0.2)
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if r not in per_rank and not p.is_alive()]
            if dead:
                raise DistributedRunError(
                    f"ring goodput: rank {dead[0]} exited (code {procs[dead[0]].exitcode}) "
                    "without a result"
                ) from None
            if time.monotonic() > deadline:
                missing = sorted(set(range(workers)) - set(per_rank))
                raise DistributedRunError(
                    f"ring goodput: rank(s) {missing} did not finish within {limit_s:g} s"
                ) from None
            continue
        if kind == "error":
            raise DistributedRunError(f"ring goodput: rank {rank}: {payload}")
        per_rank[rank] = payload
    return [per_rank[r] for r in range(workers)]


def _rank_main(
    rank: int,
    workers: int,
    init: str,
    sizes: tuple[int, ...],
    repeats: int,
    warmup: int,
    timeout_s: float,
    cluster: EmulatedCluster | None,
    results: Any,
) -> None:
    try:
        if cluster is not None:  # first, while this process has one thread
            enter_namespace(cluster.namespaces[rank])
            os.environ["GLOO_SOCKET_IFNAME"] = cluster.ifname
        else:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            init_method=init,
            rank=rank,
            world_size=workers,
            timeout=timedelta(seconds=timeout_s),
        )
        buffers = [torch.ones(n // 4) for n in sizes]
        times = []
        for repetition in range(warmup + repeats):
            dist.barrier()
            start = time.perf_counter()
            pending = [dist.all_reduce(b, async_op=True) for b in buffers]
            for work in pending:
                work.wait()
            if repetition >= warmup:
                times.append(time.perf_counter() - start)
        dist.barrier()
        dist.destroy_process_group()
        results.put(("times", rank, times))
    except (SgdsimError, RuntimeError, OSError) as err:
        results.put(("error", rank, str(err)))
        raise SystemExit(1) from err
