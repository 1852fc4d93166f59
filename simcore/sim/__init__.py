"""The fine-grained discrete-event simulator of distributed SGD (TPDS'22 Alg. 1, ICPE'20 Alg. 3.1).

From a single-worker trace, :func:`simulate` predicts the throughput of W workers training with
a parameter server (Async- or Sync-SGD) or ring AllReduce, on SimPy. Semantics: ``SEMANTICS.md``
beside this file. Pure: no file I/O, no plotting.
"""

from simcore.sim.api import MIN_STEP_S, SweepResult, simulate, sweep, validate
from simcore.sim.config import SimulationConfig
from simcore.sim.engine import SimulationError
from simcore.sim.precision import (
    PrecisionRule,
    simulate_many,
    simulate_sized,
    simulate_to_precision,
)
from simcore.sim.results import (
    Estimate,
    LinkStats,
    SimulationResult,
    StepRecord,
    Stopping,
    Timeline,
    TimelineRecord,
    WorkerStats,
)
from simcore.sim.sharing import (
    EqualSharePolicy,
    SharingPolicy,
    register_sharing_policy,
    sharing_policy_names,
)
from simcore.sim.streams import (
    StreamContext,
    StreamScheduler,
    register_stream_scheduler,
    stream_scheduler_names,
)

__all__ = [
    "MIN_STEP_S",
    "EqualSharePolicy",
    "Estimate",
    "LinkStats",
    "PrecisionRule",
    "SharingPolicy",
    "SimulationConfig",
    "SimulationError",
    "SimulationResult",
    "StepRecord",
    "Stopping",
    "StreamContext",
    "StreamScheduler",
    "SweepResult",
    "Timeline",
    "TimelineRecord",
    "WorkerStats",
    "register_sharing_policy",
    "register_stream_scheduler",
    "sharing_policy_names",
    "simulate",
    "simulate_many",
    "simulate_sized",
    "simulate_to_precision",
    "stream_scheduler_names",
    "sweep",
    "validate",
]
