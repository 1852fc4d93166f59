"""Measured against predicted throughput: profile one worker, predict W workers, run them.

For one model and batch size (TPDS'22 section 4: profile a single worker, predict, measure):

0. **The testbed** (``link_rate_bps``, needs root): every rank in a network namespace of its own
   (:mod:`profilers.netns_cluster`), the parameter server's link (ring AllReduce: every worker's)
   shaped with ``tc`` to the given rate, so that two cores can reproduce network-bound training.
   First the link is measured (:mod:`profilers.link_sharing`): the goodput of one flow (the
   bandwidth to predict with) and how unevenly concurrent flows share it: the spread of the share
   ratios of two flows, started together or one half-way through the other, is the simulator's
   ``flow_weight_cv``. For ring AllReduce also a ring of two nodes all-reducing the model's
   layers with nothing else running (:mod:`profilers.distributed.ring_goodput`): what it took
   beyond its bytes at one flow's goodput, per message, is the ring predictions' fixed cost of
   each of its messages (gloo's segments of at most 1 MiB, at least two per rank); and rings
   of 3..W nodes, whose time beyond that cost gives the rate a ring of each W moves its bytes
   at (``Measurements.rings``, ``RingGoodput.bytes_bandwidth_bps``). For a
   parameter server also what its link carries with pulls and pushes in flight at once
   (:mod:`profilers.distributed.link_duplex`), how much each direction slows beside the
   other's transfers (:mod:`profilers.distributed.link_interference`, the simulator's
   ``duplex_interference``, used instead of ``duplex_bps``), and how the link shares W of the
   model's transfers started together over connections kept open, as training's are
   (:mod:`profilers.warm_sharing`; recorded and shown, used only when asked:
   ``flow_sharing="warm"``). Without the testbed
   every rank talks over loopback.
   With two or more cores the servers are pinned to the first core and the workers to the
   others (:class:`Testbed`), so that a server's CPU work does not slow the workers, as on a
   cluster where it has a machine of its own.
1. **Profile.** A one-worker PS Async-SGD run gives a trace with measured compute and measured
   transfers (:func:`~profilers.distributed.to_trace.run_to_trace`); ``profile_runs`` such
   runs (3), and as many of the computation alone, taken in turns, pool their steps
   (:func:`~profilers.distributed.to_trace.pooled_trace`), so that one run's luck does not
   carry into every prediction. On loopback the bandwidth
   is fitted to its transfers (bytes over the time each connection was busy). A one-worker
   ring-AllReduce run, which sends nothing, gives the computation alone
   (:func:`~profilers.distributed.to_trace.with_compute_of`): the transfers' CPU work slowed the
   first run's computation, and the simulator is given that work per byte instead
   (:mod:`profilers.distributed.comm_cpu` fits it to the first run).
2. **Predict** W = 1..Wmax for each architecture with the simulator (:func:`simcore.sim.simulate`)
   twice and with the coarse model. *simulator*: the workers share their cores
   (``colocated_workers = W``, ``host_cpu_cores``, ``worker_cpu_cores`` = torch threads per
   rank: processor sharing of the cores, SEMANTICS.md) but each has its own link
   (``shared_nic=False``), and concurrent transfers get the measured unequal shares. For a
   parameter server it replays the profile as it ran (each worker computes as the one worker
   did beside its own transfers), and each worker's communication threads take the CPU the
   one-worker runs used beyond that computation, on the cores the computations leave
   (:func:`simcore.trace.cpu.measured_comm_thread`: the trace carries the runs' CPU time per
   step, and ``sgdsim simulate`` charges it alike); for ring AllReduce, whose
   one-worker run sends nothing, the computation alone with the transfers' CPU work put on
   the cores beside it: per byte, what the one-worker run's transfers cost its computation
   or what the ring of two's ranks spent alone, the larger
   (:class:`~profilers.distributed.comm_cpu.RingCpuWork`), pipelined with each all-reduce's messages
   (``ring_cpu_placement``; :meth:`Predictor.replayed_trace` says why). *ideal*: the paper's
   replay of the profiled step as it ran, every worker on a host of its own, equal shares.
3. **Measure** each W ``repetitions`` times with the runner, in rounds of one run of every
   point (the later profile runs between them), and the co-location slowdown: the compute per
   step of the W-worker run over the solo run's.

The transfers' CPU work is fitted at the testbed's one rate; on the 2-core VM it grew less than
in proportion to the rate (see profilers/distributed/README.md). On a busy machine the measured
numbers are noisy: accuracy must be judged on an idle one.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from profilers import host_load
from profilers.distributed.comm_cpu import CommCpuFit, RingCpuWork, compute_s_per_step, fit_comm_cpu
from profilers.distributed.config import Architecture, Overlap, RunConfig
from profilers.distributed.link_duplex import duplex_text, measure_duplex
from profilers.distributed.link_interference import (
    interference_report_text,
    measure_interference,
    measured_interference,
)
from profilers.distributed.link_profile import (
    effective_bandwidth_bps,
    measured_network_profile,
    measured_ring_cpu_work,
    with_transfer_cpu,
    with_transfer_latency,
)
from profilers.distributed.measurements import MeasuredPoint, Measurements
from profilers.distributed.noise_floor import (
    NOISE_Z,
    NoiseFloor,
    beyond_noise,
    noise_floor,
    relative_standard_error,
)
from profilers.distributed.records import RunResult, SlowdownReport
from profilers.distributed.ring_goodput import RingGoodput as MeasuredRing
from profilers.distributed.ring_goodput import measure_ring_goodput, ring_goodput_text
from profilers.distributed.spawn import run_distributed
from profilers.distributed.testbed import Testbed, available_cores
from profilers.distributed.to_trace import pooled_trace, with_compute_of
from profilers.distributed.transfer_latency import fit_transfer_latency
from profilers.link_sharing import LinkSharingReport, link_sharing_text, measure_link_sharing
from profilers.netns import tbf_burst_nbytes, tbf_segments_gso
from profilers.netns_cluster import BURST_S
from profilers.warm_sharing import measure_warm_sharing, warm_sharing_text
from simcore.analytic.advisor import Candidate, analytic_examples_per_s
from simcore.analytic.ddp_model import ddp_worker_from_trace
from simcore.analytic.params import worker_type_from_trace
from simcore.errors import ConfigError
from simcore.link_settings import (
    DEFAULT_SOURCE,
    FLOW_SHARINGS,
    FRESH_SHARING,
    FULL_DUPLEX,
    WARM_SHARING,
    LinkSettings,
    Sourced,
    duplex_limit_bps,
    ring_parse_alpha,
)
from simcore.network import NetworkProfile
from simcore.network_effects import (
    DuplexInterference,
    RingGoodput,
    nearest_measured,
    per_workers_text,
)
from simcore.report.table import Column, Table
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.arrivals import (
    arrivals_text,
    computations_by_arrival,
    position_medians,
    pull_arrivals,
    timeline_computations,
    timeline_pull_ends,
)
from simcore.sim.buckets import DEFAULT_BUCKET_CAP_BYTES, DEFAULT_FIRST_BUCKET_BYTES
from simcore.sim.occupancy import (
    LinkOccupancy,
    pooled_occupancy,
    short_occupancy_text,
    timeline_occupancy,
)
from simcore.sim.phases import ReplicationPhases, replication_phases, step_time_quantiles
from simcore.sim.precision import DEFAULT_PRECISION, PrecisionRule, simulate_to_precision
from simcore.trace.cpu import CommThreadCpu, forward_backward_s_per_step, measured_comm_thread
from simcore.trace.model import Trace
from simcore.units import format_bandwidth, format_bytes, format_seconds

__all__ = [
    "COLUMNS_TEXT",
    "Predictor",
    "ValidationPoint",
    "ValidationReport",
    "assess",
    "colocation_slowdown",
    "effective_bandwidth_bps",
    "measure",
    "noise_floor_text",
    "offsets_text",
    "report_tables",
    "report_text",
    "simulate_argv",
    "validate",
]

SIM_STEPS = 300  # the cap of a prediction's run (steps per worker); a timeline's fixed length
SIM_WARMUP_STEPS = 30
# Predictions run to this precision (the CLI's default rule) rather than always to the cap: the
# measured runs they are compared with vary by several percent, and a campaign of a few hundred
# points is then assessed in tens of seconds rather than minutes.
SIM_RULE = PrecisionRule(target=DEFAULT_PRECISION, max_steps=SIM_STEPS)
# Asynchronous workers settle in lock-step or alternating depending on small differences (the
# seed, or a bandwidth 0.05% off, moves one W = 2 prediction by 6%): a prediction is the mean of
# independent replications, not one run's draw.
SIM_REPLICATIONS = 8
# One-worker runs of each kind a validation pools into its profile: on the 2-core VM such runs
# of one configuration differed by up to 20%, and every prediction inherits the profile's luck.
PROFILE_RUNS = 3
# The duplex measurement moved by about +-0.1 (around 1.5-1.6) from one measurement to the next
# with 8 repetitions; 16 of each (about 20 s at 300-500 Mbit/s) narrow that by about sqrt(2).
DUPLEX_REPEATS = 16
# The interference measurement's repetitions of each pattern: six measurements of 16 gave
# efficiencies 0.91-0.96 and exponents within 0.15 of each other (link_interference).
INTERFERENCE_REPEATS = 16
# Rounds of the warm-sharing measurement per direction: at 200 Mbit/s 16 rounds of four of
# cnn's 2.48 MB transfers gave a pull cv of 0.39, 0.47 and a push cv of 0.56, 0.57 (about 25 s).
WARM_SHARING_ROUNDS = 16
# Where a ring's transfers' CPU work runs by default (SimulationConfig.parse_placement): chosen
# on the campaign's fit half against after each all-reduce and four other placements.
RING_CPU_PLACEMENT = "pipelined"
SHORTFALL = 0.05  # a fitted slowdown this much short of the measured one is reported
_SIM_SHAPE = {  # architecture -> (simulator arch, mode)
    Architecture.PS_ASYNC: ("ps", "async"),
    Architecture.PS_SYNC: ("ps", "sync"),
    Architecture.ALLREDUCE: ("allreduce", "sync"),
    Architecture.DDP: ("ddp", "sync"),
}
# DDP's buckets a validation runs by default: torch's defaults (25 MiB, a 1 MiB first bucket).
DDP_BUCKET_CAPS: tuple[float | None, ...] = (None,)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ValidationPoint:
    """One architecture at one worker count: measured and predicted examples/s.

    ``measured`` has one value per repetition; ``slowdown`` is the mean over repetitions of the
    compute time per step relative to the solo profile (1.0 = no co-location effect).
    ``cpu_ratio``: a parameter server's workers' CPU time per step in the runs (every thread's,
    after warm-up) over the one-worker runs' that the prediction charges each worker; nan for
    ring AllReduce (its prediction charges CPU per byte instead) or runs that did not record
    it. Where the workers' cores are the bottleneck, an error of about ``cpu_ratio - 1`` is the
    host's, not the model's: the runs' workers needed that much more (or less) CPU per step.
    """

    architecture: str
    workers: int
    measured: tuple[float, ...]
    simulated: float
    simulated_ideal: float
    coarse: float
    slowdown: float
    # How the workers' steps went, measured (over the runs) and simulated (over the seeds): the
    # 5%, 50% and 95% quantiles of the post-warm-up step times (s), and the phase pattern of
    # each run or seed (simcore.sim.phases: lock-step, pipelined, drifting, mixed).
    measured_step_s: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    simulated_step_s: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    measured_phases: tuple[str, ...] = ()
    simulated_phases: tuple[str, ...] = ()
    # The same runs' and seeds' median distance between consecutive workers' step starts, in
    # steps (ReplicationPhases.median_distance: 0 together, 0.5 alternating); one value per run
    # or seed with two workers or more.
    measured_offsets: tuple[float, ...] = ()
    simulated_offsets: tuple[float, ...] = ()
    # Async-SGD with W >= 2: how the transfers lined up on the server's link after warm-up
    # (simcore.sim.occupancy), measured (pooled over the runs that carry it: spans, or the
    # summary a compacted run keeps) and simulated (one seed's timeline). None: not known.
    measured_occupancy: LinkOccupancy | None = None
    simulated_occupancy: LinkOccupancy | None = None
    cpu_ratio: float = math.nan
    # Sync-SGD with W >= 2 and runs that kept their spans: when each of a step's pulls had
    # arrived after the server's release (first to arrive, second, ...; the median over steps),
    # in one pull alone at the link's bandwidth (simcore.sim.arrivals), measured (the median
    # over those runs) and simulated (one seed's timeline). None: not known.
    measured_pull_arrivals: tuple[float, ...] | None = None
    simulated_pull_arrivals: tuple[float, ...] | None = None
    # The same points: the computation per step of the first worker to have its pull, the
    # second, ... (forward and backward, the median over steps), over the solo trace's: above
    # 1 where it shared its core with the other workers' computations or their transfers' work,
    # below where the solo runs' own transfers had slowed it more
    # (simcore.sim.arrivals.computations_by_arrival).
    measured_computations: tuple[float, ...] | None = None
    simulated_computations: tuple[float, ...] | None = None
    # Each simulated seed's examples/s where ``simulated`` is their mean (Async-SGD with W >= 2,
    # whose workers line up differently from one seed to the next); empty where the prediction
    # is one run (its batch means give its interval).
    simulated_seeds: tuple[float, ...] = ()
    # DDP: the runs' bucket limits as torch applied them (RunConfig.buckets_text: "25 MiB
    # (1 MiB first)", "1 MiB"), which tell two DDP points of one W apart; "" otherwise.
    buckets: str = ""

    @property
    def name(self) -> str:
        """``ddp 1 MiB``, ``ps-async``: the architecture and, for DDP, its buckets."""
        return f"{self.architecture} {self.buckets}" if self.buckets else self.architecture

    @property
    def measured_mean(self) -> float:
        return statistics.fmean(self.measured)

    @property
    def spread(self) -> float:
        """(max - min) / mean of the repetitions."""
        return _relative_range(self.measured)

    @property
    def simulated_spread(self) -> float:
        """(max - min) / mean of the simulated seeds, as :attr:`spread` of the runs; NaN where
        the prediction is one run."""
        return _relative_range(self.simulated_seeds) if len(self.simulated_seeds) >= 2 else math.nan

    @property
    def measured_offset(self) -> float:
        """The median of :attr:`measured_offsets` (NaN without one)."""
        return statistics.median(self.measured_offsets) if self.measured_offsets else math.nan

    @property
    def simulated_offset(self) -> float:
        """The median of :attr:`simulated_offsets` (NaN without one)."""
        return statistics.median(self.simulated_offsets) if self.simulated_offsets else math.nan

    @property
    def standard_error(self) -> float:
        """The measured mean's standard error over the mean (NaN with one repetition)."""
        return relative_standard_error(self.measured)

    def error(self, predicted: float) -> float:
        """Relative error of a prediction against the measured mean (0.1 = 10% too high)."""
        return (predicted - self.measured_mean) / self.measured_mean

    def beyond_noise(self, predicted: float) -> bool:
        """Whether the prediction's error is more than the repetitions' noise explains
        (:data:`~profilers.distributed.noise_floor.NOISE_Z` standard errors)."""
        return beyond_noise(self.error(predicted), self.standard_error)


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
    link_rate_bps: float | None = None  # the testbed's shaped rate; None: loopback
    link_sharing: LinkSharingReport | None = None  # measured on the testbed's link
    flow_weight_cv: float = 0.0  # calibrated from link_sharing
    cores: int = 0  # of the machine (ring AllReduce workers share them all); 0: not known
    alone_trace: Trace | None = None  # the computation without transfers, which the sim replays
    comm_cpu: CommCpuFit | None = None  # the transfers' CPU work, fitted to the solo run
    measurements: Measurements | None = None  # every run, to assess again or look into
    predictor: Predictor | None = None  # what made the ``simulated`` predictions
    ring_bandwidth_bps: float | None = None  # the ring predictions' link; None: bandwidth_bps
    link_text: str = ""  # where the link's values came from (measured, an option, a profile)
    network: NetworkProfile | None = None  # the link as this validation measured it
    # a ring rank's CPU work per byte and what it was taken from; None: given, or no ring
    ring_cpu_work: RingCpuWork | None = None
    flow_sharing: str = FRESH_SHARING  # which measurement of the link's sharing gave the cvs

    @property
    def testbed_burst_s(self) -> float | None:
        """The shaped links' tbf bucket as time at their rate, as the measurements recorded
        it; None on loopback or without the measurements."""
        if self.link_rate_bps is None or self.measurements is None:
            return None
        return self.measurements.link_burst_s

    def abs_errors(self, predictor: str) -> list[float]:
        """|error| of ``predictor`` (``simulated``, ``simulated_ideal``, ``coarse``)."""
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


def validate(
    model: str,
    *,
    bandwidth_bps: float | None = None,
    link: LinkSettings | None = None,
    progress: Progress | None = None,
    ring_cpu_placement: str = RING_CPU_PLACEMENT,
    flow_sharing: str = FRESH_SHARING,
    **options: Any,
) -> ValidationReport:
    """Profile one worker, predict W = 1..``workers_max`` and measure them (see the module):
    :func:`measure` with ``options``, then :func:`assess` with ``bandwidth_bps``, ``link``,
    ``ring_cpu_placement`` and ``flow_sharing``.

    Raises
    ------
    ConfigError : a bad argument, or the testbed is not permitted here.
    DistributedRunError : a run failed.
    """
    measured = measure(model, progress=progress, **options)
    return assess(
        measured,
        bandwidth_bps=bandwidth_bps,
        link=link,
        progress=progress,
        ring_cpu_placement=ring_cpu_placement,
        flow_sharing=flow_sharing,
    )


def measure(
    model: str,
    *,
    batch_size: int = 32,
    workers_max: int = 4,
    architectures: Sequence[str] = ("ps-async", "ps-sync", "allreduce"),
    repetitions: int = 3,
    steps: int = 100,
    warmup: int = 10,
    overlap: str = "layerwise",
    link_rate_bps: float | None = None,
    link_burst_s: float = BURST_S,
    threads: int = 1,
    seed: int = 0,
    profile_runs: int = PROFILE_RUNS,
    progress: Progress | None = None,
    checkpoint: Callable[[Measurements], None] | None = None,
    bucket_caps_mb: Sequence[float | None] = DDP_BUCKET_CAPS,
    first_bucket_mb: float | None = None,
) -> Measurements:
    """The real part of a validation: the link (on the testbed), the solo profile, the
    computation alone and ``repetitions`` runs of every point.

    Parameters
    ----------
    model : built-in name or ``package.module:factory``.
    batch_size : examples per worker and step.
    workers_max : largest W.
    architectures : any of ``ps-async``, ``ps-sync``, ``allreduce``, ``ddp``.
    repetitions : real runs per point, taken in rounds of one run of every point.
    steps, warmup : steps per worker in every real run, and those left out.
    overlap : ``layerwise`` or ``strict``, for the runs and the predictions alike.
    link_rate_bps : run on the emulated cluster (:mod:`profilers.netns_cluster`, needs root)
        with the parameter server's link, or every worker's link for ring AllReduce, shaped to
        this rate; None: every rank on loopback, unshaped.
    link_burst_s : the shaped links' tbf bucket, as time at the rate (the cluster's 1 ms: below
        ~545 Mbit/s it splits TCP's GSO packets, which costs the ranks CPU a real NIC would
        not; ``scenarios/research/testbed_segmentation.py``).
    threads : torch threads per rank (also the simulator's ``worker_cpu_cores``).
    profile_runs : one-worker runs of each kind (the profile, the computation alone), taken in
        turns, the first pair before everything and the others before the later rounds of the
        points; the profile pools their steps.
    progress : called with a line of text as each run finishes.
    checkpoint : called with what has been measured so far once the link and the first
        one-worker runs are done and after every run of a point, so that a run failing late
        loses nothing measured before it.
    bucket_caps_mb : DDP's bucket caps in MiB, each a point of its own at every W (None:
        torch's default, 25 MiB with a 1 MiB first bucket; a cap given alone makes the first
        bucket as large, as torch does).
    first_bucket_mb : DDP's first bucket in MiB for every cap (None: as torch decides).

    Raises
    ------
    ConfigError : a bad argument, or the testbed is not permitted here.
    DistributedRunError : a run failed.
    """
    if workers_max < 1 or repetitions < 1 or profile_runs < 1:
        raise ConfigError(
            f"workers_max, repetitions and profile_runs must be >= 1, got {workers_max}, "
            f"{repetitions}, {profile_runs}"
        )
    if not link_burst_s > 0:
        raise ConfigError(f"link_burst_s: must be > 0 seconds, got {link_burst_s}")
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
    archs = [Architecture(name) for name in architectures]
    testbed = Testbed(link_rate_bps, available_cores(), burst_s=link_burst_s)
    sharing = None
    if link_rate_bps is not None:
        sharing = measure_link_sharing(link_rate_bps, burst_s=link_burst_s)
        say(link_sharing_text(sharing))
    solos: list[RunResult] = []
    alones: list[RunResult] = []

    def watched(config: RunConfig, what: str) -> tuple[RunResult, str]:
        """The run, and a note if other work used the machine meanwhile ("" if not)."""
        start = host_load.sample()
        result = testbed.run(config)
        load = host_load.load_since(start)
        if load is None:
            return result, ""
        note = load.note(what)
        # Kept with the run, so that a report from the saved runs says it too (host_load_text).
        return dataclasses.replace(result, other_cores=round(load.others_cores, 3)), note

    def say_all(*lines: str) -> None:
        for line in lines:
            if line:
                say(line)

    def profile_pair() -> None:
        # In turns: a drift of the machine touches both kinds alike.
        n = len(solos) + 1
        solo_run, solo_note = watched(base, f"solo profile run {n}")
        alone_run, alone_note = watched(
            _run_config(base, Architecture.ALLREDUCE, 1), f"computation-alone run {n}"
        )
        solos.append(solo_run)
        alones.append(alone_run)
        say_all(
            f"solo profile run {n}/{profile_runs}: {solo_run.examples_per_s:.1f} examples/s",
            solo_note,
            alone_note,
        )

    # The first pair now (the link measurements need the model's bytes); the others spread
    # over the rounds of the points below (profile_rounds).
    before_round = _profile_rounds(profile_runs, repetitions)
    for _ in range(before_round.count(-1)):
        profile_pair()
    solo, alone = solos[0], alones[0]
    rings: list[MeasuredRing] = []
    if link_rate_bps is not None and workers_max >= 2 and not all(a.uses_servers for a in archs):
        # The ring alone for every W the points run: the ring of two gives the cost per
        # message, each W the rate its bytes move at (a ring of four at 500 Mbit/s moved them
        # at two thirds of a ring of two's; Measurements.rings).
        for ring_workers in range(2, workers_max + 1):
            rings.append(
                measure_ring_goodput(
                    tuple(solo.layer_nbytes.values()),
                    workers=ring_workers,
                    link_rate_bps=link_rate_bps,
                    burst_s=link_burst_s,
                )
            )
            say(ring_goodput_text(rings[-1], sharing.goodput_bps() if sharing else None))
    duplex = interference = warm = None
    # A shaped server link that several workers will share: how its two directions and its
    # concurrent transfers behave.
    if link_rate_bps is not None and any(a.uses_servers for a in archs) and workers_max >= 2:
        duplex = measure_duplex(
            link_rate_bps=link_rate_bps, repeats=DUPLEX_REPEATS, burst_s=link_burst_s
        )
        say(duplex_text(duplex))
        interference = measure_interference(
            link_rate_bps=link_rate_bps, repeats=INTERFERENCE_REPEATS, burst_s=link_burst_s
        )
        say(interference_report_text(interference, measured_interference(interference)))
        # The model's whole transfer, as a server's pulls send it and the workers push it.
        warm = measure_warm_sharing(
            link_rate_bps,
            nbytes=sum(solo.layer_nbytes.values()),
            flows=workers_max,
            rounds=WARM_SHARING_ROUNDS,
            burst_s=link_burst_s,
        )
        say(warm_sharing_text(warm))
    measured = Measurements(
        base,
        link_rate_bps,
        testbed.cores,
        sharing,
        solo,
        alone,
        (),
        rings[0] if rings else None,  # the ring of two, as readers before `rings` know it
        duplex,
        solo_more=tuple(solos[1:]),
        alone_more=tuple(alones[1:]),
        rings=tuple(rings),
        link_burst_s=link_burst_s,
        interference=interference,
        warm_sharing=warm,
    )
    keep = checkpoint or (lambda _measured: None)
    keep(measured)
    # In rounds, one run of every point each, rather than a point's runs back to back: this
    # VM's speed wanders over tens of seconds (check-200's resnet8: a worker's CPU per step
    # 29-37 ms from one 2-5 s run to the next, the three runs of a point often alike), so a
    # point's runs taken together share one state of the host and its mean misses the others,
    # as a profile taken only at the start does. Spread over the validation, the points and
    # the profile sample the host alike.
    configs = [
        _run_config(base, arch, workers, cap, first_bucket_mb)
        for arch in archs
        for cap in (bucket_caps_mb if arch is Architecture.DDP else (None,))
        for workers in range(1, workers_max + 1)
    ]
    plan = [(c.architecture, c.workers, _point_name(c)) for c in configs]
    runs: dict[tuple[Architecture, int, str], list[RunResult]] = {key: [] for key in plan}
    for round_index in range(repetitions):
        for _ in range(before_round.count(round_index)):
            profile_pair()
            measured = dataclasses.replace(
                measured, solo_more=tuple(solos[1:]), alone_more=tuple(alones[1:])
            )
        for config, key in zip(configs, plan, strict=True):
            name = f"{key[2]} W={key[1]}"
            run, note = watched(config, f"{name} run {len(runs[key]) + 1}")
            runs[key].append(run)
            done = runs[key]
            if len(done) == repetitions:
                mean = statistics.fmean(r.examples_per_s for r in done)
                say(f"{name}: measured {mean:.1f} examples/s")
            else:
                say(f"{name}: run {len(done)}/{repetitions}: {run.examples_per_s:.1f} examples/s")
            say_all(note)
            points = tuple(MeasuredPoint(k[0], k[1], tuple(runs[k])) for k in plan if runs[k])
            measured = dataclasses.replace(measured, points=points)
            keep(measured)
    shared = host_load_text(measured)
    if shared:
        say(shared)
    return measured


def _profile_rounds(profile_runs: int, repetitions: int) -> list[int]:
    """Before which round of the points each pair of one-worker runs is taken: -1 before
    everything (the first pair, and all of them with one round), then one pair before each
    later round in turn, so that the profile spans the validation as the points do."""
    later = list(range(1, repetitions))
    return [-1 if i == 0 or not later else later[(i - 1) % len(later)] for i in range(profile_runs)]


def assess(
    measured: Measurements,
    *,
    bandwidth_bps: float | None = None,
    link: LinkSettings | None = None,
    progress: Progress | None = None,
    ideal: bool = True,
    ring_cpu_placement: str = RING_CPU_PLACEMENT,
    flow_sharing: str = FRESH_SHARING,
) -> ValidationReport:
    """Predict every measured point from the solo profile and compare (no real runs: a saved
    validation can be assessed again, e.g. after a change to the model). ``ideal=False``
    leaves out the papers' replay on ideal hosts (``simulated_ideal`` is then nan), which a
    campaign does not report. ``ring_cpu_placement``: where a ring's transfers' CPU work runs
    (``Predictor.ring_cpu_placement``).

    ``bandwidth_bps``: the link for the predictions; None: the testbed's one-flow goodput, or
    on loopback the bandwidth fitted to the solo run's transfers. ``link``: values (from options
    or a network profile) that replace what the validation measured or fitted: each of its
    bandwidth (with a profile's ring goodput per W), latency, flow weight cv and transfer CPU
    cost whose source is not the default; its bandwidth wins over ``bandwidth_bps``.
    ``flow_sharing``: which measurement of how the server's link shares concurrent transfers
    gives the parameter server's flow weight cvs when ``link`` gives none: ``"fresh"``
    (:mod:`profilers.link_sharing`'s new connections, the default) or ``"warm"``
    (:mod:`profilers.warm_sharing`'s connections kept open, as training's are; each direction
    its own cv). The README's "Concurrent transfers share the link less evenly in training"
    says why warm is not the default.

    Raises
    ------
    ConfigError : no point was measured, the runs cannot be turned into a trace (see
        :func:`run_to_trace`), ``flow_sharing`` is unknown, or it is ``"warm"`` and the runs
        have parameter-server points but no warm-sharing measurement.
    """
    if not measured.points:
        raise ConfigError("the measurements hold no runs with W workers to compare with")
    if flow_sharing not in FLOW_SHARINGS:
        raise ConfigError(
            f"flow sharing: {flow_sharing!r} is not one of {', '.join(FLOW_SHARINGS)}"
        )
    given = link or LinkSettings(Sourced(0.0))
    if flow_sharing == WARM_SHARING and given.flow_weight_cv.source != DEFAULT_SOURCE:
        raise ConfigError(
            f"flow sharing 'warm' takes the cvs from the runs' own measurement; a flow weight "
            f"cv was given too ({given.flow_weight_cv.source})"
        )
    say = progress or (lambda _line: None)
    solo, sharing = measured.solo, measured.sharing
    testbed = Testbed(measured.link_rate_bps, measured.cores)
    trace = pooled_trace(measured.solo_runs)
    alone = with_compute_of(trace, measured.alone_runs)
    own = measured_network_profile(measured, trace, alone)  # what this validation measured
    ring_bandwidth_bps = None
    ring_message_latency_s = ring_segment_bytes = None
    ring_bandwidths: tuple[tuple[int, float], ...] = ()
    if given.bandwidth_bps.source != DEFAULT_SOURCE:
        bandwidth = given.bandwidth_bps
    elif bandwidth_bps is not None:
        bandwidth = Sourced(bandwidth_bps, "bandwidth_bps")
    else:
        what = "measured one flow" if sharing else "fitted to the solo run"
        bandwidth = Sourced(own.bandwidth_bps, what)
        if own.ring_goodput is not None:
            ring_bandwidth_bps = own.ring_goodput.points[0][1]
            ring_message_latency_s = own.ring_goodput.message_latency_s
            ring_segment_bytes = own.ring_goodput.segment_bytes
            ring_bandwidths = own.ring_goodput.bandwidths
    bandwidth_bps = bandwidth.value
    ring = given.ring if bandwidth.source == given.profile else None
    if given.latency_s.is_option:
        ring_message_latency_s = None  # --latency for every message, as simulate does
    given_ring_cpu = None
    if ring is not None and ring.message_latency_s is not None:
        # A profile's ring terms (version 3), as `sgdsim simulate --network` applies them.
        given_ring_cpu, ring_segment_bytes = ring.cpu_s_per_byte, ring.segment_bytes
        ring_bandwidths = ring.bandwidths
        if not given.latency_s.is_option:
            ring_message_latency_s = ring.message_latency_s
        ring = None
    own_cv = own.flow_sharing.weight_cv if own.flow_sharing is not None else 0.0
    weight_cv = _measured_unless_given(given.flow_weight_cv, own_cv, "measured")
    # Each direction its own spread, as `sgdsim simulate --network` applies a profile's: the
    # measured pull and push cvs, or a profile's push cv (an option sets one value for both).
    push_cv: float | None = None
    if weight_cv.source == "measured" and flow_sharing == WARM_SHARING:
        weight_cv, push_cv = _warm_cvs(measured)
    elif weight_cv.source == "measured" and own.flow_sharing is not None:
        pull, push = own.flow_sharing.pull_cv, own.flow_sharing.push_cv
        if pull is not None and push is not None:
            weight_cv, push_cv = Sourced(pull, "measured"), push
    elif given.flow_weight_cv_push is not None and weight_cv.source == given.profile:
        push_cv = given.flow_weight_cv_push.value
    latency = _measured_unless_given(given.latency_s, 0.0, DEFAULT_SOURCE)
    # What the server's link carries both ways at once, as a multiple of one direction: an
    # option's or a profile's, else the testbed's own measurement; full duplex without any.
    # Unless a ratio was given, the interference between the two directions that this
    # validation's network profile holds instead (its own measurement, else the testbed's,
    # link_interference.TESTBED_INTERFERENCE, which says why): the ratio's measurement times
    # every worker pulling and pushing at once, which training rarely does, and its shared
    # limit slows one pull beside one push by a quarter where the link loses a few percent.
    own_duplex = own.duplex.ratio if own.duplex is not None else FULL_DUPLEX
    duplex = _measured_unless_given(given.duplex_ratio, own_duplex, "measured")
    duplex_bps = duplex_limit_bps(duplex.value, bandwidth.value)
    interference = None
    if given.duplex_interference is not None:  # an option's or a profile's
        interference = DuplexInterference(
            *given.duplex_interference.value, method=given.duplex_interference.source
        )
        duplex_bps = None
    elif duplex.source == "measured" and own.duplex_interference is not None:
        interference, duplex_bps = own.duplex_interference, None
    comm_thread = measured_comm_thread(trace)  # the solo runs' CPU time, pooled into the trace
    fitting = Predictor(
        trace,
        bandwidth_bps,
        measured.base,
        testbed,
        weight_cv.value,
        ring_bandwidth_bps=ring_bandwidth_bps,
        ring=ring,
        latency_s=latency.value,
        ring_message_latency_s=ring_message_latency_s,
        ring_segment_bytes=ring_segment_bytes,
        ring_bandwidths=ring_bandwidths,
        flow_weight_cv_push=push_cv,
        duplex_bps=duplex_bps,
        duplex_interference=interference.parameters if interference is not None else None,
        comm_thread_s_per_step=comm_thread.beyond_s if comm_thread is not None else 0.0,
    )
    comm_cpu = fit_comm_cpu(  # the work at the transfers' pace, which replaces the rest
        alone,
        compute_s_per_step(trace),
        dataclasses.replace(
            fitting.config(Architecture.PS_ASYNC, 1, ideal=False), comm_thread_s_per_step=0.0
        ),
    )
    cores = testbed.worker_cores(Architecture.PS_ASYNC)
    own = with_transfer_cpu(own, comm_cpu, cores)
    # Unless a latency was given, the parameter server's transfers cost what the one-worker
    # runs took beyond the replay of their trace.
    solo_examples_per_s = statistics.fmean(r.examples_per_s for r in measured.solo_runs)
    ps_latency = None
    if latency.source == DEFAULT_SOURCE:
        solo_step_s = measured.base.batch_size / solo_examples_per_s
        ps_latency = fit_transfer_latency(
            trace, solo_step_s, fitting.config(Architecture.PS_ASYNC, 1, ideal=False)
        )
        own = with_transfer_latency(own, ps_latency)
    cpu = _measured_unless_given(given.comm_cpu_s_per_byte, comm_cpu.s_per_byte, "fitted")
    # Unless a transfer CPU cost was given, a ring's transfers cost the CPU work per byte the
    # one-worker run's transfers did or the ring of two nodes' ranks spent alone, whichever is
    # larger (RingCpuWork says why). The ring's cost per message, measured alone, is not used:
    # it was 2-3x what a ring's messages cost in training, and it predicted the fit half's
    # rings worse. A profile's ring CPU per byte (version 3) likewise, unless --comm-cpu was
    # given.
    ring_work = None
    ring_work_text = ""
    work: RingCpuWork | None = None
    if given_ring_cpu is not None and not cpu.is_option:
        ring_work, ring_work_text = given_ring_cpu, f"from {given.profile or 'the network profile'}"
    elif cpu.source == "fitted":
        work = measured_ring_cpu_work(measured, trace, alone)
        ring_work, ring_work_text = work.s_per_byte, work.text()
    model_of = dataclasses.replace(
        fitting,
        alone=alone,
        comm_cpu_s_per_byte=cpu.value,
        ring_cpu_work_s_per_byte=ring_work,
        ring_cpu_placement=ring_cpu_placement,
        ps_latency_s=ps_latency.latency_s if ps_latency is not None else 0.0,
    )
    link_text = _link_text(bandwidth, latency, weight_cv, cpu, ring, given.profile, push_cv)
    if duplex_bps is not None:
        link_text += (
            f"; parameter server: both directions together at most "
            f"{format_bandwidth(duplex_bps)} ({duplex.value:.3g}x one way, {duplex.source})"
        )
    if interference is not None:
        link_text += f"; parameter server: {interference.text()} ({interference.method})"
        if duplex.value < FULL_DUPLEX:
            link_text += (
                f", instead of both directions together at most {duplex.value:.3g}x one "
                f"({duplex.source})"
            )
    link_text += "; " + comm_thread_text(comm_thread)
    if ps_latency is not None and ps_latency.latency_s > 0:
        link_text += (
            f"; parameter server: {format_seconds(ps_latency.latency_s)} per transfer beyond "
            f"its bytes (the one-worker runs' {format_seconds(ps_latency.measured_step_s)} "
            f"step against {format_seconds(ps_latency.replayed_step_s)} replayed)"
        )
    if ring_work is not None:
        link_text += (
            f"; ring AllReduce: the transfers' CPU work {ring_work * 1e9:.3g} ns per byte sent "
            f"or received ({ring_work_text}), done by the worker "
            + (
                "on each message of an all-reduce once it has arrived, on a thread sharing the "
                "cores, one all-reduce at a time"
                if ring_cpu_placement == "pipelined"
                else "after each all-reduce"
            )
        )
    # The values behind the predictions are the report's (link_text and the lines after it);
    # the progress only says what is under way.
    say(f"predicting {len(measured.points)} point(s) from the solo profile")
    points = tuple(
        model_of.point(p.architecture, p.workers, p.runs, solo, ideal=ideal)
        for p in measured.points
    )
    # The profile against its own runs: what the trace misses (gaps between ops) shows here,
    # apart from any effect of W; with a fitted transfer latency it is closed, up to the fit's
    # tolerance, wherever the replay was the faster.
    solo_sim = model_of.simulated(Architecture.PS_ASYNC, 1)
    return ValidationReport(
        trace.metadata.model_name,
        measured.base.batch_size,
        bandwidth_bps,
        testbed.worker_cores(Architecture.PS_ASYNC),
        measured.base.threads or 1,
        trace,
        points,
        solo_examples_per_s,
        solo_sim,
        measured.link_rate_bps,
        sharing,
        weight_cv.value,
        len(testbed.cores),
        alone,
        comm_cpu,
        measured,
        model_of,
        ring_bandwidth_bps,
        link_text,
        own,
        work,
        flow_sharing,
    )


def one_pull_s(trace: Trace, bandwidth_bps: float) -> float:
    """One whole-model pull alone on the link: the unit of the Sync-SGD pull arrivals."""
    return trace.param_nbytes * 8 / bandwidth_bps


def _warm_cvs(measured: Measurements) -> tuple[Sourced[float], float | None]:
    """The pull and push flow weight cvs of the runs' warm-sharing measurement (pulls leave
    the server's node, pushes go into it)."""
    warm = measured.warm_sharing
    if warm is None:
        # Rings use no cv, and one worker's transfers share the server's link with nothing.
        if not any(p.architecture.uses_servers and p.workers > 1 for p in measured.points):
            return Sourced(0.0, "measured, warm connections"), None
        raise ConfigError(
            "flow sharing 'warm': these runs hold no warm-sharing measurement (validations "
            "record it since 2026-11-28, on the testbed, when several workers share the "
            "server's link)"
        )
    how = f"measured, {warm.flows} transfers at once over connections kept open"
    return Sourced(warm.weight_cv("out of"), how), warm.weight_cv("into")


def _measured_unless_given(given: Sourced[float], measured: float, how: str) -> Sourced[float]:
    """``given`` when it came from an option or a profile, else the validation's own value."""
    return given if given.source != DEFAULT_SOURCE else Sourced(measured, how)


def _link_text(
    bandwidth: Sourced[float],
    latency: Sourced[float],
    weight_cv: Sourced[float],
    cpu: Sourced[float],
    ring: RingGoodput | None,
    profile: str | None,
    push_cv: float | None = None,
) -> str:
    """One line: every link value the simulator's predictions use, and where it came from."""
    ring_text = "" if ring is None else f", ring AllReduce goodput per W ({profile})"
    return (
        f"link: {format_bandwidth(bandwidth.value)} ({bandwidth.source}) + "
        f"{format_seconds(latency.value)} ({latency.source}){ring_text}, flow weight cv "
        f"{_cv_text(weight_cv.value, push_cv)} ({weight_cv.source}), transfer CPU "
        f"{cpu.value * 1e9:.3g} ns/B ({cpu.source}"
        + (
            "; for a trace of the computation alone, not used here: a parameter server "
            "replays its runs' computation, a ring charges its own CPU per byte)"
            if cpu.source == "fitted"
            else ")"
        )
    )


def solo_runs_text(runs: Sequence[RunResult]) -> str:
    """``mean of 440.1, 464.3: 5.4% apart``: each one-worker run's examples/s and how far apart
    they were (the luck of a run, which the profile pools and every prediction inherits);
    ``mean`` for fewer than two runs."""
    if len(runs) < 2:
        return "mean"
    rates = [r.examples_per_s for r in runs]
    apart = (max(rates) - min(rates)) / statistics.fmean(rates)
    return f"mean of {', '.join(f'{x:.1f}' for x in rates)}: {100 * apart:.1f}% apart"


def host_load_text(measured: Measurements | None) -> str:
    """A note naming the runs that shared the machine with other work (``other_cores`` at least
    ``host_load.NOTE_CORES``); "" when none did or the runs were not watched (saved before
    2026-11-29)."""
    if measured is None:
        return ""
    named = [("solo profile", r) for r in measured.solo_runs]
    named += [("computation alone", r) for r in measured.alone_runs]
    named += [(f"{p.name} W={p.workers}", r) for p in measured.points for r in p.runs]
    watched = [(name, r.other_cores) for name, r in named if r.other_cores is not None]
    busy = [(name, cores) for name, cores in watched if cores >= host_load.NOTE_CORES]
    if not busy:
        return ""
    where = ", ".join(dict.fromkeys(name for name, _ in busy))  # in order, each once
    return (
        f"note: {len(busy)} of the {len(watched)} runs shared the machine with other work (up "
        f"to {max(cores for _, cores in busy):.2f} cores; {where}): their examples/s, and the "
        "errors against them, are not those of an idle machine; validate again on an idle one "
        "before trusting them"
    )


def comm_thread_text(measured: CommThreadCpu | None) -> str:
    """Where a parameter-server prediction's CPU beside the computation came from."""
    if measured is None:
        return (
            "parameter server: the workers' CPU beside their computation not charged (these "
            "runs did not record their CPU time)"
        )
    return (
        f"parameter server: each worker's communication threads "
        f"{format_seconds(measured.beyond_s)} CPU per step beside its computation (the "
        f"one-worker runs' {format_seconds(measured.cpu_s_per_step)} of CPU per step less the "
        f"{format_seconds(measured.compute_s_per_step)} their trace computes)"
    )


def _cv_text(pull_cv: float, push_cv: float | None) -> str:
    if push_cv is None or push_cv == pull_cv:
        return f"{pull_cv:.3g}"
    return f"{pull_cv:.3g} pull / {push_cv:.3g} push"


def _run_config(
    base: RunConfig,
    arch: Architecture,
    workers: int,
    bucket_cap_mb: float | None = None,
    first_bucket_mb: float | None = None,
) -> RunConfig:
    """``base`` as ``arch`` with ``workers`` workers; the bucket limits apply to DDP only."""
    servers = 1 if arch.uses_servers else 0
    ddp = arch is Architecture.DDP
    return dataclasses.replace(
        base,
        architecture=arch,
        workers=workers,
        servers=servers,
        bucket_cap_mb=bucket_cap_mb if ddp else None,
        first_bucket_mb=first_bucket_mb if ddp else None,
    )


def _point_name(config: RunConfig) -> str:
    """``ddp 1 MiB``, ``ps-async``: a measured point's architecture and, for DDP, buckets."""
    arch = config.architecture
    return f"ddp {config.buckets_text()}" if arch is Architecture.DDP else arch.value


@dataclass(frozen=True)
class _SyncOrders:
    """A Sync-SGD point's pull arrivals and computations in their order, measured (the median
    over the runs with spans) and simulated (ValidationPoint); None where not known."""

    measured_arrivals: tuple[float, ...] | None = None
    simulated_arrivals: tuple[float, ...] | None = None
    measured_computations: tuple[float, ...] | None = None
    simulated_computations: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Predictor:
    """The predictions of one validation: the solo trace, the link, and how ranks are placed."""

    trace: Trace
    bandwidth_bps: float
    base: RunConfig
    testbed: Testbed
    flow_weight_cv: float
    alone: Trace | None = None  # the computation without transfers; None: replay ``trace``
    comm_cpu_s_per_byte: float = 0.0  # the transfers' CPU work, with ``alone``
    ring_bandwidth_bps: float | None = None  # a ring AllReduce's measured goodput; None: link's
    ring: RingGoodput | None = None  # a profile's ring goodput per W (over ring_bandwidth_bps)
    latency_s: float = 0.0  # per transfer (from an option or a profile)
    # A ring's transfers' CPU work per byte a worker sends or receives, done by the worker after
    # each all-reduce (ring_cpu_work_s_per_byte); None: comm_cpu_s_per_byte's model instead.
    ring_cpu_work_s_per_byte: float | None = None
    # Where that work runs: "after" each all-reduce on the worker's computation, or
    # "pipelined" with its messages on a thread sharing the cores (parse_placement).
    ring_cpu_placement: str = RING_CPU_PLACEMENT
    # The measured ring's fixed cost per message (RingGoodput.message_latency_s): with it a ring
    # runs at the link's one-flow bandwidth plus one such cost per message (gloo's segments, or
    # the paper's 2(W-1) a layer: ring_segment_bytes), rather than at
    # the goodput of a ring of two nodes, which folds the messages into a rate. It replaces
    # latency_s for a ring (it holds the network's latency), as `simulate --network` does.
    ring_message_latency_s: float | None = None
    # The largest message of the ring's implementation (gloo's segments), which the message
    # count behind ring_message_latency_s assumed (SimulationConfig.ring_segment_bytes).
    ring_segment_bytes: float | None = None
    # With ring_message_latency_s, the rate the bytes of a ring of each W measured moved at
    # (network_effects.RingGoodput.bandwidths): a ring of W runs at the nearest W's, at most
    # bandwidth_bps. Empty: bandwidth_bps for every W.
    ring_bandwidths: tuple[tuple[int, float], ...] = ()
    # The uplink's (pushes') own flow weight cv; None: flow_weight_cv for both directions.
    flow_weight_cv_push: float | None = None
    # What the server's link carries with pulls and pushes at once (link_duplex); None: full
    # duplex, each direction its bandwidth whatever the other does.
    duplex_bps: float | None = None
    # Instead of duplex_bps: each direction slowed by the other's transfers (the simulator's
    # duplex_interference: efficiency, pull exponent, push exponent); None: not this model.
    duplex_interference: tuple[float, float, float] | None = None
    # A parameter server's transfers' fixed cost, fitted to the one-worker runs
    # (fit_transfer_latency), on top of latency_s for the parameter-server architectures.
    ps_latency_s: float = 0.0
    # A parameter-server worker's CPU per step beyond its trace's computation, measured in the
    # one-worker runs (CommThreadCpu): its communication threads' work, which workers sharing
    # cores compete for (SimulationConfig.comm_thread_s_per_step).
    comm_thread_s_per_step: float = 0.0
    # DDP's bucket cap and first bucket in bytes, as the runs of the point predicted had them
    # (RunConfig.bucket_limits_bytes); None: torch's defaults. point() sets them from the runs.
    ddp_buckets: tuple[int, int] | None = None

    def config(self, arch: Architecture, workers: int, *, ideal: bool) -> SimulationConfig:
        """The simulator's view of a run. ``ideal``: every worker alone on its host, and a link
        of equal shares; otherwise the workers share the testbed's cores (their NICs are their
        own) and concurrent transfers get the measured unequal shares."""
        sim_arch, mode = _SIM_SHAPE[arch]
        config = SimulationConfig(
            workers=workers,
            bandwidth_bps=self.bandwidth_bps,
            arch=sim_arch,
            mode=mode,
            overlap="layerwise" if self.base.overlap is Overlap.LAYERWISE else "none",
            steps=SIM_STEPS,
            warmup_steps=SIM_WARMUP_STEPS,
            replications=SIM_REPLICATIONS,
            latency_s=self.latency_s,
        )
        if sim_arch == "ddp" and self.ddp_buckets is not None:
            cap, first = self.ddp_buckets
            config = dataclasses.replace(config, bucket_cap_bytes=cap, first_bucket_bytes=first)
        if ideal:
            return config
        if sim_arch == "ps":
            config = dataclasses.replace(
                config,
                latency_s=self.latency_s + self.ps_latency_s,
                comm_thread_s_per_step=self.comm_thread_s_per_step,
            )
        # DDP all-reduces each bucket with the same gloo ring as the per-layer ring: the same
        # measured terms (its messages are the buckets' segments rather than a layer's).
        ring = sim_arch in ("allreduce", "ddp")
        if ring and self.ring is not None:
            config = dataclasses.replace(config, bandwidth_bps=self.ring.nearest(workers)[1])
        elif ring and self.ring_message_latency_s is not None:
            latency = self.ring_message_latency_s  # holds the network's latency too
            config = dataclasses.replace(
                config,
                latency_s=latency,
                ring_segment_bytes=self.ring_segment_bytes,
                bandwidth_bps=self.ring_bytes_bandwidth_bps(workers),
            )
        elif ring and self.ring_bandwidth_bps is not None:
            config = dataclasses.replace(config, bandwidth_bps=self.ring_bandwidth_bps)
        cores = self.testbed.worker_cores(arch)
        if ring and self.ring_cpu_work_s_per_byte is not None:
            config = dataclasses.replace(
                config,
                parse_alpha_s_per_byte=ring_parse_alpha(self.ring_cpu_work_s_per_byte, workers),
                parse_placement=self.ring_cpu_placement,
            )
        return dataclasses.replace(
            config,
            colocated_workers=workers,
            host_cpu_cores=cores,
            worker_cpu_cores=min(float(self.base.threads or cores), cores),
            shared_nic=False,
            flow_weight_cv=self.flow_weight_cv if sim_arch == "ps" else 0.0,
            flow_weight_cv_push=self.flow_weight_cv_push if sim_arch == "ps" else None,
            duplex_bps=self.duplex_bps if sim_arch == "ps" else None,
            duplex_interference=self.duplex_interference if sim_arch == "ps" else None,
            comm_cpu_s_per_byte=self.comm_cpu_s_per_byte if self._rate_coupled_cpu(arch) else 0.0,
        )

    def ring_bytes_bandwidth_bps(self, workers: int) -> float:
        """The rate a ring of ``workers`` moves its bytes at: the nearest W measured in
        ``ring_bandwidths`` (ties: the larger), at most the link's bandwidth."""
        if not self.ring_bandwidths:
            return self.bandwidth_bps
        return min(nearest_measured(self.ring_bandwidths, workers)[1], self.bandwidth_bps)

    def ring_bytes_bandwidths_text(self) -> str:
        """``W=2 431 Mbit/s, ...``: the rate of each ring measured, as the predictions use it
        (at most the link's bandwidth); "" without rates per W."""
        return per_workers_text(
            (w, self.ring_bytes_bandwidth_bps(w)) for w, _ in self.ring_bandwidths
        )

    def simulated(self, arch: Architecture, workers: int, *, ideal: bool = False) -> float:
        return self.simulation(arch, workers, ideal=ideal).examples_per_s.value

    def replayed_trace(self, arch: Architecture | None = None, *, ideal: bool = False) -> Trace:
        """The trace the simulator replays for ``arch``: the one-worker parameter-server run
        as it ran (the profile) for the parameter-server architectures and for ``ideal``; the
        computation alone, with the transfers' CPU work put back by the simulator, for ring
        AllReduce (None: the latter when there is one).

        A parameter server's workers compute as the one-worker run did beside its own
        transfers: each worker's transfers per step are the same whatever W, and what they
        cost the computation is in that run's measured compute, however it arises. The
        per-byte cost fitted to it cannot reproduce it when the slowdown does not come from
        work running beside the computation (strict phases: 1.18x slower computation with no
        transfer in flight, resnet8 at 300 Mbit/s), and it then under-predicted the step by
        10-20%. A ring's workers send no bytes in a one-worker run, so their transfers' work
        has to be modelled.
        """
        if not ideal and self.alone is not None and self._replays_alone(arch):
            return self.alone
        return self.trace

    def _replays_alone(self, arch: Architecture | None) -> bool:
        return self.alone is not None and (arch is None or not arch.uses_servers)

    def _rate_coupled_cpu(self, arch: Architecture) -> bool:
        """Whether ``comm_cpu_s_per_byte`` (work beside each transfer, at its pace) models the
        transfers' CPU work: for a ring replaying the computation alone, when no measured
        per-byte work (``ring_cpu_work_s_per_byte``) replaces it."""
        return self._replays_alone(arch) and self.ring_cpu_work_s_per_byte is None

    def simulation(
        self, arch: Architecture, workers: int, *, ideal: bool = False, timeline: bool = False
    ) -> SimulationResult:
        """The simulated run behind a prediction; ``timeline``: one replication, with its
        timeline (to draw next to a measured run)."""
        config = self.config(arch, workers, ideal=ideal)
        if timeline:
            config = dataclasses.replace(config, timeline=True, replications=1)
            return simulate(self.replayed_trace(arch, ideal=ideal), config)
        if config.mode != "async" or workers < 2:
            # One run's batch means give the interval: nothing to average over seeds.
            config = dataclasses.replace(config, replications=1)
        return simulate_to_precision(self.replayed_trace(arch, ideal=ideal), config, SIM_RULE)

    def point(
        self,
        arch: Architecture,
        workers: int,
        runs: Sequence[RunResult],
        solo: RunResult,
        *,
        ideal: bool = True,
    ) -> ValidationPoint:
        model = self.for_point(arch, runs)
        if model is not self:  # DDP: the runs' own buckets
            return model.point(arch, workers, runs, solo, ideal=ideal)
        simulated = self.simulation(arch, workers)
        arrivals = self._sync_orders(arch, workers, runs)
        measured = [measured_phases(r) for r in runs]
        return ValidationPoint(
            architecture=arch.value,
            workers=workers,
            measured=tuple(r.examples_per_s for r in runs),
            simulated=simulated.examples_per_s.value,
            simulated_ideal=self.simulated(arch, workers, ideal=True) if ideal else math.nan,
            coarse=self._coarse(arch, workers),
            slowdown=statistics.fmean(r.slowdown_vs(solo).ratio for r in runs),
            measured_step_s=measured_step_quantiles(runs),
            simulated_step_s=simulated_step_quantiles(simulated),
            measured_phases=tuple(p.label for p in measured),
            simulated_phases=tuple(p.label for p in simulated.phases),
            measured_offsets=_offsets(measured),
            simulated_offsets=_offsets(simulated.phases),
            simulated_seeds=(
                simulated.replication_examples_per_s
                if len(simulated.replication_examples_per_s) >= 2
                else ()
            ),
            cpu_ratio=self._cpu_ratio(arch, runs),
            measured_pull_arrivals=arrivals.measured_arrivals,
            simulated_pull_arrivals=arrivals.simulated_arrivals,
            measured_computations=arrivals.measured_computations,
            simulated_computations=arrivals.simulated_computations,
            **self._occupancies(arch, workers, runs),
            buckets=runs[0].config.buckets_text() if arch is Architecture.DDP and runs else "",
        )

    def for_point(self, arch: Architecture, runs: Sequence[RunResult]) -> Predictor:
        """The predictor of a point of ``runs``: for DDP with the runs' buckets (two DDP
        points of one W differ by them), otherwise this one."""
        if arch is not Architecture.DDP or not runs:
            return self
        buckets = runs[0].config.bucket_limits_bytes()
        return (
            self if buckets == self.ddp_buckets else dataclasses.replace(self, ddp_buckets=buckets)
        )

    def _coarse(self, arch: Architecture, workers: int) -> float:
        """The analytic examples/s at the link's bandwidth (the ring's and DDP's closed forms
        from the trace, the parameter server's mean value analysis)."""
        sim_arch, mode = _SIM_SHAPE[arch]
        if sim_arch == "ddp":
            cap, first = self.ddp_buckets or (DEFAULT_BUCKET_CAP_BYTES, DEFAULT_FIRST_BUCKET_BYTES)
            ddp = ddp_worker_from_trace(
                self.replayed_trace(arch), bucket_cap_bytes=cap, first_bucket_bytes=first
            )
            candidate = Candidate("ddp", "sync", "ring", workers)
            return analytic_examples_per_s(
                candidate, worker_type_from_trace(self.trace), self.bandwidth_bps, ddp=ddp
            )
        sharing = "allreduce" if sim_arch == "allreduce" else "ps"
        candidate = Candidate(sim_arch, mode, sharing, workers)
        return analytic_examples_per_s(
            candidate, worker_type_from_trace(self.trace), self.bandwidth_bps
        )

    def _cpu_ratio(self, arch: Architecture, runs: Sequence[RunResult]) -> float:
        """The runs' workers' CPU per step over the trace's (ValidationPoint.cpu_ratio)."""
        charged = measured_comm_thread(self.trace)
        per_run = [r.cpu_s_per_step() for r in runs]
        if not arch.uses_servers or charged is None or charged.cpu_s_per_step <= 0:
            return math.nan
        if not per_run or any(cpu is None for cpu in per_run):
            return math.nan
        return statistics.fmean(cpu for cpu in per_run if cpu is not None) / charged.cpu_s_per_step

    def _sync_orders(
        self, arch: Architecture, workers: int, runs: Sequence[RunResult]
    ) -> _SyncOrders:
        """Sync-SGD with W >= 2, where runs kept their spans: the measured and simulated pull
        arrivals after each release and the computations in the order of those arrivals
        (ValidationPoint); None each otherwise."""
        if arch is not Architecture.PS_SYNC or workers < 2:
            return _SyncOrders()
        unit_s = one_pull_s(self.trace, self.bandwidth_bps)
        compute_s = forward_backward_s_per_step(self.replayed_trace(arch))
        spanned = [(r, r.pull_arrival_times()) for r in runs if r.spans]
        per_run = [pull_arrivals(*times, workers, unit_s, r.config.warmup) for r, times in spanned]
        known = [a for a in per_run if a is not None]
        if not known:
            return _SyncOrders()
        computed = [
            computations_by_arrival(
                times[0], r.computation_times(), workers, compute_s, r.config.warmup
            )
            for r, times in spanned
        ]
        timeline = self.simulation(arch, workers, timeline=True).timeline
        assert timeline is not None
        pull_ends, releases = timeline_pull_ends(timeline)
        simulated = timeline_computations(timeline)
        return _SyncOrders(
            position_medians(known),
            pull_arrivals(pull_ends, releases, workers, unit_s, SIM_WARMUP_STEPS),
            position_medians([c for c in computed if c is not None]),
            computations_by_arrival(pull_ends, simulated, workers, compute_s, SIM_WARMUP_STEPS),
        )

    def _occupancies(
        self, arch: Architecture, workers: int, runs: Sequence[RunResult]
    ) -> dict[str, LinkOccupancy | None]:
        """Async-SGD with W >= 2: the measured and simulated link occupancy (ValidationPoint)."""
        if arch is not Architecture.PS_ASYNC or workers < 2:
            return {}
        measured = [o for o in (r.link_occupancy() for r in runs) if o is not None]
        timeline = self.simulation(arch, workers, timeline=True).timeline
        assert timeline is not None
        return {
            "measured_occupancy": pooled_occupancy(measured),
            "simulated_occupancy": timeline_occupancy(timeline, workers, SIM_WARMUP_STEPS),
        }


def simulate_argv(
    report: ValidationReport,
    arch: Architecture,
    workers: int,
    *,
    trace_file: str,
    alone_file: str,
    network_file: str,
    runs: Sequence[RunResult] = (),
) -> list[str]:
    """The ``sgdsim simulate`` command line that predicts ``arch`` with ``workers`` workers as
    this validation did, from its saved solo trace, computation alone and network profile
    (:attr:`ValidationReport.network`): the testbed's hosting as options (workers sharing its
    cores, a link each: ``--own-nics`` at every W, W = 1 included, where it changes nothing).
    The testbed pins the servers to a core of their own (:class:`Testbed`, two or more cores):
    a machine of their own as far as the workers' cores go, so no ``--server-host``. A
    parameter server's communication threads come from the solo trace's
    own CPU time (schema version 3), and since that trace ran beside its transfers the
    profile's transfer CPU stays off for it (``LinkSettings.trace_beside_transfers``). Meant
    for a validation of the link it measured (no ``--network``, ``--bandwidth`` ... given) and
    the default ring. ``runs``: the point's runs, whose buckets a DDP point's line gives.

    Raises
    ------
    ConfigError : the report has no predictor (it was not made by :func:`assess`).
    """
    if report.predictor is None:
        raise ConfigError("simulate_argv: the report has no predictor")
    p = report.predictor.for_point(arch, runs)
    config = p.config(arch, workers, ideal=False)  # the hosting as the prediction has it
    trace = alone_file if p.replayed_trace(arch) is p.alone else trace_file
    argv = ["sgdsim", "simulate", trace, "--network", network_file, "--arch", config.arch]
    argv += ["--mode", config.mode, "--workers", str(workers)]
    argv += ["--colocated", str(config.colocated_workers)]
    argv += ["--host-cores", f"{config.host_cpu_cores:g}"]
    argv += ["--worker-cores", f"{config.worker_cpu_cores:g}"]
    if not config.shared_nic:
        argv += ["--own-nics"]
    if config.overlap == "none":
        argv += ["--overlap", "none"]
    if config.arch == "ddp":
        argv += ["--bucket-cap", f"{config.bucket_cap_bytes}B"]
        argv += ["--first-bucket", f"{config.first_bucket_bytes}B"]
    return argv


STEP_QUANTILES = (0.05, 0.5, 0.95)


def measured_step_quantiles(runs: Sequence[RunResult]) -> tuple[float, float, float]:
    """The 5%, 50% and 95% quantiles (s) of every worker's post-warm-up step times (each step
    from the previous one's end, as the simulator counts them), pooled over ``runs``."""
    # From the last warm-up step's end on: the first measured step then counts from it
    # (step_time_quantiles counts the first of its ends from 0).
    ends = [
        np.array([s.end_s for s in steps])[max(run.config.warmup, 1) - 1 :]
        for run in runs
        for steps in run.steps_by_worker().values()
    ]
    p05, median, p95 = step_time_quantiles(ends, 1, STEP_QUANTILES)
    return (p05, median, p95)


def simulated_step_quantiles(result: SimulationResult) -> tuple[float, float, float]:
    """The workers' median of each step-time quantile (s) of a simulated run."""
    rows = [(w.p05_step_s, w.median_step_s, w.p95_step_s) for w in result.workers]
    if not rows:
        return (math.nan, math.nan, math.nan)
    q = np.median(np.array(rows), axis=0)
    return (float(q[0]), float(q[1]), float(q[2]))


def measured_phases(run: RunResult) -> ReplicationPhases:
    """How a real run's workers lined up (:mod:`simcore.sim.phases`), from their step ends."""
    by_worker = run.steps_by_worker()
    if len(by_worker) < 2:
        return ReplicationPhases(0, 0.0, ())
    origin = min(s.start_s for s in run.steps)
    length = min(len(steps) for steps in by_worker.values())
    ends = np.array(
        [[s.end_s - origin for s in steps[:length]] for _, steps in sorted(by_worker.items())]
    )
    return replication_phases(ends, run.config.warmup, 0, 0.0)


def _relative_range(values: Sequence[float]) -> float:
    """(max - min) / mean of ``values``."""
    return (max(values) - min(values)) / statistics.fmean(values)


def _offsets(phases: Sequence[ReplicationPhases]) -> tuple[float, ...]:
    """Each run's or seed's median distance between workers' step starts, where it has one."""
    distances = (p.median_distance for p in phases)
    return tuple(d for d in distances if not math.isnan(d))


# --- presenting a report -------------------------------------------------------------------------

PREDICTORS = (
    ("simulated", "simulator"),
    ("simulated_ideal", "simulator, the profiled step on ideal hosts and link"),
    ("coarse", "coarse model"),
)
COLUMNS = (
    Column("workers", "W", "{:d}"),
    Column("measured", "measured"),
    Column("measured_min", "min"),
    Column("measured_max", "max"),
    Column("spread_percent", "spread%", "{:.1f}"),
    Column("standard_error_percent", "se%", "{:.1f}"),
    Column("simulated", "sim"),
    Column("simulated_error_percent", "err%", "{:+.1f}"),
    Column("simulated_spread_percent", "seeds%", "{:.1f}"),
    Column("simulated_ideal", "ideal"),
    Column("simulated_ideal_error_percent", "err%", "{:+.1f}"),
    Column("coarse", "coarse"),
    Column("coarse_error_percent", "err%", "{:+.1f}"),
    Column("slowdown", "compute x"),
    Column("cpu_ratio", "cpu x", "{:.2f}"),
)


# What a point's row's seeds%, compute x and cpu x columns are (the campaign's tables share them).
COLUMNS_TEXT = (
    "(seeds%: (max - min) / mean of the simulated seeds the prediction averages (Async-SGD "
    "with two workers or more, whose workers line up differently from seed to seed), beside"
    " spread%, the runs'; compute x: the runs' forward and backward per worker-step, wall "
    "time, over the solo profile's; cpu x: a parameter server's workers' CPU time per step "
    "over the one-worker runs' that the prediction charges, '-' for rings or runs without "
    "it: where the workers' cores are the bottleneck, an error near cpu x - 1 is the "
    "host's, not the model's)"
)


def comm_cpu_text(fit: CommCpuFit) -> str:
    """One line: the fitted CPU cost of communication and what it was fitted to."""
    text = (
        f"transfers' CPU work {fit.s_per_byte * 1e9:.1f} ns/byte ({fit.cores_at_full_rate:.2f} "
        f"cores at the full rate): computation per step {1e3 * fit.alone_compute_s:.1f} ms "
        f"alone, {1e3 * fit.measured_compute_s:.1f} ms beside the transfers "
        f"({fit.slowdown:.2f}x; simulated {1e3 * fit.simulated_compute_s:.1f} ms)"
    )
    if fit.simulated_compute_s < (1.0 - SHORTFALL) * fit.measured_compute_s:
        text += (
            "; sharing the cores fairly with the transfers cannot slow it that much (the "
            "predictions replay the one-worker run's computation instead)"
        )
    return text


def report_tables(report: ValidationReport) -> list[Table]:
    """One table per architecture: examples/s measured (mean of the repetitions, spread =
    (max - min) / mean), each prediction with its error, and the co-location slowdown."""
    tables: dict[str, Table] = {}
    for p in report.points:
        table = tables.setdefault(p.name, Table(p.name, COLUMNS))
        errors = {f"{key}_error_percent": 100 * p.error(getattr(p, key)) for key, _ in PREDICTORS}
        table.add(
            workers=p.workers,
            measured=p.measured_mean,
            measured_min=min(p.measured),
            measured_max=max(p.measured),
            spread_percent=100 * p.spread,
            standard_error_percent=100 * p.standard_error,
            simulated=p.simulated,
            simulated_spread_percent=100 * p.simulated_spread,
            simulated_ideal=p.simulated_ideal,
            coarse=p.coarse,
            slowdown=p.slowdown,
            cpu_ratio=p.cpu_ratio,
            **errors,
        )
    return list(tables.values())


def _cores_text(report: ValidationReport) -> str:
    if report.cores > report.host_cpu_cores:
        return (
            f"parameter-server workers share {report.host_cpu_cores:g} of {report.cores} cores "
            f"(the server has the other), ring workers all {report.cores}"
        )
    return f"workers share {report.host_cpu_cores:g} core(s)"


def phase_counts_text(labels: Sequence[str]) -> str:
    """``('drifting', 'pipelined', 'drifting')`` -> ``drifting 2, pipelined 1``."""
    return ", ".join(f"{k} {v}" for k, v in Counter(labels).most_common())


def async_pattern_lines(points: Sequence[ValidationPoint]) -> list[str]:
    """For Async-SGD with two workers or more: how the workers lined up in each real run and
    each simulated seed, their step times, and how the transfers shared the server's link: a
    prediction far below its runs with every seed in lock-step is the simulator's missing
    drift (README: 'Async-SGD: what makes workers drift'). None: no such point."""
    shown = [
        p
        for p in points
        if p.architecture == Architecture.PS_ASYNC.value
        and p.workers >= 2
        and (p.measured_phases or p.simulated_phases)
    ]
    if not shown:
        return []
    lines = [
        "",
        "Async-SGD: how the workers lined up in each real run and each simulated seed "
        "(lock-step: starting their steps together; pipelined: at a fixed offset; drifting: "
        "none) and how far apart consecutive workers mostly started their steps (the median, "
        "in steps: 0 together, 0.5 alternating), the median and 95% quantile of their step "
        "times, and the share of time every worker pulled / every worker pushed / both "
        "directions of the server's link were busy",
    ]
    for p in shown:
        m, s = p.measured_step_s, p.simulated_step_s
        lines.append(
            f"  W={p.workers}: runs {phase_counts_text(p.measured_phases) or '-'}; seeds "
            f"{phase_counts_text(p.simulated_phases) or '-'}; examples/s "
            f"{_span_text(p.measured, '.4g')}, simulated {_span_text(p.simulated_seeds, '.4g')}; "
            f"apart {offsets_text(p.measured_offsets)}, simulated "
            f"{offsets_text(p.simulated_offsets)}; steps {_ms(m[1])} / {_ms(m[2])} ms, "
            f"simulated {_ms(s[1])} / {_ms(s[2])} ms; link "
            f"{short_occupancy_text(p.measured_occupancy)} %, simulated "
            f"{short_occupancy_text(p.simulated_occupancy)} %"
        )
    lines += [line for p in shown if (line := offset_gap_line(p))]
    return lines


# The gap between the seeds' and the runs' median distance between step starts (steps) beyond
# which a validation names it: on the kept runs of the models whose steps the link bounds, 10
# of the 11 Async-SGD points with a gap this large were off in its direction (15% on average;
# scenarios/research/async_offsets.py).
OFFSET_GAP = 0.15


def offset_gap_line(point: ValidationPoint) -> str:
    """For an Async-SGD point whose simulated workers started their steps at least OFFSET_GAP
    of a step closer together (or farther apart) than the real ones: which way that moves a
    link-bound prediction; "" otherwise."""
    runs, seeds = point.measured_offset, point.simulated_offset
    if math.isnan(runs) or math.isnan(seeds) or abs(seeds - runs) < OFFSET_GAP:
        return ""
    closer = seeds < runs
    return (
        f"  W={point.workers}: the simulated workers started their steps "
        f"{abs(seeds - runs):.2f} of a step {'closer together' if closer else 'farther apart'} "
        f"than the real ones (medians {seeds:.2f} and {runs:.2f}): where the link bounds the "
        f"step, such a gap makes the prediction too {'low' if closer else 'high'} (README: "
        "'Async-SGD: what makes workers drift')"
    )


def offsets_text(distances: Sequence[float]) -> str:
    """Runs' or seeds' median distances between step starts: ``0.21-0.46``, ``-`` for none."""
    return _span_text(distances, ".2f")


def _span_text(values: Sequence[float], spec: str) -> str:
    """``low-high`` of ``values`` in format ``spec`` (one number when both read the same),
    ``-`` for none."""
    if not values:
        return "-"
    low, high = format(min(values), spec), format(max(values), spec)
    return low if low == high else f"{low}-{high}"


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{1e3 * seconds:.3g}"


def report_text(report: ValidationReport) -> str:
    """The setup line, the tables and the mean and maximum absolute error of each predictor."""
    where = "loopback"
    if report.link_rate_bps is not None:
        rate = report.link_rate_bps
        where = f"emulated cluster, links shaped to {format_bandwidth(rate)}"
        burst = report.testbed_burst_s or BURST_S  # (a report without its measurements)
        bucket = format_bytes(tbf_burst_nbytes(rate, burst))
        if tbf_segments_gso(rate, burst):
            where += (
                f" (tbf's bucket of {bucket} splits TCP's GSO packets: every byte costs the "
                "ranks' CPU an order of magnitude more than a real NIC would, and at high rates "
                "Async-SGD workers sharing a core take turns on the link for it, which the "
                "simulator does not model; scenarios/research/testbed_segmentation.py, "
                "scenarios/research/async_convoy.py)"
            )
        elif burst != BURST_S:
            where += f" (tbf's bucket {bucket}, {burst * 1e3:g} ms at the rate)"
    lines = [
        f"{report.model_name}, batch {report.batch_size}/worker; {where}; predicted with a link "
        f"of {format_bandwidth(report.bandwidth_bps)}, flow weight cv "
        f"{report.flow_weight_cv:.3f}; {_cores_text(report)}, {report.threads} torch "
        "thread(s) per rank; examples/s over all workers"
    ]
    if report.link_text:
        lines.append(report.link_text)
    if report.link_sharing is not None:
        lines += [link_sharing_text(report.link_sharing), ""]
    measured = report.measurements
    if measured is not None and measured.interference is not None:
        fitted = measured_interference(measured.interference)
        lines += [interference_report_text(measured.interference, fitted), ""]
    if measured is not None and measured.warm_sharing is not None:
        lines.append(warm_sharing_text(measured.warm_sharing))
        if report.flow_sharing != WARM_SHARING:
            lines.append(
                "  (not used by the predictions, which share the link with the fresh flows' cv "
                "above: the README's \"Concurrent transfers share the link less evenly in "
                'training"; validate --flow-sharing warm uses it)'
            )
        lines.append("")
    rings = measured.ring_set if measured is not None else ()
    if rings:
        one_flow = report.link_sharing.goodput_bps() if report.link_sharing else None
        predictor = report.predictor
        alpha = predictor.ring_message_latency_s if predictor is not None else None
        if alpha is not None:
            bandwidth = "the link's bandwidth"
            if predictor is not None and predictor.ring_bandwidths:
                bandwidth = (
                    f"its bytes' rate per W measured ({predictor.ring_bytes_bandwidths_text()}; "
                    "RingGoodput.bytes_bandwidth_bps)"
                )
            used = (
                f"for the ring's predictions: {bandwidth} plus {format_seconds(alpha)} per "
                "message"
                + (" (gloo's segments)" if predictor and predictor.ring_segment_bytes else "")
                + " (RingGoodput.message_latency_s)"
            )
        elif report.ring_bandwidth_bps is not None:
            used = "used for the ring's predictions"
        else:
            used = "not used (--bandwidth given)"
        lines += [ring_goodput_text(ring, one_flow) for ring in rings[:-1]]
        lines.append(f"{ring_goodput_text(rings[-1], one_flow)}; {used}")
    if report.comm_cpu is not None:
        lines.append(comm_cpu_text(report.comm_cpu))
    solo_error = (report.solo_simulated - report.solo_examples_per_s) / report.solo_examples_per_s
    solo_runs = report.measurements.solo_runs if report.measurements is not None else ()
    lines.append(
        f"solo profile ({max(len(solo_runs), 1)} run(s)): {report.solo_examples_per_s:.1f} "
        f"examples/s measured ({solo_runs_text(solo_runs)}), {report.solo_simulated:.1f} "
        f"simulated from their trace ({100 * solo_error:+.1f}%)"
    )
    shared = host_load_text(report.measurements)
    if shared:
        lines.append(shared)
    for table in report_tables(report):
        lines += ["", table.text()]
    lines += ["", COLUMNS_TEXT]
    lines += async_pattern_lines(report.points)
    arrivals = [p for p in report.points if p.measured_pull_arrivals is not None]
    if arrivals:
        unit_s = one_pull_s(report.trace, report.bandwidth_bps)
        lines += [
            "",
            f"Sync-SGD: when the first, second, ... of a step's pulls arrived after the server's "
            f"release, in one pull alone ({format_seconds(unit_s)}; median over steps; equal "
            f"sharing: all at W, one after another: 1, 2, ... W)",
        ]
        lines += [
            f"  W={p.workers}: measured {arrivals_text(p.measured_pull_arrivals)}, simulated "
            f"{arrivals_text(p.simulated_pull_arrivals)}"
            for p in arrivals
        ]
        compute_s = forward_backward_s_per_step(report.trace)
        lines += [
            f"and the computation per step of the first worker to have its pull, the second, ... "
            f"(forward and backward), in the solo profile's ({format_seconds(compute_s)}; "
            f"median over steps)"
        ]
        lines += [
            f"  W={p.workers}: measured {arrivals_text(p.measured_computations)}, simulated "
            f"{arrivals_text(p.simulated_computations)}"
            for p in arrivals
        ]
    lines += ["", "absolute error over all points: mean / max"]
    for key, label in PREDICTORS:
        errors = report.abs_errors(key)
        lines.append(f"  {label}: {100 * statistics.fmean(errors):.1f}% / {100 * max(errors):.1f}%")
    floor = noise_floor([p.standard_error for p in report.points])
    if floor is not None:
        beyond = sum(p.beyond_noise(p.simulated) for p in report.points)
        lines += [
            f"  {noise_floor_text(floor)}",
            f"  the simulator's error is beyond {NOISE_Z:g} standard errors of the measured mean "
            f"(se%) at {beyond} of {len(report.points)} points",
        ]
    return "\n".join(lines)


def noise_floor_text(floor: NoiseFloor) -> str:
    """One clause: what the repetitions' own noise costs a perfect prediction."""
    # The largest error is a median over draws of the runs, so it can be below the mean
    # error's expectation (one point: 0.67 against 0.80 standard errors): said as such, not
    # as a "mean / max" pair.
    points = f"{floor.points} point{'' if floor.points == 1 else 's'}"
    return (
        f"the runs' own noise: a prediction of every point's true mean would be off by "
        f"{100 * floor.mean_abs_error:.1f}% on average, and by {100 * floor.max_abs_error:.1f}% "
        f"at most in a typical validation ({100 * floor.max_abs_error_p90:.1f}% in 9 of 10), "
        f"over {points}"
    )
