"""simcore.parallel: independent simulations on several processes give the results of one.

Every test here starts a pool of processes (forked: tens of milliseconds); the module is marked
slow in conftest's list only if it grows beyond that.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pickle
import time

import pytest

import simcore.sim.api as api_module
from simcore.errors import ConfigError, ResourceError
from simcore.parallel import Interrupted, current_jobs, jobs, run_tasks, usable_cores
from simcore.sim import PrecisionRule, SimulationConfig, simulate, simulate_many
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace


def _pid_and_square(x: int, progress: object) -> tuple[int, int, int]:
    if callable(progress):
        progress(1, 1)
    return os.getpid(), x * x, current_jobs()


def _fails_on_two(x: int, progress: object) -> int:
    if x == 2:
        raise ConfigError(f"item {x}: refused")
    return x


def _quick_or_stuck(x: int, progress: object) -> int:
    if x == 0:
        return 0
    time.sleep(60)  # never finishes within the test: the pool is terminated first
    return x


def _dies_on_one(x: int, progress: object) -> int:
    if x == 1:
        os._exit(3)  # as the out-of-memory killer would end it
    return x


def _reports_in_steps(x: int, progress: object) -> int:
    assert callable(progress)
    for done in range(1, x + 1):
        progress(done, x)
    return x


def test_the_pool_runs_the_tasks_elsewhere_and_keeps_their_order() -> None:
    items = list(range(7))
    with jobs(2):
        out = run_tasks(_pid_and_square, items, planned=[1] * 7, progress=lambda d, t: None)
    assert [square for _, square, _ in out] == [x * x for x in items]
    assert {pid for pid, _, _ in out} - {os.getpid()}  # ran in the pool's processes
    assert os.getpid() not in {pid for pid, _, _ in out}
    assert all(inner == 1 for _, _, inner in out)  # no pool inside a pool's process
    assert multiprocessing.active_children() == []  # the pool is gone


def test_one_job_or_too_little_work_runs_here() -> None:
    with jobs(1):
        out = run_tasks(_pid_and_square, [1, 2, 3])
    assert {pid for pid, _, _ in out} == {os.getpid()}
    with jobs(2):
        out = run_tasks(_pid_and_square, [1, 2, 3], cost=10, min_cost=11)
    assert {pid for pid, _, _ in out} == {os.getpid()}
    assert current_jobs() == 1  # the library's default, restored after each block


def test_progress_sums_the_tasks_never_goes_back_and_ends_at_the_total() -> None:
    for count in (1, 2):
        seen: list[tuple[int, int]] = []
        with jobs(count):
            run_tasks(
                _reports_in_steps,
                [3, 5, 2],
                planned=[1, 1, 1],  # under-planned: totals grow as the tasks report theirs
                progress=lambda d, t, seen=seen: seen.append((d, t)),  # type: ignore[misc]
            )
        dones = [d for d, _ in seen]
        assert dones == sorted(dones)
        assert all(d <= t for d, t in seen)
        assert seen[-1] == (10, 10)


def test_an_error_in_a_pool_process_reaches_the_caller() -> None:
    with jobs(2), pytest.raises(ConfigError, match="item 2: refused"):
        run_tasks(_fails_on_two, [1, 2, 3, 4])
    assert multiprocessing.active_children() == []


def test_a_pool_process_that_dies_is_an_error_not_a_hang() -> None:
    with jobs(2), pytest.raises(ResourceError, match=r"ended abruptly.*--jobs 1"):
        run_tasks(_dies_on_one, [0, 1, 2])
    assert multiprocessing.active_children() == []


def test_ctrl_c_stops_the_pool_and_keeps_what_finished() -> None:
    def interrupt(done: int, total: int) -> None:
        if done >= 1:  # task 0 returned (neither reports progress; task 1 never returns)
            raise KeyboardInterrupt

    with jobs(2), pytest.raises(Interrupted) as stop:
        run_tasks(_quick_or_stuck, [0, 1], progress=interrupt, planned=[1, 1])
    assert isinstance(stop.value, KeyboardInterrupt)
    assert stop.value.finished == {0: 0}
    assert multiprocessing.active_children() == []  # the stuck task's process was stopped


def test_jobs_must_be_a_positive_integer() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="jobs: must be an integer >= 1"), jobs(bad):  # type: ignore[arg-type]
            pass
    assert usable_cores() >= 1


def test_a_trace_survives_pickling_with_its_read_only_views() -> None:
    trace = load_trace("resnet50-b32")
    assert trace.op_index  # a cached view, not picklable itself
    copy = pickle.loads(pickle.dumps(trace))
    assert copy == trace and copy.op_index == trace.op_index
    assert copy.metadata.host == trace.metadata.host
    with pytest.raises(TypeError):
        copy.metadata.host["x"] = 1  # type: ignore[index]  # still read-only


@pytest.fixture
def pool_for_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small runs use the pool too (the threshold keeps them in-process otherwise)."""
    monkeypatch.setattr(api_module, "PARALLEL_MIN_OPS", 0)
    monkeypatch.setattr("simcore.sim.precision.PARALLEL_MIN_OPS", 0)


def _result_numbers(result: object) -> tuple[object, ...]:
    r = result
    return (
        r.examples_per_s,  # type: ignore[attr-defined]
        r.replication_examples_per_s,  # type: ignore[attr-defined]
        r.mean_step_s,  # type: ignore[attr-defined]
        r.simulated_time_s,  # type: ignore[attr-defined]
        r.simulated_ops,  # type: ignore[attr-defined]
        r.stopping,  # type: ignore[attr-defined]
        tuple(dataclasses.astuple(link) for link in r.links),  # type: ignore[attr-defined]
    )


@pytest.mark.usefixtures("pool_for_any_work")
def test_replications_on_a_pool_are_bit_identical_to_one_process() -> None:
    trace = synthetic_trace([0.01, 0.02], [0.02, 0.01], [2_000_000, 500_000])
    config = SimulationConfig(
        workers=3,
        bandwidth_bps=1e9,
        steps=40,
        warmup_steps=8,
        mode="async",
        replications=4,
        flow_weight_cv=0.3,
        host_cpu_cores=2,
        comm_cpu_s_per_byte=2e-9,
    )
    with jobs(1):
        alone = simulate(trace, config)
    with jobs(2):
        pooled = simulate(trace, config)
    assert _result_numbers(pooled) == _result_numbers(alone)
    assert len(alone.replication_examples_per_s) == 4


@pytest.mark.usefixtures("pool_for_any_work")
def test_a_sweep_on_a_pool_is_the_sweep_in_one_process() -> None:
    trace = synthetic_trace([0.01, 0.02], [0.02, 0.01], [2_000_000, 500_000])
    base = SimulationConfig(workers=1, bandwidth_bps=1e9, mode="sync")
    configs = [dataclasses.replace(base, workers=w) for w in (1, 2, 3, 5)]
    rule = PrecisionRule(target=0.02, max_steps=200, pilot_steps=20)
    seen: list[tuple[int, int]] = []
    with jobs(1):
        alone = simulate_many(trace, configs, rule)
    with jobs(2):
        pooled = simulate_many(trace, configs, rule, progress=lambda d, t: seen.append((d, t)))
    assert [_result_numbers(r) for r in pooled] == [_result_numbers(r) for r in alone]
    assert [r.config.workers for r in pooled] == [1, 2, 3, 5]
    spent = sum(r.stopping.worker_steps for r in pooled if r.stopping is not None)
    assert seen[-1] == (spent, spent)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_sweep_checks_every_config_before_anything_runs() -> None:
    trace = synthetic_trace([0.01], [0.02], [1_000_000])
    good = SimulationConfig(workers=2, bandwidth_bps=1e9, steps=20, warmup_steps=2)
    bad = dataclasses.replace(good, worker_types=(0, 1))  # names a second trace that is absent
    with jobs(2), pytest.raises(ConfigError):
        simulate_many(trace, [good, bad], None)


def test_the_cli_gives_the_same_sweep_on_one_process_or_two(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from simcore.cli.main import main

    monkeypatch.setattr(api_module, "PARALLEL_MIN_OPS", 0)
    monkeypatch.setattr("simcore.sim.precision.PARALLEL_MIN_OPS", 0)
    argv = ["simulate", "cnn-b32", "--workers", "1-3", "--max-steps", "120", "--csv"]
    tables = []
    for count in ("1", "2"):
        assert main([*argv, "--jobs", count]) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1] and tables[0].count("\n") == 4


@pytest.mark.parametrize("bad", ["0", "-2", "two", "1.5"])
def test_jobs_option_refuses_what_is_not_a_count(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from simcore.cli.main import main

    with pytest.raises(SystemExit) as stop:
        main(["simulate", "cnn-b32", "--jobs", bad])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"--jobs: {bad!r} is not a number of processes" in err


@pytest.mark.usefixtures("pool_for_any_work")
def test_every_kind_of_config_and_result_crosses_the_pool() -> None:
    """What a pool's process receives (configs, traces) and returns (results, with their configs
    and timelines) must pickle for every feature a scenario uses: two servers with a placement
    (a read-only mapping), hybrid sharing, HTTP/2 streams, heterogeneous worker types, hosts of
    several devices, co-located workers with transfer CPU cost, a timeline."""
    fast = synthetic_trace([0.01, 0.02], [0.02, 0.01], [2_000_000, 500_000], batch_size=8)
    slow = synthetic_trace([0.02, 0.04], [0.04, 0.02], [2_000_000, 500_000], batch_size=8)
    base = SimulationConfig(workers=2, bandwidth_bps=1e9, steps=30, warmup_steps=5, mode="sync")
    configs = [
        dataclasses.replace(base, servers=2, placement={"l0": 0, "l1": 1}),
        dataclasses.replace(base, sharing="hybrid"),
        dataclasses.replace(base, scheduler="http2", window_bytes=65536),
        dataclasses.replace(base, worker_types=(0, 1)),
        dataclasses.replace(base, devices_per_host=4, intra_bandwidth_bps=100e9),
        dataclasses.replace(
            base, colocated_workers=2, host_cpu_cores=2, comm_cpu_s_per_byte=1e-9, mode="async"
        ),
        dataclasses.replace(base, timeline=True, arch="allreduce"),
    ]
    for config in configs:
        assert pickle.loads(pickle.dumps(config)) == config
    with jobs(1):
        alone = simulate_many([fast, slow], configs, None)
    with jobs(2):
        pooled = simulate_many([fast, slow], configs, None)
    assert [_result_numbers(r) for r in pooled] == [_result_numbers(r) for r in alone]
    assert [r.config for r in pooled] == configs
    timeline = pooled[-1].timeline
    assert timeline is not None and len(timeline.start_s) == len(alone[-1].timeline.start_s)
