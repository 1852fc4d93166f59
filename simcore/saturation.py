"""The saturation point of a throughput curve: one definition for the scenarios, the advisor and
the CLI, so that "saturates at W = 10" means the same thing everywhere.

A curve saturates at the fewest workers whose throughput reaches :data:`SATURATION_SHARE` (95%)
of the best throughput on the curve. Measured against the best rather than against the previous
point, the rule does not depend on how densely W was sampled, and a simulated curve's noise
(a few percent at large W) moves it little. When only the largest W tried reaches that share, the
curve is still climbing and there is no saturation point in range.
"""

from __future__ import annotations

from collections.abc import Sequence

SATURATION_SHARE = 0.95


def saturation_point(
    workers: Sequence[int], examples_per_s: Sequence[float], share: float = SATURATION_SHARE
) -> int | None:
    """The fewest workers reaching ``share`` of the curve's best throughput.

    ``workers`` must increase. Returns None when only the last point reaches it (still climbing)
    or the curve has fewer than two points.
    """
    if len(workers) != len(examples_per_s):
        raise ValueError(f"{len(workers)} worker counts but {len(examples_per_s)} throughputs")
    if len(workers) < 2:
        return None
    best = max(examples_per_s)
    first = next(w for w, x in zip(workers, examples_per_s, strict=True) if x >= share * best)
    return None if first == workers[-1] else first
