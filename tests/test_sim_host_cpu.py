"""Co-located workers sharing a host's CPU (issue 7; the 2-core testbed of issue 6): closed forms,
the exact reduction to the unshared simulator, and the checks on the settings."""

from __future__ import annotations

import pytest

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace

REL = 1e-9
FWD = [0.010, 0.020]
BWD = [0.020, 0.030]
T_C = sum(FWD) + sum(BWD)


def compute_only() -> object:
    return synthetic_trace(FWD, BWD, [0, 0])  # parameter-free layers: no transfers


def run(trace: object, **kw: object) -> float:
    base: dict[str, object] = {"steps": 6, "warmup_steps": 1, "mode": "sync"}
    base.update(kw)
    return simulate(trace, SimulationConfig(**base)).steps_per_s.value  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("workers", "cores", "per_worker", "slowdown"),
    [
        (1, 2.0, 2.0, 1.0),  # alone: as profiled
        (2, 2.0, 1.0, 1.0),  # two single-threaded workers on two cores: no contention
        (4, 2.0, 1.0, 2.0),  # four on two cores: each op gets half a core
        (4, 2.0, 2.0, 4.0),  # profiled with two threads, now sharing two cores four ways
        (3, 4.0, 2.0, 1.5),  # 3 x 2 cores wanted, 4 available
    ],
)
def test_sync_steps_stretch_by_the_cpu_oversubscription(
    workers: int, cores: float, per_worker: float, slowdown: float
) -> None:
    # In lock-step every worker computes the same op at the same time: each gets
    # min(cores / n, per_worker) of the per_worker cores it had when profiled.
    steps_per_s = run(
        compute_only(),
        workers=workers,
        colocated_workers=workers,
        host_cpu_cores=cores,
        worker_cpu_cores=per_worker,
    )
    assert steps_per_s == pytest.approx(workers / (slowdown * T_C), rel=REL)


def test_workers_on_separate_hosts_do_not_slow_each_other() -> None:
    alone = run(compute_only(), workers=4, host_cpu_cores=2.0, worker_cpu_cores=2.0)
    assert alone == pytest.approx(4 / T_C, rel=REL)
    two_hosts = run(
        compute_only(), workers=4, colocated_workers=2, host_cpu_cores=2.0, worker_cpu_cores=2.0
    )
    assert two_hosts == pytest.approx(4 / (2 * T_C), rel=REL)


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_unshared_cpu_is_exactly_the_flat_simulator(mode: str) -> None:
    trace = load_trace("cnn-b32")
    common: dict[str, object] = {
        "workers": 3,
        "bandwidth_bps": 1e9,
        "steps": 30,
        "warmup_steps": 5,
        "mode": mode,
    }
    flat = simulate(trace, SimulationConfig(**common))  # type: ignore[arg-type]
    # Three workers with a whole host each: an op alone always runs at the profiled speed.
    shared = simulate(
        trace,
        SimulationConfig(**common, host_cpu_cores=2.0),  # type: ignore[arg-type]
    )
    assert shared.examples_per_s.value == pytest.approx(flat.examples_per_s.value, rel=1e-12)


def test_async_throughput_is_bounded_by_the_host_cpu() -> None:
    # However the ops interleave, a host's two cores deliver at most 2 core-seconds per second,
    # and each step needs T_C * 2 core-seconds (profiled with two threads).
    trace = synthetic_trace(
        [[0.010, 0.020], [0.012, 0.018], [0.008, 0.025]],
        [[0.020, 0.030], [0.022, 0.028], [0.018, 0.035]],
        [0, 0],
    )
    mean_c = (0.030 + 0.050 + 0.030 + 0.050 + 0.033 + 0.053) / 3
    sps = run(
        trace,
        workers=4,
        mode="async",
        steps=200,
        warmup_steps=20,
        colocated_workers=4,
        host_cpu_cores=2.0,
        worker_cpu_cores=2.0,
    )
    assert sps <= 1.0 / mean_c * 1.02


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="worker_cpu_cores: needs host_cpu_cores"):
        SimulationConfig(worker_cpu_cores=1.0)
    with pytest.raises(ConfigError, match=r"worker_cpu_cores: 4\.0 is more than"):
        SimulationConfig(host_cpu_cores=2.0, worker_cpu_cores=4.0)
    with pytest.raises(ConfigError, match="colocated_workers: must be an integer >= 1"):
        SimulationConfig(colocated_workers=0)
    with pytest.raises(ConfigError, match="colocated_workers: not with devices_per_host"):
        SimulationConfig(colocated_workers=2, devices_per_host=2, intra_bandwidth_bps=1e9)


@pytest.mark.parametrize(("colocated", "pull_bps"), [(1, 10e9), (2, 5e9)])
def test_colocated_workers_share_their_hosts_nic(colocated: int, pull_bps: float) -> None:
    # A 20 Gbit/s server and 10 Gbit/s NICs: two workers on their own hosts each pull at
    # 10 Gbit/s; on one host they split its NIC, 5 Gbit/s each.
    size, fwd, bwd = 4_000_000, 0.010, 0.020
    trace = synthetic_trace([fwd], [bwd], [size])
    step = 8 * size / pull_bps + fwd + bwd + 8 * size / pull_bps
    sps = run(
        trace,
        workers=2,
        bandwidth_bps=20e9,
        worker_bandwidth_bps=10e9,
        sharing="ps",
        colocated_workers=colocated,
    )
    assert sps == pytest.approx(2 / step, rel=REL)
