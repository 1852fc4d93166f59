"""Has a run settled? The end of its start-up transient, found in the run itself (MSER-5).

Workers that start together take a while to reach their steady pattern: Async-SGD workers on a
busy link, more so behind a per-flow cap, stay bunched for tens to hundreds of steps. A warm-up
shorter than that leaves the transient in the estimate, and the confidence interval does not
show it: ``heterogeneous.py`` (b), W = 3 with a cap, gave 1089 examples/s +-0.5% after 100
steps with 10 left out, against 1272 after 3000 steps with 1500 left out.

MSER-5 (White 1997; Hoad, Robinson and Davies 2010) picks the truncation point that minimises
the standard error of the mean of what is left: the step durations (mean over workers, per
step) are averaged in batches of 5, and for every cut ``d`` in the first half of the batches
``var(z[d:]) / (m - d)`` is computed; the smallest wins. A cut in the first part of the run
means the transient ended there; a cut at the end of the allowed half means the run is too
short to tell where it ends (the classic MSER warning). :func:`settling_of` turns that into
a verdict the stopping rule (:mod:`simcore.sim.precision`) acts on: how many steps the
transient took (median over replications), whether the run was too short to see its end, and
how far the mean step time after the run's own warm-up is from the mean after the cut (the
bias a too-short warm-up leaves, relative).

Pure: arrays in, numbers out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simcore.sim.phases import step_durations

__all__ = [
    "BATCH",
    "LIMIT_SHARE",
    "SIGNIFICANT",
    "Settling",
    "mser_truncation",
    "settling_of",
]

BATCH = 5  # steps per batch of MSER-5
SIGNIFICANT = 4.0  # standard errors between the transient's batches and the rest: see t_score
MIN_BATCHES = 2  # batches needed on each side of the cut (per replication) for a t_score
# A cut this close to the end of the allowed half (half the run) counts as "at the limit": the
# series still trends there, so its end lies beyond what the run shows.
LIMIT_SHARE = 0.4


@dataclass(frozen=True)
class Settling:
    """Where a run's transient ended, from its step durations.

    ``steps``: the MSER-5 cut, steps from the start (median over replications);
    ``at_limit``: the cut lies at the end of what MSER may cut (``LIMIT_SHARE`` of the run or
    later) in most replications: the run is too short to show the transient's end;
    ``shift``: the relative difference of the mean step time after the run's warm-up from the
    mean after the cut (> 0: the warm-up left slower steps in, so throughput reads low).
    """

    steps: int
    at_limit: bool
    shift: float
    # how many standard errors the batches between the warm-up and the cut lie from those after
    # it (pooled over replications; 0 with too few batches on either side): noise alone gives
    # a few (MSER picks its cut where the rest looks quiet), a real transient far more
    t_score: float = 0.0

    def biased(self, warmup: int, tolerance: float) -> bool:
        """Whether the run's warm-up of ``warmup`` steps left more than ``tolerance`` (relative)
        of a real transient (:data:`SIGNIFICANT` standard errors) in its mean step time."""
        return self.steps > warmup and abs(self.shift) > tolerance and self.t_score > SIGNIFICANT


def mser_truncation(durations: Sequence[float] | np.ndarray, batch: int = BATCH) -> int:
    """The MSER-``batch`` cut of a series of step durations, in steps from its start (a
    multiple of ``batch``; 0 for a series of fewer than two batches)."""
    return _mser_cut(_batch_means(np.asarray(durations, dtype=float), batch)) * batch


def _mser_cut(z: np.ndarray) -> int:
    """The MSER cut of batch means ``z``, in batches from the start."""
    m = len(z)
    if m < 2:
        return 0
    # var(z[d:]) / (m - d) for d = 0 .. m // 2, from suffix sums (one pass, no loop in Python)
    count = np.arange(m, 0, -1, dtype=float)  # m - d
    suffix = np.cumsum(z[::-1])[::-1]
    suffix_sq = np.cumsum((z * z)[::-1])[::-1]
    mean = suffix / count
    variance = np.maximum(suffix_sq / count - mean * mean, 0.0)
    score = (variance / count)[: m // 2 + 1]
    return int(np.argmin(score))


def settling_of(step_ends: Sequence[np.ndarray], warmup: int) -> Settling:
    """The :class:`Settling` of a run's replications, from each one's ``(workers, steps)`` step
    end times (s) and the run's warm-up (steps)."""
    cuts: list[int] = []
    after_warmup: list[float] = []
    after_cut: list[float] = []
    transient: list[np.ndarray] = []  # per replication, its batches between warm-up and cut
    settled: list[np.ndarray] = []  # ... and after the cut
    steps = 0
    for ends in step_ends:
        durations = step_durations(np.asarray(ends, dtype=float)).mean(axis=0)
        steps = len(durations)
        z = _batch_means(durations, BATCH)
        cut = _mser_cut(z) * BATCH
        cuts.append(cut)
        after_warmup.append(float(durations[min(warmup, steps - 1) :].mean()))
        after_cut.append(float(durations[min(cut, steps - 1) :].mean()))
        first = -(-warmup // BATCH)  # the first batch wholly after the warm-up
        if cut // BATCH - first >= MIN_BATCHES and len(z) - cut // BATCH >= MIN_BATCHES:
            transient.append(z[first : cut // BATCH])
            settled.append(z[cut // BATCH :])
    if not cuts:
        return Settling(0, False, 0.0)
    at_limit = sum(cut >= LIMIT_SHARE * steps for cut in cuts) > len(cuts) / 2
    reference = float(np.mean(after_cut))
    shift = float(np.mean(after_warmup)) / reference - 1.0 if reference > 0 else 0.0
    return Settling(int(np.median(cuts)), at_limit, shift, _t_score(transient, settled))


def _batch_means(values: np.ndarray, batch: int) -> np.ndarray:
    """Means of consecutive batches of ``batch`` values (an incomplete last one left out)."""
    m = len(values) // batch
    means: np.ndarray = values[: m * batch].reshape(m, batch).mean(axis=1)
    return means


def _t_score(transient: list[np.ndarray], settled: list[np.ndarray]) -> float:
    """|mean(transient) - mean(settled)| in standard errors (Welch), each replication's batches
    taken relative to its own settled mean (seeds may settle at different levels)."""
    if not transient:
        return 0.0
    a = np.concatenate([t - s.mean() for t, s in zip(transient, settled, strict=True)])
    b = np.concatenate([s - s.mean() for s in settled])
    error = float(np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))) if len(a) > 1 else 0.0
    gap = abs(float(a.mean()))
    if error <= 0.0:
        return float("inf") if gap > 0.0 else 0.0
    return gap / error
