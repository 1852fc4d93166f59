"""Sync-SGD step times of the coarse model (TPDS'22 section 3.1, Eq. 7-11).

With K workers, one parameter server of bandwidth B and model size M, every step has the phases
downlink, compute, uplink, update, started together by all workers:

- Eq. 7, links shared equally (PS): ``K M/B + T_C + K M/B + T_S``;
- Eq. 8, links FCFS: the pulls end one after another (the last at ``K M/B``), which staggers the
  workers so their pushes do not collide: ``K M/B + T_C + M/B + T_S``;
- Eq. 9, hybrid: the mean of the two step times, ``K M/B + T_C + (K+1) M/(2B) + T_S``;
- Eq. 10, hybrid with overlap: the forward pass hides under the downlink and the backward pass
  under the uplink: ``max(K M/B, T_F) + max((K+1) M/(2B), T_B) + T_S``;
- Eq. 11, ring AllReduce (no server): ``T_C + 2 (K-1) M / (K B)``.

Heterogeneous workers: a synchronous step ends when its slowest worker ends, so each equation is
evaluated per worker type (its T_F, T_B, M) and the step time is the largest; T_S is the largest
update time among the types present. All K workers complete one step per step time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simcore.analytic.params import Cluster, WorkerType

__all__ = ["SyncEstimate", "SyncPrediction", "predict_sync"]


@dataclass(frozen=True)
class SyncEstimate:
    """One Sync-SGD estimate: the step time and the throughput it implies."""

    step_s: float
    steps_per_s: float
    examples_per_s: float


@dataclass(frozen=True)
class SyncPrediction:
    """Eq. 7 (``ps``), 8 (``fcfs``), 9 (``hybrid``), 10 (``overlap``), 11 (``allreduce``)."""

    cluster: Cluster
    ps: SyncEstimate
    fcfs: SyncEstimate
    hybrid: SyncEstimate
    overlap: SyncEstimate
    allreduce: SyncEstimate


StepFormula = Callable[[WorkerType, int, float], float]  # (type, K, M/B) -> step time w/o T_S


def _eq7(w: WorkerType, k: int, mb: float) -> float:
    return k * mb + w.compute_s + k * mb


def _eq8(w: WorkerType, k: int, mb: float) -> float:
    return k * mb + w.compute_s + mb


def _eq9(w: WorkerType, k: int, mb: float) -> float:
    return k * mb + w.compute_s + (k + 1) * mb / 2


def _eq10(w: WorkerType, k: int, mb: float) -> float:
    return max(k * mb, w.forward_s) + max((k + 1) * mb / 2, w.backward_s)


def _eq11(w: WorkerType, k: int, mb: float) -> float:
    return w.compute_s + 2 * (k - 1) * mb / k


def _estimate(cluster: Cluster, formula: StepFormula, with_update: bool) -> SyncEstimate:
    k = cluster.workers
    b = cluster.bandwidth_bps
    step = max(formula(w, k, w.transfer_s(b)) for w in cluster.worker_types)
    if with_update:
        step += max(w.update_s for w in cluster.worker_types)
    examples = sum(
        n * w.batch_size for w, n in zip(cluster.worker_types, cluster.counts, strict=True)
    )
    return SyncEstimate(step_s=step, steps_per_s=k / step, examples_per_s=examples / step)


def predict_sync(cluster: Cluster) -> SyncPrediction:
    """Every coarse Sync-SGD estimate for ``cluster``; step times in seconds."""
    return SyncPrediction(
        cluster=cluster,
        ps=_estimate(cluster, _eq7, True),
        fcfs=_estimate(cluster, _eq8, True),
        hybrid=_estimate(cluster, _eq9, True),
        overlap=_estimate(cluster, _eq10, True),
        allreduce=_estimate(cluster, _eq11, False),
    )
