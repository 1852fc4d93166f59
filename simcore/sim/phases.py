"""How workers' steps line up: phase offsets between workers, per replication (pure).

Identical deterministic Async-SGD workers can settle in lock-step (they pull, compute and push
together) or in alternating, pipelined phases (one computes while the other uses the link),
depending on the seed, and the two give different throughputs (``SEMANTICS.md``, "Drift"). To let
a user see which happened, each replication's step boundaries are turned into phase offsets.

**Offset.** For two workers a and b, every post-warm-up step start ``s`` of b is placed in the
step of a that was running then: ``phi = (s - start_a) / (end_a - start_a)``, the fraction of a's
step that had passed, in [0, 1). Dividing by the step actually running (rather than taking the
offset modulo a's mean step time) keeps a steady phase steady when step times vary. Offsets are
circular: 0.97 is as close to lock-step as 0.03.

**Summary per pair.** The circular mean offset, the concentration ``R = |mean(exp(2 pi i phi))|``
(1: always the same offset; near 0: every offset equally often), the share of starts within
``LOCK_TOLERANCE`` of a step of 0, a histogram of phi in ``HISTOGRAM_BINS`` bins, and the median
distance to starting together, ``min(phi, 1 - phi)`` (0 in lock-step, 0.5 alternating).

**Label.** A pair whose offsets concentrate (``R >= LOCKED_CONCENTRATION``) around 0 (within
``LOCK_TOLERANCE``) is ``lock-step``; concentrated elsewhere, ``pipelined``; otherwise
``drifting`` (no fixed offset). A replication takes its pairs' label when they agree, else
``mixed``; with one worker, ``one worker``. In Sync-SGD every step starts at the barrier, so runs
are lock-step by construction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LOCK_TOLERANCE = 0.05  # fraction of a step: starts this close to a neighbour's are "together"
LOCKED_CONCENTRATION = 0.8  # resultant length above which the offset counts as fixed
HISTOGRAM_BINS = 10

LOCK_STEP = "lock-step"
PIPELINED = "pipelined"
DRIFTING = "drifting"
MIXED = "mixed"
ONE_WORKER = "one worker"


@dataclass(frozen=True, slots=True)
class PairPhase:
    """Phase offsets of worker ``second``'s step starts within worker ``first``'s steps."""

    first: int
    second: int
    offsets: int  # step starts measured
    mean_offset: float  # circular mean, fraction of a step in [0, 1)
    concentration: float  # resultant length R in [0, 1]
    lockstep_share: float  # share of starts within LOCK_TOLERANCE of a step of 0
    histogram: tuple[int, ...]  # counts of offsets in HISTOGRAM_BINS equal bins of [0, 1)
    # The median over offsets of min(phi, 1 - phi), the distance to starting together: 0 in
    # lock-step, 0.5 alternating, about 0.25 when every offset is as likely (0 without offsets).
    # Unlike the circular mean it says how far apart drifting workers mostly were.
    median_distance: float = 0.0

    @property
    def label(self) -> str:
        if self.offsets == 0 or self.concentration < LOCKED_CONCENTRATION:
            return DRIFTING
        distance = min(self.mean_offset, 1.0 - self.mean_offset)
        return LOCK_STEP if distance < LOCK_TOLERANCE else PIPELINED


@dataclass(frozen=True, slots=True)
class ReplicationPhases:
    """How one replication's workers lined up (consecutive pairs 0-1, 1-2, ...)."""

    replication: int
    steps_per_s: float
    pairs: tuple[PairPhase, ...]

    @property
    def label(self) -> str:
        labels = {pair.label for pair in self.pairs}
        if not labels:
            return ONE_WORKER
        return labels.pop() if len(labels) == 1 else MIXED

    @property
    def median_distance(self) -> float:
        """The pairs' mean :attr:`PairPhase.median_distance` (NaN with no offsets)."""
        measured = [pair.median_distance for pair in self.pairs if pair.offsets]
        return sum(measured) / len(measured) if measured else math.nan


def step_starts(ends: np.ndarray) -> np.ndarray:
    """Each step's start from the step ends ``e[n]`` (s): ``e[n-1]``, and 0 for the first."""
    return np.concatenate(([0.0], ends[:-1]))


def offsets(ends_a: np.ndarray, ends_b: np.ndarray, warmup: int) -> np.ndarray:
    """Phase offsets (fractions of a step, [0, 1)) of b's post-warm-up step starts in a's steps.

    Starts of b after a's last step ended, or inside a step of a that took no time, are left out.
    """
    return offsets_within(step_starts(ends_a), ends_a, step_starts(ends_b)[warmup:])


def offsets_within(starts_a: np.ndarray, ends_a: np.ndarray, starts_b: np.ndarray) -> np.ndarray:
    """Phase offsets of the times ``starts_b`` within the steps ``[starts_a[i], ends_a[i])``
    (ascending, not overlapping; gaps between them allowed), as :func:`offsets`: times in no
    step, or in a step that took no time, are left out."""
    index = np.searchsorted(starts_a, starts_b, side="right") - 1
    inside = (index >= 0) & (starts_b < ends_a[np.clip(index, 0, None)])
    index, starts_b = index[inside], starts_b[inside]
    length = ends_a[index] - starts_a[index]
    positive = length > 0
    phi = (starts_b[positive] - starts_a[index][positive]) / length[positive]
    wrapped: np.ndarray = np.mod(phi, 1.0)
    return wrapped


def pair_phase(first: int, second: int, phi: np.ndarray) -> PairPhase:
    """The summary of offsets ``phi`` (see the module docstring)."""
    if phi.size == 0:
        return PairPhase(first, second, 0, 0.0, 0.0, 0.0, (0,) * HISTOGRAM_BINS)
    angle = 2.0 * math.pi * phi
    mean_vector = complex(float(np.cos(angle).mean()), float(np.sin(angle).mean()))
    mean_offset = (math.atan2(mean_vector.imag, mean_vector.real) / (2.0 * math.pi)) % 1.0
    distance = np.minimum(phi, 1.0 - phi)
    counts, _ = np.histogram(phi, bins=HISTOGRAM_BINS, range=(0.0, 1.0))
    return PairPhase(
        first=first,
        second=second,
        offsets=int(phi.size),
        mean_offset=float(mean_offset),
        concentration=min(1.0, abs(mean_vector)),
        lockstep_share=float((distance < LOCK_TOLERANCE).mean()),
        histogram=tuple(int(c) for c in counts),
        median_distance=float(np.median(distance)),
    )


def replication_phases(
    step_ends: np.ndarray, warmup: int, replication: int, steps_per_s: float
) -> ReplicationPhases:
    """Phases of consecutive workers in one replication; ``step_ends`` is (workers, steps) s."""
    pairs = tuple(
        pair_phase(w, w + 1, offsets(step_ends[w], step_ends[w + 1], warmup))
        for w in range(step_ends.shape[0] - 1)
    )
    return ReplicationPhases(replication, steps_per_s, pairs)


def step_durations(step_ends: np.ndarray) -> np.ndarray:
    """Step times (s) from step end times along the last axis, the first step from 0."""
    return np.diff(step_ends, axis=-1, prepend=0.0)


def step_time_quantiles(
    step_ends: list[np.ndarray], warmup: int, quantiles: tuple[float, ...]
) -> tuple[float, ...]:
    """Quantiles (s) of one worker's post-warm-up step times, pooled over replications."""
    times = np.concatenate([step_durations(e)[warmup:] for e in step_ends])
    if times.size == 0:
        return tuple(math.nan for _ in quantiles)
    return tuple(float(q) for q in np.quantile(times, quantiles))
