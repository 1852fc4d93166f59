"""The simulator's public entry points: one call from traces and a config to a result.

>>> from simcore.trace.build import synthetic_trace
>>> from simcore.sim import SimulationConfig, simulate
>>> trace = synthetic_trace([0.01], [0.02], [1_000_000])
>>> config = SimulationConfig(workers=2, bandwidth_bps=1e9, steps=20, warmup_steps=2)
>>> result = simulate(trace, config)
>>> round(result.steps_per_s.value, 3) > 0
True
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simcore.errors import ConfigError
from simcore.parallel import run_tasks
from simcore.sim.config import HYBRID, SimulationConfig, trace_of_worker, validate_for_traces
from simcore.sim.dag import CompiledDag, compile_trace
from simcore.sim.engine import Engine, ProgressCallback, RunRecord
from simcore.sim.results import Estimate, SimulationResult, StepRecord, Timeline, summarize
from simcore.sim.sharing import get_sharing_policy
from simcore.trace.model import Trace

__all__ = ["MIN_STEP_S", "SweepResult", "simulate", "sweep", "validate"]

#: The shortest step a simulation accepts (s). A step that can take no time (a profile of zero
#: durations without transfers) has unbounded throughput; one far below any profiler's resolution
#: makes the estimator overflow.
MIN_STEP_S = 1e-9

#: Simulated ops (worker-steps x ops per step) below which replications run one by one in this
#: process: a pool's start and shipping the DAGs cost ~0.05-0.1 s, ~20,000 ops' worth.
PARALLEL_MIN_OPS = 200_000


def _as_traces(trace: Trace | Sequence[Trace]) -> list[Trace]:
    traces = [trace] if isinstance(trace, Trace) else list(trace)
    for t in traces:
        if not isinstance(t, Trace):
            raise ConfigError(f"trace: expected a Trace, got {type(t).__name__}")
    return traces


def simulate(
    trace: Trace | Sequence[Trace],
    config: SimulationConfig,
    *,
    progress: ProgressCallback | None = None,
) -> SimulationResult:
    """Simulate ``config.workers`` workers training from ``trace`` and estimate throughput.

    Parameters
    ----------
    trace : the single-worker trace, or one trace per worker type (see ``config.worker_types``).
    config : what to simulate; validated against the traces before anything runs.
    progress : called as ``progress(done, total)`` with worker-steps simulated so far.

    Returns
    -------
    SimulationResult
        Throughput with a 95% CI, per-worker and per-link statistics, and the timeline when
        ``config.timeline`` is set.

    Raises
    ------
    ConfigError
        If the configuration does not fit the traces (names the parameter), or a step could take
        no time (see :func:`validate`); raised before anything is simulated.
    SimulationError
        If the run cannot finish or its throughput is unbounded (see SEMANTICS.md, "Estimates").
    """
    traces = _as_traces(trace)
    validate(traces, config)
    if config.policy_name == HYBRID:
        return _hybrid(traces, config, progress)
    return _run(traces, config, progress)


def validate(trace: Trace | Sequence[Trace], config: SimulationConfig) -> None:
    """Every check :func:`simulate` makes before it starts; nothing is simulated.

    Raises
    ------
    ConfigError
        If ``config`` does not fit the traces (names the parameter), or if a step could take
        less than :data:`MIN_STEP_S` (names the trace and the profiled step).
    """
    traces = _as_traces(trace)
    validate_for_traces(config, traces)
    _check_step_time(traces, config, *_compile(traces, config))


def _compile(
    traces: Sequence[Trace], config: SimulationConfig
) -> tuple[list[int], list[CompiledDag], list[int]]:
    """The traces the workers use, their compiled DAGs, and each worker's DAG index."""
    worker_trace = trace_of_worker(config, len(traces))
    used = sorted(set(worker_trace))
    dags = [compile_trace(traces[i], config) for i in used]
    return used, dags, [used.index(t) for t in worker_trace]


def _check_step_time(
    traces: Sequence[Trace],
    config: SimulationConfig,
    used: Sequence[int],
    dags: Sequence[CompiledDag],
    worker_dag: Sequence[int],
) -> None:
    """ConfigError if some worker's step could be shorter than MIN_STEP_S (see the constant)."""
    speeds = config.speed_factors or (1.0,) * config.workers
    for d, dag in enumerate(dags):
        fastest = max(s for s, wd in zip(speeds, worker_dag, strict=True) if wd == d)
        bounds = dag.step_lower_bounds_s(config.bandwidth_bps, fastest, config.jitter != "none")
        shortest = min(range(len(bounds)), key=bounds.__getitem__)
        if bounds[shortest] < MIN_STEP_S:
            where = "its shortest ops" if config.jitter != "none" else f"profiled step {shortest}"
            raise ConfigError(
                f"trace {traces[used[d]].source}: a simulated step can take "
                f"{bounds[shortest]:.3g} s ({where}: longest path of computation and transfers "
                f"at full bandwidth); steps must last at least {MIN_STEP_S:g} s, or throughput "
                "is unbounded: check the trace's durations and sizes"
            )


def _run(
    traces: list[Trace], config: SimulationConfig, progress: ProgressCallback | None
) -> SimulationResult:
    started = time.perf_counter()
    _, dags, worker_dag = _compile(traces, config)
    worker_trace = trace_of_worker(config, len(traces))
    seeds = np.random.SeedSequence(config.seed).spawn(config.replication_count)
    per_run = config.workers * config.steps
    # One replication's timeline is shown: the others need not keep theirs.
    runs = [
        _Replication(
            config if r == 0 else dataclasses.replace(config, timeline=False),
            dags,
            worker_dag,
            seed,
        )
        for r, seed in enumerate(seeds)
    ]
    records = run_tasks(
        _replicate,
        runs,
        planned=[per_run] * len(runs),
        progress=progress,
        cost=len(runs) * per_run * max(len(d.op_ids) for d in dags),
        min_cost=PARALLEL_MIN_OPS,
    )
    timeline = _timeline(records[0], dags) if config.timeline else None
    batch_sizes = [dags[d].batch_size for d in worker_dag]
    return summarize(
        config, records, batch_sizes, worker_trace, timeline, time.perf_counter() - started
    )


@dataclass(frozen=True)
class _Replication:
    """One replication of a run: what :func:`_replicate` needs, picklable for a pool."""

    config: SimulationConfig
    dags: Sequence[CompiledDag]
    worker_dag: Sequence[int]
    seed: np.random.SeedSequence


def _replicate(run: _Replication, progress: ProgressCallback | None) -> RunRecord:
    config = run.config
    engine = Engine(
        config,
        run.dags,
        run.worker_dag,
        get_sharing_policy(config.policy_name),
        run.seed,
        progress,
    )
    return engine.run()


def _timeline(record: RunRecord, dags: Sequence[CompiledDag]) -> Timeline:
    rec = record.recorder
    assert rec is not None
    return Timeline(
        worker=np.frombuffer(rec.worker, dtype=np.int32).copy(),
        step=np.frombuffer(rec.step, dtype=np.int32).copy(),
        op=np.frombuffer(rec.op, dtype=np.int32).copy(),
        slot=np.frombuffer(rec.slot, dtype=np.int32).copy(),
        start_s=np.frombuffer(rec.start, dtype=np.float64).copy(),
        end_s=np.frombuffer(rec.end, dtype=np.float64).copy(),
        nbytes=np.frombuffer(rec.bits, dtype=np.float64) / 8.0,
        op_ids=tuple(op for dag in dags for op in dag.op_ids),
        op_kinds=tuple(kind for dag in dags for kind in dag.kinds),
        slot_names=tuple(spec.label for dag in dags for spec in dag.slots),
        steps=tuple(StepRecord(*s) for s in record.step_records),
    )


def _hybrid(
    traces: list[Trace], config: SimulationConfig, progress: ProgressCallback | None
) -> SimulationResult:
    """TPDS'22 3.2.1: run ``fcfs`` and ``ps`` with the same seeds and average their throughputs.

    Progress counts the worker-steps of both runs, so it never goes back.
    """
    parts = tuple(
        _run(traces, dataclasses.replace(config, sharing=name), _part(progress, i, 2))
        for i, name in enumerate(("fcfs", "ps"))
    )
    fcfs, ps = parts

    def mean(a: Estimate, b: Estimate) -> Estimate:
        low = None if a.ci_low is None or b.ci_low is None else (a.ci_low + b.ci_low) / 2
        high = None if a.ci_high is None or b.ci_high is None else (a.ci_high + b.ci_high) / 2
        return Estimate((a.value + b.value) / 2, low, high, a.method, a.samples)

    return dataclasses.replace(
        ps,
        config=config,
        steps_per_s=mean(fcfs.steps_per_s, ps.steps_per_s),
        examples_per_s=mean(fcfs.examples_per_s, ps.examples_per_s),
        replication_steps_per_s=tuple(
            (a + b) / 2
            for a, b in zip(fcfs.replication_steps_per_s, ps.replication_steps_per_s, strict=True)
        ),
        replication_examples_per_s=tuple(
            (a + b) / 2
            for a, b in zip(
                fcfs.replication_examples_per_s, ps.replication_examples_per_s, strict=True
            )
        ),
        simulated_ops=fcfs.simulated_ops + ps.simulated_ops,
        wall_time_s=fcfs.wall_time_s + ps.wall_time_s,
        components=parts,
    )


def _part(progress: ProgressCallback | None, index: int, parts: int) -> ProgressCallback | None:
    """Progress of run ``index`` of ``parts`` equal runs, reported as progress of all of them."""
    if progress is None:
        return None
    report = progress

    def part(done: int, total: int) -> None:
        report(index * total + done, parts * total)

    return part


@dataclass(frozen=True)
class SweepResult:
    """Results of one config at several worker counts, in the order given."""

    points: tuple[SimulationResult, ...]

    @property
    def workers(self) -> tuple[int, ...]:
        return tuple(p.config.workers for p in self.points)

    @property
    def steps_per_s(self) -> tuple[float, ...]:
        return tuple(p.steps_per_s.value for p in self.points)


def sweep(
    trace: Trace | Sequence[Trace],
    config: SimulationConfig,
    workers: Sequence[int],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """``simulate`` at each worker count in ``workers``; every config is validated first.

    ``progress(done, total)`` counts finished worker counts.
    """
    if not workers:
        raise ConfigError("workers: the sweep needs at least one worker count")
    traces = _as_traces(trace)
    configs = [dataclasses.replace(config, workers=w) for w in workers]
    for c in configs:
        validate(traces, c)
    points = []
    for i, c in enumerate(configs):
        points.append(simulate(traces, c))
        if progress is not None:
            progress(i + 1, len(configs))
    return SweepResult(tuple(points))
