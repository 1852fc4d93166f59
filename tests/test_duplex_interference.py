"""The other model of a server link's two directions: each keeps its bandwidth, and a direction
facing more transfers the other way is slowed by its ACKs waiting in that direction's queue."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.sim.rate_link import interfered_capacity
from simcore.trace.build import synthetic_trace

# --- the rule ----------------------------------------------------------------------------------


def test_an_idle_direction_on_either_side_leaves_the_full_capacity() -> None:
    assert interfered_capacity(10.0, 3, 0, 0.5, 1.0) == 10.0
    assert interfered_capacity(10.0, 0, 3, 0.5, 1.0) == 10.0


def test_as_many_transfers_each_way_lose_only_the_efficiency() -> None:
    assert interfered_capacity(10.0, 1, 1, 0.9, 0.8) == pytest.approx(9.0)
    assert interfered_capacity(10.0, 3, 2, 0.9, 0.8) == pytest.approx(9.0)


def test_one_pull_against_two_pushes_by_hand() -> None:
    # 0.93 * (1/2) ** 0.8 = 0.93 * 0.5743 = 0.5341
    assert interfered_capacity(1.0, 1, 2, 0.93, 0.8) == pytest.approx(0.93 * 0.5**0.8)
    assert interfered_capacity(1.0, 1, 2, 0.93, 0.8) == pytest.approx(0.5341, abs=1e-4)
    # one against three with exponent 1: a third of the efficiency
    assert interfered_capacity(3.0, 1, 3, 0.9, 1.0) == pytest.approx(0.9)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.1, 10.0),
    st.integers(1, 6),
    st.integers(1, 6),
    st.floats(0.05, 1.0),
    st.floats(0.0, 3.0),
    st.floats(0.0, 3.0),
)
def test_more_transfers_the_other_way_or_a_larger_exponent_never_help(
    capacity: float, n: int, m: int, efficiency: float, exponent: float, more: float
) -> None:
    here = interfered_capacity(capacity, n, m, efficiency, exponent)
    assert 0.0 < here <= capacity * efficiency * (1 + 1e-12)
    assert interfered_capacity(capacity, n, m + 1, efficiency, exponent) <= here * (1 + 1e-12)
    assert interfered_capacity(capacity, n, m, efficiency, exponent + more) <= here * (1 + 1e-12)


# --- in the engine -----------------------------------------------------------------------------


def _one_layer() -> Any:
    """1.25 MB (1 s at 10 Mbit/s each way), 2 ms of compute."""
    return synthetic_trace([0.001], [0.001], [1_250_000], overlap=False)


_ASYNC = SimulationConfig(
    workers=2,
    bandwidth_bps=10e6,
    arch="ps",
    mode="async",
    steps=60,
    warmup_steps=10,
    flow_weight_cv=0.5,  # unequal shares keep the workers from moving in lock-step
)


def _steps_per_s(config: SimulationConfig) -> float:
    return simulate(_one_layer(), config).steps_per_s.value


def test_no_loss_and_no_exponent_is_full_duplex_bit_for_bit() -> None:
    full = _steps_per_s(_ASYNC)
    coupled = _steps_per_s(dataclasses.replace(_ASYNC, duplex_interference=(1.0, 0.0, 0.0)))
    assert coupled == full


def test_half_of_each_direction_while_both_are_busy_is_at_most_half_duplex() -> None:
    full = _steps_per_s(_ASYNC)
    half = _steps_per_s(dataclasses.replace(_ASYNC, duplex_interference=(0.5, 0.0, 0.0)))
    # both directions busy: each at half its rate, together one direction's worth, so a step's
    # 2 s of bits take 2 s of the link at best (1% for the steps at the window's ends)
    assert half <= 0.5 * 1.01
    assert full > 0.6


def test_a_slower_pull_direction_never_speeds_async_workers_up() -> None:
    three = dataclasses.replace(_ASYNC, workers=3)
    rates = [
        _steps_per_s(dataclasses.replace(three, duplex_interference=(0.9, exponent, 0.3)))
        for exponent in (0.0, 0.8, 3.0)
    ]
    assert rates[0] >= rates[1] >= rates[2]
    assert rates[0] > rates[2]


def test_strict_sync_phases_never_overlap_so_interference_changes_nothing() -> None:
    base = SimulationConfig(
        workers=3, bandwidth_bps=10e6, arch="ps", mode="sync", steps=20, warmup_steps=4
    )
    plain = simulate(_one_layer(), base).steps_per_s.value
    coupled = dataclasses.replace(base, duplex_interference=(0.6, 1.0, 1.0))
    # 3 pulls of 1 s share the downlink (3 s), compute 2 ms, 3 pushes (3 s): 3 worker-steps
    assert plain == pytest.approx(3 / 6.002, rel=1e-6)
    assert simulate(_one_layer(), coupled).steps_per_s.value == pytest.approx(plain, rel=1e-9)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"duplex_interference": (0.0, 0.5, 0.5)}, "efficiency"),
        ({"duplex_interference": (1.2, 0.5, 0.5)}, "efficiency must be <= 1"),
        ({"duplex_interference": (0.9, -1.0, 0.5)}, "pull_exponent"),
        ({"duplex_interference": (0.9, 0.5, 11.0)}, "push_exponent must be <= 10"),
        ({"duplex_interference": (0.9, 0.5)}, "efficiency, pull_exponent, push_exponent"),
        ({"duplex_interference": (0.9, 0.5, 0.5), "duplex_bps": 1e9}, "give one"),
        ({"duplex_interference": (0.9, 0.5, 0.5), "servers": 2}, "one parameter server"),
        (
            {"duplex_interference": (0.9, 0.5, 0.5), "arch": "allreduce", "mode": "sync"},
            "one parameter server",
        ),
    ],
)
def test_bad_interference_is_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SimulationConfig(**changes)
