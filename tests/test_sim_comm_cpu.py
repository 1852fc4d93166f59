"""The transfers' CPU work on the host (SimulationConfig.comm_cpu_s_per_byte, issue 6): hand-timed
steps, what it must leave alone, and its fit to a measured slowdown (profilers.distributed)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profilers.distributed.comm_cpu import (
    compute_s_per_step,
    fit_comm_cpu,
    simulated_compute_s_per_step,
)
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.sim.sharing import fair_share_of_flows
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace

REL = 1e-9
B = 1e8  # bit/s: a layer of 1 MB takes 0.08 s
MB = 1_000_000


def cores_at_full_rate(cores: float) -> float:
    """The comm_cpu_s_per_byte for which one transfer at B keeps ``cores`` busy."""
    return 8.0 * cores / B


def step_s(trace: object, **kw: object) -> float:
    base: dict[str, object] = {
        "bandwidth_bps": B,
        "steps": 4,
        "warmup_steps": 1,
        "mode": "sync",
        "host_cpu_cores": 1.0,
    }
    base.update(kw)
    result = simulate(trace, SimulationConfig(**base))  # type: ignore[arg-type]
    return float(base.get("workers", 1)) / result.steps_per_s.value  # type: ignore[arg-type]


def two_layers(backward_s: list[float] | None = None) -> object:
    return synthetic_trace([0.1, 0.01], backward_s or [0.02, 0.02], [MB, MB])


@pytest.mark.parametrize(
    ("cores", "step"),
    [
        # pull l0 0-.08, pull l1 .08-.16; forward l0 from .08 beside pull l1, which wants f of
        # the core: the forward gets 1 - f, or half when f is more than that (fair sharing);
        # forward l1, backward l1 (.02), then push l1 (.08) beside backward l0, then push l0.
        (0.0, 0.37),  # fwd l0 .08-.18, l1 -.19, bwd l1 -.21, push l1 -.29, push l0 -.37
        (0.25, 0.39),  # fwd l0 does .06 by .16, ends .20; l1 -.21, bwd l1 -.23; pushes .23-.39
        (1.0, 0.41),  # at .5: fwd l0 does .04 by .16, ends .22; -.23, -.25; pushes .25-.41
    ],
)
def test_transfers_take_their_cpu_work_from_the_computation(cores: float, step: float) -> None:
    c = cores_at_full_rate(cores)
    assert step_s(two_layers(), comm_cpu_s_per_byte=c) == pytest.approx(step, rel=REL)


def test_a_ring_allreduce_costs_its_bytes_both_ways() -> None:
    # Two workers on hosts of their own; each AllReduce moves 2(K-1)/K = 1 x the layer's bytes
    # at B (.08 s). Backward l0 (.1) runs beside AllReduce l1 (.13-.21), which wants twice
    # f = .25 of the core: the backward does .04 by .21 and ends at .27 (it would end at .25
    # if the ring cost one way only); AllReduce l0 .27-.35.
    trace = two_layers([0.1, 0.02])
    common: dict[str, object] = {"workers": 2, "arch": "allreduce"}
    assert step_s(trace, **common) == pytest.approx(0.31, rel=REL)  # .13 + .1 + .08
    c = cores_at_full_rate(0.25)
    assert step_s(trace, comm_cpu_s_per_byte=c, **common) == pytest.approx(0.35, rel=REL)


def test_the_cost_comes_off_the_cores_before_the_colocated_workers_share_them() -> None:
    # Two workers on one 1-core host share the server's link (B/2 each, so a transfer keeps
    # f/2 = .125 cores busy) and, in lock-step, the core. Plain: pulls l0 0-.16 and l1 .16-.32;
    # forwards l0 at .5 each .16-.36; l1 -.38; backward l1 -.42; pushes l1 .42-.58, l0 .58-.74.
    # With the cost: while pulls l1 run (.16-.32) they want .125 each, less than a fair share,
    # so the forwards get .375 each (.06 done), then .5: they end at .40; l1 -.42, backward l1
    # -.46 (no transfer), pushes l1 .46-.62 and l0 .62-.78 (backward l0 ends in time).
    trace = two_layers()
    common: dict[str, object] = {
        "workers": 2,
        "colocated_workers": 2,
        "shared_nic": False,
        "worker_cpu_cores": 1.0,
    }
    assert step_s(trace, **common) == pytest.approx(0.74, rel=REL)
    c = cores_at_full_rate(0.25)
    assert step_s(trace, comm_cpu_s_per_byte=c, **common) == pytest.approx(0.78, rel=REL)


@settings(max_examples=25, deadline=None)
@given(
    fwd=st.lists(st.floats(0.001, 0.05), min_size=2, max_size=4),
    cores=st.floats(0.05, 2.0),
)
def test_strict_phases_leave_no_computation_beside_a_transfer(
    fwd: list[float], cores: float
) -> None:
    # One worker with strict phases never computes while its own transfers run (the server's
    # updates are not the worker's): the cost changes nothing.
    n = len(fwd)
    trace = synthetic_trace(fwd, fwd[::-1], [MB // 4] * n, update_s=0.003)
    plain = step_s(trace, overlap="none")
    assert step_s(
        trace, overlap="none", comm_cpu_s_per_byte=cores_at_full_rate(cores)
    ) == pytest.approx(plain, rel=REL)


@pytest.mark.parametrize(("arch", "mode"), [("ps", "async"), ("ps", "sync"), ("allreduce", "sync")])
def test_a_negligible_cost_is_the_simulator_without_it(arch: str, mode: str) -> None:
    # A cost > 0 switches the host CPUs and the links to the general link; with a cost too small
    # to matter the results must agree with the equal-share links.
    common: dict[str, object] = {
        "workers": 4,
        "arch": arch,
        "mode": mode,
        "bandwidth_bps": 1e9,
        "steps": 30,
        "warmup_steps": 3,
        "colocated_workers": 2,
        "host_cpu_cores": 2.0,
        "worker_cpu_cores": 1.0,
        "shared_nic": False,
    }
    trace = load_trace("cnn-b32")
    plain = simulate(trace, SimulationConfig(**common))  # type: ignore[arg-type]
    tiny = simulate(trace, SimulationConfig(**common, comm_cpu_s_per_byte=1e-30))  # type: ignore[arg-type]
    assert tiny.examples_per_s.value == pytest.approx(plain.examples_per_s.value, rel=1e-9)


def test_the_cost_needs_host_cores_and_is_not_negative() -> None:
    with pytest.raises(ConfigError, match=r"comm_cpu_s_per_byte.*host_cpu_cores"):
        SimulationConfig(comm_cpu_s_per_byte=1e-9)
    with pytest.raises(ConfigError, match="comm_cpu_s_per_byte"):
        SimulationConfig(host_cpu_cores=1.0, comm_cpu_s_per_byte=-1e-9)


# --- the fit (profilers.distributed.comm_cpu) ----------------------------------------------------


def fit_config(**kw: object) -> SimulationConfig:
    return SimulationConfig(bandwidth_bps=B, host_cpu_cores=1.0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("cores", [0.1, 0.25, 0.4])
def test_the_fit_finds_the_cost_that_made_the_slowdown(cores: float) -> None:
    # (A transfer wanting half the core or more gets half beside one computation: the
    # slowdowns of costs beyond that are all alike, so the fit is checked below it.)
    trace = synthetic_trace([0.02, 0.03, 0.01], [0.03, 0.04, 0.02], [MB, 2 * MB, MB])
    config = fit_config()
    truth = cores_at_full_rate(cores)
    measured = simulated_compute_s_per_step(
        trace, dataclasses.replace(config, comm_cpu_s_per_byte=truth)
    )
    assert measured > compute_s_per_step(trace)  # the transfers did slow it
    fit = fit_comm_cpu(trace, measured, config)
    assert fit.simulated_compute_s == pytest.approx(measured, rel=2e-3)
    assert fit.s_per_byte == pytest.approx(truth, rel=0.02)
    assert fit.cores_at_full_rate == pytest.approx(cores, rel=0.02)
    assert fit.slowdown == pytest.approx(measured / compute_s_per_step(trace), rel=REL)


def test_the_fit_stops_at_its_bounds_and_needs_host_cores() -> None:
    trace = two_layers()
    fit = fit_comm_cpu(trace, 0.9 * compute_s_per_step(trace), fit_config())
    assert fit.s_per_byte == 0.0
    # More slowdown than transfers can cause: the largest cost, and the shortfall shows.
    fit = fit_comm_cpu(trace, 10 * compute_s_per_step(trace), fit_config())
    assert fit.cores_at_full_rate == pytest.approx(1.0, rel=REL)
    assert fit.simulated_compute_s < fit.measured_compute_s
    with pytest.raises(ConfigError, match="host_cpu_cores"):
        fit_comm_cpu(trace, 1.0, SimulationConfig(bandwidth_bps=B))


@pytest.mark.parametrize(
    ("capacity", "n", "cap", "others", "computing"),
    [
        (1.0, 1, 1.0, [0.42], 0.58),  # the transfer wants less than half: it gets it
        (1.0, 1, 1.0, [0.8], 0.5),  # it wants more: half each
        (2.0, 4, 1.0, [0.84] * 4, 1.0),  # eight wants on two cores: a quarter each
        (2.0, 2, 1.0, [0.1], 1.9),  # 0.1 is below a fair share, the rest split 1.9
        (4.0, 2, 1.0, [0.5], 2.0),  # everyone satisfied
        (2.0, 0, 1.0, [0.5], 0.0),  # nothing computing
    ],
)
def test_fair_share_of_the_computations(
    capacity: float, n: int, cap: float, others: list[float], computing: float
) -> None:
    assert fair_share_of_flows(capacity, n, cap, others) == pytest.approx(computing, rel=REL)
