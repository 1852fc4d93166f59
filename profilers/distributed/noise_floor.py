"""How far the runs' own noise alone puts a perfect prediction from the measured means.

A validation compares each prediction with the mean of a few real runs of one configuration.
That mean is itself a sample: on a shared VM three runs of one point differ by up to a fifth,
so even a predictor that knew every configuration's true throughput would show an error
against the measured means. This module says how large, so that a validation can tell the
model's error from the measurement's:

- :func:`relative_standard_error`: a point's standard error of the mean, relative to the mean;
- :func:`noise_floor`: over a set of points, the mean absolute error such a perfect predictor
  is expected to show, and the median and 90% quantile of its largest absolute error;
- :func:`beyond_noise`: whether one error is larger than its point's measurement can explain;
- :class:`RepeatGap`: one configuration measured twice, at different times of one validation,
  and how far apart the two means came out: the noise the standard errors miss when the
  machine's speed wanders between the runs of one point and those of another;
- :func:`error_noise_sd`: from configurations validated twice, each time with its own profile,
  how much of one validation's error does not repeat: what no model can predict;
  :func:`repeating_error_rms`: how large the part that repeats, the model's own, is.

The measured mean of point ``i`` is taken as normal around the true mean with the standard
deviation ``s_i`` its runs show (their sample standard deviation over the square root of
their number). With three runs ``s_i`` is itself rough, so the floor is an estimate of the
noise's size, not a bound. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "NOISE_Z",
    "NoiseFloor",
    "RepeatGap",
    "beyond_noise",
    "error_noise_sd",
    "noise_floor",
    "relative_standard_error",
    "repeating_error_rms",
]

# An error beyond this many standard errors of its measured mean is the model's, not the
# runs': about 1 point in 20 exceeds 2 by chance alone.
NOISE_Z = 2.0


def relative_standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean of ``values`` over their mean (0.02 = 2%); NaN for
    fewer than two values or a mean that is not positive."""
    if len(values) < 2:
        return math.nan
    mean = statistics.fmean(values)
    if not mean > 0:
        return math.nan
    return statistics.stdev(values) / math.sqrt(len(values)) / mean


@dataclass(frozen=True)
class NoiseFloor:
    """What a predictor that knew every point's true mean would score against the measured
    means (relative errors, 0.05 = 5%), over ``points`` points with a known standard error."""

    points: int
    mean_abs_error: float  # expected mean |error| over the points
    max_abs_error: float  # median of the largest |error|
    max_abs_error_p90: float  # 90% quantile of the largest |error|


def noise_floor(standard_errors: Sequence[float]) -> NoiseFloor | None:
    """The noise floor of points whose measured means have the relative ``standard_errors``
    (NaN: unknown, left out). None when no point has one."""
    known = [s for s in standard_errors if not math.isnan(s)]
    if any(s < 0 for s in known):
        raise ValueError(f"standard errors must be >= 0, got {min(known)}")
    if not known:
        return None
    return NoiseFloor(
        points=len(known),
        # E|N(0, s)| = s * sqrt(2 / pi)
        mean_abs_error=statistics.fmean(known) * math.sqrt(2.0 / math.pi),
        max_abs_error=_max_quantile(known, 0.5),
        max_abs_error_p90=_max_quantile(known, 0.9),
    )


def beyond_noise(error: float, standard_error: float, z: float = NOISE_Z) -> bool:
    """Whether a relative ``error`` exceeds ``z`` standard errors of its measured mean (False
    when the standard error is unknown: nothing says it is beyond)."""
    if math.isnan(standard_error):
        return False
    return abs(error) > z * standard_error


def _max_quantile(scales: Sequence[float], q: float) -> float:
    """The ``q`` quantile of max_i |N(0, scales[i])| for independent normals: the x at which
    P(every |error_i| <= x) = prod_i erf(x / (scales[i] sqrt 2)) reaches q."""
    positive = [s for s in scales if s > 0]
    if not positive:
        return 0.0

    def below(x: float) -> float:
        return math.prod(math.erf(x / (s * math.sqrt(2.0))) for s in positive)

    low, high = 0.0, max(positive)
    while below(high) < q:
        high *= 2.0
    # The product rises monotonically in x: bisection to a relative precision far below
    # what three runs can tell.
    for _ in range(100):
        mid = 0.5 * (low + high)
        if below(mid) < q:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


@dataclass(frozen=True)
class RepeatGap:
    """One configuration measured twice at different times (examples/s of each run): a
    validation's one-worker profile runs and its W = 1 point, say. A perfect model predicts
    both alike, so how far apart they are is noise; with runs taken back to back it includes
    the machine's state of the moment, which their standard errors do not see."""

    label: str
    first: tuple[float, ...]
    second: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.first or not self.second:
            raise ValueError(f"{self.label}: a repeat needs runs on both sides")

    @property
    def gap(self) -> float:
        """The second mean relative to the first, less one (0.05: 5% higher)."""
        first = statistics.fmean(self.first)
        return statistics.fmean(self.second) / first - 1.0

    @property
    def standard_error(self) -> float:
        """The standard error of ``gap`` the runs' own spread implies (NaN with one run on a
        side): the two means' relative standard errors combined."""
        a, b = relative_standard_error(self.first), relative_standard_error(self.second)
        return math.hypot(a, b)


def error_noise_sd(shifts: Sequence[float]) -> float:
    """The standard deviation of the part of a validation's error that does not repeat, from
    configurations validated twice (``shifts``: each one's relative error in the second
    validation less its error in the first; NaN: unknown, left out). NaN without any.

    Each error is taken as the model's own, alike in both validations (it is the same model of
    the same configuration), plus noise drawn anew each time, normal with mean 0 and standard
    deviation ``sd``: the runs' spread, the profile's, the machine's speed between them. A
    shift is then the difference of two such draws, normal with variance ``2 sd^2``, and
    ``sd^2`` is half the mean squared shift. ``noise_floor([sd] * n)`` is what that noise
    alone costs a model whose own error is nil, over ``n`` points.
    """
    known = [s for s in shifts if not math.isnan(s)]
    if not known:
        return math.nan
    return math.sqrt(statistics.fmean(s * s for s in known) / 2.0)


def repeating_error_rms(errors: Sequence[tuple[float, float]]) -> float:
    """The root mean square of the part of a validation's error that repeats, from
    configurations validated twice (``errors``: each one's relative error in the first
    validation and in the second). NaN without any.

    With each error the model's own ``m`` plus noise drawn anew each time (independent, mean
    0: :func:`error_noise_sd`), the product of a configuration's two errors has the mean
    ``m^2``: the mean product estimates the mean square of the model's own error (0 when the
    noise makes it negative: nothing then says the model errs at all).
    """
    if not errors:
        return math.nan
    return math.sqrt(max(statistics.fmean(a * b for a, b in errors), 0.0))
