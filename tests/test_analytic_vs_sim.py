"""Exact MVA against the simulator on the very network it models (TPDS'22 Fig. 5, PS links).

The trace is built so that its fine-grained DAG is the four-station network: one layer, so one
pull (downlink), a forward and a zero backward (the worker station), one push (uplink) and a
zero update. The update is zero because the simulator gives every worker its own core at the
server (no contention there), whereas Fig. 5 shares the server as one PS station: with T_S = 0
the two agree. With ``jitter="exponential"`` every service time is exponential, the network has
product form and exact MVA gives its mean throughput exactly.

What is compared: the simulator's steady-state throughput measured through the utilization law,
``X = rho_D / S_D`` with ``S_D = 8 M / B`` the same for every worker, where ``rho_D`` is the
downlink's (and, averaged with it, the uplink's) utilization over the window in which every
worker is running (SEMANTICS.md, Estimates). Its 95% CI over independent seeded runs must
contain the MVA value. The simulator's own estimator, ``sum_w steps_w / span_w``, also counts
each worker's last steps after faster workers have finished (less contention then): close to
the MVA value for identical workers, but biased upwards for mixed ones, so the check uses the
window instead.
"""

from __future__ import annotations

import pytest

from simcore.analytic import Cluster, predict_async, worker_type_from_trace
from simcore.sim import SimulationConfig, simulate
from simcore.sim.results import Estimate
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

B = 1e9
SIZE = 1_250_000  # M/B = 10 ms at 1 Gbit/s
S_LINK = 8 * SIZE / B
SEEDS = range(1, 9)


def simulated(
    traces: list[Trace], workers: int, types: tuple[int, ...] | None = None
) -> tuple[Estimate, list[float]]:
    """The utilization-law throughput (steps/s) with its 95% CI, and each run's own estimate."""
    samples, own = [], []
    for seed in SEEDS:
        config = SimulationConfig(
            workers=workers,
            bandwidth_bps=B,
            sharing="ps",
            jitter="exponential",
            worker_types=types,
            steps=1500,
            warmup_steps=100,
            seed=seed,
        )
        result = simulate(traces, config)
        rho = sum(link.utilization for link in result.links) / len(result.links)
        samples.append(rho / S_LINK)
        own.append(result.steps_per_s.value)
    return Estimate.from_samples(sum(samples) / len(samples), samples, "replications"), own


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 4, 8])
def test_identical_workers_within_the_ci(workers: int) -> None:
    trace = synthetic_trace([0.020], [0.0], [SIZE], update_s=0.0)
    exact = predict_async(Cluster.homogeneous(worker_type_from_trace(trace), workers, B)).ps
    assert exact.mva.solver == "grouped"
    assert exact.link_utilization > 0.4  # the links are really shared: not a trivial check
    est, own = simulated([trace], workers)
    assert est.ci_low is not None and est.ci_high is not None
    assert est.ci_low <= exact.steps_per_s <= est.ci_high
    assert sum(own) / len(own) == pytest.approx(exact.steps_per_s, rel=0.02)  # end effect: < 1%


@pytest.mark.slow
def test_two_worker_types_within_the_ci() -> None:
    fast = synthetic_trace([0.015], [0.0], [SIZE], update_s=0.0)
    slow = synthetic_trace([0.045], [0.0], [SIZE], update_s=0.0)
    types = (0, 1, 1, 0, 1)
    cluster = Cluster((worker_type_from_trace(fast), worker_type_from_trace(slow)), (2, 3), B)
    exact = predict_async(cluster, solver="singleton").ps
    est, _ = simulated([fast, slow], len(types), types)
    assert est.ci_low is not None and est.ci_high is not None
    assert est.ci_low <= exact.steps_per_s <= est.ci_high
