"""Degenerate inputs and cross-checks: steps taking no time, jitter, hybrid progress, lock-step."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from simcore.errors import ConfigError
from simcore.sim import MIN_STEP_S, SimulationConfig, SimulationError, simulate, validate
from simcore.sim.dag import compile_trace
from simcore.sim.engine import Engine
from simcore.trace.build import synthetic_trace

B = 1e9


@pytest.fixture()
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the engine must not start")

    monkeypatch.setattr(Engine, "__init__", boom)


@pytest.mark.usefixtures("no_engine")
@pytest.mark.parametrize(
    ("forward_s", "sizes", "kwargs", "where"),
    [
        ([0.0, 0.0], [0, 0], {}, "profiled step 0"),  # nothing to compute or send
        ([5e-324, 0.0], [0, 0], {}, "profiled step 0"),  # a subnormal step overflows 1/span
        ([[0.01, 0.0], [0.0, 0.0]], [0, 0], {}, "profiled step 1"),  # one empty profiled step
        ([[0.01, 0.0], [0.0, 0.02]], [0, 0], {"jitter": "resample"}, "its shortest ops"),
        # Ring AllReduce with one worker sends 2(K-1)/K = 0 bytes.
        ([0.0, 0.0], [1000, 1000], {"arch": "allreduce", "mode": "sync"}, "profiled step 0"),
    ],
)
def test_steps_that_can_take_no_time_are_rejected_before_simulating(
    forward_s: list[float] | list[list[float]],
    sizes: list[int],
    kwargs: dict[str, object],
    where: str,
) -> None:
    backward = [[0.0] * 2 for _ in forward_s] if isinstance(forward_s[0], list) else [0.0] * 2
    trace = synthetic_trace(forward_s, backward, sizes)
    config = SimulationConfig(steps=5, warmup_steps=1, **kwargs)  # type: ignore[arg-type]
    for call in (validate, simulate):
        with pytest.raises(ConfigError, match=f"{where}.*throughput is unbounded"):
            call(trace, config)


def test_latency_or_a_fast_link_makes_such_a_trace_valid() -> None:
    trace = synthetic_trace([0.0, 0.0], [0.0, 0.0], [1000, 1000])
    config = SimulationConfig(workers=2, bandwidth_bps=B, steps=5, warmup_steps=1, mode="sync")
    # Each worker pulls then pushes 2 x 8000 bits at B/2: 4 transfers of 16 us.
    assert simulate(trace, config).steps_per_s.value == pytest.approx(2 / 64e-6, rel=1e-9)
    # In a ring of 3 each of the two AllReduces, one after the other, sends 2(3-1)/3 of 8000 bits
    # and pays 2 x 2 hops of 1 ms latency.
    ring = SimulationConfig(
        arch="allreduce",
        mode="sync",
        workers=3,
        bandwidth_bps=B,
        latency_s=1e-3,
        steps=5,
        warmup_steps=1,
    )
    step_s = 2 * (4 / 3 * 8000 / B + 4 * 1e-3)
    assert simulate(trace, ring).steps_per_s.value == pytest.approx(3 / step_s, rel=1e-9)


def test_lower_bound_is_the_one_worker_step_of_a_chain() -> None:
    # One layer: pull, forward, backward, push, update in a chain: the bound is exact.
    size, f, b, u = 125_000, 0.010, 0.020, 0.001
    trace = synthetic_trace([f], [b], [size], update_s=u)
    config = SimulationConfig(bandwidth_bps=B, steps=3, warmup_steps=0)
    bound = compile_trace(trace, config).step_lower_bounds_s(B)
    assert bound == pytest.approx([2 * 8 * size / B + f + b + u], rel=1e-12)
    assert compile_trace(trace, config).step_lower_bounds_s(B, speed=2.0) == pytest.approx(
        [2 * 8 * size / B + (f + b) / 2 + u], rel=1e-12
    )
    assert 1 / simulate(trace, config).steps_per_s.value == pytest.approx(bound[0], rel=1e-9)
    assert bound[0] > MIN_STEP_S


def test_jitter_that_zeroes_every_measured_step_is_an_error_not_a_warning() -> None:
    # jitter_cv=100: each duration is 0 with probability ~1/2; with seed 2 the one measured step
    # (both ops) is zeroed, so that worker's throughput is unbounded.
    trace = synthetic_trace([0.01], [0.01], [0])
    config = SimulationConfig(steps=2, warmup_steps=1, jitter_cv=100.0, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SimulationError, match=r"worker 0: .* throughput is unbounded"):
            simulate(trace, config)


def test_a_batch_of_zero_length_steps_leaves_the_interval_undefined() -> None:
    trace = synthetic_trace([0.01], [0.01], [0])
    config = SimulationConfig(steps=40, warmup_steps=0, batches=20, jitter_cv=100.0, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = simulate(trace, config)
    est = result.steps_per_s
    assert np.isfinite(est.value) and est.value > 0
    assert est.ci_low is None and est.ci_high is None and est.samples == 20


def test_jitter_cv_varies_computation_but_not_latency() -> None:
    latency = 1e-3
    trace = synthetic_trace([0.01], [0.02], [1000], update_s=0.001)
    config = SimulationConfig(
        bandwidth_bps=B, steps=30, warmup_steps=0, latency_s=latency, jitter_cv=0.3, timeline=True
    )
    result = simulate(trace, config)
    assert result.timeline is not None
    lengths: dict[str, list[float]] = {}
    for r in result.timeline:
        lengths.setdefault(r.kind, []).append(r.end_s - r.start_s)
    assert lengths["other"] == pytest.approx([latency] * 60, rel=1e-9)  # two transfers per step
    for kind in ("forward", "backward", "update"):
        assert np.std(lengths[kind]) > 0.1 * np.mean(lengths[kind])


def test_hybrid_progress_counts_both_runs_and_never_goes_back() -> None:
    seen: list[tuple[int, int]] = []
    trace = synthetic_trace([0.01], [0.01], [100_000])
    config = SimulationConfig(workers=2, steps=50, warmup_steps=5, sharing="hybrid")
    simulate(trace, config, progress=lambda d, t: seen.append((d, t)))
    done = [d for d, _ in seen]
    assert done == sorted(done)
    assert {t for _, t in seen} == {200} and done[-1] == 200


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
def test_identical_async_workers_in_lock_step_match_sync(workers: int) -> None:
    # One profiled step and processor sharing: async workers pull, compute and push together
    # forever, so their steps are those of Sync-SGD, barrier included (SEMANTICS.md, "Drift").
    trace = synthetic_trace(
        [0.004, 0.006, 0.003], [0.008, 0.012, 0.006], [400_000, 800_000, 200_000], update_s=5e-4
    )
    config = SimulationConfig(workers=workers, bandwidth_bps=B, steps=30, warmup_steps=3)
    asynchronous = simulate(trace, config)
    synchronous = simulate(trace, dataclasses.replace(config, mode="sync"))
    assert asynchronous.steps_per_s.value == pytest.approx(synchronous.steps_per_s.value, rel=1e-12)
