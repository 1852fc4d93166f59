"""A server link whose two directions together carry less than twice one: the sharing rule, the
engine, and the gloo measurement."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profilers.distributed.link_duplex import (
    DuplexReport,
    duplex_from_dict,
    duplex_text,
    duplex_to_dict,
    measure_duplex,
)
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.sim.rate_link import duplex_capacity
from simcore.trace.build import synthetic_trace

# --- the sharing rule --------------------------------------------------------------------------


def test_an_idle_other_direction_leaves_the_full_capacity() -> None:
    assert duplex_capacity(10.0, 3, 10.0, 0, 12.0) == 10.0


def test_one_transfer_each_way_split_the_duplex_limit() -> None:
    # one pull and one push, 1.5x one direction together: 0.75 each
    assert duplex_capacity(1.0, 1, 1.0, 1, 1.5) == pytest.approx(0.75)


def test_the_crowded_direction_fills_first_and_the_other_gets_what_is_left() -> None:
    # 3 pulls and 1 push, 1.5 together: an equal level of 0.375 would give the pulls 1.125 > 1,
    # so the pulls get their 1 (1/3 each) and the push what the shared limit leaves: 0.5
    assert duplex_capacity(1.0, 3, 1.0, 1, 1.5) == 1.0
    assert duplex_capacity(1.0, 1, 1.0, 3, 1.5) == pytest.approx(0.5)


def test_a_duplex_limit_of_two_directions_limits_nothing() -> None:
    assert duplex_capacity(1.0, 1, 1.0, 1, 2.0) == 1.0
    assert duplex_capacity(1.0, 2, 1.0, 5, 2.0) == 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.1, 10.0),
    st.floats(0.1, 10.0),
    st.integers(1, 6),
    st.integers(1, 6),
    st.floats(0.1, 25.0),
)
def test_the_two_directions_never_exceed_the_limit_or_their_own_capacity(
    down: float, up: float, n: int, m: int, duplex: float
) -> None:
    a = duplex_capacity(down, n, up, m, duplex)
    b = duplex_capacity(up, m, down, n, duplex)
    assert 0.0 <= a <= down + 1e-12 and 0.0 <= b <= up + 1e-12
    assert a + b <= duplex * (1 + 1e-9)
    # work-conserving: the limit or both capacities are used in full
    assert a + b == pytest.approx(min(duplex, down + up)) or (
        a == pytest.approx(down) or b == pytest.approx(up)
    )


# --- in the engine -----------------------------------------------------------------------------


def _one_layer() -> Any:
    """1.25 MB (1 s at 10 Mbit/s each way), 2 ms of compute."""
    return synthetic_trace([0.001], [0.001], [1_250_000], overlap=False)


def test_async_workers_on_a_half_duplex_link_share_one_direction() -> None:
    # unequal shares (flow_weight_cv) keep the workers from moving in lock-step
    base = SimulationConfig(
        workers=2,
        bandwidth_bps=10e6,
        arch="ps",
        mode="async",
        steps=60,
        warmup_steps=10,
        flow_weight_cv=0.5,
    )

    def steps_per_s(duplex_bps: float | None) -> float:
        config = dataclasses.replace(base, duplex_bps=duplex_bps)
        return simulate(_one_layer(), config).steps_per_s.value

    full, half = steps_per_s(None), steps_per_s(10e6)
    # half duplex: every step moves 2 s worth of bits through 10 Mbit/s in all: at most 0.5
    # steps/s (1% for the steps in flight at the ends of the measured window); full duplex lets
    # one worker pull while the other pushes (up to 1 step/s)
    assert half <= 0.5 * 1.01
    assert full > 0.6
    assert steps_per_s(20e6) == full  # twice one direction: no limit at all


def test_strict_sync_phases_never_overlap_so_the_limit_changes_nothing() -> None:
    base = SimulationConfig(
        workers=3, bandwidth_bps=10e6, arch="ps", mode="sync", steps=20, warmup_steps=4
    )
    plain = simulate(_one_layer(), base).steps_per_s.value
    limited = simulate(_one_layer(), dataclasses.replace(base, duplex_bps=12e6)).steps_per_s
    # 3 pulls of 1 s share the downlink (3 s), compute 2 ms, 3 pushes (3 s): 3 worker-steps
    assert plain == pytest.approx(3 / 6.002, rel=1e-6)
    assert limited.value == pytest.approx(plain, rel=1e-9)


def test_the_limit_applies_to_one_parameter_server_only() -> None:
    with pytest.raises(ConfigError, match="duplex_bps"):
        SimulationConfig(arch="allreduce", mode="sync", duplex_bps=1e9)
    with pytest.raises(ConfigError, match="duplex_bps"):
        SimulationConfig(servers=2, duplex_bps=1e9)
    with pytest.raises(ConfigError, match="duplex_bps"):
        SimulationConfig(duplex_bps=-1.0)


# --- the measurement ---------------------------------------------------------------------------


def test_goodputs_are_bits_over_total_time() -> None:
    # 2 workers x 1 MB: one way 16 Mbit per repetition; both ways 32 Mbit
    report = DuplexReport(2, 1_000_000, (1.0, 1.0), (2.0,), (2.0, 6.0), 5e7)
    assert report.one_way_bps() == pytest.approx(3 * 16e6 / 4.0)
    assert report.duplex_bps() == pytest.approx(2 * 32e6 / 8.0)
    assert report.ratio() == pytest.approx(8e6 / 12e6)
    assert "0.67x one way" in duplex_text(report)


def test_a_report_survives_its_dict_and_bad_ones_name_the_source() -> None:
    report = DuplexReport(2, 1000, (0.1,), (0.2,), (0.3, 0.4), None)
    assert duplex_from_dict(duplex_to_dict(report)) == report
    with pytest.raises(ConfigError, match=r"f\.json: duplex"):
        duplex_from_dict({"workers": 2}, "f.json")
    bad = duplex_to_dict(dataclasses.replace(report, both_s=(0.0,)))
    with pytest.raises(ConfigError, match="positive"):
        duplex_from_dict(bad, "f.json")


def test_bad_arguments_fail_before_anything_starts() -> None:
    with pytest.raises(ConfigError, match="duplex: needs workers >= 1"):
        measure_duplex(workers=0)
    with pytest.raises(ConfigError, match="transfers of >= 4 bytes"):
        measure_duplex(nbytes=2)


@pytest.mark.slow
def test_a_server_and_two_workers_on_loopback_time_every_repetition() -> None:
    report = measure_duplex(workers=2, nbytes=400_000, repeats=2, warmup=1)
    assert report.workers == 2 and report.nbytes == 400_000
    assert len(report.push_s) == len(report.pull_s) == len(report.both_s) == 2
    assert min(report.push_s + report.pull_s + report.both_s) > 0
    assert report.link_rate_bps is None and report.duplex_bps() > 0


@pytest.mark.slow
def test_on_a_shaped_link_each_direction_stays_below_the_rate(root_only: None) -> None:
    # root_only: skipped without root, and no namespace may be left afterwards. 1.25 MB at
    # 100 Mbit/s: 0.1 s a transfer. However busy the machine, neither direction can beat the
    # shaper, nor both together twice it; a quarter of the rate still catches a wrong unit.
    report = measure_duplex(workers=2, link_rate_bps=100e6, nbytes=1_250_000, repeats=3)
    assert 0.25 * 100e6 < report.one_way_bps() < 100e6
    assert 0.25 * 100e6 < report.duplex_bps() < 2 * 100e6
    assert report.link_rate_bps == 100e6
