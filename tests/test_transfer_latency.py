"""The fitted fixed cost of a parameter server's transfers, against hand-timed one-worker steps."""

from __future__ import annotations

import pytest

from profilers.distributed.transfer_latency import fit_transfer_latency
from simcore.sim import SimulationConfig
from simcore.trace.build import synthetic_trace

B = 1e9
SIZE = 1_000_000


def one_worker(**kw: object) -> SimulationConfig:
    return SimulationConfig(workers=1, bandwidth_bps=B, **kw)  # type: ignore[arg-type]


def test_the_latency_that_makes_the_replay_as_slow_as_the_runs() -> None:
    # One layer: pull, forward, backward, push, update in sequence, so each transfer's latency
    # adds to the step once: a step 2 ms longer than the replay is 1 ms per transfer.
    trace = synthetic_trace([0.010], [0.020], [SIZE], update_s=0.001)
    replayed = 2 * 8 * SIZE / B + 0.030 + 0.001
    fit = fit_transfer_latency(trace, replayed + 0.002, one_worker())
    assert fit.replayed_step_s == pytest.approx(replayed, rel=1e-9)
    assert fit.simulated_step_s == pytest.approx(replayed + 0.002, rel=1e-3)
    assert fit.latency_s == pytest.approx(0.001, rel=0.05)


def test_no_latency_when_the_replay_is_as_slow_as_the_runs_already() -> None:
    trace = synthetic_trace([0.010], [0.020], [SIZE], update_s=0.001)
    replayed = 2 * 8 * SIZE / B + 0.030 + 0.001
    for measured in (replayed, 0.9 * replayed):
        fit = fit_transfer_latency(trace, measured, one_worker())
        assert fit.latency_s == 0.0
        assert fit.simulated_step_s == pytest.approx(replayed, rel=1e-9)


def test_a_given_latency_is_where_the_fit_starts() -> None:
    # The fitted value includes what the configuration already had.
    trace = synthetic_trace([0.010], [0.020], [SIZE], update_s=0.001)
    replayed = 2 * 8 * SIZE / B + 0.030 + 0.001
    fit = fit_transfer_latency(trace, replayed + 0.004, one_worker(latency_s=0.0005))
    assert fit.replayed_step_s == pytest.approx(replayed + 0.001, rel=1e-9)
    assert fit.latency_s == pytest.approx(0.002, rel=0.05)
