"""Simulator behaviour: drift, estimates and intervals, links, policies, servers, bad configs."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from simcore.errors import ConfigError
from simcore.sim import (
    SharingPolicy,
    SimulationConfig,
    SimulationResult,
    register_sharing_policy,
    simulate,
    sweep,
)
from simcore.sim.dag import assign_servers, compile_trace
from simcore.sim.engine import Engine
from simcore.sim.sharing import get_sharing_policy, nic_limited_rates
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

B = 1e9


def layered(steps: int = 1, spread: float = 0.2, seed: int = 0) -> Trace:
    """Four layers; ``steps`` profiled steps whose durations vary by ``spread``."""
    rng = np.random.default_rng(seed)
    base_f = np.array([0.004, 0.006, 0.003, 0.002])
    fwd = [(base_f * (1 + spread * rng.uniform(-1, 1, 4))).tolist() for _ in range(steps)]
    bwd = [(2 * base_f * (1 + spread * rng.uniform(-1, 1, 4))).tolist() for _ in range(steps)]
    return synthetic_trace(
        fwd, bwd, [400_000, 800_000, 200_000, 100_000], update_s=0.0005, batch_size=32
    )


def step_ends(result: SimulationResult) -> np.ndarray:
    """(workers, steps) step end times from the timeline."""
    assert result.timeline is not None
    steps = result.timeline.steps
    out = np.zeros((result.config.workers, result.config.steps))
    for s in steps:
        out[s.worker, s.step] = s.end_s
    return out


def test_identical_async_workers_stay_in_lock_step_without_sampling_variation() -> None:
    config = SimulationConfig(workers=3, bandwidth_bps=B, steps=40, warmup_steps=5, timeline=True)
    ends = step_ends(simulate(layered(steps=1), config))
    assert np.allclose(ends, ends[0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("jitter", ["sampling", "resample", "cv"])
def test_async_workers_drift_apart_with_step_variation(jitter: str) -> None:
    trace = layered(steps=1) if jitter == "cv" else layered(steps=8)
    config = SimulationConfig(
        workers=3,
        bandwidth_bps=B,
        steps=40,
        warmup_steps=5,
        timeline=True,
        jitter="resample" if jitter == "resample" else "none",
        jitter_cv=0.1 if jitter == "cv" else 0.0,
    )
    ends = step_ends(simulate(trace, config))
    offsets = np.abs(ends - ends[0])
    # The workers' step ends no longer coincide (ICPE'20 Fig. 15-16): after the first steps
    # hardly any step ends together, and the offsets reach a sizeable part of a step.
    assert (offsets[1:, 5:] < 1e-9).mean() < 0.1
    assert offsets[1:, 5:].max() > 0.1 * float(np.diff(ends[0]).mean())


def test_batch_means_interval_contains_the_point_estimate() -> None:
    config = SimulationConfig(workers=4, bandwidth_bps=B, steps=200, warmup_steps=20)
    result = simulate(layered(steps=8), config)
    est = result.steps_per_s
    assert est.method == "batch-means" and est.samples == 10
    assert est.ci_low is not None and est.ci_high is not None
    assert est.ci_low < est.value < est.ci_high
    assert result.examples_per_s.value == pytest.approx(32 * est.value, rel=1e-12)


def test_replications_give_independent_estimates_and_an_interval() -> None:
    config = SimulationConfig(workers=2, bandwidth_bps=B, steps=60, warmup_steps=10, replications=4)
    result = simulate(layered(steps=8), config)
    assert result.steps_per_s.method == "replications" and result.steps_per_s.samples == 4
    reps = result.replication_steps_per_s
    assert len(set(reps)) == 4
    assert result.steps_per_s.value == pytest.approx(float(np.mean(reps)), rel=1e-12)
    assert result.workers[0].steps == 4 * 50


def test_estimator_matches_the_issue_formula() -> None:
    config = SimulationConfig(workers=3, bandwidth_bps=B, steps=30, warmup_steps=7, timeline=True)
    result = simulate(layered(steps=5), config)
    ends = step_ends(result)
    k, n = 7, 30
    expected = sum((n - k) / (ends[w, n - 1] - ends[w, k - 1]) for w in range(3))
    assert result.steps_per_s.value == pytest.approx(expected, rel=1e-12)


def test_same_seed_same_result_other_seed_other_result() -> None:
    config = SimulationConfig(workers=3, bandwidth_bps=B, steps=50, warmup_steps=5, seed=3)
    a = simulate(layered(steps=8), config)
    b = simulate(layered(steps=8), config)
    c = simulate(layered(steps=8), dataclasses.replace(config, seed=4))
    assert a.steps_per_s == b.steps_per_s and a.links == b.links
    assert a.steps_per_s.value != c.steps_per_s.value


def test_memory_does_not_grow_with_steps_without_timeline() -> None:
    trace = layered(steps=4)
    sizes = []
    for steps in (30, 300):
        config = SimulationConfig(workers=2, bandwidth_bps=B, steps=steps, warmup_steps=5)
        engine = Engine(
            config,
            [compile_trace(trace, config)],
            [0, 0],
            get_sharing_policy("ps"),
            np.random.SeedSequence(1),
        )
        record = engine.run()
        sizes.append((record.ends.shape, len(record.step_records), record.recorder))
    assert sizes[0] == sizes[1] == ((2, 11), 0, None)


def test_link_statistics() -> None:
    size = 1_250_000
    trace = synthetic_trace([0.010], [0.010], [size])
    result = simulate(
        trace, SimulationConfig(workers=4, bandwidth_bps=B, mode="sync", steps=20, warmup_steps=2)
    )
    down = next(link for link in result.links if link.name == "downlink")
    step = 4 * 8 * size / B + 0.020 + 4 * 8 * size / B
    # Each step the downlink is busy for 4 S/B of the step time, with 4 active flows.
    assert down.utilization == pytest.approx(4 * 8 * size / B / step, rel=1e-9)
    assert down.mean_active_flows == pytest.approx(4 * down.utilization, rel=1e-9)
    assert down.transferred_bytes == pytest.approx(18 * 4 * size, rel=1e-9)


class GeneralPs(SharingPolicy):
    """Processor sharing through the general O(n) link, to cross-check the virtual-time link."""

    name = "general-ps"

    def rates(self, workers: Sequence[int], capacity_bps: float) -> Sequence[float]:
        return [capacity_bps / len(workers)] * len(workers)


class GeneralFcfs(SharingPolicy):
    name = "general-fcfs"

    def rates(self, workers: Sequence[int], capacity_bps: float) -> Sequence[float]:
        return [capacity_bps] + [0.0] * (len(workers) - 1)


@pytest.mark.parametrize(("mine", "builtin"), [(GeneralPs, "ps"), (GeneralFcfs, "fcfs")])
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_registered_policy_on_the_general_link_agrees(
    mine: type[SharingPolicy], builtin: str, mode: str
) -> None:
    register_sharing_policy(mine.name, mine)
    config = SimulationConfig(
        workers=5, bandwidth_bps=B, mode=mode, steps=40, warmup_steps=5, sharing=builtin
    )
    trace = layered(steps=6)
    ours = simulate(trace, dataclasses.replace(config, sharing=mine.name))
    theirs = simulate(trace, config)
    assert ours.steps_per_s.value == pytest.approx(theirs.steps_per_s.value, rel=1e-9)


def test_greedy_and_round_robin_placement() -> None:
    trace = synthetic_trace([0.0] * 4, [0.0] * 4, [400, 300, 200, 100])
    # Greedy: l0 -> s0 (400); l1 -> s1 (300); l2 -> s1 (500); l3 -> s0 (500).
    assert assign_servers(trace, 2, "greedy") == {"l0": 0, "l1": 1, "l2": 1, "l3": 0}
    assert assign_servers(trace, 2, "round-robin") == {"l0": 0, "l1": 1, "l2": 0, "l3": 1}


def test_nic_limit_as_in_icpe_section_5() -> None:
    # Worker 0 is alone on server 0 (share B) and one of n=4 on server 1 (share B/4).
    rates = nic_limited_rates([B, B / 4], [0, 0], [B])
    assert rates == pytest.approx([B - B / 4, B / 4])
    assert nic_limited_rates([B, B], [0, 0], [B]) == pytest.approx([B / 2, B / 2])


def test_two_servers_share_one_worker_nic() -> None:
    size = 1_250_000  # 10 ms at 1 Gbit/s
    trace = synthetic_trace([0.0, 0.0], [0.0, 0.0], [size, size])
    config = SimulationConfig(
        workers=1,
        bandwidth_bps=B,
        servers=2,
        steps=1,
        warmup_steps=0,
        timeline=True,
        placement={"l0": 0, "l1": 1},
    )
    result = simulate(trace, config)
    assert result.timeline is not None
    pulls = [r for r in result.timeline if r.kind == "pull"]
    assert {r.resource for r in pulls} == {"downlink", "downlink[1]"}
    for r in pulls:  # both at once, each at B/2 through the NIC
        assert (r.start_s, r.end_s) == pytest.approx((0.0, 0.020), abs=1e-12)
    faster = simulate(trace, dataclasses.replace(config, worker_bandwidth_bps=2 * B))
    assert faster.steps_per_s.value == pytest.approx(2 * result.steps_per_s.value, rel=1e-9)


def test_two_servers_halve_the_contention() -> None:
    trace = synthetic_trace([0.001] * 4, [0.001] * 4, [500_000] * 4)
    config = SimulationConfig(
        workers=8,
        bandwidth_bps=B,
        worker_bandwidth_bps=10 * B,
        steps=30,
        warmup_steps=5,
        mode="sync",
    )
    one = simulate(trace, config)
    two = simulate(trace, dataclasses.replace(config, servers=2))
    assert two.steps_per_s.value > 1.8 * one.steps_per_s.value


def test_sweep_reports_progress_and_throughput_grows_then_saturates() -> None:
    seen: list[tuple[int, int]] = []
    config = SimulationConfig(bandwidth_bps=B, steps=30, warmup_steps=5)
    result = sweep(
        layered(steps=4), config, [1, 2, 4, 16], progress=lambda d, t: seen.append((d, t))
    )
    assert result.workers == (1, 2, 4, 16)
    assert seen[-1] == (4, 4)
    x = result.steps_per_s
    assert x[1] > x[0]
    assert x[3] < 16 * x[0] / 2  # the shared link saturates


def test_simulation_progress_callback() -> None:
    seen: list[tuple[int, int]] = []
    simulate(
        layered(),
        SimulationConfig(workers=2, steps=50, warmup_steps=5),
        progress=lambda d, t: seen.append((d, t)),
    )
    assert seen[-1] == (100, 100) and len(seen) <= 101


@pytest.mark.parametrize(
    ("kwargs", "culprit"),
    [
        ({"workers": 0}, "workers"),
        ({"bandwidth_bps": 0.0}, "bandwidth_bps"),
        ({"bandwidth_bps": -1e9}, "bandwidth_bps"),
        ({"bandwidth_bps": float("nan")}, "bandwidth_bps"),
        ({"sharing": "round-robin"}, "sharing"),
        ({"scheduler": "lifo"}, "scheduler"),
        ({"steps": 50, "warmup_steps": 50}, "steps"),
        ({"arch": "ring"}, "arch"),
        ({"arch": "allreduce", "mode": "async"}, "mode"),
        ({"workers": 2, "speed_factors": (1.0,)}, "speed_factors"),
        ({"flow_cap_bps": 0.0}, "flow_cap_bps"),
        ({"latency_s": -1.0}, "latency_s"),
        ({"placement": "random"}, "placement"),
    ],
)
def test_bad_configs_are_rejected_naming_the_parameter(
    kwargs: dict[str, object], culprit: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{culprit}: "):
        SimulationConfig(**kwargs)  # type: ignore[arg-type]


def test_unknown_policy_error_lists_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"registered: .*fcfs.*ps"):
        SimulationConfig(sharing="nope")


def test_trace_dependent_errors_come_before_simulating(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("the engine must not start")

    monkeypatch.setattr(Engine, "__init__", boom)
    trace = synthetic_trace([0.0, 0.0], [0.0, 0.0], [100, 100])
    with pytest.raises(ConfigError, match="placement: layer 'conv9' is not in trace"):
        simulate(trace, SimulationConfig(servers=2, placement={"l0": 0, "l1": 1, "conv9": 0}))
    with pytest.raises(ConfigError, match="placement: layer 'l1' has parameters but no server"):
        simulate(trace, SimulationConfig(servers=2, placement={"l0": 0}))
    with pytest.raises(ConfigError, match="placement: layer 'l1' -> server 2"):
        simulate(trace, SimulationConfig(servers=2, placement={"l0": 0, "l1": 2}))
    with pytest.raises(ConfigError, match="worker_types"):
        simulate([trace, trace], SimulationConfig(workers=3))
    with pytest.raises(ConfigError, match="worker_types"):
        simulate([trace], SimulationConfig(workers=2, worker_types=(0, 1)))


def test_benchmark_script_runs_on_a_small_setting() -> None:
    spec = importlib.util.spec_from_file_location(
        "bench_simulator", Path(__file__).with_name("bench_simulator.py")
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    trace = bench.resnet50_shaped(profiled_steps=2)
    assert 600 <= len(trace.ops) <= 700
    for policy in bench.POLICIES:
        rate, wall = bench.measure(trace, 2, policy, 3, False)
        assert rate > 0 and wall > 0
    for arch in ("ps-async", "ps-sync", "ring"):  # --effects
        row = bench.measure_effects(trace, 2, arch, 3, True)
        assert row.ops > 0 and row.cpu_s > 0 and row.wall_s > 0
