"""Unequal shares on a processor-sharing link: random flow weights and their calibration.

Plain processor sharing gives n concurrent transfers B/n each, so equal transfers started together
end together. TCP flows through one bottleneck do not: their congestion windows differ, and one of
them ends first. Discriminatory processor sharing with random weights models that: each transfer
draws a weight w (lognormal, mean 1, coefficient of variation ``cv``) and gets ``B * w / sum(w)``
while it shares the link (``SimulationConfig.flow_weight_cv``).

:mod:`profilers.link_sharing` estimates ``cv`` on a real link from the share ratios of two flows.
A coarser summary of equal transfers started together is their *FCFS index*
``(t_last - t_first) / (t_last * (k - 1) / k)``, 0 under PS and 1 under FCFS;
:func:`weight_cv_for_fcfs_index` finds the ``cv`` whose expected index matches a measured one.

For k equal transfers (size 1, link rate 1) the completion times have a closed form. In the
virtual time ``V(t) = integral dt / sum(active weights)`` a transfer of weight w progresses by
``w dV`` and ends at ``V = 1/w``, so the heaviest ends first; between the ends of the j-th and
(j+1)-th heaviest, real time passes ``sum(weights still active) * dV``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from simcore.errors import ConfigError

__all__ = [
    "completion_times",
    "expected_fcfs_index",
    "lognormal_weights",
    "rescaled_weights",
    "weight_cv_for_fcfs_index",
]

_CV_MAX = 50.0  # an index this cv cannot reach is FCFS for every practical purpose


def lognormal_weights(cv: float, rng: np.random.Generator, batch: int = 256) -> Callable[[], float]:
    """A function drawing one weight per call: lognormal, mean 1, coefficient of variation cv.

    It draws ``batch`` weights from ``rng`` at a time (the same numbers, in the same order, as
    one draw per call), so ``rng`` must serve this function alone.
    """
    sigma = math.sqrt(math.log1p(cv * cv))
    mu = -0.5 * sigma * sigma
    ahead: list[float] = []  # the next weights, last one first

    def draw() -> float:
        if not ahead:
            ahead.extend(reversed(rng.lognormal(mu, sigma, size=batch).tolist()))
        return ahead.pop()

    return draw


def rescaled_weights(
    draw: Callable[[], float], cv_from: float, cv_to: float
) -> Callable[[], float]:
    """Weights of coefficient of variation ``cv_to`` from ``draw``'s of ``cv_from`` (both
    lognormal, mean 1): the same standard normal behind each, so that links with different cvs
    still take their weights from one stream in one order."""
    sigma_from = math.sqrt(math.log1p(cv_from * cv_from))
    sigma_to = math.sqrt(math.log1p(cv_to * cv_to))
    mu_from, mu_to = -0.5 * sigma_from * sigma_from, -0.5 * sigma_to * sigma_to
    scale = sigma_to / sigma_from

    def draw_rescaled() -> float:
        return math.exp(mu_to + scale * (math.log(draw()) - mu_from))

    return draw_rescaled


def completion_times(weights: np.ndarray) -> np.ndarray:
    """End times of k equal transfers (size 1, link rate 1) started together under DPS.

    ``weights`` has shape (..., k); the result has the same shape, each row ascending (the
    heaviest transfer first). The last end is always k: the link never idles.
    """
    w = -np.sort(-np.asarray(weights, dtype=float), axis=-1)  # descending
    v_end = 1.0 / w  # ascending virtual end times
    dv = np.diff(v_end, axis=-1, prepend=0.0)
    active = np.flip(np.cumsum(np.flip(w, axis=-1), axis=-1), axis=-1)  # sum of w[j:]
    times: np.ndarray = np.cumsum(active * dv, axis=-1)
    return times


def _index(times: np.ndarray) -> np.ndarray:
    k = times.shape[-1]
    first, last = times[..., 0], times[..., -1]
    index: np.ndarray = (last - first) / (last * (k - 1) / k)
    return index


def expected_fcfs_index(cv: float, flows: int, *, samples: int = 20000, seed: int = 0) -> float:
    """Mean FCFS index of ``flows`` equal transfers with weights of coefficient of variation cv."""
    if flows < 2:
        raise ConfigError(f"flows: the FCFS index needs at least 2 transfers, got {flows}")
    if cv == 0:
        return 0.0
    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log1p(cv * cv))
    weights = rng.lognormal(-0.5 * sigma * sigma, sigma, size=(samples, flows))
    return float(_index(completion_times(weights)).mean())


def weight_cv_for_fcfs_index(
    index: float, flows: Sequence[int] = (2, 4), *, tolerance: float = 1e-4
) -> float:
    """The weight cv whose mean FCFS index over ``flows`` (equally weighted) equals ``index``.

    Raises
    ------
    ConfigError : ``index`` is not in [0, 1), or ``flows`` has a value below 2.
    """
    if not 0 <= index < 1:
        raise ConfigError(f"FCFS index: must be in [0, 1) to calibrate, got {index!r}")
    if not flows or min(flows) < 2:
        raise ConfigError(f"flows: need transfer counts >= 2, got {list(flows)}")
    if index == 0:
        return 0.0

    def mean_index(cv: float) -> float:
        return sum(expected_fcfs_index(cv, k) for k in flows) / len(flows)

    low, high = 0.0, 1.0
    while mean_index(high) < index:
        high *= 2
        if high > _CV_MAX:
            return _CV_MAX
    while high - low > tolerance * max(high, 1e-3):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if mean_index(mid) < index else (low, mid)
    return 0.5 * (low + high)
