"""Unequal shares on a processor-sharing link: the closed form, the calibration, the engine."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.sim.flow_weights import (
    completion_times,
    expected_fcfs_index,
    lognormal_weights,
    rescaled_weights,
    weight_cv_for_fcfs_index,
)
from simcore.sim.rate_link import weighted_rates
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

# --- closed form -------------------------------------------------------------------------------


def test_equal_weights_end_together_as_under_processor_sharing() -> None:
    assert completion_times(np.array([1.0, 1.0])).tolist() == [2.0, 2.0]
    assert completion_times(np.ones(4)).tolist() == [4.0] * 4


def test_two_flows_by_hand() -> None:
    # weights 3 and 1: rates 3/4 and 1/4 until the heavy one ends at 1 / (3/4) = 4/3; the light
    # one has 1 - 1/3 = 2/3 left and ends 2/3 later, at 2
    assert completion_times(np.array([1.0, 3.0])) == pytest.approx([4 / 3, 2.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=8))
def test_the_link_never_idles_and_the_heaviest_ends_first(weights: list[float]) -> None:
    times = completion_times(np.array(weights))
    assert times[-1] == pytest.approx(len(weights))  # k unit transfers at rate 1
    assert np.all(np.diff(times) >= -1e-9)
    assert times[0] == pytest.approx(sum(weights) / max(weights))


def test_fcfs_index_of_two_flows_is_one_minus_the_weight_ratio() -> None:
    # index = (2 - 4/3) / (2 * 1/2) = 2/3 = 1 - 1/3
    times = completion_times(np.array([3.0, 1.0]))
    index = (times[-1] - times[0]) / (times[-1] * (2 - 1) / 2)
    assert index == pytest.approx(2 / 3)


def test_expected_index_grows_with_the_spread_from_ps_towards_fcfs() -> None:
    indices = [expected_fcfs_index(cv, 4) for cv in (0.0, 0.1, 0.3, 1.0, 10.0)]
    assert indices[0] == 0.0
    assert all(a < b for a, b in itertools.pairwise(indices))
    assert 0.75 < indices[-1] < 1.0  # towards FCFS, never quite there


def test_lognormal_weights_have_mean_one_and_the_asked_cv() -> None:
    draw = lognormal_weights(0.5, np.random.default_rng(3))
    sample = np.array([draw() for _ in range(40000)])
    assert sample.mean() == pytest.approx(1.0, abs=0.02)
    assert sample.std() / sample.mean() == pytest.approx(0.5, abs=0.02)


@pytest.mark.parametrize("cv_to", [0.1, 0.5, 2.0])
def test_rescaled_weights_have_mean_one_and_their_own_cv(cv_to: float) -> None:
    # The uplink's weights (flow_weight_cv_push) come from the downlink's stream of draws.
    draw = rescaled_weights(lognormal_weights(0.3, np.random.default_rng(5)), 0.3, cv_to)
    sample = np.array([draw() for _ in range(40000)])
    assert sample.mean() == pytest.approx(1.0, rel=0.03)
    assert sample.std() / sample.mean() == pytest.approx(cv_to, rel=0.06)


@pytest.mark.parametrize("index", [0.05, 0.13, 0.4])
def test_calibration_inverts_the_expected_index(index: float) -> None:
    cv = weight_cv_for_fcfs_index(index, (2, 4))
    mean = (expected_fcfs_index(cv, 2) + expected_fcfs_index(cv, 4)) / 2
    assert mean == pytest.approx(index, abs=1e-3)


def test_calibration_rejects_what_it_cannot_invert() -> None:
    assert weight_cv_for_fcfs_index(0.0) == 0.0
    with pytest.raises(ConfigError, match="FCFS index"):
        weight_cv_for_fcfs_index(1.0)
    with pytest.raises(ConfigError, match="flows"):
        weight_cv_for_fcfs_index(0.2, (1,))


# --- the link's rates --------------------------------------------------------------------------


def test_weighted_rates_are_proportional_and_caps_clip_or_refill() -> None:
    inf = math.inf
    assert weighted_rates([1.0, 3.0], 8.0, [inf, inf], False) == [2.0, 6.0]
    # clip: the capped flow loses 2, nobody gets it
    assert weighted_rates([1.0, 3.0], 8.0, [inf, 4.0], False) == [2.0, 4.0]
    # max-min: the 2 freed by the cap go to the other flow
    assert weighted_rates([1.0, 3.0], 8.0, [inf, 4.0], True) == [4.0, 4.0]


# --- in the engine -----------------------------------------------------------------------------


def _one_layer_trace() -> Trace:
    """Strict phases, one layer of 1.25 MB (10 Mbit: 1 s at 10 Mbit/s), 20 ms of compute."""
    return synthetic_trace([0.01], [0.01], [1_250_000], overlap=False)


def test_weights_keep_the_link_work_conserving_and_sync_between_ps_and_fcfs() -> None:
    trace = _one_layer_trace()
    base = SimulationConfig(
        workers=4, bandwidth_bps=10e6, arch="ps", mode="sync", steps=40, warmup_steps=5
    )
    ps = simulate(trace, base).steps_per_s.value
    fcfs = simulate(trace, dataclasses.replace(base, sharing="fcfs")).steps_per_s.value
    dps = simulate(trace, dataclasses.replace(base, flow_weight_cv=0.5)).steps_per_s.value
    # PS by hand: 4 pulls of 1 s share the link (4 s), compute 0.02 s, 4 pushes (4 s)
    assert ps == pytest.approx(4 / 8.02, rel=1e-6)
    assert ps < dps < fcfs
    # Async-SGD saturates the link whatever the weights: 4 workers x 1 s per direction
    saturated = dataclasses.replace(base, mode="async", flow_weight_cv=0.5)
    assert simulate(trace, saturated).steps_per_s.value <= 1.0 + 1e-9


def test_weights_are_drawn_from_the_seed() -> None:
    trace = _one_layer_trace()
    config = SimulationConfig(
        workers=3, bandwidth_bps=10e6, mode="sync", steps=30, warmup_steps=5, flow_weight_cv=0.4
    )
    first = simulate(trace, config).steps_per_s.value
    assert simulate(trace, config).steps_per_s.value == first
    other = simulate(trace, dataclasses.replace(config, seed=2)).steps_per_s.value
    assert other != first


def test_flow_weights_only_for_a_processor_sharing_server_link() -> None:
    with pytest.raises(ConfigError, match="flow_weight_cv"):
        SimulationConfig(flow_weight_cv=0.2, sharing="fcfs")
    with pytest.raises(ConfigError, match="flow_weight_cv"):
        SimulationConfig(flow_weight_cv=0.2, arch="allreduce", mode="sync")
    with pytest.raises(ConfigError, match="flow_weight_cv"):
        SimulationConfig(flow_weight_cv=-0.1)


def test_colocated_workers_with_nics_of_their_own_share_only_the_cpu() -> None:
    trace = _one_layer_trace()
    flat = SimulationConfig(
        workers=3, bandwidth_bps=10e6, arch="allreduce", mode="sync", steps=20, warmup_steps=2
    )
    own_nics = dataclasses.replace(
        flat, colocated_workers=3, host_cpu_cores=3.0, worker_cpu_cores=1.0, shared_nic=False
    )
    shared_nic = dataclasses.replace(own_nics, shared_nic=True)
    expected = simulate(trace, flat).steps_per_s.value
    assert simulate(trace, own_nics).steps_per_s.value == pytest.approx(expected, rel=1e-9)
    # one NIC for three ring members: each sends at a third of the rate
    assert simulate(trace, shared_nic).steps_per_s.value < 0.5 * expected
    with pytest.raises(ConfigError, match="shared_nic"):
        SimulationConfig(shared_nic="no")  # type: ignore[arg-type]


def test_share_ratios_invert_discriminatory_processor_sharing() -> None:
    """Completion times made by DPS with a known ratio give that ratio back."""
    from profilers.link_sharing import LinkSharingReport, SharingTrial

    t = 0.5  # one flow alone
    # together, weights 1 and 0.6: the heavier ends at t (1 + 0.6)
    together = SharingTrial("into", 1, (t * 1.6, 2 * t))
    assert together.share_ratio(t) == pytest.approx(0.6)
    # staggered by d = t/2, the second twice as heavy: the first ends at d + (t - d)(1 + 2)
    d = t / 2
    late_heavy = SharingTrial("into", 1, (d + (t - d) * 3, 2 * t), delay_s=d)
    assert late_heavy.share_ratio(t) == pytest.approx(2.0)
    # the second four times as heavy ends first: at d + t (1 + 4) / 4
    late_first = SharingTrial("into", 1, (2 * t, d + t * 5 / 4), delay_s=d)
    assert late_first.share_ratio(t) == pytest.approx(4.0)
    alone = SharingTrial("into", 1, (t,))
    report = LinkSharingReport(8.0, (alone, together, late_heavy, late_first))
    ratios = report.share_ratios()
    assert ratios == pytest.approx([0.6, 2.0, 4.0])
    sigma2 = sum(math.log(r) ** 2 for r in ratios) / 3 / 2
    assert report.weight_cv() == pytest.approx(math.sqrt(math.exp(sigma2) - 1))
    equal = LinkSharingReport(8.0, (alone, SharingTrial("into", 1, (2 * t, 2 * t))))
    assert equal.weight_cv() == 0.0
