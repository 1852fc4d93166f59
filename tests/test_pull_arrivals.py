"""When a Sync-SGD step's pulls arrive after the server's release (simcore.sim.arrivals),
and what each worker's computation took in the order of those arrivals.

Hand cases for the order statistics, the closed forms of equal sharing (all W at W one-pull
times) and FCFS (1, 2, ..., W) from the simulator's timeline, and a real run's spans; for the
computations, workers sharing one core that compute together (each W times alone) or one
after another (each alone).
"""

from __future__ import annotations

import pytest

from profilers.distributed.config import RunConfig
from profilers.distributed.records import RunResult, Span, StepRecord
from simcore.sim import SimulationConfig, simulate
from simcore.sim.arrivals import (
    arrivals_text,
    computations_by_arrival,
    position_medians,
    pull_arrivals,
    timeline_computations,
    timeline_pull_arrivals,
    timeline_pull_ends,
)
from simcore.trace.build import synthetic_trace


def test_each_order_statistic_is_its_median_over_steps() -> None:
    releases = {0: 10.0, 1: 20.0, 2: 30.0}
    pull_ends = {
        (1, 0): 12.0,
        (1, 1): 14.0,  # step 1: 2 and 4 after the release at 10
        (2, 0): 25.0,
        (2, 1): 21.0,  # step 2: 1 and 5 (sorted: worker 1 first)
        (3, 0): 36.0,
        (3, 1): 33.0,  # step 3: 3 and 6
        (4, 0): 41.0,  # step 4: no release before it, and worker 1 missing: left out
    }
    assert pull_arrivals(pull_ends, releases, 2, 1.0) == (2.0, 5.0)
    assert pull_arrivals(pull_ends, releases, 2, 2.0) == (1.0, 2.5)  # in units of 2 s
    assert pull_arrivals(pull_ends, releases, 2, 1.0, from_step=3) == (3.0, 6.0)
    assert pull_arrivals(pull_ends, releases, 2, 1.0, from_step=5) is None
    assert arrivals_text((1.0, 2.5)) == "1.00 2.50" and arrivals_text(None) == "-"
    with pytest.raises(ValueError, match="unit_s > 0"):
        pull_arrivals(pull_ends, releases, 2, 0.0)


def test_computations_are_ordered_by_their_workers_pull_arrival() -> None:
    pull_ends = {
        (1, 0): 12.0,
        (1, 1): 11.0,  # step 1: worker 1 first; computations 6 (worker 1), then 2
        (2, 0): 21.0,
        (2, 1): 22.0,  # step 2: worker 0 first; 4, then 8
        (3, 0): 31.0,  # step 3: worker 1's computation missing: left out
        (3, 1): 32.0,
    }
    computations = {(1, 0): 2.0, (1, 1): 6.0, (2, 0): 4.0, (2, 1): 8.0, (3, 0): 1.0}
    assert computations_by_arrival(pull_ends, computations, 2, 1.0) == (5.0, 5.0)
    assert computations_by_arrival(pull_ends, computations, 2, 2.0, from_step=2) == (2.0, 4.0)
    assert computations_by_arrival(pull_ends, computations, 2, 1.0, from_step=3) is None
    # a tie goes to the lower worker
    tied = {(1, 0): 5.0, (1, 1): 5.0}
    assert computations_by_arrival(tied, {(1, 0): 1.0, (1, 1): 3.0}, 2, 1.0) == (1.0, 3.0)
    with pytest.raises(ValueError, match="workers must be >= 1"):
        computations_by_arrival(pull_ends, computations, 0, 1.0)
    assert position_medians([(1.0, 5.0), (3.0, 4.0), (2.0, 9.0)]) == (2.0, 5.0)
    assert position_medians([]) is None


@pytest.mark.parametrize(("sharing", "expected"), [("ps", 2.0), ("fcfs", 1.0)])
def test_workers_sharing_a_core_compute_together_or_in_turn_as_their_pulls_arrive(
    sharing: str, expected: float
) -> None:
    """Two workers on one core, strict phases, a 1 MB layer (80 ms alone on 100 Mbit/s) and
    10 ms of computation each way. Equal sharing lands both pulls together: the two compute
    at once, each at half the core (2x alone). FCFS lands them 80 ms apart: each computes alone
    (1x)."""
    trace = synthetic_trace([0.01], [0.01], [1_000_000])
    config = SimulationConfig(
        workers=2,
        bandwidth_bps=1e8,
        steps=12,
        warmup_steps=2,
        mode="sync",
        sharing=sharing,
        overlap="none",
        colocated_workers=2,
        host_cpu_cores=1.0,
        shared_nic=False,
        timeline=True,
        replications=1,
    )
    timeline = simulate(trace, config).timeline
    assert timeline is not None
    pull_ends, _ = timeline_pull_ends(timeline)
    computations = timeline_computations(timeline)
    assert computations[(5, 0)] == pytest.approx(expected * 0.02)
    by_arrival = computations_by_arrival(pull_ends, computations, 2, 0.02, from_step=2)
    assert by_arrival == pytest.approx((expected, expected))


@pytest.mark.parametrize(
    ("sharing", "expected"), [("ps", (3.0, 3.0, 3.0)), ("fcfs", (1.0, 2.0, 3.0))]
)
def test_the_simulators_pulls_arrive_as_the_sharing_policy_says(
    sharing: str, expected: tuple[float, ...]
) -> None:
    """Three workers, one 1 MB layer on a 100 Mbit/s link (one pull alone: 80 ms)."""
    trace = synthetic_trace([0.01], [0.01], [1_000_000])
    config = SimulationConfig(
        workers=3,
        bandwidth_bps=1e8,
        steps=20,
        warmup_steps=2,
        mode="sync",
        sharing=sharing,
        timeline=True,
        replications=1,
    )
    timeline = simulate(trace, config).timeline
    assert timeline is not None
    arrivals = timeline_pull_arrivals(timeline, 3, 1_000_000 * 8 / 1e8, from_step=2)
    assert arrivals == pytest.approx(expected)


def test_a_real_runs_spans_give_each_workers_last_pull_and_the_servers_last_update() -> None:
    config = RunConfig(
        "mlp", architecture="ps-sync", workers=2, servers=1, batch_size=8, steps=3, warmup=1
    )
    spans = (
        Span(0, -1, 0, "fc1", "update", 0.9, 0.1),  # the server's release of step 1 at 1.0
        Span(0, -1, 0, "fc2", "update", 0.8, 0.1),
        Span(1, 0, 1, "fc1", "pull", 0.5, 0.7),  # worker 0's pulls end at 1.2 and 1.4
        Span(1, 0, 1, "fc2", "pull", 0.5, 0.9),
        Span(2, 1, 1, "fc1", "pull", 0.6, 1.6),  # worker 1's at 2.2
        Span(1, 0, 1, "fc1", "forward", 1.4, 0.1),
    )
    steps = tuple(StepRecord(w, n, float(n), n + 1.0, 1.0) for w in range(2) for n in range(3))
    run = RunResult(config, "mlp", {"fc1": 400, "fc2": 40}, spans, steps)
    pull_ends, releases = run.pull_arrival_times()
    assert pull_ends == {(1, 0): pytest.approx(1.4), (1, 1): pytest.approx(2.2)}
    assert releases == {0: pytest.approx(1.0)}
    assert pull_arrivals(pull_ends, releases, 2, 0.2) == pytest.approx((2.0, 6.0))
    # worker 0's one forward span of step 1 is its computation; worker 1 has none
    assert run.computation_times() == {(1, 0): pytest.approx(0.1)}
