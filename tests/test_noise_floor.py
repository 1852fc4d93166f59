"""The runs' own noise: a point's standard error, and what it alone costs a perfect prediction
over a set of points (closed forms for one and two points, a seeded Monte Carlo check, and
properties)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profilers.distributed.noise_floor import (
    NOISE_Z,
    beyond_noise,
    noise_floor,
    relative_standard_error,
)
from profilers.distributed.validation import ValidationPoint

NORMAL = NormalDist()
scales = st.lists(st.floats(min_value=1e-4, max_value=0.3), min_size=1, max_size=30)


def test_a_points_standard_error_is_its_runs_sd_over_root_n_over_the_mean() -> None:
    # sd of (9, 10, 11) is 1: 1 / sqrt(3) / 10
    assert relative_standard_error([9.0, 10.0, 11.0]) == pytest.approx(1 / math.sqrt(3) / 10)
    assert relative_standard_error([5.0, 5.0]) == 0.0


@pytest.mark.parametrize("values", [[], [100.0], [-1.0, 1.0], [0.0, 0.0]])
def test_no_standard_error_without_two_runs_and_a_positive_mean(values: list[float]) -> None:
    assert math.isnan(relative_standard_error(values))


def test_one_point_the_floor_is_the_half_normals_mean_and_quantiles() -> None:
    floor = noise_floor([0.04])
    assert floor is not None and floor.points == 1
    assert floor.mean_abs_error == pytest.approx(0.04 * math.sqrt(2 / math.pi))
    # |N(0, s)| has its median at s * z(0.75) and its 90% quantile at s * z(0.95)
    assert floor.max_abs_error == pytest.approx(0.04 * NORMAL.inv_cdf(0.75), rel=1e-9)
    assert floor.max_abs_error_p90 == pytest.approx(0.04 * NORMAL.inv_cdf(0.95), rel=1e-9)


def test_two_equal_points_the_median_of_the_larger_error_solves_a_square() -> None:
    # P(both |e| <= x) = (2 Phi(x / s) - 1)^2 = 1/2
    floor = noise_floor([0.02, 0.02])
    assert floor is not None
    expected = 0.02 * NORMAL.inv_cdf((1 + math.sqrt(0.5)) / 2)
    assert floor.max_abs_error == pytest.approx(expected, rel=1e-9)
    assert floor.mean_abs_error == pytest.approx(0.02 * math.sqrt(2 / math.pi))


def test_the_floor_matches_drawing_the_measured_means() -> None:
    ses = [0.005, 0.01, 0.02, 0.03, 0.05, 0.08]
    floor = noise_floor(ses)
    assert floor is not None
    draws = np.abs(np.random.default_rng(7).normal(0.0, ses, size=(40_000, len(ses))))
    assert floor.mean_abs_error == pytest.approx(draws.mean(), rel=0.01)
    largest = draws.max(axis=1)
    assert floor.max_abs_error == pytest.approx(np.quantile(largest, 0.5), rel=0.02)
    assert floor.max_abs_error_p90 == pytest.approx(np.quantile(largest, 0.9), rel=0.02)


def test_points_without_a_standard_error_are_left_out() -> None:
    assert noise_floor([]) is None
    assert noise_floor([math.nan, math.nan]) is None
    with_unknown = noise_floor([0.03, math.nan])
    assert with_unknown == noise_floor([0.03])
    exact = noise_floor([0.0, 0.0])
    assert exact is not None and exact.max_abs_error == 0.0 and exact.mean_abs_error == 0.0


def test_a_negative_standard_error_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"standard errors must be >= 0, got -0\.1"):
        noise_floor([0.1, -0.1])


@settings(deadline=None)  # no wall-clock limit: CI shares its cores
@given(scales, st.floats(min_value=0.1, max_value=10))
def test_the_floor_scales_with_the_noise(ses: list[float], k: float) -> None:
    base, scaled = noise_floor(ses), noise_floor([k * s for s in ses])
    assert base is not None and scaled is not None
    assert scaled.mean_abs_error == pytest.approx(k * base.mean_abs_error, rel=1e-9)
    assert scaled.max_abs_error == pytest.approx(k * base.max_abs_error, rel=1e-6)


@settings(deadline=None)
@given(scales, st.floats(min_value=1e-4, max_value=0.3))
def test_another_point_never_lowers_the_largest_error(ses: list[float], extra: float) -> None:
    before, after = noise_floor(ses), noise_floor([*ses, extra])
    assert before is not None and after is not None
    assert after.max_abs_error >= before.max_abs_error * (1 - 1e-9)
    assert after.max_abs_error_p90 >= after.max_abs_error
    assert max([*ses, extra]) * NORMAL.inv_cdf(0.75) <= after.max_abs_error * (1 + 1e-9)


def test_an_error_is_beyond_noise_past_two_standard_errors() -> None:
    assert NOISE_Z == 2.0
    assert beyond_noise(0.05, 0.02)
    assert beyond_noise(-0.05, 0.02)
    assert not beyond_noise(0.03, 0.02)
    assert not beyond_noise(0.5, math.nan)


def test_a_validation_point_knows_its_noise() -> None:
    point = ValidationPoint(
        architecture="ps-async",
        workers=2,
        measured=(90.0, 100.0, 110.0),
        simulated=115.0,
        simulated_ideal=120.0,
        coarse=100.0,
        slowdown=1.0,
    )
    # sd 10 over sqrt(3) over 100: 5.8%; 115 is 15% off, beyond 11.5%; 110 is not
    assert point.standard_error == pytest.approx(0.1 / math.sqrt(3))
    assert point.beyond_noise(115.0)
    assert not point.beyond_noise(110.0)
    one_run = ValidationPoint("ps-async", 2, (100.0,), 150.0, 150.0, 150.0, 1.0)
    assert math.isnan(one_run.standard_error) and not one_run.beyond_noise(150.0)


def test_the_floor_is_said_with_what_each_number_is() -> None:
    from profilers.distributed.validation import noise_floor_text

    floor = noise_floor([0.04])
    assert floor is not None
    text = noise_floor_text(floor)
    mean, typical = 100 * floor.mean_abs_error, 100 * floor.max_abs_error
    assert typical < mean  # one point: the median of |N(0, s)| is below its mean
    assert f"off by {mean:.1f}% on average, and by {typical:.1f}% at most in a typical" in text
    assert text.endswith("over 1 point")
