"""``jitter="exponential"``: exponential durations and transfer sizes around the profiled ones."""

from __future__ import annotations

import math

import pytest

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.trace.build import synthetic_trace

B = 1e9
FWD, SIZE = 0.020, 1_250_000  # 20 ms of compute; 10 ms per transfer at 1 Gbit/s


def test_one_worker_step_is_a_sum_of_exponentials() -> None:
    """Step = Exp(20 ms) forward + Exp(10 ms) pull + Exp(10 ms) push: mean 40 ms and standard
    deviation sqrt(20^2 + 10^2 + 10^2) = 24.5 ms. Over 20,000 steps the standard error of the
    mean is 0.17 ms, so 2% (5 standard errors) is a safe band; the deviation within 5%."""
    trace = synthetic_trace([FWD], [0.0], [SIZE])
    config = SimulationConfig(
        bandwidth_bps=B, jitter="exponential", steps=20_000, warmup_steps=10, seed=4
    )
    worker = simulate(trace, config).workers[0]
    assert worker.mean_step_s == pytest.approx(0.040, rel=0.02)
    assert worker.std_step_s == pytest.approx(math.sqrt(0.0006), rel=0.05)
    assert worker.min_step_s < 0.005  # far below the profiled 40 ms: the draws reach near 0


def test_transfers_and_computation_vary_from_step_to_step() -> None:
    trace = synthetic_trace([FWD], [0.005], [SIZE], update_s=0.001)
    config = SimulationConfig(
        bandwidth_bps=B, jitter="exponential", steps=20, warmup_steps=0, timeline=True
    )
    result = simulate(trace, config)
    assert result.timeline is not None
    for kind in ("pull", "forward", "backward", "push", "update"):
        spans = {round(r.end_s - r.start_s, 12) for r in result.timeline if r.kind == kind}
        assert len(spans) == 20, kind  # a fresh draw in every step


def test_default_is_unchanged_and_seeded_runs_repeat() -> None:
    trace = synthetic_trace([FWD], [0.0], [SIZE])
    plain = simulate(trace, SimulationConfig(bandwidth_bps=B, steps=10, warmup_steps=1))
    assert plain.steps_per_s.value == pytest.approx(1 / 0.040, rel=1e-12)
    config = SimulationConfig(
        workers=3, bandwidth_bps=B, jitter="exponential", steps=50, warmup_steps=5, seed=9
    )
    assert simulate(trace, config).steps_per_s.value == simulate(trace, config).steps_per_s.value


def test_unknown_jitter_lists_exponential() -> None:
    with pytest.raises(ConfigError, match="jitter: 'gamma' is not one of none, resample, exp"):
        SimulationConfig(jitter="gamma")
