"""Pieces of the distributed runner that need no processes: config, placement, task, records."""

from __future__ import annotations

import math

import pytest
import torch

from profilers.distributed import (
    DistributedRunError,
    RunConfig,
    RunResult,
    Span,
    StepRecord,
    build_setup,
    place_layers,
    synthetic_batch,
)
from simcore.errors import ConfigError, SgdsimError
from simcore.sim.dag import assign_servers
from simcore.trace.build import synthetic_trace

TINY = "test_distributed_runner:TinyNet"


def test_error_class_is_an_sgdsim_error() -> None:
    assert issubclass(DistributedRunError, SgdsimError)


@pytest.mark.parametrize(
    ("kwargs", "culprit"),
    [
        ({"architecture": "ring"}, "arch"),
        ({"overlap": "some"}, "overlap"),
        ({"workers": 0}, "workers"),
        ({"architecture": "allreduce", "servers": 1}, "servers"),
        ({"architecture": "ps-sync", "servers": 0}, "servers"),
        ({"steps": 5, "warmup": 5}, "warmup"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_config_names_the_bad_option(kwargs: dict[str, object], culprit: str) -> None:
    with pytest.raises(ConfigError, match=culprit):
        RunConfig("mlp", **kwargs)  # type: ignore[arg-type]


def test_ranks_are_servers_then_workers() -> None:
    config = RunConfig("mlp", workers=3, servers=2)
    assert config.world_size == 5
    assert [config.role(r) for r in range(5)] == [
        ("server", 0),
        ("server", 1),
        ("worker", 0),
        ("worker", 1),
        ("worker", 2),
    ]


def test_greedy_placement_matches_the_simulator() -> None:
    setup = build_setup(RunConfig("cnn"))
    nbytes = [layer.nbytes for layer in setup.param_layers]
    trace = synthetic_trace([0.0] * len(nbytes), [0.0] * len(nbytes), nbytes)
    expected = assign_servers(trace, 2, "greedy")
    placement = place_layers(setup.param_layers, 2)
    indices = range(len(nbytes))
    assert [placement[i] for i in indices] == [expected[f"l{i}"] for i in indices]
    assert set(placement.values()) == {0, 1}


def test_batches_depend_only_on_seed_worker_and_step() -> None:
    setup = build_setup(RunConfig(TINY))
    a = synthetic_batch(setup, 0, 1, 2, 8)
    b = synthetic_batch(setup, 0, 1, 2, 8)
    c = synthetic_batch(setup, 0, 0, 2, 8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])
    assert a[0].shape == (8, 16) and int(a[1].max()) < 4


def test_teacher_labels_are_learnable_and_varied() -> None:
    setup = build_setup(RunConfig(TINY))
    _, labels = synthetic_batch(setup, 0, 0, 0, 256)
    counts = torch.bincount(labels, minlength=4)
    assert int((counts > 0).sum()) >= 3  # not one constant class


def test_layers_are_the_fx_layers_with_parameters() -> None:
    setup = build_setup(RunConfig(TINY))
    assert [layer.name for layer in setup.param_layers] == ["fc1", "fc2", "fc3"]
    assert setup.param_layers[0].param_names == ("fc1.weight", "fc1.bias")
    assert setup.layers[-1].name == "loss"


def _result(ends: dict[int, list[float]], warmup: int, batch: int = 4) -> RunResult:
    config = RunConfig(
        "mlp", workers=len(ends), steps=len(ends[0]), warmup=warmup, batch_size=batch
    )
    steps = tuple(
        StepRecord(w, n, (times[n - 1] if n else 0.0), t, 1.0)
        for w, times in ends.items()
        for n, t in enumerate(times)
    )
    spans = tuple(
        Span(w + 1, w, n, "fc", "forward", 0.0, 0.01 * (w + 1))
        for w in ends
        for n in range(len(ends[0]))
    )
    return RunResult(config, "mlp", {"fc": 4}, spans, steps)


def test_throughput_is_the_simulators_estimator() -> None:
    # worker 0: steps of 0.1 s, worker 1: 0.2 s; after 1 warm-up step, 3 measured steps each
    result = _result({0: [0.1, 0.2, 0.3, 0.4], 1: [0.2, 0.4, 0.6, 0.8]}, warmup=1)
    expected = 3 * 4 / 0.3 + 3 * 4 / 0.6
    assert math.isclose(result.examples_per_s, expected)
    assert len(result.step_times_s()) == 6


def test_slowdown_compares_compute_with_a_solo_run() -> None:
    run = _result({0: [0.1, 0.2], 1: [0.1, 0.2]}, warmup=0)
    solo = _result({0: [0.1, 0.2]}, warmup=0)
    report = run.slowdown_vs(solo)
    assert math.isclose(report.ratio, 1.5)  # mean of 0.01 and 0.02 over solo's 0.01
    assert math.isclose(report.per_layer["fc"], 1.5)


def test_time_before_a_layer_that_nothing_explains_is_charged_to_it() -> None:
    from profilers.distributed.to_trace import _charge_gaps
    from simcore.trace.build import synthetic_trace

    ops = synthetic_trace([0.01, 0.02], [0.02, 0.03], [100, 200]).ops
    timed = {  # op id -> (start, duration), seconds from the step's start
        "pull:l0": (0.0, 1.0),
        "pull:l1": (1.0, 0.5),  # arrives at 1.5
        "forward:l0": (1.2, 0.5),  # could start at 1.0 (its pull): 0.2 s unexplained
        "forward:l1": (1.8, 0.4),  # could start at 1.7 (forward l0 done, pull l1 at 1.5)
        "backward:l1": (2.2, 0.3),  # started right away: nothing to charge
        "backward:l0": (2.6, 0.2),  # 0.1 s after backward l1
    }
    _charge_gaps(ops, timed)
    assert timed["forward:l0"] == pytest.approx((1.0, 0.7))
    assert timed["forward:l1"] == pytest.approx((1.7, 0.5))
    assert timed["backward:l1"] == pytest.approx((2.2, 0.3))
    assert timed["backward:l0"] == pytest.approx((2.5, 0.3))
    assert timed["pull:l0"] == (0.0, 1.0)  # transfers are left as measured


def test_the_time_since_the_worker_became_free_is_charged_to_the_first_op() -> None:
    # A run without transfers: the first forward has no timed input, so without ``ready_s``
    # nothing before it is charged; with it, the time since the previous step ended is.
    from profilers.distributed.to_trace import _charge_gaps
    from simcore.trace.build import synthetic_trace

    ops = synthetic_trace([0.01, 0.02], [0.02, 0.03], [100, 200]).ops
    timed = {"forward:l0": (0.3, 0.5), "forward:l1": (0.8, 0.4)}
    unknown = dict(timed)
    _charge_gaps(ops, unknown)
    assert unknown["forward:l0"] == (0.3, 0.5)
    _charge_gaps(ops, timed, ready_s=-0.2)  # the previous step ended 0.2 s before this began
    assert timed["forward:l0"] == pytest.approx((-0.2, 1.0))
    assert timed["forward:l1"] == pytest.approx((0.8, 0.4))  # started as soon as it could


@pytest.mark.parametrize(
    ("cores", "arch", "workers", "local", "expected"),
    [
        (2, "ps-sync", 2, None, 1),  # three ranks on two cores: one thread each, not two
        (2, "allreduce", 1, None, 2),  # a rank alone gets its cores
        (8, "allreduce", 2, None, 4),
        (8, "ps-async", 3, "2", 4),  # under torchrun: the ranks on this node
        (8, "ps-async", 3, "junk", 2),  # unreadable: every rank of the run counts
        (1, "allreduce", 4, None, 1),  # at least one
    ],
)
def test_default_threads_share_the_ranks_cores_out_among_the_ranks_here(
    monkeypatch: pytest.MonkeyPatch,
    cores: int,
    arch: str,
    workers: int,
    local: str | None,
    expected: int,
) -> None:
    import os

    from profilers.distributed.launch import default_threads

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)))
    if local is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local)
    servers = 0 if arch == "allreduce" else 1
    config = RunConfig("cnn", architecture=arch, workers=workers, servers=servers)
    assert default_threads(config) == expected
