"""Typed simulation results, the throughput estimator and its confidence interval.

Throughput estimator (per run, steps/s)::

    X = sum over workers w of (N - k) / (e_w[N-1] - e_w[k-1]),   e_w[-1] = 0,

with k warm-up steps, N steps and ``e_w[n]`` the end of worker w's step n (the barrier time in
Sync-SGD). Examples/s weighs each worker's term by its batch size.

95% confidence interval:

- ``replications >= 2``: independent replications (seeds from ``SeedSequence.spawn``); the point
  estimate is the mean of the replications' X and the half-width ``t(0.975, R-1) * s / sqrt(R)``;
- ``replications == 1``: batch means; the measured steps of every worker are cut into ``b``
  batches at the same step indices, ``X_j`` is the estimator on batch j, and the interval is the
  point estimate ``+- t(0.975, b-1) * sd(X_j) / sqrt(b)``.

Spread over seeds: with several replications, ``replication_steps_per_s`` and
``replication_examples_per_s`` hold each one's X, and ``steps_spread``/``examples_spread`` their
minimum and maximum. Async-SGD workers can settle in different phase patterns from seed to seed
(``simcore.sim.phases``), so the range says more than one run's batch means; ``phases`` says how
each replication's workers lined up, and each worker's step-time quantiles are kept.

Link statistics are time averages over the window from the moment every worker has finished its
warm-up to the moment the first worker finishes its last step (all workers active), averaged over
replications.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from simcore.sim.config import SimulationConfig
from simcore.sim.engine import RunRecord, SimulationError
from simcore.sim.phases import (
    LOCK_STEP,
    ReplicationPhases,
    replication_phases,
    step_time_quantiles,
)
from simcore.sim.settling import Settling, settling_of

# Two-sided 95% Student t quantiles t(0.975, df), df = 1..30.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table, then expansion)."""
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    # Cornish-Fisher expansion in 1/df: within 1e-4 of the exact value beyond df = 30.
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its 95% confidence interval (None when it cannot be computed)."""

    value: float
    ci_low: float | None
    ci_high: float | None
    method: str  # "replications" or "batch-means"
    samples: int  # replications or batches behind the interval

    @property
    def half_width(self) -> float | None:
        return None if self.ci_high is None else self.ci_high - self.value

    @classmethod
    def from_samples(cls, value: float, samples: Sequence[float], method: str) -> Estimate:
        """``value`` with the t interval of ``samples``; none from < 2 or from unbounded ones."""
        n = len(samples)
        if n < 2 or not all(math.isfinite(x) for x in samples):
            return cls(value, None, None, method, n)
        sd = float(np.std(samples, ddof=1))
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        return cls(value, value - half, value + half, method, n)


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """Post-warm-up step times of one worker (pooled over replications), in seconds."""

    worker: int
    trace: int  # index of the worker's trace
    steps: int
    mean_step_s: float
    std_step_s: float
    min_step_s: float
    max_step_s: float
    p05_step_s: float = math.nan  # quantiles of the step times (pooled over replications)
    median_step_s: float = math.nan
    p95_step_s: float = math.nan

    @property
    def steps_per_s(self) -> float:
        return 1.0 / self.mean_step_s if self.mean_step_s > 0 else math.inf


@dataclass(frozen=True, slots=True)
class LinkStats:
    """Time averages of one link over the steady-state window (mean over replications)."""

    name: str
    server: int
    capacity_bps: float
    utilization: float  # mean total rate / capacity (per worker link for dedicated policies)
    mean_active_flows: float  # time-weighted mean number of active workers
    mean_rate_bps: float
    peak_rate_bps: float  # largest total rate seen (whole run)
    peak_flow_rate_bps: float  # largest rate of one flow seen (whole run)
    transferred_bytes: float  # bytes completed in the window
    window_s: float


@dataclass(frozen=True, slots=True)
class TimelineRecord:
    """One op (or HTTP/2 chunk) a worker ran: where, when (s) and how many bytes."""

    worker: int
    step: int
    resource: str  # downlink, worker, uplink, ps, latency ("[i]" suffix: server i)
    op: str
    kind: str
    start_s: float
    end_s: float
    nbytes: float


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of one worker: start and end (s) and the profiled step it sampled."""

    worker: int
    step: int
    start_s: float
    end_s: float
    profile_step: int


@dataclass(frozen=True)
class Timeline:
    """Every op of one replication, stored as columns; iterate for :class:`TimelineRecord`."""

    worker: np.ndarray
    step: np.ndarray
    op: np.ndarray  # index into op_ids / op_kinds
    slot: np.ndarray  # index into slot_names
    start_s: np.ndarray
    end_s: np.ndarray
    nbytes: np.ndarray
    op_ids: tuple[str, ...]
    op_kinds: tuple[str, ...]
    slot_names: tuple[str, ...]
    steps: tuple[StepRecord, ...]

    def __len__(self) -> int:
        return len(self.start_s)

    def __iter__(self) -> Iterator[TimelineRecord]:
        for i in range(len(self)):
            op = int(self.op[i])
            yield TimelineRecord(
                int(self.worker[i]),
                int(self.step[i]),
                self.slot_names[int(self.slot[i])],
                self.op_ids[op],
                self.op_kinds[op],
                float(self.start_s[i]),
                float(self.end_s[i]),
                float(self.nbytes[i]),
            )


@dataclass(frozen=True, slots=True)
class Stopping:
    """How a run sized by the stopping rule (:mod:`simcore.sim.precision`) ended.

    ``reason``: ``reached`` (the CI is within ``target``), ``cap`` (the run reached
    ``max_steps`` short of it), ``stalled`` (a longer run did not narrow the CI), ``seeds``
    (the replications differ far more than their own noise explains: they settled in different
    phase patterns), ``rounds`` (the runs allowed were spent) or ``unsettled`` (the last run's
    warm-up still held part of the start-up transient, :mod:`simcore.sim.settling`, and the
    rule could run no longer). Precisions are relative half-widths
    of the 95% CI of examples/s (``inf``: no interval).
    """

    reason: str
    target: float
    precision: float  # reached by the result's run
    steps: int  # steps per worker of the result's run, warm-up included
    max_steps: int  # the cap
    rounds: int  # runs made, the pilot included
    worker_steps: int  # simulated by all runs (every replication, both runs of a hybrid)
    precisions: tuple[float, ...]  # of each run, in order
    seeds: int = 1  # replications of each run: with >= 2 the CI comes from the seeds
    warmup: int = 0  # steps per worker the result's run left out
    # reason "unsettled": the step where that run's start-up transient ended (MSER-5) and how far
    # its mean step time after the warm-up is from the mean after that step (relative)
    transient: tuple[int, float] | None = None

    @property
    def reached(self) -> bool:
        return self.reason == "reached"

    @property
    def capped(self) -> bool:
        """True when the cap stopped the rule short of its target."""
        return self.reason == "cap"


@dataclass(frozen=True)
class SimulationResult:
    """What :func:`simcore.sim.simulate` returns.

    ``steps_per_s`` and ``examples_per_s`` are the job throughput (all workers); ``replication_*``
    the per-replication point estimates. ``components`` holds the ``fcfs`` and ``ps`` results
    behind a ``hybrid`` prediction; the hybrid's ``workers``, ``links`` and ``timeline`` are those
    of its ``ps`` run.
    """

    config: SimulationConfig
    steps_per_s: Estimate
    examples_per_s: Estimate
    replication_steps_per_s: tuple[float, ...]
    workers: tuple[WorkerStats, ...]
    links: tuple[LinkStats, ...]
    simulated_ops: int
    simulated_time_s: float  # end of the last replication's run
    wall_time_s: float
    timeline: Timeline | None = None
    components: tuple[SimulationResult, ...] = ()
    replication_examples_per_s: tuple[float, ...] = ()
    phases: tuple[ReplicationPhases, ...] = ()  # per replication, how the workers lined up
    stopping: Stopping | None = None  # how the stopping rule sized the run; None: fixed steps
    # per replication, the standard error of its examples/s from its own batch means (inf when
    # its batches cannot give one): what seeds would differ by if they differed only by noise
    replication_standard_errors: tuple[float, ...] = ()
    # where the run's start-up transient ended (MSER-5 over its step durations); None: not
    # computed (a result built by hand)
    settling: Settling | None = None

    @property
    def steps_spread(self) -> tuple[float, float]:
        """(min, max) over replications of their steps/s."""
        return min(self.replication_steps_per_s), max(self.replication_steps_per_s)

    @property
    def examples_spread(self) -> tuple[float, float]:
        """(min, max) over replications of their examples/s."""
        values = self.replication_examples_per_s or (self.examples_per_s.value,)
        return min(values), max(values)

    @property
    def ran_in_lockstep(self) -> bool:
        """Async-SGD with two workers or more whose every replication ran in lock-step while a
        link carried bytes: identical workers that started together and stayed so, where real
        ones drift apart and can pipeline (lock-step costs nothing where nothing is sent)."""
        c = self.config
        if c.mode != "async" or c.workers < 2 or not self.phases:
            return False
        if any(rep.label != LOCK_STEP for rep in self.phases):
            return False
        return any(link.transferred_bytes > 0 for link in self.links)

    @property
    def mean_step_s(self) -> float:
        """Mean post-warm-up step time over workers (s)."""
        return float(np.mean([w.mean_step_s for w in self.workers]))

    @property
    def ops_per_wall_s(self) -> float:
        return self.simulated_ops / self.wall_time_s if self.wall_time_s > 0 else math.inf


def run_throughput(record: RunRecord, batch_sizes: Sequence[int]) -> tuple[float, float]:
    """The estimator (steps/s, examples/s) of one run over all measured steps.

    Raises
    ------
    SimulationError
        If a worker's measured steps took (next to) no simulated time, so that its throughput is
        unbounded. ``simulate`` rejects traces whose steps can be that short before it starts, so
        only ``jitter_cv`` zeroing every duration of every measured step leads here.
    """
    count = record.boundaries[-1] - record.boundaries[0]
    spans = record.ends[:, -1] - record.ends[:, 0]
    short = np.flatnonzero(~_long_enough(count, spans))
    if short.size:
        w = int(short[0])
        raise SimulationError(
            f"worker {w}: its measured steps ({count}) took {spans[w]:.3g} s of simulated time, "
            "so its throughput is unbounded (did jitter_cv zero every duration?)"
        )
    per_worker = count / spans
    return float(per_worker.sum()), float((per_worker * np.asarray(batch_sizes)).sum())


def batch_throughputs(
    record: RunRecord, batch_sizes: Sequence[int]
) -> tuple[list[float], list[float]]:
    """The estimator on each batch of steps (steps/s, examples/s).

    A batch that took (next to) no simulated time has an unbounded estimate, ``math.inf``; the
    interval then cannot be computed (see :meth:`Estimate.from_samples`).
    """
    steps, examples = [], []
    sizes = np.asarray(batch_sizes, dtype=float)
    for j in range(len(record.boundaries) - 1):
        count = record.boundaries[j + 1] - record.boundaries[j]
        spans = record.ends[:, j + 1] - record.ends[:, j]
        if not _long_enough(count, spans).all():
            steps.append(math.inf)
            examples.append(math.inf)
            continue
        per_worker = count / spans
        steps.append(float(per_worker.sum()))
        examples.append(float((per_worker * sizes).sum()))
    return steps, examples


def _standard_error(samples: Sequence[float]) -> float:
    """``sd / sqrt(n)`` of batch estimates; ``inf`` from fewer than 2 or unbounded ones."""
    if len(samples) < 2 or not all(math.isfinite(x) for x in samples):
        return math.inf
    return float(np.std(samples, ddof=1)) / math.sqrt(len(samples))


def _long_enough(count: int, spans: np.ndarray) -> np.ndarray:
    """Per worker, whether ``count / span`` is a finite number (bool array)."""
    return spans > count / np.finfo(float).max


def summarize(
    config: SimulationConfig,
    records: Sequence[RunRecord],
    batch_sizes: Sequence[int],
    worker_trace: Sequence[int],
    timeline: Timeline | None,
    wall_time_s: float,
) -> SimulationResult:
    """Build the result of ``records`` (one per replication)."""
    runs = [run_throughput(r, batch_sizes) for r in records]
    if len(records) >= 2:
        steps = Estimate.from_samples(
            float(np.mean([x for x, _ in runs])), [x for x, _ in runs], "replications"
        )
        examples = Estimate.from_samples(
            float(np.mean([e for _, e in runs])), [e for _, e in runs], "replications"
        )
    else:
        bx, be = batch_throughputs(records[0], batch_sizes)
        steps = Estimate.from_samples(runs[0][0], bx, "batch-means")
        examples = Estimate.from_samples(runs[0][1], be, "batch-means")
    return SimulationResult(
        config=config,
        steps_per_s=steps,
        examples_per_s=examples,
        replication_steps_per_s=tuple(x for x, _ in runs),
        replication_examples_per_s=tuple(e for _, e in runs),
        replication_standard_errors=tuple(
            _standard_error(batch_throughputs(r, batch_sizes)[1]) for r in records
        ),
        phases=tuple(
            replication_phases(r.step_ends, config.warmup_steps, i, runs[i][0])
            for i, r in enumerate(records)
        ),
        workers=_worker_stats(records, worker_trace, config.warmup_steps),
        settling=settling_of([r.step_ends for r in records], config.warmup_steps),
        links=_link_stats(records, config.workers),
        simulated_ops=sum(r.ops_done for r in records),
        simulated_time_s=records[-1].end_s,
        wall_time_s=wall_time_s,
        timeline=timeline,
    )


def _worker_stats(
    records: Sequence[RunRecord], worker_trace: Sequence[int], warmup: int
) -> tuple[WorkerStats, ...]:
    out = []
    for w, trace in enumerate(worker_trace):
        n, mean, m2 = 0.0, 0.0, 0.0
        for r in records:  # Chan et al.'s parallel merge of Welford moments
            nb, mb, m2b = r.step_moments[w, 0], r.step_moments[w, 1], r.step_moments[w, 2]
            if nb == 0:
                continue
            delta = mb - mean
            total = n + nb
            mean += delta * nb / total
            m2 += m2b + delta * delta * n * nb / total
            n = total
        std = math.sqrt(m2 / (n - 1)) if n > 1 else 0.0
        p05, median, p95 = step_time_quantiles(
            [r.step_ends[w] for r in records], warmup, (0.05, 0.5, 0.95)
        )
        out.append(
            WorkerStats(
                worker=w,
                trace=trace,
                steps=int(n),
                mean_step_s=mean,
                std_step_s=std,
                min_step_s=float(min(r.step_min[w] for r in records)),
                max_step_s=float(max(r.step_moments[w, 3] for r in records)),
                p05_step_s=p05,
                median_step_s=median,
                p95_step_s=p95,
            )
        )
    return tuple(out)


def _link_stats(records: Sequence[RunRecord], workers: int) -> tuple[LinkStats, ...]:
    out = []
    for i, (first, _) in enumerate(records[0].links):
        util, flows, rate, nbytes, window = [], [], [], [], []
        peak = peak_flow = 0.0
        for r in records:
            a, b = r.links[i]
            span = r.window_s[1] - r.window_s[0]
            lanes = workers if r.dedicated else 1
            mean_rate = (b.area_rate_bits - a.area_rate_bits) / span if span > 0 else 0.0
            rate.append(mean_rate)
            util.append(mean_rate / (b.capacity_bps * lanes))
            flows.append((b.area_flows - a.area_flows) / span if span > 0 else 0.0)
            nbytes.append((b.bits_done - a.bits_done) / 8.0)
            window.append(span)
            peak = max(peak, b.peak_rate_bps)
            peak_flow = max(peak_flow, b.peak_flow_rate_bps)
        out.append(
            LinkStats(
                name=first.name,
                server=first.channel,
                capacity_bps=first.capacity_bps,
                utilization=float(np.mean(util)),
                mean_active_flows=float(np.mean(flows)),
                mean_rate_bps=float(np.mean(rate)),
                peak_rate_bps=peak,
                peak_flow_rate_bps=peak_flow,
                transferred_bytes=float(np.mean(nbytes)),
                window_s=float(np.mean(window)),
            )
        )
    return tuple(out)


def _jsonable(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def result_to_dict(result: SimulationResult) -> dict[str, object]:
    """A JSON-ready dict of ``result`` (without the timeline; see ``timeline_to_dict``)."""
    config = {
        f.name: (dict(v) if isinstance(v := getattr(result.config, f.name), Mapping) else v)
        for f in fields(result.config)
    }
    config["sharing"] = result.config.policy_name
    config["replications"] = result.config.replication_count
    out = {
        "config": config,
        "steps_per_s": asdict(result.steps_per_s),
        "examples_per_s": asdict(result.examples_per_s),
        "replication_steps_per_s": list(result.replication_steps_per_s),
        "replication_examples_per_s": list(result.replication_examples_per_s),
        "spread": {
            "steps_per_s": list(result.steps_spread),
            "examples_per_s": list(result.examples_spread),
        },
        "phases": [
            {
                "label": p.label,
                **asdict(p),
                "pairs": [{"label": q.label, **asdict(q)} for q in p.pairs],
            }
            for p in result.phases
        ],
        "mean_step_s": result.mean_step_s,
        "workers": [asdict(w) for w in result.workers],
        "links": [asdict(link) for link in result.links],
        "simulated_ops": result.simulated_ops,
        "simulated_time_s": result.simulated_time_s,
        "wall_time_s": result.wall_time_s,
        "components": [result_to_dict(c) for c in result.components],
        "stopping": None if result.stopping is None else asdict(result.stopping),
    }
    return _jsonable(out)  # type: ignore[return-value]


def timeline_to_dict(timeline: Timeline) -> dict[str, object]:
    """The timeline as columns and rows (``sgdsim.timeline`` v1): one row per op or chunk."""
    columns = ["worker", "step", "resource", "op", "kind", "start_s", "end_s", "nbytes"]
    rows = [
        [r.worker, r.step, r.resource, r.op, r.kind, r.start_s, r.end_s, r.nbytes] for r in timeline
    ]
    return {
        "schema": "sgdsim.timeline",
        "schema_version": 1,
        "columns": columns,
        "rows": rows,
        "steps": [asdict(s) for s in timeline.steps],
    }
