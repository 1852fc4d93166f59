"""The share of a link a transfer got in each state of the link, fitted to observed transfers.

A state is a transfer's direction and how many pulls and pushes were in flight on a parameter
server's link (itself included). If every transfer moved the bytes one transfer alone moves in
``alone_s``, at a share of one flow's goodput that depends only on the state it was in at each
moment, then each transfer's time spent in each state, weighted by those shares, adds up to
``alone_s``: one linear equation per transfer, solved by least squares over all of them. The
fitted shares set beside a sharing model's (equal shares, the interference between the two
directions) say whether the model gets the rates right; the transfers' scatter around the fit
(``residual_cv``) says how much each transfer's luck varied beyond its state.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from simcore.errors import ConfigError
from simcore.sim.occupancy import TransferInterval, link_stretches

__all__ = ["State", "StateShares", "state_shares"]

#: A transfer's direction (PULL or PUSH) and how many pulls and pushes were in flight.
State = tuple[str, int, int]


@dataclass(frozen=True)
class StateShares:
    """The fitted share of one flow's goodput in each state (``shares``), the seconds of
    transfers observed in it (``seconds``: a share seen for little time is pinned down
    loosely), and the cv of each transfer's fitted work over one transfer alone."""

    shares: Mapping[State, float]
    seconds: Mapping[State, float]
    residual_cv: float


def state_shares(
    runs: Sequence[tuple[Sequence[TransferInterval], float, float]], alone_s: float
) -> StateShares:
    """Fit the shares to the transfers of ``runs``: each run's transfers with the window
    (start, end, s) whose transfers are fitted; the others still count in the states.
    ConfigError when ``alone_s`` is not positive or no transfer lies inside a window."""
    if not alone_s > 0:
        raise ConfigError(f"state shares: one transfer alone must take > 0 s, got {alone_s}")
    rows: list[dict[State, float]] = []
    for intervals, start, end in runs:
        stretches = link_stretches(intervals)  # every transfer's edges bound a stretch
        starts = [a for a, *_ in stretches]
        for transfer in intervals:
            if transfer.start_s < start or transfer.end_s > end:
                continue
            row: dict[State, float] = {}
            for a, b, pulls, pushes in stretches[bisect.bisect_left(starts, transfer.start_s) :]:
                if b > transfer.end_s:
                    break
                key = (transfer.direction, pulls, pushes)
                row[key] = row.get(key, 0.0) + (b - a)
            if row:
                rows.append(row)
    if not rows:
        raise ConfigError("state shares: no transfer inside the windows")
    states = sorted({key for row in rows for key in row})
    matrix = np.array([[row.get(key, 0.0) for key in states] for row in rows])
    fitted, *_ = np.linalg.lstsq(matrix, np.full(len(rows), alone_s), rcond=None)
    work = matrix @ fitted / alone_s
    return StateShares(
        {key: float(v) for key, v in zip(states, fitted, strict=True)},
        {key: float(v) for key, v in zip(states, matrix.sum(axis=0), strict=True)},
        float(np.std(work) / np.mean(work)),
    )
