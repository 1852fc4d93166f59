"""Analytic performance models of distributed SGD (pure: numpy only, no SimPy, no files).

The TPDS'22 coarse-grained models (Li et al., sections 2.1 and 3.1) answer in milliseconds where
the simulator takes seconds:

- :mod:`.params`: the coarse parameters T_F, T_B, T_S and M of a trace, and the cluster to predict;
- :mod:`.network` and :mod:`.mva`: closed multi-class queueing networks and their mean value
  analysis (exact singleton recursion, exact grouped recursion, Bard-Schweitzer);
- :mod:`.async_model`: Async-SGD as the closed network of Fig. 5 (Eq. 1-6);
- :mod:`.sync_model`: Sync-SGD step times (Eq. 7-11);
- :mod:`.advisor`: ranks data-parallel configurations for a machine budget and confirms the best
  with the simulator (so it imports :mod:`simcore.sim`; import it from its module).
"""

from simcore.analytic.async_model import (
    OVERLAP_RULES,
    AsyncPrediction,
    SharingSolution,
    predict_async,
)
from simcore.analytic.mva import SOLVERS, solve
from simcore.analytic.network import ClosedNetwork, MvaResult
from simcore.analytic.params import (
    Cluster,
    WorkerType,
    host_worker_type,
    worker_type_from_trace,
)
from simcore.analytic.sync_model import SyncEstimate, SyncPrediction, predict_sync

__all__ = [
    "OVERLAP_RULES",
    "SOLVERS",
    "AsyncPrediction",
    "ClosedNetwork",
    "Cluster",
    "MvaResult",
    "SharingSolution",
    "SyncEstimate",
    "SyncPrediction",
    "WorkerType",
    "host_worker_type",
    "predict_async",
    "predict_sync",
    "solve",
    "worker_type_from_trace",
]
