"""Coarse parameters of the TPDS'22 models, and the cluster a prediction is made for.

The coarse models see one SGD step as four phases: downlink, compute (forward then backward),
uplink, update. From a trace they need, per worker type, the mean forward time T_F, backward time
T_B and server update time T_S over the profiled steps, and the model size M (TPDS'22 2.1.2,
Table 3); the bandwidth B comes from the caller (or a measured network profile).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from simcore.errors import ConfigError
from simcore.network import NetworkProfile
from simcore.trace.model import OpKind, Trace
from simcore.trace.overhead import overhead_matrix
from simcore.units import check_bandwidth_range

__all__ = ["Cluster", "WorkerType", "bandwidth_of", "host_worker_type", "worker_type_from_trace"]


def _check_time(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name}: must be a finite number of seconds >= 0, got {value!r}")


@dataclass(frozen=True)
class WorkerType:
    """The coarse parameters of one kind of worker.

    Attributes
    ----------
    name : a label (the trace's model name, or anything).
    forward_s : T_F, seconds of forward computation per step.
    backward_s : T_B, seconds of backward computation per step.
    update_s : T_S, seconds the parameter server spends applying one step's gradients.
    model_nbytes : M, bytes pulled (and pushed) per step.
    batch_size : examples per step.
    """

    name: str
    forward_s: float
    backward_s: float
    update_s: float
    model_nbytes: int
    batch_size: int = 1

    def __post_init__(self) -> None:
        _check_time("forward_s", self.forward_s)
        _check_time("backward_s", self.backward_s)
        _check_time("update_s", self.update_s)
        if isinstance(self.model_nbytes, bool) or not isinstance(self.model_nbytes, int):
            raise ConfigError(f"model_nbytes: must be an integer, got {self.model_nbytes!r}")
        if self.model_nbytes < 0:
            raise ConfigError(f"model_nbytes: must be >= 0, got {self.model_nbytes}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise ConfigError(f"batch_size: must be an integer >= 1, got {self.batch_size!r}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size: must be an integer >= 1, got {self.batch_size}")

    @property
    def compute_s(self) -> float:
        """T_C = T_F + T_B, seconds."""
        return self.forward_s + self.backward_s

    def transfer_s(self, bandwidth_bps: float) -> float:
        """M / B: seconds to move the model once over a link of ``bandwidth_bps`` alone."""
        return 8.0 * self.model_nbytes / bandwidth_bps


MIN_COMPUTE_S = 1e-9  # the simulator's MIN_STEP_S, for the same reason


def worker_type_from_trace(trace: Trace) -> WorkerType:
    """T_F, T_B, T_S (means over the profiled steps of the per-op sums) and M of ``trace``.

    M is the sum of the bytes of the trace's pull ops. The step's fixed costs
    (``overhead:begin`` and ``overhead:end``, ``simcore.trace.overhead``) count as worker
    computation, in T_F and T_B respectively, as the simulator runs them before the forward pass
    and after the backward pass; other ops of kind ``other`` are not counted.

    Raises
    ------
    ConfigError
        If T_F + T_B is below MIN_COMPUTE_S: a step of one ring worker would take no time, and
        the models' throughput would be unbounded.
    """
    steps = range(trace.n_steps)

    def mean(kind: OpKind) -> float:
        return sum(trace.phase_time_s(s, kind) for s in steps) / trace.n_steps

    overhead = overhead_matrix(trace)
    begin_s, end_s = (0.0, 0.0) if overhead is None else overhead.mean(axis=0)
    forward_s = mean(OpKind.FORWARD) + float(begin_s)
    backward_s = mean(OpKind.BACKWARD) + float(end_s)
    compute_s = forward_s + backward_s
    if not compute_s >= MIN_COMPUTE_S:
        raise ConfigError(
            f"{trace.source}: the forward and backward passes take {compute_s:g} s per step; "
            f"the coarse models need at least {MIN_COMPUTE_S:g} s, or throughput is unbounded"
        )
    return WorkerType(
        name=trace.metadata.model_name,
        forward_s=forward_s,
        backward_s=backward_s,
        update_s=mean(OpKind.UPDATE),
        model_nbytes=sum(op.nbytes or 0 for op in trace.ops_of_kind(OpKind.PULL)),
        batch_size=trace.metadata.batch_size,
    )


def host_worker_type(
    worker: WorkerType, devices_per_host: int, intra_bandwidth_bps: float | None
) -> WorkerType:
    """A host of G devices of type ``worker`` seen as one coarse worker (TPDS'22 4.4).

    The coarse models' reasoning carries over when a host is a worker whose computation includes
    its intra-host aggregation: before its push the host reduces the gradients among its devices,
    after its pull it broadcasts the parameters, (G-1)/G * M / B_intra each (the two halves of a
    ring AllReduce, as in the simulator), added to T_B and T_F; a step trains G batches. The
    network terms are unchanged: one flow per host. What the coarse models cannot see is a
    per-flow cap (a flow alone gets the whole B in them), so with few hosts they overestimate.
    """
    if isinstance(devices_per_host, bool) or not isinstance(devices_per_host, int):
        raise ConfigError(f"devices_per_host: must be an integer >= 1, got {devices_per_host!r}")
    if devices_per_host < 1:
        raise ConfigError(f"devices_per_host: must be an integer >= 1, got {devices_per_host}")
    if devices_per_host == 1:
        return worker
    if intra_bandwidth_bps is None or not (
        math.isfinite(intra_bandwidth_bps) and intra_bandwidth_bps > 0
    ):
        raise ConfigError(
            f"intra_bandwidth_bps: must be a finite number > 0 with devices_per_host="
            f"{devices_per_host}, got {intra_bandwidth_bps!r}"
        )
    g = devices_per_host
    check_bandwidth_range("intra_bandwidth_bps", intra_bandwidth_bps)
    intra_s = (g - 1) / g * worker.transfer_s(intra_bandwidth_bps)
    return dataclasses.replace(
        worker,
        name=f"{worker.name} x{g} devices",
        forward_s=worker.forward_s + intra_s,
        backward_s=worker.backward_s + intra_s,
        batch_size=worker.batch_size * g,
    )


def bandwidth_of(profile: NetworkProfile) -> float:
    """B from a measured network profile, bit/s (its fitted latency is not part of the model)."""
    return profile.bandwidth_bps


@dataclass(frozen=True)
class Cluster:
    """``counts[i]`` workers of type ``worker_types[i]`` and one parameter server (or a ring).

    ``bandwidth_bps`` is B: the parameter server's link per direction (for ring AllReduce, each
    worker's link), bit/s.
    """

    worker_types: tuple[WorkerType, ...]
    counts: tuple[int, ...]
    bandwidth_bps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "worker_types", tuple(self.worker_types))
        object.__setattr__(self, "counts", tuple(self.counts))
        if not self.worker_types:
            raise ConfigError("worker_types: at least one worker type is needed")
        if len(self.counts) != len(self.worker_types):
            raise ConfigError(
                f"counts: needs one count per worker type ({len(self.worker_types)}), "
                f"got {len(self.counts)}"
            )
        for count in self.counts:
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigError(f"counts: each count must be an integer >= 1, got {count!r}")
        b = self.bandwidth_bps
        if not (isinstance(b, int | float) and math.isfinite(b) and b > 0):
            raise ConfigError(f"bandwidth_bps: must be a finite number > 0, got {b!r}")
        check_bandwidth_range("bandwidth_bps", b)

    @classmethod
    def homogeneous(cls, worker: WorkerType, workers: int, bandwidth_bps: float) -> Cluster:
        """``workers`` identical workers of type ``worker``."""
        return cls((worker,), (workers,), bandwidth_bps)

    @property
    def workers(self) -> int:
        """K, the total number of workers."""
        return sum(self.counts)
