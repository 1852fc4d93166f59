"""A configuration advisor for data-parallel jobs: which setup to rent for a machine budget.

Given a trace, a budget of N machines and the bandwidth B of each machine's link, :func:`advise`
enumerates every data-parallel configuration that fits the budget (:func:`enumerate_candidates`)
and ranks them by throughput and, when a price per machine-hour is given, by cost per million
examples. The analytic models (TPDS'22 section 2.1 and 3.1) predict every candidate in
milliseconds; the simulator then confirms the ``confirm_top`` best of them. A candidate is ranked
by its simulated throughput when it was simulated, by its analytic one otherwise; every
:class:`Ranked` says which.

Candidates
----------
- ``ps``: W workers and 1 or 2 parameter servers (W + servers machines), Async- or Sync-SGD, and
  a sharing assumption for the servers' links: ``ps`` (processor sharing), ``fcfs`` or
  ``hybrid``. The sharing assumption is not a setting one rents; it is how one expects the real
  network to behave, so each is ranked separately and one can see how much the answer depends on it.
- ``allreduce``: W workers in a ring (W machines), Sync-SGD only (sharing ``allreduce``).
- ``ddp``: PyTorch DDP on W workers (W machines), its buckets all-reduced by a ``ring`` or,
  from two workers, NCCL's double binary ``tree`` (the candidate's ``sharing`` names the
  collective); bucket limits and comm hook as given (``ddp``), else DDP's defaults.

Which analytic prediction
-------------------------
- PS Async-SGD: the MVA solution of TPDS'22 Fig. 5 that matches the sharing assumption: Eq. 4
  (``ps``), Eq. 3 (``fcfs``), Eq. 5's pick between them (``hybrid``). The overlap correction
  (Eq. 6) is not used: it exists only on top of the hybrid pick, so it has no per-assumption
  variant; the simulator, which replays the trace's real per-layer overlap, confirms the top.
- PS Sync-SGD: Eq. 7 (``ps``), Eq. 8 (``fcfs``), Eq. 9 (``hybrid``); again not Eq. 10.
- Ring AllReduce: Eq. 11.
- DDP: the bucket-chain closed form (:mod:`simcore.analytic.ddp_model`), which sees the
  buckets overlap the backward pass.

The analytic ``hybrid`` is Eq. 5's pick (async) or Eq. 9's mean step time (sync); the simulator's
``hybrid`` averages the ``fcfs`` and ``ps`` throughputs (TPDS'22 3.2.1). They differ a little.

Two parameter servers (an approximation)
----------------------------------------
The coarse models assume one server. With two, the layers are split between the servers by the
simulator's greedy placement (fewest bytes first); let f >= 1/2 be the busier server's share of
the model's bytes. Then, per step and direction:

- the busier server's link carries f·M per worker, so its transfers take f·M/B (it paces the job);
- each worker's own NIC still carries all M bytes, so one transfer takes at least M/B; the model
  adds the difference (1 - f)·M/B per direction to the worker's compute time as a fixed delay;
- the server applies the updates of its own layers: T_S is scaled by f as well.

That is exact for one worker (f·M/B + (1 - f)·M/B = M/B) and has the right asymptote when the
server links saturate (throughput bounded by B/(f·M) per direction). In between it is pessimistic:
it adds the NIC time to the queueing time where the two overlap in reality. It ignores that the
two servers' links are not perfectly balanced in time (only in bytes). The simulator (with the
same placement and each worker's NIC modelled) confirms the top candidates.

Saturation
----------
:func:`simcore.saturation.saturation_point` per family (a candidate without its worker count), on
the analytic curve W = 1, 2, ... up to the budget: the fewest workers that reach 95% of the
family's best throughput; None when only the largest W does (still climbing).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simcore.analytic.async_model import predict_async
from simcore.analytic.ddp_model import DdpWorker, ddp_worker_from_trace, predict_ddp
from simcore.analytic.params import Cluster, WorkerType, host_worker_type, worker_type_from_trace
from simcore.analytic.sync_model import predict_sync
from simcore.errors import ConfigError
from simcore.parallel import Interrupted
from simcore.saturation import saturation_point
from simcore.sim import (
    Estimate,
    PrecisionRule,
    SimulationConfig,
    SimulationResult,
    Stopping,
    simulate_many,
)
from simcore.sim.buckets import DEFAULT_BUCKET_CAP_BYTES, DEFAULT_FIRST_BUCKET_BYTES
from simcore.sim.collectives import collective_names
from simcore.sim.dag import assign_servers
from simcore.trace.model import Trace

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_SIM_STEPS",
    "PS_SHARINGS",
    "Advice",
    "Candidate",
    "Ranked",
    "Saturation",
    "advise",
    "analytic_examples_per_s",
    "busiest_server_share",
    "cost_per_million_examples",
    "effective_worker",
    "enumerate_candidates",
]

PS_SHARINGS = ("ps", "fcfs", "hybrid")
DDP_COLLECTIVES = collective_names()  # ring, tree
MAX_SERVERS = 2
DEFAULT_SIM_STEPS = 200
DEFAULT_SEED = 1
MIN_SIM_STEPS = 20
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Candidate:
    """One data-parallel configuration.

    ``arch`` is ``"ps"``, ``"allreduce"`` or ``"ddp"``; ``mode`` ``"async"`` or ``"sync"``
    (allreduce, ddp: sync); ``sharing`` the link sharing assumption (``ps``/``fcfs``/``hybrid``;
    ``allreduce`` for the ring; for DDP its collective, ``ring`` or ``tree``); ``servers``
    parameter servers (1 or 2; 1 for the ring and DDP, which have none).
    """

    arch: str
    mode: str
    sharing: str
    workers: int
    servers: int = 1
    devices_per_host: int = 1

    @property
    def machines(self) -> int:
        """Machines used: every training device plus the parameter servers (the ring: devices
        only). A host of G devices counts G: cloud prices scale about linearly with the
        accelerators of an instance, so the budget and the price are per device."""
        return self.workers * self.devices_per_host + (self.servers if self.arch == "ps" else 0)

    @property
    def family(self) -> str:
        """The configuration without its worker count, e.g. ``PS Sync, fcfs links, 2 servers``
        (with ``, hosts of 8`` when workers are hosts of several devices)."""
        hosts = f", hosts of {self.devices_per_host}" if self.devices_per_host > 1 else ""
        if self.arch == "allreduce":
            return f"ring AllReduce{hosts}"
        if self.arch == "ddp":
            return f"DDP, {self.sharing} AllReduce{hosts}"
        plural = "s" if self.servers > 1 else ""
        mode = self.mode.capitalize()  # PS Async / PS Sync, as advise's architecture column
        return f"PS {mode}, {self.sharing} links, {self.servers} server{plural}{hosts}"

    @property
    def label(self) -> str:
        return f"{self.family}, W={self.workers}"

    def sim_config(
        self,
        bandwidth_bps: float,
        *,
        steps: int,
        seed: int,
        latency_s: float = 0.0,
        intra_bandwidth_bps: float | None = None,
        flow_cap_bps: float | None = None,
        replications: int | None = None,
        ddp: Mapping[str, Any] | None = None,
    ) -> SimulationConfig:
        """The simulator's configuration of this candidate; warm-up is a tenth of ``steps``;
        ``replications`` None: the default for its mode (several seeds for Async-SGD);
        ``ddp``: DDP's config fields (bucket limits, comm hook) for a DDP candidate."""
        extra = {**(ddp or {}), "collective": self.sharing} if self.arch == "ddp" else {}
        return SimulationConfig(
            **extra,
            replications=replications,
            devices_per_host=self.devices_per_host,
            intra_bandwidth_bps=intra_bandwidth_bps,
            flow_cap_bps=flow_cap_bps,
            workers=self.workers,
            bandwidth_bps=bandwidth_bps,
            arch=self.arch,
            mode=self.mode,
            sharing=self.sharing if self.arch == "ps" else None,
            servers=self.servers,
            steps=steps,
            warmup_steps=steps // 10,
            seed=seed,
            latency_s=latency_s,
        )


@dataclass(frozen=True)
class Ranked:
    """A candidate with its predictions (examples/s) and its cost per million examples.

    ``simulated`` is the simulator's estimate with its 95% CI, None when not simulated;
    ``cost_per_million_examples`` is None when no price was given.
    """

    candidate: Candidate
    analytic_examples_per_s: float
    simulated: Estimate | None
    cost_per_million_examples: float | None
    simulated_spread: tuple[float, float] | None = None  # min, max examples/s over seeds
    stopping: Stopping | None = None  # how the stopping rule sized the simulation
    # every seed ran in lock-step while the link carried bytes (SimulationResult.ran_in_lockstep)
    lockstep: bool = False

    @property
    def examples_per_s(self) -> float:
        """The value the ranking uses: simulated when available, else analytic."""
        return self.analytic_examples_per_s if self.simulated is None else self.simulated.value

    @property
    def source(self) -> str:
        """``"simulated"`` or ``"analytic"``: where :attr:`examples_per_s` comes from."""
        return "analytic" if self.simulated is None else "simulated"


@dataclass(frozen=True)
class Saturation:
    """The saturation point of one family on its analytic curve W = 1..``max_workers``."""

    family: str
    workers: int | None  # None: only max_workers reaches 95% of the best (still climbing)
    max_workers: int


@dataclass(frozen=True)
class Advice:
    """What :func:`advise` returns: every candidate ranked, best first."""

    ranked: tuple[Ranked, ...]
    saturation: tuple[Saturation, ...]
    simulated: tuple[Candidate, ...]
    machines: int
    bandwidth_bps: float
    price_per_machine_hour: float | None
    interrupted: bool = False  # Ctrl-C stopped the simulations: ``simulated`` holds those done

    @property
    def best(self) -> Ranked:
        return self.ranked[0]

    @property
    def by_cost(self) -> tuple[Ranked, ...]:
        """Ranked by cost per million examples, cheapest first (empty without a price)."""
        priced = [r for r in self.ranked if r.cost_per_million_examples is not None]
        return tuple(sorted(priced, key=lambda r: r.cost_per_million_examples or 0.0))


def enumerate_candidates(machines: int, devices_per_host: Sequence[int] = (1,)) -> list[Candidate]:
    """Every candidate using at most ``machines`` machines (at least one worker each), for each
    host size in ``devices_per_host`` (a host of G devices counts G machines)."""
    out = []
    for g in devices_per_host:
        out += [
            Candidate("allreduce", "sync", "allreduce", h, 1, g)
            for h in range(1, machines // g + 1)
        ]
        out += [
            Candidate("ddp", "sync", collective, h, 1, g)
            for collective in DDP_COLLECTIVES
            for h in range(1 if collective == "ring" else 2, machines // g + 1)
        ]
        for servers in range(1, MAX_SERVERS + 1):
            for h in range(1, (machines - servers) // g + 1):
                out.extend(
                    Candidate("ps", mode, sharing, h, servers, g)
                    for mode in ("async", "sync")
                    for sharing in PS_SHARINGS
                )
    return out


def busiest_server_share(trace: Trace, servers: int) -> float:
    """f: the share of parameter bytes on the busiest server under greedy placement (1 if none)."""
    placed = assign_servers(trace, servers, "greedy")
    load = [0] * servers
    for layer in trace.layers:
        load[placed[layer.name]] += layer.param_nbytes
    total = sum(load)
    return max(load) / total if total > 0 else 1.0


def effective_worker(
    worker: WorkerType, servers: int, share: float, bandwidth_bps: float
) -> WorkerType:
    """The one-server worker type that stands for ``servers`` servers (module docstring).

    ``share`` is f, the busiest server's share of the bytes; one server: ``worker`` unchanged.
    """
    if servers == 1:
        return worker
    nic_s = (1.0 - share) * worker.transfer_s(bandwidth_bps)
    return dataclasses.replace(
        worker,
        forward_s=worker.forward_s + nic_s,
        backward_s=worker.backward_s + nic_s,
        update_s=worker.update_s * share,
        model_nbytes=round(worker.model_nbytes * share),
    )


def analytic_examples_per_s(
    candidate: Candidate,
    worker: WorkerType,
    bandwidth_bps: float,
    share: float = 1.0,
    intra_bandwidth_bps: float | None = None,
    ddp: DdpWorker | None = None,
    latency_s: float = 0.0,
) -> float:
    """The analytic examples/s of ``candidate`` (see "Which analytic prediction"); a host of
    several devices is one coarse worker (:func:`~simcore.analytic.params.host_worker_type`).
    A DDP candidate needs ``ddp``, the trace's DDP step (the closed form counts
    ``latency_s`` per hop)."""
    if candidate.arch == "ddp":
        if ddp is None:
            raise ConfigError("ddp: a DDP candidate needs the trace's DDP step (DdpWorker)")
        return predict_ddp(
            [ddp],
            [candidate.workers],
            bandwidth_bps,
            latency_s=latency_s,
            collective=candidate.sharing,
            devices_per_host=candidate.devices_per_host,
            intra_bandwidth_bps=intra_bandwidth_bps,
        ).examples_per_s
    host = host_worker_type(worker, candidate.devices_per_host, intra_bandwidth_bps)
    eff = effective_worker(host, candidate.servers, share, bandwidth_bps)
    cluster = Cluster.homogeneous(eff, candidate.workers, bandwidth_bps)
    if candidate.arch == "allreduce":
        return predict_sync(cluster).allreduce.examples_per_s
    if candidate.mode == "sync":
        est = getattr(predict_sync(cluster), candidate.sharing)
    else:
        est = getattr(predict_async(cluster), candidate.sharing)
    return float(est.examples_per_s)


def cost_per_million_examples(machines: int, price_per_machine_hour: float, eps: float) -> float:
    """``machines * price / 3600 / eps * 1e6``: the price of a million examples at ``eps``/s."""
    return machines * price_per_machine_hour / 3600.0 / eps * 1e6 if eps > 0 else math.inf


def _check_number(name: str, value: object, *, positive: bool) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):  # type: ignore[operator]
        rule = "> 0" if positive else ">= 0"
        raise ConfigError(f"{name}: must be a finite number {rule}, got {value!r}")


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: must be an integer >= {low}, got {value!r}")


def _validate(
    trace: object,
    machines: object,
    bandwidth_bps: object,
    price: object,
    confirm_top: object,
    sim_steps: object,
    seed: object,
    latency_s: object,
) -> None:
    if not isinstance(trace, Trace):
        raise ConfigError(f"trace: expected a Trace, got {type(trace).__name__}")
    _check_int("machines", machines, 1)
    _check_number("bandwidth_bps", bandwidth_bps, positive=True)
    if price is not None:
        _check_number("price_per_machine_hour", price, positive=False)
    _check_int("confirm_top", confirm_top, 0)
    _check_int("sim_steps", sim_steps, MIN_SIM_STEPS)
    _check_int("seed", seed, 0)
    _check_number("latency_s", latency_s, positive=False)


def _check_layouts(
    devices_per_host: Sequence[int], intra_bandwidth_bps: float | None, flow_cap_bps: float | None
) -> tuple[int, ...]:
    sizes = tuple(devices_per_host)
    if not sizes:
        raise ConfigError("devices_per_host: at least one host size is needed")
    for g in sizes:
        _check_int("devices_per_host", g, 1)
    if len(set(sizes)) != len(sizes):
        raise ConfigError(f"devices_per_host: {list(sizes)} lists a host size twice")
    if max(sizes) > 1:
        if intra_bandwidth_bps is None:
            raise ConfigError(
                f"intra_bandwidth_bps: needed with hosts of {max(sizes)} devices "
                "(the link between a host's devices)"
            )
        _check_number("intra_bandwidth_bps", intra_bandwidth_bps, positive=True)
    if flow_cap_bps is not None:
        _check_number("flow_cap_bps", flow_cap_bps, positive=True)
    return sizes


def _check_candidates(
    candidates: Sequence[Candidate], machines: int, sizes: Sequence[int] = (1,)
) -> None:
    if not candidates:
        raise ConfigError("candidates: at least one candidate is needed")
    for c in candidates:
        valid = enumerate_candidates(c.machines, (c.devices_per_host,))
        if c not in valid or c.machines > machines or c.devices_per_host not in sizes:
            raise ConfigError(
                f"candidates: {c.label} ({c.machines} machines) is not a valid candidate "
                f"within the budget of {machines} machines"
            )


def advise(
    trace: Trace,
    machines: int,
    bandwidth_bps: float,
    *,
    price_per_machine_hour: float | None = None,
    confirm_top: int = 3,
    sim_steps: int = DEFAULT_SIM_STEPS,
    seed: int = DEFAULT_SEED,
    latency_s: float = 0.0,
    candidates: Sequence[Candidate] | None = None,
    progress: Progress | None = None,
    devices_per_host: Sequence[int] = (1,),
    intra_bandwidth_bps: float | None = None,
    flow_cap_bps: float | None = None,
    replications: int | None = None,
    configure: Callable[[SimulationConfig], SimulationConfig] | None = None,
    precision: PrecisionRule | None = None,
    ddp: Mapping[str, Any] | None = None,
) -> Advice:
    """Rank the data-parallel configurations of ``trace`` that fit in ``machines`` machines.

    Parameters
    ----------
    trace : the one-worker trace.
    machines : the budget N (workers plus parameter servers).
    bandwidth_bps : B, every machine's link per direction, bit/s.
    price_per_machine_hour : price of one machine for one hour (any currency); None: no costs.
    confirm_top : how many of the analytically best candidates to simulate.
    sim_steps : steps per worker of each simulation (a tenth are warm-up), >= 20.
    seed : the simulations' root seed.
    latency_s : per-transfer latency for the simulations (the analytic models have none).
    candidates : restrict the search to these (default: :func:`enumerate_candidates`).
    progress : called as ``progress(done, total)`` with worker-steps simulated so far.
    devices_per_host : the host sizes to choose between (TPDS'22 4.4), e.g. ``(1, 4, 8)``; each
        candidate's workers are then hosts of that many devices, and ``machines`` counts devices.
    intra_bandwidth_bps : the link inside a host, needed with hosts of more than one device.
    flow_cap_bps : a per-flow cap of the network, applied in the simulations that confirm the
        best candidates (the analytic models have no caps, so they rank as if there were none).
    replications : seeds per simulation (None: ``default_replications`` of the candidate's mode,
        several for Async-SGD, whose workers can settle in different phases from seed to seed).
    configure : applied to each confirming simulation's configuration, e.g. a link's measured
        effects (:meth:`simcore.link_settings.LinkSettings.apply`); the analytic ranking has
        none of them.
    precision : the stopping rule (:mod:`simcore.sim.precision`) that sizes each confirming
        simulation instead of ``sim_steps``; None: ``sim_steps`` steps each.
    ddp : the DDP candidates' bucket limits and comm hook, as SimulationConfig fields
        (``bucket_cap_bytes``, ``first_bucket_bytes``, ``ddp_compression``,
        ``bucket_copy_s_per_byte``, ``gradient_as_bucket_view``); None: DDP's defaults.

    Returns
    -------
    Advice
        Candidates best first: the simulated ones by their simulated value, then the others by
        their analytic value; the
        saturation point per family, and which candidates were simulated.

    Raises
    ------
    ConfigError
        A bad input, naming the parameter; or a candidate the simulator rejects.
    """
    _validate(
        trace,
        machines,
        bandwidth_bps,
        price_per_machine_hour,
        confirm_top,
        sim_steps,
        seed,
        latency_s,
    )
    sizes = _check_layouts(devices_per_host, intra_bandwidth_bps, flow_cap_bps)
    pool = enumerate_candidates(machines, sizes) if candidates is None else list(candidates)
    _check_candidates(pool, machines, sizes)
    worker = worker_type_from_trace(trace)
    shares = {s: busiest_server_share(trace, s) for s in range(1, MAX_SERVERS + 1)}
    ddp_step = _ddp_step(trace, ddp) if any(c.arch == "ddp" for c in pool) else None
    analytic = {
        c: analytic_examples_per_s(
            c, worker, bandwidth_bps, shares[c.servers], intra_bandwidth_bps, ddp_step, latency_s
        )
        for c in pool
    }
    top = sorted(pool, key=lambda c: _order(c, analytic[c]))[:confirm_top]
    configs = [
        c.sim_config(
            bandwidth_bps,
            steps=sim_steps if precision is None else precision.first_steps,
            seed=seed,
            latency_s=latency_s,
            intra_bandwidth_bps=intra_bandwidth_bps if c.devices_per_host > 1 else None,
            flow_cap_bps=flow_cap_bps,
            replications=replications,
            ddp=ddp,
        )
        for c in top
    ]
    if configure is not None:
        configs = [configure(config) for config in configs]
    simulated, interrupted = _simulate_all(trace, top, configs, progress, precision)
    ranked = [_ranked(c, analytic[c], simulated.get(c), price_per_machine_hour) for c in pool]
    # Simulated candidates first: a simulated and an analytic figure are not of one kind (the
    # analytic models leave out latency, flow weights, step-time variation), so never interleaved.
    ranked.sort(key=lambda r: (r.simulated is None, *_order(r.candidate, r.examples_per_s)))
    return Advice(
        ranked=tuple(ranked),
        saturation=_saturations(analytic),
        simulated=tuple(c for c in top if c in simulated),
        machines=machines,
        bandwidth_bps=float(bandwidth_bps),
        price_per_machine_hour=price_per_machine_hour,
        interrupted=interrupted,
    )


def _ddp_step(trace: Trace, ddp: Mapping[str, Any] | None) -> DdpWorker:
    """The trace's DDP step with ``ddp``'s bucket limits and hook (DDP's defaults otherwise)."""
    fields = dict(ddp or {})
    return ddp_worker_from_trace(
        trace,
        bucket_cap_bytes=fields.get("bucket_cap_bytes", DEFAULT_BUCKET_CAP_BYTES),
        first_bucket_bytes=fields.get("first_bucket_bytes", DEFAULT_FIRST_BUCKET_BYTES),
        copy_s_per_byte=fields.get("bucket_copy_s_per_byte", 0.0),
        gradient_as_bucket_view=fields.get("gradient_as_bucket_view", False),
        compression=fields.get("ddp_compression", "none"),
    )


def _order(candidate: Candidate, examples_per_s: float) -> tuple[float, int]:
    """Sort key: most examples/s first; ties: fewer machines, then enumeration order (stable)."""
    return (-examples_per_s, candidate.machines)


def _ranked(
    candidate: Candidate, analytic: float, result: SimulationResult | None, price: float | None
) -> Ranked:
    simulated = None if result is None else result.examples_per_s
    eps = analytic if simulated is None else simulated.value
    cost = None if price is None else cost_per_million_examples(candidate.machines, price, eps)
    spread = None
    if result is not None and len(result.replication_examples_per_s) > 1:
        spread = result.examples_spread
    stopping = None if result is None else result.stopping
    lockstep = result is not None and result.ran_in_lockstep
    return Ranked(candidate, analytic, simulated, cost, spread, stopping, lockstep)


def _simulate_all(
    trace: Trace,
    top: Sequence[Candidate],
    configs: Sequence[SimulationConfig],
    progress: Progress | None,
    precision: PrecisionRule | None = None,
) -> tuple[dict[Candidate, SimulationResult], bool]:
    """Simulate each candidate (all validated first); progress counts worker-steps of all (the
    stopping rule's totals grow as it adds runs).

    Ctrl-C (KeyboardInterrupt) stops the simulations and keeps those that finished; the second
    value says it happened. The analytic ranking is complete either way.
    """
    try:
        results = simulate_many(trace, configs, precision, progress=progress)
    except Interrupted as stop:
        return {top[i]: result for i, result in sorted(stop.finished.items())}, True
    return dict(zip(top, results, strict=True)), False


def _saturations(analytic: dict[Candidate, float]) -> tuple[Saturation, ...]:
    """The saturation point of every family on its analytic curve, families in first-seen order."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for c, eps in analytic.items():
        curves.setdefault(c.family, []).append((c.workers, eps))
    out = []
    for family, points in curves.items():
        points.sort()
        ws = [w for w, _ in points]
        out.append(Saturation(family, saturation_point(ws, [x for _, x in points]), ws[-1]))
    return tuple(out)
