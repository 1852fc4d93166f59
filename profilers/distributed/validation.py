"""Measured against predicted throughput: profile one worker, predict W workers, run them.

For one model and batch size (TPDS'22 section 4: profile a single worker, predict, measure):

1. **Profile.** A one-worker PS Async-SGD run of the runner gives a trace with measured compute
   and measured transfers (:func:`~profilers.distributed.to_trace.run_to_trace`). Without a given
   bandwidth, the link's effective bandwidth is taken from it: bytes moved over the time the
   connection was busy, both directions.
2. **Predict** W = 1..Wmax for each architecture with the simulator (:func:`simcore.sim.simulate`)
   twice, as if every worker had a host of its own and with all workers sharing this host's CPU
   (``colocated_workers = W``, ``host_cpu_cores`` = the cores here, ``worker_cpu_cores`` = the
   ranks' torch threads: processor sharing of the cores, SEMANTICS.md), and with the coarse model.
3. **Measure** each W ``repetitions`` times with the runner, and the co-location slowdown: the
   compute per step of the W-worker run over the solo run's.

The parameter servers run on the same host too; their updates and gloo's copying also take CPU,
which neither prediction charges to the workers' cores. On a busy machine the measured numbers
are noisy: accuracy must be judged on an idle one.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from profilers.distributed.config import Architecture, Overlap, RunConfig
from profilers.distributed.records import RunResult, SlowdownReport
from profilers.distributed.spawn import run_distributed
from profilers.distributed.to_trace import run_to_trace
from simcore.analytic.advisor import Candidate, analytic_examples_per_s
from simcore.analytic.params import worker_type_from_trace
from simcore.errors import ConfigError
from simcore.report.table import Column, Table
from simcore.sim import SimulationConfig, simulate
from simcore.trace.model import OpKind, Trace

__all__ = [
    "ValidationPoint",
    "ValidationReport",
    "colocation_slowdown",
    "effective_bandwidth_bps",
    "report_tables",
    "report_text",
    "validate",
]

SIM_STEPS = 300
SIM_WARMUP_STEPS = 30
_SIM_SHAPE = {  # architecture -> (simulator arch, mode)
    Architecture.PS_ASYNC: ("ps", "async"),
    Architecture.PS_SYNC: ("ps", "sync"),
    Architecture.ALLREDUCE: ("allreduce", "sync"),
}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ValidationPoint:
    """One architecture at one worker count: measured and predicted examples/s.

    ``measured`` has one value per repetition; ``slowdown`` is the mean over repetitions of the
    compute time per step relative to the solo profile (1.0 = no co-location effect).
    """

    architecture: str
    workers: int
    measured: tuple[float, ...]
    simulated: float
    simulated_shared_cpu: float
    coarse: float
    slowdown: float

    @property
    def measured_mean(self) -> float:
        return statistics.fmean(self.measured)

    @property
    def spread(self) -> float:
        """(max - min) / mean of the repetitions."""
        return (max(self.measured) - min(self.measured)) / self.measured_mean

    def error(self, predicted: float) -> float:
        """Relative error of a prediction against the measured mean (0.1 = 10% too high)."""
        return (predicted - self.measured_mean) / self.measured_mean


@dataclass(frozen=True)
class ValidationReport:
    """All points of one validation, the solo trace and the bandwidth the predictions used."""

    model_name: str
    batch_size: int
    bandwidth_bps: float
    host_cpu_cores: float
    threads: int
    trace: Trace
    points: tuple[ValidationPoint, ...]
    solo_examples_per_s: float  # the profiling run itself, measured
    solo_simulated: float  # the simulator replaying that run's own trace (W=1)

    def abs_errors(self, predictor: str) -> list[float]:
        """|error| of ``predictor`` (``simulated``, ``simulated_shared_cpu``, ``coarse``)."""
        return [abs(p.error(getattr(p, predictor))) for p in self.points]


def colocation_slowdown(
    config: RunConfig, workers: Sequence[int] = (2, 3, 4)
) -> tuple[RunResult, dict[int, SlowdownReport]]:
    """Compute per step of ``config`` run with each W in ``workers``, relative to W = 1.

    Returns the solo run and, per W, its :class:`SlowdownReport` (ratio and per-layer ratios).
    On one host, co-located ranks share the cores, so the ratio grows with W once W plus the
    servers exceed them; gloo's own copying and the servers' updates take CPU too.
    """
    solo = run_distributed(dataclasses.replace(config, workers=1))
    reports = {
        w: run_distributed(dataclasses.replace(config, workers=w)).slowdown_vs(solo)
        for w in workers
    }
    return solo, reports


def effective_bandwidth_bps(trace: Trace) -> float:
    """Bits moved by the trace's transfers over the time they kept their connection busy.

    Raises
    ------
    ConfigError : the trace has no measured transfers.
    """
    bits = busy = 0.0
    for step in trace.steps:
        for op, duration in zip(trace.ops, step.duration_s, strict=True):
            if op.kind in (OpKind.PULL, OpKind.PUSH) and duration is not None and op.nbytes:
                bits += 8.0 * op.nbytes
                busy += duration
    if busy <= 0:
        raise ConfigError(f"trace {trace.source}: no measured transfer times to fit a bandwidth")
    return bits / busy


def validate(
    model: str,
    *,
    batch_size: int = 32,
    workers_max: int = 4,
    architectures: Sequence[str] = ("ps-async", "ps-sync", "allreduce"),
    repetitions: int = 3,
    steps: int = 100,
    warmup: int = 10,
    overlap: str = "layerwise",
    bandwidth_bps: float | None = None,
    threads: int = 1,
    seed: int = 0,
    progress: Progress | None = None,
) -> ValidationReport:
    """Profile one worker, predict W = 1..``workers_max`` and measure them (see the module).

    Parameters
    ----------
    model : built-in name or ``package.module:factory``.
    batch_size : examples per worker and step.
    workers_max : largest W.
    architectures : any of ``ps-async``, ``ps-sync``, ``allreduce``.
    repetitions : real runs per point.
    steps, warmup : steps per worker in every real run, and those left out.
    overlap : ``layerwise`` or ``strict``, for the runs and the predictions alike.
    bandwidth_bps : link bandwidth for the predictions, bit/s; None: measured by the solo run.
    threads : torch threads per rank (also the simulator's ``worker_cpu_cores``).
    progress : called with a line of text as each run finishes.

    Raises
    ------
    ConfigError : a bad argument. DistributedRunError : a run failed.
    """
    if workers_max < 1 or repetitions < 1:
        raise ConfigError(
            f"workers_max and repetitions must be >= 1, got {workers_max}, {repetitions}"
        )
    say = progress or (lambda _line: None)
    base = RunConfig(
        model,
        batch_size=batch_size,
        steps=steps,
        warmup=warmup,
        overlap=Overlap(overlap),
        threads=threads,
        seed=seed,
    )
    solo = run_distributed(base)
    trace = run_to_trace(solo)
    bandwidth = bandwidth_bps or effective_bandwidth_bps(trace)
    say(f"solo profile: {solo.examples_per_s:.1f} examples/s, link {bandwidth / 1e9:.2f} Gbit/s")
    cores = float(
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    points = []
    for name in architectures:
        arch = Architecture(name)
        for workers in range(1, workers_max + 1):
            config = _run_config(base, arch, workers)
            runs = [run_distributed(config) for _ in range(repetitions)]
            point = _point(arch, workers, runs, solo, trace, bandwidth, cores, base)
            say(f"{name} W={workers}: measured {point.measured_mean:.1f} examples/s")
            points.append(point)
    # The profile against its own run: what the trace misses (gaps between ops) shows here,
    # apart from any effect of W.
    solo_sim = simulate(
        trace, _sim_config(Architecture.PS_ASYNC, 1, bandwidth, base)
    ).examples_per_s
    return ValidationReport(
        trace.metadata.model_name,
        batch_size,
        bandwidth,
        cores,
        threads,
        trace,
        tuple(points),
        solo.examples_per_s,
        solo_sim.value,
    )


def _run_config(base: RunConfig, arch: Architecture, workers: int) -> RunConfig:
    servers = 1 if arch.uses_servers else 0
    return dataclasses.replace(base, architecture=arch, workers=workers, servers=servers)


def _sim_config(
    arch: Architecture, workers: int, bandwidth: float, base: RunConfig
) -> SimulationConfig:
    """The simulator's view of a run: same architecture, overlap and W, every worker alone."""
    sim_arch, mode = _SIM_SHAPE[arch]
    return SimulationConfig(
        workers=workers,
        bandwidth_bps=bandwidth,
        arch=sim_arch,
        mode=mode,
        overlap="layerwise" if base.overlap is Overlap.LAYERWISE else "none",
        steps=SIM_STEPS,
        warmup_steps=SIM_WARMUP_STEPS,
    )


def _point(
    arch: Architecture,
    workers: int,
    runs: Sequence[RunResult],
    solo: RunResult,
    trace: Trace,
    bandwidth: float,
    cores: float,
    base: RunConfig,
) -> ValidationPoint:
    sim_arch, mode = _SIM_SHAPE[arch]
    common = _sim_config(arch, workers, bandwidth, base)
    shared = dataclasses.replace(
        common,
        colocated_workers=workers,
        host_cpu_cores=cores,
        worker_cpu_cores=float(base.threads or cores),
    )
    sharing = "allreduce" if sim_arch == "allreduce" else "ps"
    candidate = Candidate(sim_arch, mode, sharing, workers)
    coarse = analytic_examples_per_s(candidate, worker_type_from_trace(trace), bandwidth)
    return ValidationPoint(
        architecture=arch.value,
        workers=workers,
        measured=tuple(r.examples_per_s for r in runs),
        simulated=simulate(trace, common).examples_per_s.value,
        simulated_shared_cpu=simulate(trace, shared).examples_per_s.value,
        coarse=coarse,
        slowdown=statistics.fmean(r.slowdown_vs(solo).ratio for r in runs),
    )


# --- presenting a report -------------------------------------------------------------------------

PREDICTORS = (
    ("simulated", "simulator"),
    ("simulated_shared_cpu", "simulator, shared host CPU"),
    ("coarse", "coarse model"),
)
COLUMNS = (
    Column("workers", "W", "{:d}"),
    Column("measured", "measured", "{:.1f}"),
    Column("spread_percent", "spread%", "{:.0f}"),
    Column("simulated", "sim", "{:.1f}"),
    Column("simulated_error_percent", "err%", "{:+.1f}"),
    Column("simulated_shared_cpu", "sim+cpu", "{:.1f}"),
    Column("simulated_shared_cpu_error_percent", "err%", "{:+.1f}"),
    Column("coarse", "coarse", "{:.1f}"),
    Column("coarse_error_percent", "err%", "{:+.1f}"),
    Column("slowdown", "compute x", "{:.2f}"),
)


def report_tables(report: ValidationReport) -> list[Table]:
    """One table per architecture: examples/s measured (mean of the repetitions, spread =
    (max - min) / mean), each prediction with its error, and the co-location slowdown."""
    tables: dict[str, Table] = {}
    for p in report.points:
        table = tables.setdefault(p.architecture, Table(p.architecture, COLUMNS))
        errors = {f"{key}_error_percent": 100 * p.error(getattr(p, key)) for key, _ in PREDICTORS}
        table.add(
            workers=p.workers,
            measured=p.measured_mean,
            spread_percent=100 * p.spread,
            simulated=p.simulated,
            simulated_shared_cpu=p.simulated_shared_cpu,
            coarse=p.coarse,
            slowdown=p.slowdown,
            **errors,
        )
    return list(tables.values())


def report_text(report: ValidationReport) -> str:
    """The setup line, the tables and the mean and maximum absolute error of each predictor."""
    lines = [
        f"{report.model_name}, batch {report.batch_size}/worker; link "
        f"{report.bandwidth_bps / 1e9:.2f} Gbit/s; host {report.host_cpu_cores:g} cores, "
        f"{report.threads} torch thread(s) per rank; examples/s over all workers"
    ]
    solo_error = (report.solo_simulated - report.solo_examples_per_s) / report.solo_examples_per_s
    lines.append(
        f"solo profile run: {report.solo_examples_per_s:.1f} examples/s measured, "
        f"{report.solo_simulated:.1f} simulated from its own trace ({100 * solo_error:+.1f}%)"
    )
    for table in report_tables(report):
        lines += ["", table.text()]
    lines += ["", "absolute error over all points: mean / max"]
    for key, label in PREDICTORS:
        errors = report.abs_errors(key)
        lines.append(f"  {label}: {100 * statistics.fmean(errors):.1f}% / {100 * max(errors):.1f}%")
    return "\n".join(lines)
