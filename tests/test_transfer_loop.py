"""profilers.distributed.transfer_loop: Async-SGD's transfers without training, read back as
the link's occupancy and each worker's cycle."""

from __future__ import annotations

import pytest

from profilers.distributed.transfer_loop import TransferLoop, measure_transfer_loop, state_shares
from simcore.errors import ConfigError
from simcore.sim.occupancy import PULL, PUSH, TransferInterval


def _pipelined_pair(steps: int) -> TransferLoop:
    """Two workers in perfect anti-phase: transfers of 1 s, no busy time; worker 1 pulls
    while worker 0 pushes."""
    intervals = []
    for k in range(steps):
        for worker, offset in ((0, 0.0), (1, 1.0)):
            start = offset + 2 * k
            intervals.append(TransferInterval(worker, PULL, start, start + 1))
            intervals.append(TransferInterval(worker, PUSH, start + 1, start + 2))
    return TransferLoop(nbytes=1000, busy_s=0.0, steps=steps, intervals=tuple(intervals))


def test_the_cycle_is_the_time_between_a_workers_pull_ends() -> None:
    loop = _pipelined_pair(6)
    assert loop.workers == 2
    assert loop.cycle_s(warmup=2) == pytest.approx(2.0)
    assert loop.transfer_s(warmup=2) == pytest.approx(1.0)


def test_anti_phase_keeps_both_directions_busy_after_the_warmup() -> None:
    occupancy = _pipelined_pair(6).occupancy(warmup=1)
    assert occupancy.both_directions == pytest.approx(1.0)
    assert occupancy.all_pulling == occupancy.all_pushing == 0.0


def _lock_step_pair(steps: int) -> TransferLoop:
    """Two workers in lock-step: both pull for 2 s, then both push for 2 s."""
    intervals = []
    for k in range(steps):
        for worker in (0, 1):
            intervals.append(TransferInterval(worker, PULL, 4 * k, 4 * k + 2))
            intervals.append(TransferInterval(worker, PUSH, 4 * k + 2, 4 * k + 4))
    return TransferLoop(nbytes=1000, busy_s=0.0, steps=steps, intervals=tuple(intervals))


def test_each_state_gets_the_share_that_moved_one_transfers_bytes() -> None:
    # Transfers of 1 s alone. Anti-phase: every transfer alone on its direction beside one the
    # other way, at full rate. Lock-step: two transfers on a direction for 2 s, half each.
    piped = state_shares([_pipelined_pair(6)], alone_s=1.0, warmup=1)
    assert piped.shares == pytest.approx({("pull", 1, 1): 1.0, ("push", 1, 1): 1.0})
    assert piped.residual_cv == pytest.approx(0.0, abs=1e-12)
    both = state_shares([_pipelined_pair(6), _lock_step_pair(6)], alone_s=1.0, warmup=1)
    assert both.shares[("pull", 2, 0)] == pytest.approx(0.5)
    assert both.shares[("push", 0, 2)] == pytest.approx(0.5)
    assert both.seconds[("pull", 2, 0)] == pytest.approx(2 * 2.0 * 4)  # 2 workers, 4 steps
    with pytest.raises(ConfigError, match="must take > 0 s"):
        state_shares([_pipelined_pair(3)], alone_s=0.0, warmup=1)


def test_a_warmup_that_leaves_no_step_is_refused() -> None:
    loop = _pipelined_pair(3)
    with pytest.raises(ConfigError, match=r"warm-up 3 must be in 0\.\.2"):
        loop.occupancy(warmup=3)
    with pytest.raises(ConfigError, match="no step after 2 warm-up steps"):
        loop.cycle_s(warmup=2)  # one pull end left per worker: no gap between two


@pytest.mark.parametrize(
    ("workers", "steps", "nbytes", "busy_s"),
    [(0, 5, 1000, 0.0), (2, 1, 1000, 0.0), (2, 5, 2, 0.0), (2, 5, 1000, -1.0)],
)
def test_bad_arguments_are_refused_before_any_rank_starts(
    workers: int, steps: int, nbytes: int, busy_s: float
) -> None:
    with pytest.raises(ConfigError, match="transfer loop: needs workers >= 1"):
        measure_transfer_loop(workers, nbytes=nbytes, steps=steps, busy_s=busy_s)


@pytest.mark.slow
def test_a_loopback_loop_keeps_every_transfer_in_order() -> None:
    busy = 0.004
    loop = measure_transfer_loop(2, nbytes=200_000, steps=5, busy_s=busy, timeout_s=60.0)
    assert loop.workers == 2 and loop.nbytes == 200_000
    for worker in range(2):
        mine = [i for i in loop.intervals if i.worker == worker]
        pulls = [i for i in mine if i.direction == PULL]
        pushes = [i for i in mine if i.direction == PUSH]
        assert len(pulls) == len(pushes) == 5
        for k in range(5):
            # a push leaves after its pull has arrived and the worker spun busy_s
            assert pushes[k].start_s >= pulls[k].end_s + busy
            # the server sends the next pull when the push has arrived
            if k + 1 < 5:
                assert pulls[k + 1].start_s == pushes[k].end_s
    assert loop.cycle_s(warmup=1) > busy
