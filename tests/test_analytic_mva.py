"""Mean value analysis of closed networks (simcore.analytic.mva) against hand-derived values.

Notation: a job of class c has its own delay Z_c (its worker's compute) and visits the shared
stations D (downlink), U (uplink) and S (server) with service times S^D, S^U, S^S.
"""

from __future__ import annotations

import numpy as np
import pytest

from simcore.analytic.mva import SINGLETON_MAX_CLASSES, lattice_size, solve
from simcore.analytic.network import ClosedNetwork
from simcore.errors import ConfigError

SD, SU, SS = 0.010, 0.010, 0.005  # s
SUM_S = SD + SU + SS
SUM_S2 = SD**2 + SU**2 + SS**2
PS3 = ("ps", "ps", "ps")
FCFS_LINKS = ("fcfs", "fcfs", "ps")  # Eq. 3: FCFS links, PS server


def network(
    populations: tuple[int, ...], delays: tuple[float, ...], disc: tuple[str, ...] = PS3
) -> ClosedNetwork:
    return ClosedNetwork(populations, delays, ((SD, SU, SS),) * len(populations), disc)


@pytest.mark.parametrize("solver", ["singleton", "grouped", "bard-schweitzer"])
@pytest.mark.parametrize("disc", [PS3, FCFS_LINKS])
def test_one_worker_is_one_over_its_cycle(solver: str, disc: tuple[str, ...]) -> None:
    """K = 1: the job never meets another, so T^l = S^l at every station (Eq. 1 and Eq. 2 with
    an empty network behind it: N = rho = 0). X = 1 / (Z + S^D + S^U + S^S) = 1 / 0.075 s.
    """
    result = solve(network((1,), (0.05,), disc), solver)
    assert result.throughput_per_s[0] == pytest.approx(1 / 0.075, rel=1e-12)
    assert result.response_s[0] == pytest.approx([SD, SU, SS], rel=1e-12)
    assert result.solver == solver


@pytest.mark.parametrize("solver", ["singleton", "grouped"])
def test_two_identical_workers_ps(solver: str) -> None:
    """K = 2, Z = 0.05 s, all stations PS (Eq. 1).

    With one job alone (n = e_j): cycle C = Z + sum S = 0.075 s, X = 1/C, N_j^l = S^l / C.
    With both: T^l = S^l (1 + S^l / C), so each job's cycle is C + sum (S^l)^2 / C
    = 0.075 + 0.000225 / 0.075 = 0.078 s, and X = 2 / 0.078 = 25.641 steps/s.
    """
    result = solve(network((2,), (0.05,)), solver)
    c = 0.05 + SUM_S
    assert result.throughput_per_s.sum() == pytest.approx(2 / (c + SUM_S2 / c), rel=1e-12)
    assert result.throughput_per_s.sum() == pytest.approx(25.641025641, rel=1e-9)


@pytest.mark.parametrize("solver", ["singleton", "grouped"])
def test_two_identical_workers_fcfs_links(solver: str) -> None:
    """K = 2, Z = 0.05 s, FCFS links as TPDS'22 Eq. 2 writes it, PS server.

    The other job alone has N^l = rho^l = S^l / C (C = 0.075 s), so at an FCFS link
    T^l = S^l + S^l (S^l/C - S^l/(2C)) = S^l (1 + S^l / (2C)); at the PS server
    T^S = S^S (1 + S^S / C). Cycle = C + (SD^2 + SU^2) / (2C) + SS^2 / C
    = 0.075 + 0.0013333 + 0.00033333 = 0.0766667 s; X = 2 / 0.0766667 = 26.0870 steps/s.
    """
    result = solve(network((2,), (0.05,), FCFS_LINKS), solver)
    c = 0.05 + SUM_S
    cycle = c + (SD**2 + SU**2) / (2 * c) + SS**2 / c
    assert result.throughput_per_s.sum() == pytest.approx(2 / cycle, rel=1e-12)
    assert result.throughput_per_s.sum() == pytest.approx(26.086956522, rel=1e-9)


@pytest.mark.parametrize("solver", ["singleton", "grouped"])
def test_two_different_workers_ps(solver: str) -> None:
    """K = 2 of two types, Z_1 = 0.05 s and Z_2 = 0.10 s, all PS.

    Alone: C_1 = 0.075 s, C_2 = 0.125 s, N_j^l = S^l / C_j. Together, job 1 meets job 2's
    queue: cycle_1 = C_1 + sum (S^l)^2 / C_2 = 0.0768 s; cycle_2 = C_2 + sum (S^l)^2 / C_1
    = 0.128 s. X = 1/0.0768 + 1/0.128 = 13.0208 + 7.8125 = 20.8333 steps/s.
    """
    result = solve(network((1, 1), (0.05, 0.10)), solver)
    assert result.throughput_per_s == pytest.approx([1 / 0.0768, 1 / 0.128], rel=1e-12)
    assert result.throughput_per_s.sum() == pytest.approx(20.833333333, rel=1e-9)


def random_network(rng: np.random.Generator, k: int, disc: tuple[str, ...]) -> ClosedNetwork:
    """k workers split at random among up to three types with random times."""
    types = int(rng.integers(1, 4))
    counts = np.bincount(rng.integers(types, size=k), minlength=types)
    counts = counts[counts > 0]
    g = len(counts)
    return ClosedNetwork(
        populations=tuple(int(c) for c in counts),
        delay_s=tuple(float(z) for z in rng.uniform(0.0, 0.1, g)),
        service_s=tuple(tuple(float(s) for s in row) for row in rng.uniform(0.0, 0.02, (g, 3))),
        disciplines=disc,
    )


@pytest.mark.parametrize("disc", [PS3, FCFS_LINKS, ("fcfs", "ps", "fcfs")])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 12])
def test_grouped_equals_singleton(k: int, disc: tuple[str, ...]) -> None:
    rng = np.random.default_rng(1000 * k + len(disc[0]))
    for _ in range(3):
        net = random_network(rng, k, disc)
        grouped, single = solve(net, "grouped"), solve(net, "singleton")
        assert grouped.throughput_per_s == pytest.approx(single.throughput_per_s, rel=1e-9)
        assert grouped.response_s == pytest.approx(single.response_s, rel=1e-9, abs=1e-15)
        assert single.iterations == 2**k and grouped.iterations <= 2**k


@pytest.mark.parametrize("solver", ["singleton", "grouped", "bard-schweitzer"])
@pytest.mark.parametrize("disc", [PS3, FCFS_LINKS])
def test_littles_law_and_utilization(solver: str, disc: tuple[str, ...]) -> None:
    net = random_network(np.random.default_rng(7), 9, disc)
    r = solve(net, solver)
    pops = np.asarray(net.populations, dtype=float)
    # Little's law per class over its whole cycle: jobs queued + jobs in their delay = n_c.
    in_delay = r.throughput_per_s * np.asarray(net.delay_s)
    assert r.queue_length.sum(axis=1) + in_delay == pytest.approx(pops, rel=1e-12)
    assert r.throughput_per_s == pytest.approx(pops / r.cycle_s, rel=1e-12)
    # Utilization law: rho = X S, a station is never busier than 1.
    assert r.utilization == pytest.approx(r.throughput_per_s[:, None] * net.service_array())
    assert np.all(r.station_utilization <= 1 + 1e-12)
    # A job waits at least its service; at a station, at least as many jobs as it serves.
    assert np.all(r.response_s >= net.service_array() - 1e-15)
    assert np.all(r.queue_length >= r.utilization - 1e-15)


@pytest.mark.parametrize("disc", [PS3, FCFS_LINKS])
def test_grouped_by_levels_is_the_vector_by_vector_recursion_bit_for_bit(
    disc: tuple[str, ...],
) -> None:
    """The grouped solver's two fast forms (one class: a chain in floats; several: a level of
    the lattice at a time) against the recursion the singleton solver runs, kept as the
    reference: the same operations per vector, so the same numbers exactly."""
    from simcore.analytic.mva import _by_levels, _exact, _one_class

    rng = np.random.default_rng(11 + len(disc[0]))
    for classes in (1, 2, 3):
        for _ in range(4):
            pops = tuple(int(n) for n in rng.integers(1, 7, classes))
            net = ClosedNetwork(
                pops,
                tuple(rng.uniform(0.0, 0.1, classes)),
                tuple(tuple(rng.uniform(0.001, 0.05, 3)) for _ in range(classes)),
                disc,
            )
            reference = _exact(net)
            fast = _one_class(net) if classes == 1 else _by_levels(net)
            assert np.array_equal(fast[0], reference[0]) and np.array_equal(fast[1], reference[1])
            assert fast[2] == reference[2] == lattice_size(pops)


def test_throughput_bounds_of_many_identical_workers() -> None:
    """Asymptotic bounds: X <= n / (Z + sum S) and X <= 1 / max S; near the latter for n >> 1."""
    r = solve(network((1024,), (0.05,)), "grouped")
    x = r.throughput_per_s[0]
    assert x <= 1 / SD and x <= 1024 / (0.05 + SUM_S)
    assert x == pytest.approx(1 / SD, rel=1e-3)


def test_bard_schweitzer_close_to_exact() -> None:
    """Tolerances: 10 distinct workers at ~85% link utilization (the knee, where the approximation
    is worst): total throughput within 3.5%, each worker within 5%. One class of 64 identical
    workers: within 0.5%; 1024: within 1e-4 (the approximation is exact as n -> infinity).
    """
    rng = np.random.default_rng(5)
    net = ClosedNetwork((1,) * 10, tuple(rng.uniform(0.01, 0.1, 10)), ((SD, SU, 0.002),) * 10, PS3)
    exact, approx = solve(net, "singleton"), solve(net, "bard-schweitzer")
    assert 0.8 < exact.station_utilization[0] < 0.9
    assert approx.throughput_per_s.sum() == pytest.approx(exact.throughput_per_s.sum(), rel=0.035)
    assert approx.throughput_per_s == pytest.approx(exact.throughput_per_s, rel=0.05)
    for n, rel in ((64, 5e-3), (1024, 1e-4)):
        one = network((n,), (0.05,))
        assert solve(one, "bard-schweitzer").throughput_per_s == pytest.approx(
            solve(one, "grouped").throughput_per_s, rel=rel
        )


def test_auto_picks_exact_grouped_then_bard_schweitzer() -> None:
    assert solve(network((1024,), (0.05,))).solver == "grouped"
    many = ClosedNetwork((1,) * 40, tuple(np.linspace(0.01, 0.1, 40)), ((SD, SU, SS),) * 40, PS3)
    assert solve(many).solver == "bard-schweitzer"


@pytest.mark.parametrize(
    ("kwargs", "culprit"),
    [
        ({"populations": (0,)}, "populations"),
        ({"populations": ()}, "populations"),
        ({"delay_s": (-1.0,)}, "service_s"),
        ({"delay_s": (float("nan"),)}, "service_s"),
        ({"service_s": ((SD, SU),)}, "service_s"),
        ({"disciplines": ("ps", "lifo", "ps")}, "disciplines"),
        ({"delay_s": (0.0,), "service_s": ((0.0, 0.0, 0.0),)}, "service_s"),
        ({"delay_s": (0.1, 0.2)}, "delay_s"),
    ],
)
def test_bad_networks_name_the_field(kwargs: dict[str, object], culprit: str) -> None:
    base: dict[str, object] = {
        "populations": (1,),
        "delay_s": (0.05,),
        "service_s": ((SD, SU, SS),),
        "disciplines": PS3,
    }
    base.update(kwargs)
    with pytest.raises(ConfigError, match=culprit):
        ClosedNetwork(**base)  # type: ignore[arg-type]


def test_bad_solver_names_the_parameter() -> None:
    with pytest.raises(ConfigError, match="solver: 'magic' is not one of"):
        solve(network((1,), (0.05,)), "magic")
    with pytest.raises(ConfigError, match="solver: 'singleton'"):
        solve(network((SINGLETON_MAX_CLASSES + 1,), (0.05,)), "singleton")
