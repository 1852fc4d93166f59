"""simcore.sim.state_shares: the share of one flow's goodput a transfer got in each state of the
link, fitted to hand-made transfers whose shares are known."""

from __future__ import annotations

import pytest

from simcore.errors import ConfigError
from simcore.sim.occupancy import PULL, PUSH, TransferInterval
from simcore.sim.state_shares import state_shares


def _pipelined_pair(steps: int) -> list[TransferInterval]:
    """Two workers in anti-phase, transfers of 1 s: worker 1 pulls while worker 0 pushes."""
    out = []
    for k in range(steps):
        for worker, offset in ((0, 0.0), (1, 1.0)):
            start = offset + 2 * k
            out.append(TransferInterval(worker, PULL, start, start + 1))
            out.append(TransferInterval(worker, PUSH, start + 1, start + 2))
    return out


def _lock_step_pair(steps: int) -> list[TransferInterval]:
    """Two workers in lock-step: both pull for 2 s, then both push for 2 s."""
    out = []
    for k in range(steps):
        for worker in (0, 1):
            out.append(TransferInterval(worker, PULL, 4 * k, 4 * k + 2))
            out.append(TransferInterval(worker, PUSH, 4 * k + 2, 4 * k + 4))
    return out


def test_anti_phase_transfers_each_get_the_whole_link() -> None:
    # Transfers of 1 s alone that took 1 s beside one the other way: a share of 1 each.
    fit = state_shares([(_pipelined_pair(6), 1.0, 11.0)], alone_s=1.0)
    assert fit.shares == pytest.approx({("pull", 1, 1): 1.0, ("push", 1, 1): 1.0})
    assert fit.residual_cv == pytest.approx(0.0, abs=1e-12)


def test_transfers_sharing_a_direction_each_get_half() -> None:
    # Two transfers together on a direction for 2 s: half each; the window keeps the first
    # step's transfers out of the fit (they still count in the states of the others).
    runs = [(_pipelined_pair(6), 1.0, 11.0), (_lock_step_pair(6), 4.0, 24.0)]
    fit = state_shares(runs, alone_s=1.0)
    assert fit.shares[("pull", 2, 0)] == pytest.approx(0.5)
    assert fit.shares[("push", 0, 2)] == pytest.approx(0.5)
    assert fit.seconds[("pull", 2, 0)] == pytest.approx(2 * 2.0 * 5)  # 2 workers, 5 steps


def test_a_transfer_that_took_longer_than_its_state_allows_shows_in_the_residual() -> None:
    intervals = _pipelined_pair(6)
    slow = intervals[4]  # worker 0's second pull: 1 s of bytes in 1.5 s beside the push
    intervals[4] = TransferInterval(slow.worker, slow.direction, slow.start_s, slow.end_s + 0.5)
    fit = state_shares([(intervals, 0.0, 12.0)], alone_s=1.0)
    assert fit.residual_cv > 0.05


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ConfigError, match="must take > 0 s"):
        state_shares([(_pipelined_pair(3), 0.0, 6.0)], alone_s=0.0)
    with pytest.raises(ConfigError, match="no transfer inside the windows"):
        state_shares([(_pipelined_pair(3), 100.0, 101.0)], alone_s=1.0)
