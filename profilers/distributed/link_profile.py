"""A validation's link measurements as a network profile (``sgdsim.network`` schema 2).

The validation measures the link it predicts with (:mod:`profilers.distributed.validation`): one
flow's goodput and how unevenly flows share the link (:mod:`profilers.link_sharing`, on the
testbed), a ring AllReduce's goodput (:mod:`profilers.distributed.ring_goodput`), what the server's
link carries both ways at once (:mod:`profilers.distributed.link_duplex`), and it fits the
transfers' CPU cost (:mod:`profilers.distributed.comm_cpu`). :func:`measured_network_profile`
puts them in the same :class:`~simcore.network.NetworkProfile` that ``sgdsim network measure``
writes, so that the predictions read them from one object and ``sgdsim validate --save-network``
can hand them to ``--network`` of the other commands.
"""

from __future__ import annotations

import dataclasses
import socket
from datetime import UTC, datetime

from profilers.distributed.comm_cpu import CommCpuFit, RingCpuWork, ring_cpu_work
from profilers.distributed.link_interference import TESTBED_INTERFERENCE, measured_interference
from profilers.distributed.measurements import Measurements
from profilers.distributed.ring_goodput import ring_model_terms
from profilers.distributed.transfer_latency import LatencyFit
from simcore.errors import ConfigError
from simcore.network import NetworkProfile
from simcore.network_effects import Duplex, FlowSharing, RingGoodput, TransferCpu
from simcore.trace.model import OpKind, Trace
from simcore.units import format_bandwidth

__all__ = [
    "effective_bandwidth_bps",
    "measured_network_profile",
    "measured_ring_cpu_work",
    "with_transfer_cpu",
    "with_transfer_latency",
]


def effective_bandwidth_bps(trace: Trace) -> float:
    """Bits moved by the trace's transfers over the time they kept their connection busy.

    Raises
    ------
    ConfigError : the trace has no measured transfers.
    """
    bits = busy = 0.0
    for step in trace.steps:
        for op, duration in zip(trace.ops, step.duration_s, strict=True):
            if op.kind in (OpKind.PULL, OpKind.PUSH) and duration is not None and op.nbytes:
                bits += 8.0 * op.nbytes
                busy += duration
    if busy <= 0:
        raise ConfigError(f"trace {trace.source}: no measured transfer times to fit a bandwidth")
    return bits / busy


def measured_ring_cpu_work(measured: Measurements, trace: Trace, alone: Trace) -> RingCpuWork:
    """A ring rank's CPU work per byte (:class:`~profilers.distributed.comm_cpu.RingCpuWork`)
    from the one-worker run (``trace`` beside its transfers, ``alone`` without) and the ring of
    fewest nodes timed alone, if its CPU time was measured."""
    rings = measured.ring_set
    cost = rings[0].cpu_costs() if rings else None
    return ring_cpu_work(trace, alone, cost.s_per_byte if cost is not None else None)


def measured_network_profile(
    measured: Measurements, trace: Trace, alone: Trace | None = None
) -> NetworkProfile:
    """The link as the validation measured it: on the testbed one flow's goodput, the flows'
    unequal shares, the ring's goodput and the duplex goodput; on loopback the bandwidth fitted
    to the solo run's transfers (``trace``) and nothing else. No latency and no CPU cost yet
    (:func:`with_transfer_latency` and :func:`with_transfer_cpu` add the fits).

    On the testbed the ring effect also carries what the validation's ring predictions use:
    the ring of two nodes' fixed cost per message beyond its bytes at one flow's goodput and,
    given the computation alone (``alone``), the CPU work per byte of the one-worker run's
    transfers or the ring of two's ranks alone, the larger
    (:class:`~profilers.distributed.comm_cpu.RingCpuWork`)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    sharing, rate = measured.sharing, measured.link_rate_bps
    where = "loopback" if rate is None else f"testbed link shaped to {format_bandwidth(rate)}"
    flow = None
    if sharing is not None:
        warm = measured.warm_sharing
        method = f"profilers.link_sharing before the validation's runs ({where})"
        if warm is not None:
            method += (
                f"; warm: profilers.warm_sharing, {warm.flows} of the model's transfers at once "
                "over connections kept open"
            )
        flow = FlowSharing(
            sharing.weight_cv(),
            pull_cv=sharing.weight_cv("out of"),
            push_cv=sharing.weight_cv("into"),
            fcfs_index=sharing.fcfs_index(),
            method=method,
            created_utc=now,
            warm_pull_cv=warm.weight_cv("out of") if warm is not None else None,
            warm_push_cv=warm.weight_cv("into") if warm is not None else None,
        )
    ring = None
    rings = measured.ring_set
    if rings:
        fewest = rings[0]
        method = f"profilers.distributed.ring_goodput of the model's layers ({where})"
        latency = cpu = segments = None
        bandwidths: tuple[tuple[int, float], ...] = ()
        if sharing is not None:
            terms = ring_model_terms(rings, sharing.goodput_bps())
            latency, segments, bandwidths = (
                terms.message_latency_s,
                terms.segment_bytes,
                terms.bandwidths,
            )
            method += (
                f"; cost per message: the ring of {fewest.workers}'s time beyond the bytes at "
                "one flow's goodput, over gloo's segments of at most 1 MiB"
            )
            if bandwidths:
                method += (
                    "; the bytes' rate per W: each ring's time beyond that cost per message "
                    "(at most one flow's goodput)"
                )
        if sharing is not None and alone is not None:
            work = measured_ring_cpu_work(measured, trace, alone)
            cpu = work.s_per_byte
            method += f"; CPU per byte: {work.text()} (profilers.distributed.comm_cpu)"
        ring = RingGoodput(
            tuple((r.workers, r.goodput_bps()) for r in rings),
            method=method,
            created_utc=now,
            message_latency_s=latency,
            cpu_s_per_byte=cpu,
            segment_bytes=segments,
            bandwidths=bandwidths,
        )
    duplex = None
    if measured.duplex is not None:
        duplex = Duplex(
            measured.duplex.ratio(),
            method=f"profilers.distributed.link_duplex ({where})",
            created_utc=now,
        )
    # What the validation predicts the two directions with on the testbed: the testbed's
    # interference, which this validation did not measure itself (its method says so).
    interference = None
    if measured.interference is not None:
        interference = dataclasses.replace(
            measured_interference(measured.interference), created_utc=now
        )
    elif duplex is not None and rate is not None:
        interference = dataclasses.replace(
            TESTBED_INTERFERENCE,
            method=f"{TESTBED_INTERFERENCE.method}; not measured by this validation",
            created_utc=now,
        )
    if sharing is not None:
        bandwidth, how = sharing.goodput_bps(), "one TCP flow's goodput (profilers.link_sharing)"
    else:
        bandwidth, how = effective_bandwidth_bps(trace), "bytes over busy time of the solo run's"
        how += " transfers"
    return NetworkProfile(
        latency_s=0.0,
        bandwidth_bps=bandwidth,
        backend="gloo",
        endpoints=f"the validation's {where}",
        method=f"bandwidth: {how}; latency not measured",
        host=socket.gethostname(),
        created_utc=now,
        flow_sharing=flow,
        ring_goodput=ring,
        duplex=duplex,
        duplex_interference=interference,
        source="measured",
    )


def with_transfer_cpu(profile: NetworkProfile, fit: CommCpuFit, cores: float) -> NetworkProfile:
    """``profile`` with the fitted CPU cost of transfers, on ``cores`` cores."""
    cost = TransferCpu(
        fit.s_per_byte,
        cores,
        method=f"profilers.distributed.comm_cpu: computation {fit.measured_compute_s:.4g} s per "
        f"step beside the transfers, {fit.alone_compute_s:.4g} s alone, replayed by the simulator",
        created_utc=profile.created_utc,
    )
    return dataclasses.replace(profile, transfer_cpu=cost)


def with_transfer_latency(profile: NetworkProfile, fit: LatencyFit) -> NetworkProfile:
    """``profile`` with the fitted latency of a parameter server's transfers as its latency: what
    `sgdsim simulate --network` then adds to each transfer, as the validation's predictions do
    (a ring with the profile's cost per message uses that instead)."""
    how = (
        f"latency: what a transfer took beyond its bytes in the one-worker parameter-server "
        f"runs ({fit.measured_step_s:.4g} s per step measured, {fit.replayed_step_s:.4g} s "
        "replayed; profilers.distributed.transfer_latency)"
    )
    return dataclasses.replace(
        profile,
        latency_s=fit.latency_s,
        method=profile.method.replace("latency not measured", how),
    )
