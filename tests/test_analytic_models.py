"""The TPDS'22 coarse models: parameters from a trace, Async-SGD (Eq. 3-6), Sync-SGD (Eq. 7-11)."""

from __future__ import annotations

import pytest

from simcore.analytic import (
    Cluster,
    WorkerType,
    predict_async,
    predict_sync,
    solve,
    worker_type_from_trace,
)
from simcore.analytic.async_model import fig5_network
from simcore.analytic.params import bandwidth_of
from simcore.errors import ConfigError
from simcore.network import NetworkProfile
from simcore.sim import SimulationConfig, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace

REL = 1e-12
B = 1e9
# T_F = 20 ms, T_B = 30 ms, T_S = 5 ms, M = 1.25 MB, so M/B = 10 ms at 1 Gbit/s.
WORKER = WorkerType("w", forward_s=0.020, backward_s=0.030, update_s=0.005, model_nbytes=1_250_000)
MB = 0.010


def test_parameters_from_a_trace_are_mean_phase_sums() -> None:
    trace = synthetic_trace(
        [[0.010, 0.020], [0.012, 0.024]],
        [[0.030, 0.040], [0.034, 0.044]],
        [1000, 3000],
        update_s=[0.001, 0.002],
        batch_size=16,
    )
    w = worker_type_from_trace(trace)
    assert w.forward_s == pytest.approx((0.030 + 0.036) / 2, rel=REL)
    assert w.backward_s == pytest.approx((0.070 + 0.078) / 2, rel=REL)
    assert w.update_s == pytest.approx(0.003, rel=REL)
    assert (w.model_nbytes, w.batch_size) == (4000, 16)


def test_sample_trace_model_size_is_its_parameter_bytes() -> None:
    trace = load_trace("resnet50-b32")
    w = worker_type_from_trace(trace)
    assert w.model_nbytes == trace.param_nbytes and w.batch_size == 32
    assert w.forward_s > 0 and w.backward_s > 0 and w.update_s > 0


def test_bandwidth_from_a_network_profile() -> None:
    assert bandwidth_of(NetworkProfile(latency_s=1e-5, bandwidth_bps=9.2e8)) == 9.2e8


def test_async_one_worker_by_hand() -> None:
    """K = 1: X = 1 / (T_F + T_B + 2 M/B + T_S) = 1 / 0.075 s for PS, FCFS and hybrid.
    Link utilization X M/B = 0.133 <= 0.6, so Eq. 5 picks FCFS. Eq. 6: T^D = T^U = M/B alone,
    compute becomes (T_F - M/B) + (T_B - M/B) = 0.030 s; X = 1 / 0.055 s.
    """
    p = predict_async(Cluster.homogeneous(WORKER, 1, B))
    for sol in (p.ps, p.fcfs, p.hybrid):
        assert sol.steps_per_s == pytest.approx(1 / 0.075, rel=REL)
    assert p.fcfs.link_utilization == pytest.approx(MB / 0.075, rel=REL)
    assert p.hybrid.links == "fcfs"
    assert p.overlap.steps_per_s == pytest.approx(1 / 0.055, rel=REL)
    assert p.solver == "grouped"


def test_async_two_workers_by_hand() -> None:
    """K = 2 identical, C = 0.075 s alone. PS links (Eq. 4): cycle = C + sum S^2 / C
    = 0.078 s, X = 2/0.078. FCFS links (Eq. 3): cycle = C + (2 (M/B)^2) / (2C) + T_S^2 / C
    = 0.0766667 s, X = 2/0.0766667 (see test_analytic_mva for the derivation).
    """
    p = predict_async(Cluster.homogeneous(WORKER, 2, B))
    assert p.ps.steps_per_s == pytest.approx(2 / 0.078, rel=REL)
    assert p.fcfs.steps_per_s == pytest.approx(2 / (0.075 + 0.0001 / 0.075 + 0.000025 / 0.075))
    assert p.ps.examples_per_s == p.ps.steps_per_s  # batch size 1


def test_hybrid_threshold_switches_between_fcfs_and_ps() -> None:
    cluster = Cluster.homogeneous(WORKER, 6, B)
    p = predict_async(cluster)
    rho = p.fcfs.link_utilization
    assert predict_async(cluster, rho_t=rho).hybrid.links == "fcfs"
    assert predict_async(cluster, rho_t=rho * 0.999).hybrid.links == "ps"
    assert predict_async(cluster, rho_t=1.0).hybrid.steps_per_s == p.fcfs.steps_per_s
    assert predict_async(cluster, rho_t=0.0).hybrid.steps_per_s == p.ps.steps_per_s


def test_overlap_rules_differ_when_the_second_solve_crosses_the_threshold() -> None:
    """First solve at utilization <= 0.6 (FCFS); the overlap-corrected one above it."""
    w = WorkerType("cnn", 0.0125, 0.0125, 0.00128, 2_481_448, batch_size=32)
    cluster = Cluster.homogeneous(w, 2, 9.2e8)
    keep = predict_async(cluster, overlap_rule="keep")
    again = predict_async(cluster, overlap_rule="reselect")
    assert keep.hybrid.links == again.hybrid.links == "fcfs"
    assert (keep.overlap.links, again.overlap.links) == ("fcfs", "ps")
    t = keep.hybrid.mva.response_s[0]
    compute = (max(0.0, w.forward_s - t[0]) + max(0.0, w.backward_s - t[1]),)  # Eq. 6
    for rule, links in ((keep, "fcfs"), (again, "ps")):
        direct = solve(fig5_network(cluster, links, compute))
        assert rule.overlap.steps_per_s == pytest.approx(direct.throughput_per_s.sum(), rel=REL)
        assert rule.overlap.examples_per_s == pytest.approx(32 * rule.overlap.steps_per_s)


def test_async_heterogeneous_workers_use_one_class_per_type() -> None:
    fast = WorkerType("fast", 0.010, 0.015, 0.005, 1_250_000, batch_size=32)
    cluster = Cluster((WORKER, fast), (3, 2), B)
    p = predict_async(cluster, solver="grouped")
    single = predict_async(cluster, solver="singleton")
    assert p.ps.steps_per_s == pytest.approx(single.ps.steps_per_s, rel=1e-9)
    assert p.ps.mva.throughput_per_s[1] > p.ps.mva.throughput_per_s[0] / 3 * 2  # faster per worker
    x = p.ps.mva.throughput_per_s
    assert p.ps.examples_per_s == pytest.approx(x[0] + 32 * x[1], rel=REL)


def test_sync_equations_7_to_11_by_hand() -> None:
    k = 4
    p = predict_sync(Cluster.homogeneous(WORKER, k, B))
    t_c, t_s = 0.050, 0.005
    steps = {
        "ps": k * MB + t_c + k * MB + t_s,  # Eq. 7
        "fcfs": k * MB + t_c + MB + t_s,  # Eq. 8
        "hybrid": k * MB + t_c + (k + 1) * MB / 2 + t_s,  # Eq. 9
        "overlap": max(k * MB, 0.020) + max((k + 1) * MB / 2, 0.030) + t_s,  # Eq. 10
        "allreduce": t_c + 2 * (k - 1) * MB / k,  # Eq. 11
    }
    for name, step in steps.items():
        est = getattr(p, name)
        assert est.step_s == pytest.approx(step, rel=REL), name
        assert est.steps_per_s == pytest.approx(k / step, rel=REL)
    assert p.hybrid.step_s == pytest.approx((p.ps.step_s + p.fcfs.step_s) / 2, rel=REL)


def test_sync_heterogeneous_slowest_worker_paces_the_step() -> None:
    slow = WorkerType("slow", 0.040, 0.060, 0.002, 1_250_000, batch_size=8)
    p = predict_sync(Cluster((WORKER, slow), (2, 1), B))
    k = 3
    assert p.ps.step_s == pytest.approx(2 * k * MB + 0.100 + 0.005, rel=REL)
    assert p.allreduce.step_s == pytest.approx(0.100 + 2 * (k - 1) * MB / k, rel=REL)
    assert p.ps.examples_per_s == pytest.approx((2 + 8) / p.ps.step_s, rel=REL)


@pytest.mark.parametrize("k", [1, 3, 6])
def test_sync_matches_the_simulator_on_a_strict_phase_trace(k: int) -> None:
    """With strict phases (no overlap, one update after the last push) the simulator gives
    Eq. 7, 8 and 11 exactly (tests/test_sim_closed_forms.py); the analytic model must agree."""
    trace = synthetic_trace(
        [0.010, 0.020], [0.020, 0.030], [1_000_000, 500_000], update_s=[0.004, 0.0], overlap=False
    )
    p = predict_sync(Cluster.homogeneous(worker_type_from_trace(trace), k, B))
    base = {"workers": k, "bandwidth_bps": B, "mode": "sync", "steps": 4, "warmup_steps": 1}
    for name, extra in (("ps", {"sharing": "ps"}), ("fcfs", {"sharing": "fcfs"})):
        sim = simulate(trace, SimulationConfig(**base, **extra))  # type: ignore[arg-type]
        assert sim.steps_per_s.value == pytest.approx(getattr(p, name).steps_per_s, rel=1e-9)
    ring = synthetic_trace([0.010, 0.020], [0.020, 0.030], [1_000_000, 500_000], overlap=False)
    p_ring = predict_sync(Cluster.homogeneous(worker_type_from_trace(ring), k, B))
    if k > 1:
        sim = simulate(ring, SimulationConfig(**base, arch="allreduce"))  # type: ignore[arg-type]
        assert sim.steps_per_s.value == pytest.approx(p_ring.allreduce.steps_per_s, rel=1e-9)


@pytest.mark.parametrize(
    ("make", "culprit"),
    [
        (lambda: Cluster.homogeneous(WORKER, 2, 0.0), "bandwidth_bps"),
        (lambda: Cluster.homogeneous(WORKER, 0, B), "counts"),
        (lambda: Cluster((WORKER,), (1, 2), B), "counts"),
        (lambda: Cluster((), (), B), "worker_types"),
        (lambda: WorkerType("w", -0.1, 0.0, 0.0, 10), "forward_s"),
        (lambda: WorkerType("w", 0.1, float("inf"), 0.0, 10), "backward_s"),
        (lambda: WorkerType("w", 0.1, 0.1, 0.0, -1), "model_nbytes"),
        (lambda: WorkerType("w", 0.1, 0.1, 0.0, 10, batch_size=0), "batch_size"),
        (lambda: predict_async(Cluster.homogeneous(WORKER, 2, B), rho_t=1.5), "rho_t"),
        (
            lambda: predict_async(Cluster.homogeneous(WORKER, 2, B), overlap_rule="x"),
            "overlap_rule",
        ),
        (lambda: predict_async(Cluster.homogeneous(WORKER, 2, B), solver="x"), "solver"),
    ],
)
def test_bad_inputs_name_the_parameter(make: object, culprit: str) -> None:
    with pytest.raises(ConfigError, match=f"^{culprit}:"):
        make()  # type: ignore[operator]
