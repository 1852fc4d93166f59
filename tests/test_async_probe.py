"""The bare Async-SGD probe: its step from a trace, its rate and phases from step times, its
file form, its arguments, and real runs."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from profilers.distributed.async_probe import (
    MIN_STEPS,
    PROBE_S,
    AsyncProbe,
    ProbeStep,
    async_probe_text,
    measure_async_probe,
    probe_from_dict,
    probe_step,
    probe_steps,
    probe_to_dict,
    probe_trace,
)
from profilers.distributed.testbed import available_cores
from simcore.errors import ConfigError
from simcore.sim.occupancy import PULL, PUSH, TransferInterval
from simcore.trace.build import synthetic_trace


def staggered(workers: int, step_s: float = 0.5, steps: int = 4) -> AsyncProbe:
    """Workers with steps of ``step_s``, worker k starting k/W of a step after worker 0."""
    times = tuple(
        tuple(
            (n * step_s + k * step_s / workers, (n + 1) * step_s + k * step_s / workers)
            for n in range(steps)
        )
        for k in range(workers)
    )
    return AsyncProbe(workers, (4000,), (0.01,), (0.02,), True, 1e8, times)


def test_a_bare_step_keeps_the_layers_with_parameters_and_all_the_computation() -> None:
    # l0 (400 B), l1 without parameters, l2 (800 B): l1's forward and backward go to l0, the
    # last layer with parameters before it.
    trace = synthetic_trace(
        [[0.01, 0.002, 0.03], [0.03, 0.004, 0.05]],
        [[0.1, 0.02, 0.3], [0.3, 0.04, 0.5]],
        [400, 0, 800],
    )
    step = probe_step(trace)
    assert step.layer_nbytes == (400, 800)
    assert step.forward_s == pytest.approx((0.02 + 0.003, 0.04))
    assert step.backward_s == pytest.approx((0.2 + 0.03, 0.4))
    assert step.compute_s == pytest.approx(0.023 + 0.04 + 0.23 + 0.4)


def test_a_leading_layer_without_parameters_goes_to_the_first_with_some() -> None:
    trace = synthetic_trace([0.005, 0.01], [0.007, 0.02], [0, 400])
    step = probe_step(trace)
    assert step == ProbeStep((400,), (pytest.approx(0.015),), (pytest.approx(0.027),))
    with pytest.raises(ConfigError, match="no layer has parameters"):
        probe_step(synthetic_trace([0.01], [0.01], [0]))


def test_the_simulators_bare_step_is_a_chain_of_the_layers() -> None:
    step = ProbeStep((400, 800), (0.01, 0.02), (0.03, 0.04))
    trace = probe_trace(step, layerwise=True)
    assert [layer.param_nbytes for layer in trace.layers] == [400, 800]
    assert probe_step(trace) == step  # the bare step of the bare step is itself


def test_a_probe_round_trips_and_a_damaged_one_is_named() -> None:
    probe = staggered(3)
    assert probe_from_dict(json.loads(json.dumps(probe_to_dict(probe)))) == probe
    data = probe_to_dict(probe)
    del data["step_times"]
    with pytest.raises(ConfigError, match=r"p\.json: probes\[0\]: missing field 'step_times'"):
        probe_from_dict(data, "p.json", "probes[0]")
    data = probe_to_dict(probe)
    data["step_times"] = data["step_times"][:2]  # three workers, two workers' steps
    with pytest.raises(ConfigError, match=r"async_probe: needs workers >= 1"):
        probe_from_dict(data)


def test_a_probes_transfers_round_trip_and_give_the_links_occupancy() -> None:
    # Two workers in anti-phase over steps of 1 s: each pulls for 0.5 s while the other pushes.
    transfers = tuple(
        interval
        for worker in (0, 1)
        for n in range(4)
        for interval in (
            TransferInterval(worker, PULL, n + worker / 2, n + worker / 2 + 0.5),
            TransferInterval(worker, PUSH, n + worker / 2 + 0.5, n + worker / 2 + 1.0),
        )
    )
    times = tuple(tuple((n + w / 2, n + w / 2 + 1.0) for n in range(4)) for w in (0, 1))
    probe = AsyncProbe(2, (4000,), (0.0,), (0.0,), False, 1e8, times, True, transfers)
    assert probe_from_dict(json.loads(json.dumps(probe_to_dict(probe)))) == probe
    assert probe.transfer_s() == pytest.approx(0.5)
    assert probe.occupancy().both_directions == pytest.approx(1.0)  # within the window 0.5-4
    data = probe_to_dict(probe)
    data["transfers"][1][0][1] = -1.0  # a pull that ends before it starts
    with pytest.raises(ConfigError, match=r"p\.json: async_probe: interval ends"):
        probe_from_dict(data, "p.json")
    with pytest.raises(ConfigError, match="no transfers kept"):
        staggered(2).occupancy()  # saved before probes kept their transfers


def test_the_rate_counts_the_steps_that_end_while_every_worker_is_timed() -> None:
    # Two workers, steps of 0.5 s, the second 0.25 s late: the window is [0.25, 2.0], in which
    # worker 0's four steps and worker 1's first three end: 7 steps in 1.75 s.
    probe = staggered(2)
    assert probe.window() == (0.25, 2.0)
    assert probe.steps_per_s() == pytest.approx(7 / 1.75)
    assert probe.steps_per_s() == pytest.approx(2 / 0.5)  # each worker's own rate, summed


def test_phases_place_each_start_in_worker_0s_step() -> None:
    assert staggered(2).phases() == pytest.approx((0.5,) * 4)
    assert staggered(2).phase_quartiles() == pytest.approx((0.5, 0.5, 0.5))
    # Four workers a quarter of a step apart.
    four = staggered(4)
    assert sorted(set(round(p, 9) for p in four.phases())) == [0.25, 0.5, 0.75]
    assert staggered(1).phases() == () and staggered(1).phase_quartiles() is None
    text = async_probe_text(staggered(2))
    assert "2 worker(s) 4 steps/s" in text and "phases 0.50 / 0.50 / 0.50" in text


def test_workers_that_never_overlap_have_no_rate() -> None:
    apart = AsyncProbe(
        2, (4000,), (0.0,), (0.0,), True, None, (((0.0, 1.0), (1.0, 2.0)), ((3.0, 4.0), (4.0, 5.0)))
    )
    with pytest.raises(ConfigError, match="do not overlap"):
        apart.steps_per_s()


def test_steps_last_about_the_probe_time() -> None:
    # 1 MB each way at 100 Mbit/s: 0.08 s, so a step of 0.02 s computation is 0.18 s alone;
    # four workers' bytes one way take 0.32 s a step.
    assert probe_steps([1_000_000], 0.02, 1e8, 1) == math.ceil(PROBE_S / 0.18)
    assert probe_steps([1_000_000], 0.02, 1e8, 4) == math.ceil(PROBE_S / 0.32)
    assert probe_steps([1_000_000], 10.0, 1e8, 1) == MIN_STEPS
    assert probe_steps([1_000_000], 0.0, None, 2) == 10 * MIN_STEPS  # loopback, no sleep


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"workers": 0}, "needs workers >= 1"),
        ({"layer_nbytes": [2]}, "layers of >= 4 bytes"),
        ({"forward_s": [0.1, 0.1]}, "2 forward and 1 backward times"),
        ({"backward_s": [-1.0]}, "time >= 0"),
    ],
)
def test_bad_arguments_fail_before_anything_starts(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "layer_nbytes": [4000],
        "forward_s": [0.0],
        "backward_s": [0.0],
        "layerwise": True,
        "workers": 2,
    } | kwargs
    with pytest.raises(ConfigError, match=match):
        measure_async_probe(**args)  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize("layerwise", [True, False])
def test_two_workers_on_loopback_time_every_step(layerwise: bool) -> None:
    probe = measure_async_probe(
        [40_000, 4_000],
        [0.002, 0.001],
        [0.002, 0.001],
        layerwise=layerwise,
        workers=2,
        steps=6,
        warmup=2,
    )
    assert probe.workers == 2 and probe.layerwise is layerwise and probe.link_rate_bps is None
    assert [len(steps) for steps in probe.step_times] == [6, 6]
    assert min(s for steps in probe.step_times for s, _ in steps) == 0.0  # from the first start
    for steps in probe.step_times:
        for (start, end), (next_start, _) in itertools.pairwise(steps):
            assert end - start >= 0.006  # every step sleeps its computation at least
            assert next_start >= end  # a worker's steps follow one another
    assert probe.steps_per_s() > 0
    # every step's pull and push, each worker's in order: a push leaves once its pull has
    # arrived and the step has computed, and the server sends the next pull after the push
    for worker in range(2):
        mine = [i for i in probe.transfers if i.worker == worker]
        assert [i.direction for i in mine] == ["pull", "push"] * 6
        for pull, push, next_pull in zip(mine[::2], mine[1::2], mine[2::2], strict=False):
            assert push.start_s >= pull.end_s
            assert next_pull.start_s >= push.end_s
    occupancy = probe.occupancy()
    assert occupancy.workers == 2 and occupancy.span_s > 0
    assert probe_from_dict(json.loads(json.dumps(probe_to_dict(probe)))) == probe


@pytest.mark.slow
def test_burning_workers_spend_their_computation_on_the_cpu() -> None:
    # Two workers burning 20 ms of CPU a step each: on one shared core (the testbed pins the
    # workers to the cores after the server's) a step takes at least 20 ms of wall time, and
    # the two together can use at most the cores they have.
    probe = measure_async_probe(
        [4_000], [0.01], [0.01], layerwise=True, workers=2, burn=True, steps=8, warmup=1
    )
    assert probe.burn and probe_from_dict(probe_to_dict(probe)) == probe
    worker_cores = max(len(available_cores()) - 1, 1)
    for steps in probe.step_times:
        assert all(end - start >= 0.02 for start, end in steps)
    assert probe.steps_per_s() * 0.02 <= worker_cores * 1.05  # CPU seconds per second


@pytest.mark.slow
def test_one_worker_on_a_shaped_link_moves_its_bytes_at_about_the_rate(root_only: None) -> None:
    # root_only: skipped without root, and no namespace may be left afterwards.
    # 1 MB each way at 100 Mbit/s: at least 0.16 s of transfers a step at the shaped rate (tbf
    # counts headers: a little more), plus 0.02 s asleep; a busy machine only makes it slower.
    probe = measure_async_probe(
        [1_000_000], [0.01], [0.01], layerwise=False, workers=1, link_rate_bps=100e6, steps=5
    )
    step_s = 1 / probe.steps_per_s()
    assert 0.18 < step_s < 4 * 0.18
