"""The simulation configuration: a frozen, validated dataclass in SI units.

Every check that does not need the trace runs when the config is built; the checks that do (a
placement naming a layer, worker types) run in :func:`validate_for_traces` before a simulation
starts. Errors are :class:`~simcore.errors.ConfigError` and start with the parameter's name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from simcore.errors import ConfigError
from simcore.sim.buckets import (
    DEFAULT_BUCKET_CAP_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    trace_buckets,
)
from simcore.sim.collectives import collective_names
from simcore.sim.sharing import sharing_policy_names
from simcore.sim.streams import stream_scheduler_names
from simcore.trace.model import Trace
from simcore.units import check_bandwidth_range, check_duration_range

ARCHS = ("ps", "allreduce", "ddp")
COLLECTIVE_ARCHS = ("allreduce", "ddp")  # no parameter servers: the workers all-reduce
COMPRESSIONS = ("none", "fp16")  # DDP's comm hooks: none, or torch's fp16_compress_hook
MODES = ("async", "sync")
CAP_MODES = ("clip", "maxmin")
JITTERS = ("none", "resample", "exponential")
PLACEMENTS = ("greedy", "round-robin")
OVERLAPS = ("layerwise", "none")
PARSE_PLACEMENTS = ("after", "pipelined")
SERVER_NICS = ("shared", "own")  # a server on a training host: that host's network, or its own
HYBRID = "hybrid"
MAX_SERVERS = 1024  # parameter servers; far more than layers of real models, and quick to place

# Replications the CLI and the reports run by default. Async-SGD: identical workers settle in
# lock-step or in pipelined phases depending on the seed (simcore.sim.phases), so one run's
# batch means can be tight around one of two answers. Five seeds give a t interval with 4
# degrees of freedom (t = 2.78) and show both patterns with probability 1 - p^5 - (1-p)^5
# when a seed lands in one with probability p (0.83 at p = 0.3, against 0.63 with three seeds),
# at five times one run's cost. Sync-SGD restarts every worker at each barrier, and one worker
# has no phases, so neither can settle differently: one run with batch means.
ASYNC_REPLICATIONS = 5
SYNC_REPLICATIONS = 1


def default_replications(mode: str, workers: int = 2) -> int:
    """The replications the CLI and reports run for ``mode`` and ``workers`` unless told
    otherwise: several for Async-SGD with two workers or more, else one."""
    return ASYNC_REPLICATIONS if mode == "async" and workers > 1 else SYNC_REPLICATIONS


@dataclass(frozen=True)
class SimulationConfig:
    """What to simulate. Bandwidths in bit/s, sizes in bytes, times in seconds.

    Attributes
    ----------
    workers : number of workers W (>= 1).
    bandwidth_bps : bandwidth B of each parameter server's link, per direction; for ``allreduce``
        the bandwidth of each worker in the ring.
    arch : ``"ps"`` (parameter server), ``"allreduce"`` (decentralized ring AllReduce of each
        layer, sync only) or ``"ddp"`` (PyTorch DistributedDataParallel: the gradients in
        buckets, one AllReduce per bucket in bucket order, overlapped with the backward pass;
        sync only; :mod:`simcore.sim.ddp_dag`).
    mode : ``"async"`` (a worker starts its next step when its own step ends) or ``"sync"`` (a
        barrier: the next step starts when all workers finished).
    sharing : a registered sharing policy (``fcfs``, ``ps``, ``allreduce``, ...) or ``"hybrid"``
        (the mean of the ``fcfs`` and ``ps`` throughputs, TPDS'22 3.2.1). None: ``ps`` for the
        parameter server, ``allreduce`` for the ring.
    steps : steps N simulated per worker, warm-up included.
    warmup_steps : first k steps of each worker left out of the estimates (ICPE'20 4.1: 50).
    seed : root seed; replications, workers and schedulers get independent streams from it.
    replications : independent runs; with >= 2 the 95% CI comes from them, with 1 from batch means.
        None: the default for the mode (``default_replications``: 5 for async with two workers
        or more, else 1), as
        the CLI and the scenarios use it; ``replication_count`` is the number run.
    batches : batch count for batch means (used when ``replications == 1``).
    flow_cap_bps : per-flow rate cap (TPDS'22 4.4), one value or one per worker; None = none.
    cap_mode : ``"clip"`` (min(share, cap), the rest unused: the paper) or ``"maxmin"``.
    scheduler : stream scheduler of the network connections (``fifo``, ``http2``, ``trace``,
        ``critical-path``, ``reverse``, ``random``).
    window_bytes : HTTP/2 flow-control window WIN in bytes.
    parse_alpha_s_per_byte, parse_beta_s : receiver-side parsing op ``alpha * bytes + beta``
        after each transfer (ICPE'20 3.2.1); 0 and 0 = none.
    parse_placement : where that op runs. ``"after"``: after its transfer, on the worker's
        computation (the paper's). ``"pipelined"`` (ring AllReduce only): each all-reduce as
        its 2(K-1) messages, the work on each message done once it has arrived, while the next
        moves, by a communication thread of the worker's own that shares the host's cores with
        the computation (``host_cpu_cores``); collectives one at a time. See SEMANTICS.md.
    ring_segment_bytes : a ring AllReduce's messages as gloo sends them (None: the paper's ring,
        2(K-1) messages of 1/K of the layer each). gloo cuts a layer of M bytes into S segments
        of at most this many bytes (its ``kMaxSegmentSize``, 1 MiB), at least 2 per rank and a
        multiple of K, and sends 2 S (K-1)/K of them one after another, each followed by the
        latency and, with ``parse_placement="pipelined"``, its share of the parsing work (with
        ``"after"`` the work follows the last message). See SEMANTICS.md.
    comm_thread_s_per_step : CPU seconds per worker-step that the worker's communication
        threads spend beyond what the trace's computation ops hold (parameter server only):
        receiving, copying and sending the layers, the kernel's network stack on the worker's
        behalf. Shared over the step's transfers in proportion to their bytes, each share is
        done from a push's start or from a pull's arrival, on the worker's ``comm`` slot (one
        op at a time); with ``host_cpu_cores`` it runs on the cores the computations leave
        (they spent the rest of the measured CPU), else on a core of its own. Nothing waits
        for it but the end of the step: a worker alone does it while it waits for transfers,
        workers sharing cores pay for it. Not with ``comm_cpu_s_per_byte``. 0 = none. See
        SEMANTICS.md.
    latency_s : network latency added to each transfer (not occupying the link).
    servers : number of parameter servers M.
    placement : how layers map to servers: ``"greedy"`` (smallest load in bytes first, as
        TensorFlow), ``"round-robin"``, or a mapping layer name -> server index.
    worker_bandwidth_bps : each worker's NIC; None = ``bandwidth_bps``. Caps a worker's total rate
        over all its connections in one direction.
    speed_factors : per worker, its compute speed relative to the profiled one (2.0 = forward and
        backward take half the time); None = all 1.
    worker_types : per worker, the index of its trace when several traces are given.
    jitter : ``"none"``, ``"resample"`` (each op's duration drawn from that op's profiled
        values independently, instead of whole profiled steps) or ``"exponential"`` (in each
        sampled step, every computation op's duration and every transfer's size drawn from an
        exponential distribution with the profiled value as its mean: the service times of
        product-form queueing theory, for checks against analytic models).
    jitter_cv : extra multiplicative noise on computation durations, coefficient of variation.
    timeline : record every op (memory then grows with the number of steps).
    overlap : ``"layerwise"`` (the trace's per-layer dependencies: a layer's forward starts when
        its pull has arrived, its push when its backward ends) or ``"none"`` (strict phases:
        all pulls, then all computation, then all pushes; TPDS'22 Fig. 4). See SEMANTICS.md.
    devices_per_host : G, accelerators per host (TPDS'22 4.4). With G > 1 each of the ``workers``
        is a host of G devices that each run the profiled step; a host aggregates per layer with
        an intra-host AllReduce, one device per host talks to the servers or the inter-host ring,
        and it broadcasts the new parameters inside the host. 1 = one device per worker (flat).
    intra_bandwidth_bps : the intra-host link between a host's devices (NVLink, PCIe), bit/s;
        needed when ``devices_per_host > 1``.
    server_host : the host whose machine also runs the parameter servers (by default a host is
        one worker; with ``devices_per_host > 1`` a host of G devices; with
        ``colocated_workers = k`` host h holds workers ``h*k .. h*k+k-1``); None = the servers
        have machines of their own. With ``host_cpu_cores`` the servers' updates (and their
        parsing) share that host's cores with its workers' computation. See ``server_nic``.
    server_nic : with ``server_host``, whether the servers use their host's network
        (``"shared"``: the transfers between them and that host's workers stay on the machine
        and take no time, latency and parsing still apply) or have a NIC of their own
        (``"own"``: a container or VM per process, the emulated testbed's link per rank; every
        worker's transfers, that host's included, cross the servers' link as usual).
    colocated_workers : worker processes per host (workers 0..k-1 on the first host, and so on);
        with ``host_cpu_cores`` they share the host's CPU. 1 = every worker has its own host.
    host_cpu_cores : CPU cores per host shared by its co-located workers' computation (processor
        sharing); None = computation is not shared.
    worker_cpu_cores : cores one worker's computation used when it was profiled alone (e.g.
        torch's intra-op threads); an op alone runs at the profiled speed, and ``n`` concurrent
        ops on a host each run at ``min(host_cpu_cores / n, worker_cpu_cores)`` cores. None =
        ``host_cpu_cores`` (a worker alone used the whole host). See SEMANTICS.md.
    shared_nic : whether co-located workers also share their host's NIC (``worker_bandwidth_bps``
        for all of them together). False: each has a network link of its own (a VM or container
        per worker with its own virtual NIC, or the emulated cluster of ``profilers.netns_cluster``)
        and they share only the CPU.
    flow_weight_cv : unequal shares on a processor-sharing link (``sharing="ps"``, parameter
        server). Each transfer draws a weight when it starts, lognormal with mean 1 and this
        coefficient of variation, and concurrent transfers get the link in proportion to their
        weights (discriminatory processor sharing). 0 = plain PS (equal shares). TCP flows through
        one bottleneck do not get equal shares; ``profilers.link_sharing`` measures how unequal
        they are on a real link and estimates this value. See SEMANTICS.md.
    flow_weight_cv_push : the uplink's own cv (pushes, many workers into one server), when it
        was measured apart from the downlink's (pulls); None = ``flow_weight_cv`` for both.
    comm_cpu_s_per_byte : CPU time (core-seconds) a worker's host spends per byte the worker
        sends or receives: the communication library's and the kernel's work for a transfer
        (copies, wake-ups, the network stack). A transfer at rate r wants
        ``r / 8 * comm_cpu_s_per_byte`` cores of its host while it runs, and the host's cores
        are shared max-min fairly between these wants and the computations. Needs
        ``host_cpu_cores``. A ring AllReduce receives as much as it sends. 0 = transfers cost
        no CPU. The validation of ``profilers.distributed`` fits it to how much the transfers
        slowed a worker's computation. See SEMANTICS.md.
    duplex_bps : what a parameter server's link carries in both directions together (bit/s)
        while pulls and pushes are both in flight; None = each direction carries
        ``bandwidth_bps`` whatever the other does (full duplex). The transfers in flight share
        it max-min fairly, each direction still at most ``bandwidth_bps``. A real server falls
        short of twice its one-way goodput when both directions are busy (the ACKs of one
        direction queue behind the other's data; the server's CPU handles both):
        ``profilers.distributed.link_duplex`` measures it. See SEMANTICS.md.
    duplex_interference : ``(efficiency, pull_exponent, push_exponent)``, the other model of a
        parameter server's two directions (instead of ``duplex_bps``): each direction keeps its
        own bandwidth, and while both carry transfers a direction with ``n`` transfers facing
        ``m`` in the other carries ``efficiency * min(1, n / m) ** exponent`` of it (pulls use
        ``pull_exponent``, pushes ``push_exponent``). A transfer's ACKs travel the other way, so
        they wait in the other direction's queue, which the more transfers it carries the
        longer it stands. None = not this model. ``profilers.distributed.link_duplex``
        measures it (``measure_interference``). See SEMANTICS.md.
    bucket_cap_bytes, first_bucket_bytes : DDP's bucket limits (``bucket_cap_mb``, 25 MiB, and
        the first bucket's, 1 MiB; :mod:`simcore.sim.buckets` has torch's rule).
    collective : DDP's AllReduce algorithm, ``"ring"`` or ``"tree"`` (NCCL's double binary
        tree; :mod:`simcore.sim.collectives`).
    ddp_compression : DDP's comm hook: ``"none"`` (plain AllReduce) or ``"fp16"`` (torch's
        ``fp16_compress_hook``: the buckets travel as float16, cast before and after).
    bucket_copy_s_per_byte : seconds per byte the worker's device takes to copy a gradient into
        its bucket and back after the AllReduce (DDP without ``gradient_as_bucket_view``), and
        to cast a bucket for ``fp16``; 0 = free.
    gradient_as_bucket_view : DDP's option: gradients live in the buckets, no copies.
    """

    workers: int = 1
    bandwidth_bps: float = 10e9
    arch: str = "ps"
    mode: str = "async"
    sharing: str | None = None
    steps: int = 1000
    warmup_steps: int = 50
    seed: int = 1
    replications: int | None = 1
    batches: int = 10
    flow_cap_bps: float | tuple[float, ...] | None = None
    cap_mode: str = "clip"
    scheduler: str = "fifo"
    window_bytes: int = 65536
    parse_alpha_s_per_byte: float = 0.0
    parse_beta_s: float = 0.0
    parse_placement: str = "after"
    ring_segment_bytes: float | None = None
    comm_thread_s_per_step: float = 0.0
    latency_s: float = 0.0
    servers: int = 1
    placement: str | Mapping[str, int] = "greedy"
    worker_bandwidth_bps: float | None = None
    speed_factors: tuple[float, ...] | None = None
    worker_types: tuple[int, ...] | None = None
    jitter: str = "none"
    jitter_cv: float = 0.0
    timeline: bool = False
    overlap: str = "layerwise"
    devices_per_host: int = 1
    intra_bandwidth_bps: float | None = None
    server_host: int | None = None
    server_nic: str = "shared"
    colocated_workers: int = 1
    host_cpu_cores: float | None = None
    worker_cpu_cores: float | None = None
    shared_nic: bool = True
    flow_weight_cv: float = 0.0
    flow_weight_cv_push: float | None = None
    comm_cpu_s_per_byte: float = 0.0
    duplex_bps: float | None = None
    duplex_interference: tuple[float, float, float] | None = None
    bucket_cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES
    first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES
    collective: str = "ring"
    ddp_compression: str = "none"
    bucket_copy_s_per_byte: float = 0.0
    gradient_as_bucket_view: bool = False

    def weight_cv_of(self, direction: str) -> float:
        """The flow weight cv of the ``"uplink"`` (pushes) or ``"downlink"`` (pulls)."""
        if direction == "uplink" and self.flow_weight_cv_push is not None:
            return self.flow_weight_cv_push
        return self.flow_weight_cv

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled for a pool of processes (simcore.parallel): the read-only placement travels as
        # a dict, and __post_init__ freezes it again on arrival.
        values = [getattr(self, f.name) for f in fields(self)]
        return (SimulationConfig, tuple(dict(v) if isinstance(v, Mapping) else v for v in values))

    def __post_init__(self) -> None:
        if isinstance(self.placement, Mapping):
            object.__setattr__(self, "placement", MappingProxyType(dict(self.placement)))
        for name in ("flow_cap_bps", "speed_factors", "worker_types"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        _validate(self)

    @property
    def runs(self) -> int:
        """Engine runs behind one result: every replication, twice for a hybrid (fcfs and ps)."""
        return self.replication_count * (2 if self.policy_name == HYBRID else 1)

    @property
    def replication_count(self) -> int:
        """The replications run: ``replications``, or the mode's default when it is None."""
        if self.replications is None:
            return default_replications(self.mode, self.workers)
        return self.replications

    @property
    def policy_name(self) -> str:
        """The sharing policy actually used (``sharing`` or the architecture's default)."""
        if self.sharing is not None:
            return self.sharing
        return "allreduce" if self.is_collective else "ps"

    @property
    def is_collective(self) -> bool:
        """No parameter servers: the workers all-reduce (per-layer ring, or DDP's buckets)."""
        return self.arch in COLLECTIVE_ARCHS

    @property
    def ring_collective(self) -> bool:
        """The workers all-reduce in a ring (the per-layer ring, or DDP's ring): what a
        measured ring's terms (cost per message, rate per W, CPU per byte) describe."""
        return self.is_collective and self.collective == "ring"

    @property
    def shares_host_cpu(self) -> bool:
        """True when co-located workers' computation shares a host CPU."""
        return self.host_cpu_cores is not None

    def host_of(self, worker: int) -> int:
        """The host of ``worker`` (co-located workers fill hosts in index order)."""
        return worker // self.colocated_workers

    def server_is_local(self, worker: int) -> bool:
        """Whether ``worker``'s transfers to the servers stay on its machine (the servers run on
        its host and share the host's network: ``server_nic="shared"``)."""
        return (
            self.server_host is not None
            and self.server_nic == "shared"
            and self.host_of(worker) == self.server_host
        )

    @property
    def hosts(self) -> int:
        """Hosts the workers occupy (``colocated_workers`` per host, the last maybe fewer)."""
        return self.host_of(self.workers - 1) + 1

    @property
    def worker_cores(self) -> float | None:
        """Cores one worker's computation uses alone on a shared host CPU; None: not shared."""
        if self.host_cpu_cores is None:
            return None
        return self.worker_cpu_cores if self.worker_cpu_cores is not None else self.host_cpu_cores

    @property
    def ring_pipelined(self) -> bool:
        """A ring AllReduce of two or more simulated as its messages: its parsing work pipelined
        with them (``parse_placement="pipelined"``), or gloo's segments
        (``ring_segment_bytes``); one participant exchanges nothing."""
        return (
            self.is_collective
            and self.collective == "ring"
            and self.workers > 1
            and (self.parse_placement == "pipelined" or self.ring_segment_bytes is not None)
        )

    @property
    def comm_cpu_cores_per_bps(self) -> float:
        """Cores a transfer's CPU work takes per bit/s of its rate (``comm_cpu_s_per_byte``
        per byte; a ring AllReduce flow receives as many bytes as it sends, so twice that)."""
        both_ways = 2.0 if self.is_collective else 1.0
        return both_ways * self.comm_cpu_s_per_byte / 8.0

    @property
    def nic_bps(self) -> float:
        """Each worker's NIC bandwidth in bit/s."""
        return (
            self.bandwidth_bps if self.worker_bandwidth_bps is None else self.worker_bandwidth_bps
        )


def _int_at_least(config: SimulationConfig, name: str, low: int) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: must be an integer >= {low}, got {value!r}")


def _positive(name: str, value: Any, *, zero_ok: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero_ok):
        rule = ">= 0" if zero_ok else "> 0"
        raise ConfigError(f"{name}: must be a finite number {rule}, got {value!r}")


# Beyond this an exponent starves the lighter direction outright (4 transfers against 1: below
# 1e-6 of its bandwidth); no measured link comes near (0.2-0.9 on the emulated testbed).
MAX_INTERFERENCE_EXPONENT = 10.0


def _check_interference(config: SimulationConfig) -> None:
    value = config.duplex_interference
    if not (isinstance(value, tuple) and len(value) == 3):
        raise ConfigError(
            f"duplex_interference: must be (efficiency, pull_exponent, push_exponent), "
            f"got {value!r}"
        )
    efficiency, pull, push = value
    _positive("duplex_interference efficiency", efficiency)
    if efficiency > 1:
        raise ConfigError(f"duplex_interference: efficiency must be <= 1, got {efficiency!r}")
    for what, exponent in (("pull_exponent", pull), ("push_exponent", push)):
        _positive(f"duplex_interference {what}", exponent, zero_ok=True)
        if exponent > MAX_INTERFERENCE_EXPONENT:
            raise ConfigError(
                f"duplex_interference: {what} must be <= {MAX_INTERFERENCE_EXPONENT:g}, "
                f"got {exponent!r}"
            )
    if config.duplex_bps is not None:
        raise ConfigError(
            "duplex_interference and duplex_bps: two models of the same link's two directions; "
            "give one"
        )
    if config.arch != "ps" or config.servers != 1:
        raise ConfigError(
            f"duplex_interference: applies to one parameter server's link (arch='ps', "
            f"servers=1), not arch={config.arch!r} with {config.servers} server(s)"
        )


def _one_of(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(allowed)}")


def _per_worker(config: SimulationConfig, name: str) -> None:
    value = getattr(config, name)
    if isinstance(value, tuple) and len(value) != config.workers:
        raise ConfigError(
            f"{name}: needs one value per worker ({config.workers}), got {len(value)}"
        )


def _validate(config: SimulationConfig) -> None:
    for name, low in (
        ("workers", 1),
        ("steps", 1),
        ("warmup_steps", 0),
        ("batches", 2),
        ("servers", 1),
        ("window_bytes", 1),
        ("seed", 0),
        ("devices_per_host", 1),
        ("colocated_workers", 1),
    ):
        _int_at_least(config, name, low)
    if config.replications is not None:
        _int_at_least(config, "replications", 1)
    if config.servers > MAX_SERVERS:
        raise ConfigError(f"servers: must be at most {MAX_SERVERS}, got {config.servers}")
    if config.steps <= config.warmup_steps:
        raise ConfigError(
            f"steps: must be greater than warmup_steps ({config.warmup_steps}), got {config.steps}"
        )
    _positive("bandwidth_bps", config.bandwidth_bps)
    check_bandwidth_range("bandwidth_bps", config.bandwidth_bps)
    if config.worker_bandwidth_bps is not None:
        _positive("worker_bandwidth_bps", config.worker_bandwidth_bps)
        check_bandwidth_range("worker_bandwidth_bps", config.worker_bandwidth_bps)
    _one_of("arch", config.arch, ARCHS)
    _one_of("mode", config.mode, MODES)
    _one_of("cap_mode", config.cap_mode, CAP_MODES)
    _one_of("jitter", config.jitter, JITTERS)
    _one_of("overlap", config.overlap, OVERLAPS)
    _one_of("parse_placement", config.parse_placement, PARSE_PLACEMENTS)
    if config.parse_placement == "pipelined" and not config.is_collective:
        raise ConfigError(
            f"parse_placement: 'pipelined' is for an AllReduce (arch='allreduce' or 'ddp'), "
            f"not arch={config.arch!r}"
        )
    if config.ring_segment_bytes is not None:
        _positive("ring_segment_bytes", config.ring_segment_bytes)
        if config.ring_segment_bytes < 4:
            raise ConfigError(
                f"ring_segment_bytes: a segment holds at least one float32 (4 bytes), got "
                f"{config.ring_segment_bytes!r}"
            )
        if not config.is_collective:
            raise ConfigError(
                f"ring_segment_bytes: is for a ring AllReduce (arch='allreduce' or 'ddp'), not "
                f"arch={config.arch!r}"
            )
    if config.comm_thread_s_per_step > 0 and config.arch != "ps":
        raise ConfigError(
            f"comm_thread_s_per_step: applies to a parameter server's transfers (arch='ps'), "
            f"not arch={config.arch!r}"
        )
    if config.comm_thread_s_per_step > 0 and config.comm_cpu_s_per_byte > 0:
        raise ConfigError(
            "comm_thread_s_per_step: not with comm_cpu_s_per_byte, which models the same CPU "
            "work at the transfers' pace; give one of them"
        )
    if config.policy_name not in [*sharing_policy_names(), HYBRID]:
        raise ConfigError(
            f"sharing: unknown policy {config.policy_name!r}; registered: "
            f"{', '.join(sharing_policy_names())} (or {HYBRID})"
        )
    if config.scheduler not in stream_scheduler_names():
        raise ConfigError(
            f"scheduler: unknown stream scheduler {config.scheduler!r}; registered: "
            f"{', '.join(stream_scheduler_names())}"
        )
    for name in (
        "parse_alpha_s_per_byte",
        "parse_beta_s",
        "comm_thread_s_per_step",
        "latency_s",
        "jitter_cv",
        "flow_weight_cv",
        "comm_cpu_s_per_byte",
    ):
        _positive(name, getattr(config, name), zero_ok=True)
    check_duration_range("latency_s", config.latency_s)
    check_duration_range("parse_beta_s", config.parse_beta_s)
    check_duration_range("comm_thread_s_per_step", config.comm_thread_s_per_step)
    if config.flow_weight_cv_push is not None:
        _positive("flow_weight_cv_push", config.flow_weight_cv_push, zero_ok=True)
    if config.duplex_bps is not None:
        _positive("duplex_bps", config.duplex_bps)
        check_bandwidth_range("duplex_bps", config.duplex_bps)
        if config.arch != "ps" or config.servers != 1:
            raise ConfigError(
                f"duplex_bps: applies to one parameter server's link (arch='ps', servers=1), "
                f"not arch={config.arch!r} with {config.servers} server(s)"
            )
    if config.duplex_interference is not None:
        _check_interference(config)
    weighted = config.flow_weight_cv > 0 or config.weight_cv_of("uplink") > 0
    if weighted and (config.arch != "ps" or config.policy_name != "ps"):
        raise ConfigError(
            f"flow_weight_cv: weights apply to a parameter server's processor-sharing link "
            f"(arch='ps', sharing='ps'), not arch={config.arch!r} with sharing "
            f"{config.policy_name!r}"
        )
    _validate_per_worker(config)
    if config.intra_bandwidth_bps is not None:
        _positive("intra_bandwidth_bps", config.intra_bandwidth_bps)
        check_bandwidth_range("intra_bandwidth_bps", config.intra_bandwidth_bps)
    elif config.devices_per_host > 1:
        raise ConfigError(
            f"intra_bandwidth_bps: needed with devices_per_host={config.devices_per_host} "
            "(the link between a host's devices, e.g. 300GB/s for NVLink)"
        )
    if not isinstance(config.shared_nic, bool):
        raise ConfigError(f"shared_nic: must be True or False, got {config.shared_nic!r}")
    _validate_host_cpu(config)
    _validate_server_host(config)
    if config.is_collective:
        what = "ring AllReduce" if config.arch == "allreduce" else "DDP"
        if config.mode != "sync":
            raise ConfigError(f"mode: {what} is synchronous; use mode='sync' with it")
        if config.servers != 1:
            raise ConfigError(f"servers: {what} has no parameter servers; use servers=1")
    _validate_ddp(config)
    if isinstance(config.placement, str):
        _one_of("placement", config.placement, PLACEMENTS)


# DDP's own options, with their defaults: given with another architecture they do nothing.
_DDP_DEFAULTS = {
    "bucket_cap_bytes": DEFAULT_BUCKET_CAP_BYTES,
    "first_bucket_bytes": DEFAULT_FIRST_BUCKET_BYTES,
    "collective": "ring",
    "ddp_compression": "none",
    "bucket_copy_s_per_byte": 0.0,
    "gradient_as_bucket_view": False,
}


def _validate_ddp(config: SimulationConfig) -> None:
    if config.arch != "ddp":
        for name, default in _DDP_DEFAULTS.items():
            if getattr(config, name) != default:
                raise ConfigError(
                    f"{name}: is an option of DDP (arch='ddp'), not arch={config.arch!r}"
                )
        return
    for name in ("bucket_cap_bytes", "first_bucket_bytes"):
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{name}: must be a whole number of bytes > 0, got {value!r}")
    _one_of("collective", config.collective, collective_names())
    _one_of("ddp_compression", config.ddp_compression, COMPRESSIONS)
    _positive("bucket_copy_s_per_byte", config.bucket_copy_s_per_byte, zero_ok=True)
    view = config.gradient_as_bucket_view
    if not isinstance(view, bool):
        raise ConfigError(f"gradient_as_bucket_view: must be True or False, got {view!r}")
    if config.collective == "tree":
        if config.workers < 2:
            raise ConfigError(
                f"collective: a tree needs at least 2 workers to all-reduce among, got "
                f"workers={config.workers}; use collective='ring' (one worker reduces nothing)"
            )
        if config.parse_placement == "pipelined" or config.ring_segment_bytes is not None:
            raise ConfigError(
                "collective: 'tree' with gloo's ring segments or pipelined ring work "
                "(ring_segment_bytes, parse_placement='pipelined'); those describe a ring"
            )


def _validate_server_host(config: SimulationConfig) -> None:
    host, nic = config.server_host, config.server_nic
    _one_of("server_nic", nic, SERVER_NICS)
    if host is None:
        if nic != "shared":
            raise ConfigError(
                f"server_nic: {nic!r} needs server_host (servers on machines of their own have "
                "their own NICs already)"
            )
        return
    if isinstance(host, bool) or not isinstance(host, int) or not 0 <= host < config.hosts:
        k, last = config.colocated_workers, config.hosts - 1
        # One worker per host (the default): a host is a worker, and is named so.
        where = (
            f"host index 0..{last} ({config.workers} workers, {k} per host)"
            if k > 1
            else f"worker index 0..{last}"
        )
        raise ConfigError(f"server_host: must be a {where}, got {host!r}")
    if config.arch != "ps":
        raise ConfigError(f"server_host: arch={config.arch!r} has no parameter servers")


def _validate_host_cpu(config: SimulationConfig) -> None:
    if config.comm_cpu_s_per_byte > 0 and config.host_cpu_cores is None:
        raise ConfigError(
            "comm_cpu_s_per_byte: needs host_cpu_cores (the cores on which the transfers' CPU "
            "work competes with the computation)"
        )
    if config.host_cpu_cores is not None:
        _positive("host_cpu_cores", config.host_cpu_cores)
    if config.worker_cpu_cores is not None:
        _positive("worker_cpu_cores", config.worker_cpu_cores)
        if config.host_cpu_cores is None:
            raise ConfigError("worker_cpu_cores: needs host_cpu_cores (the cores it shares)")
        if config.worker_cpu_cores > config.host_cpu_cores:
            raise ConfigError(
                f"worker_cpu_cores: {config.worker_cpu_cores} is more than the host's "
                f"host_cpu_cores ({config.host_cpu_cores})"
            )
    if config.colocated_workers > 1 and config.devices_per_host > 1:
        raise ConfigError(
            "colocated_workers: not with devices_per_host > 1 (a worker is then a whole host)"
        )


def _validate_per_worker(config: SimulationConfig) -> None:
    cap = config.flow_cap_bps
    if cap is not None:
        for value in cap if isinstance(cap, tuple) else (cap,):
            _positive("flow_cap_bps", value)
            check_bandwidth_range("flow_cap_bps", value)
        _per_worker(config, "flow_cap_bps")
    if config.speed_factors is not None:
        _per_worker(config, "speed_factors")
        for value in config.speed_factors:
            _positive("speed_factors", value)
    if config.worker_types is not None:
        _per_worker(config, "worker_types")
        for value in config.worker_types:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"worker_types: entries must be integers >= 0, got {value!r}")


def validate_for_traces(config: SimulationConfig, traces: Sequence[Trace]) -> None:
    """Checks that need the traces; raises ConfigError naming the parameter."""
    if not traces:
        raise ConfigError("trace: at least one trace is needed")
    types = config.worker_types
    if types is None and len(traces) not in (1, config.workers):
        raise ConfigError(
            f"worker_types: {len(traces)} traces for {config.workers} workers; give one trace, "
            f"one per worker, or worker_types mapping each worker to a trace"
        )
    if types is not None and max(types) >= len(traces):
        raise ConfigError(
            f"worker_types: trace index {max(types)} but only {len(traces)} traces were given"
        )
    if isinstance(config.placement, Mapping):
        for trace in traces:
            _validate_mapping(config.placement, config.servers, trace)
    if config.arch == "ddp":
        _validate_ddp_traces(config, traces)


def _validate_ddp_traces(config: SimulationConfig, traces: Sequence[Trace]) -> None:
    """Every worker's trace makes the same buckets: DDP replicates one model on every rank."""
    shapes = [
        tuple(
            (b.nbytes, b.layers)
            for b in trace_buckets(t, config.bucket_cap_bytes, config.first_bucket_bytes)
        )
        for t in traces
    ]
    for trace, shape in zip(traces[1:], shapes[1:], strict=True):
        if shape != shapes[0]:
            raise ConfigError(
                f"worker_types: DDP replicates one model on every worker, but trace "
                f"{trace.source} has other gradients than {traces[0].source} (buckets of "
                f"{[n for n, _ in shape]} bytes against {[n for n, _ in shapes[0]]})"
            )


def _validate_mapping(mapping: Mapping[str, int], servers: int, trace: Trace) -> None:
    layers = trace.layer_by_name
    for name, server in mapping.items():
        if name not in layers:
            raise ConfigError(
                f"placement: layer {name!r} is not in trace {trace.source} "
                f"(model {trace.metadata.model_name})"
            )
        if isinstance(server, bool) or not isinstance(server, int) or not 0 <= server < servers:
            raise ConfigError(
                f"placement: layer {name!r} -> server {server!r}, must be 0..{servers - 1}"
            )
    for layer in trace.layers:
        if layer.param_nbytes > 0 and layer.name not in mapping:
            raise ConfigError(
                f"placement: layer {layer.name!r} has parameters but no server in the mapping"
            )


def trace_of_worker(config: SimulationConfig, n_traces: int) -> list[int]:
    """Index of each worker's trace."""
    if config.worker_types is not None:
        return list(config.worker_types)
    return [0 if n_traces == 1 else w for w in range(config.workers)]
