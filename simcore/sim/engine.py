"""The discrete-event engine: one replication of W workers running N steps on SimPy.

All state lives in one :class:`simpy.Environment` per run. Workers are SimPy processes that run
their steps (Async-SGD); in Sync-SGD one server-side process starts every step of every worker
and waits on a barrier event. Inside a step, ops are driven by timeout callbacks
(:mod:`simcore.sim.slots`) and links (:mod:`simcore.sim.links`).

Step semantics (TPDS'22 Alg. 1, ICPE'20 Alg. 3.1):

- a step is one profiled step sampled with replacement (seeded), optionally with per-op jitter
  (or, with ``jitter="exponential"``, exponential durations and transfer sizes);
- a step starts by making every op without dependencies ready (the pulls) and ends when all its
  ops have completed; at t=0 and at every barrier the workers start in index order 0..W-1;
- ``e_w[n]``, the end of worker w's step n, is the completion of its last op (async) or the
  barrier time (sync);
- the run records, without growing with N, what the throughput estimator needs: each worker's
  step ends at the warm-up end and at batch boundaries, and running step-time moments.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import simpy

from simcore.errors import SgdsimError
from simcore.gc_pause import gc_paused
from simcore.sim.config import SimulationConfig
from simcore.sim.dag import COMM, RENDEZVOUS, CompiledDag, ring_latency_s
from simcore.sim.flow_weights import lognormal_weights, rescaled_weights
from simcore.sim.links import LeftoverLink, Link, LinkCounters, OrderedLink, VirtualTimeLink
from simcore.sim.rate_link import RateLink
from simcore.sim.sharing import (
    EqualSharePolicy,
    FirstComeFirstServed,
    ProcessorSharing,
    SharingPolicy,
    fair_share_of_flows,
)
from simcore.sim.slots import (
    ComputeSlot,
    DelaySlot,
    NetSlot,
    Recorder,
    Rendezvous,
    RendezvousSlot,
    SharedComputeSlot,
    WorkerState,
)
from simcore.sim.streams import StreamContext, make_stream_scheduler, random_rank
from simcore.trace.model import Resource

ProgressCallback = Callable[[int, int], None]
#: Worker-steps between two progress reports (and young-garbage collections) at most.
CHECKPOINT_STEPS = 2000


class SimulationError(SgdsimError, RuntimeError):
    """The simulation could not finish (e.g. a sharing policy gave every flow a zero rate)."""


@dataclass(frozen=True)
class RunRecord:
    """The raw outcome of one replication (flat, typed); summarized by :mod:`.results`."""

    boundaries: tuple[int, ...]  # step indices k-1, ..., N-1 whose ends were recorded
    ends: np.ndarray  # (workers, len(boundaries)) end times s; column 0 is e_w[k-1] (0 if k=0)
    step_moments: np.ndarray  # (workers, 4): count, mean, M2 (Welford), max of step times s
    step_min: np.ndarray  # (workers,) shortest post-warm-up step s
    step_ends: np.ndarray  # (workers, steps) e_w[n] s: step-time distributions and phases
    window_s: tuple[float, float]  # link statistics window: all warmed up .. first worker done
    links: tuple[tuple[LinkCounters, LinkCounters], ...]  # counters at window start and end
    dedicated: bool  # links of a dedicated policy: one per worker
    ops_done: int
    end_s: float
    recorder: Recorder | None
    step_records: tuple[
        tuple[int, int, float, float, int], ...
    ]  # worker, step, start, end, profile


def batch_boundaries(steps: int, warmup: int, batches: int) -> tuple[int, ...]:
    """Step indices ``k-1 = B_0 < B_1 < ... < B_b = N-1`` cutting the measured steps in batches."""
    measured = steps - warmup
    b = min(batches, measured)
    return tuple(sorted({warmup - 1 + round(j * measured / b) for j in range(b + 1)}))


class Engine:
    """One replication: build workers and links for ``config`` and run them."""

    def __init__(
        self,
        config: SimulationConfig,
        dags: Sequence[CompiledDag],
        worker_dag: Sequence[int],
        policy: SharingPolicy,
        seed: np.random.SeedSequence,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.config = config
        self.env = simpy.Environment()
        self.policy = policy
        self.dags = dags
        self.worker_dag = worker_dag
        with gc_paused():  # W workers' state: several objects per worker and op, all kept
            streams = seed.spawn(config.workers + 1)
            self.rngs = [np.random.default_rng(s) for s in streams[: config.workers]]
            self.sched_rng = np.random.default_rng(streams[-1])
            # spawned after the streams above, so that adding it changed none of them
            self._link_rng = np.random.default_rng(seed.spawn(1)[0])
            self.recorder = Recorder() if config.timeline else None
            self.links = self._make_links()
            self.host_cpus = self._make_host_cpus()
            self.comm_cpus = self._make_comm_cpus()
            self.rendezvous = Rendezvous(self.env, config.workers)
            # One table per (DAG, speed), shared by the workers that have them: a table per worker
            # made memory grow with W times the trace (36 KB per worker for a 43-op trace).
            tables: dict[tuple[int, float], list[list[float]]] = {}
            self._rows = [self._worker_rows(w, tables) for w in range(config.workers)]
            self._computation = [dags[d].computation for d in worker_dag]
            self.workers = [self._make_worker(w) for w in range(config.workers)]
        self.boundaries = batch_boundaries(config.steps, config.warmup_steps, config.batches)
        self._boundary_col = {b: j for j, b in enumerate(self.boundaries)}
        n_w = config.workers
        self.ends = np.zeros((n_w, len(self.boundaries)))
        self.moments = np.zeros((n_w, 4))
        self.step_min = np.full(n_w, math.inf)
        self.step_ends = np.zeros((n_w, config.steps))
        self.last_end = [0.0] * n_w
        self.profile_step = [0] * n_w
        self.step_records: list[tuple[int, int, float, float, int]] = []
        self._warmed = 0
        self._window_start: tuple[float, list[LinkCounters]] | None = None
        self._window_end: tuple[float, list[LinkCounters]] | None = None
        self._barrier: simpy.Event | None = None
        self._pending = 0
        self.progress = progress  # progress(worker-steps done, of this run's)
        self._steps_done = 0
        # 1% of the run, but at least every CHECKPOINT_STEPS worker-steps, so that the progress
        # of a long run moves (and its rate and time left are known) within seconds.
        self._progress_total = config.workers * config.steps
        self._progress_every = max(1, min(self._progress_total // 100, CHECKPOINT_STEPS))

    # ----------------------------------------------------------------- construction
    def _caps(self) -> list[float]:
        cfg = self.config
        cap = cfg.flow_cap_bps
        caps = list(cap) if isinstance(cap, tuple) else [cap or math.inf] * cfg.workers
        if cfg.servers == 1 and cfg.nic_bps < cfg.bandwidth_bps:
            caps = [min(c, cfg.nic_bps) for c in caps]  # one server: the NIC is a per-flow cap
        return caps

    def _make_links(self) -> dict[str, Link]:
        links: dict[str, Link] = {}
        for direction in (Resource.DOWNLINK.value, Resource.UPLINK.value):
            if any(s.resource == direction for dag in self.dags for s in dag.slots):
                links[direction] = self._make_link(direction)
        duplex, interference = self.config.duplex_bps, self.config.duplex_interference
        if (duplex is not None or interference is not None) and len(links) == 2:
            down, up = links[Resource.DOWNLINK.value], links[Resource.UPLINK.value]
            assert isinstance(down, RateLink) and isinstance(up, RateLink)
            if interference is not None:
                efficiency, pull_exponent, push_exponent = interference
                down.couple_interference(up, efficiency, pull_exponent)
                up.couple_interference(down, efficiency, push_exponent)
            else:
                assert duplex is not None
                down.couple_duplex(up, duplex)
                up.couple_duplex(down, duplex)
        return links

    def _make_link(self, name: str) -> Link:
        cfg, policy, env = self.config, self.policy, self.env
        caps = self._caps()
        bandwidth = cfg.bandwidth_bps
        shared_nic = cfg.colocated_workers > 1 and cfg.shared_nic
        # Only the general link has NIC groups, weights, and tells the CPUs its flows' rates.
        general = (
            shared_nic
            or cfg.weight_cv_of(name) > 0
            or cfg.comm_cpu_s_per_byte > 0
            or cfg.duplex_bps is not None
            or cfg.duplex_interference is not None
        )
        uniform = all(c == caps[0] for c in caps)
        if not general and cfg.servers == 1 and uniform and isinstance(policy, EqualSharePolicy):
            cap = caps[0]
            share = policy.share_bps

            def share_of_n(n: int) -> float:
                rate = share(n, bandwidth)
                return rate if rate < cap else cap

            return VirtualTimeLink(env, name, bandwidth, share_of_n)
        no_spare = cfg.cap_mode == "clip" or all(c >= bandwidth for c in caps)
        if (
            not general
            and cfg.servers == 1
            and isinstance(policy, FirstComeFirstServed)
            and no_spare
        ):
            return OrderedLink(env, name, bandwidth, caps)
        nic: list[float] | None
        nic_of: list[int] | None = None
        if shared_nic:  # co-located workers: one NIC per host
            nic = [cfg.nic_bps] * cfg.hosts
            nic_of = [cfg.host_of(w) for w in range(cfg.workers)]
        else:
            nic = [cfg.nic_bps] * cfg.workers if cfg.servers > 1 else None
        return RateLink(
            env,
            name,
            [bandwidth] * cfg.servers,
            policy,
            caps,
            cfg.cap_mode == "maxmin",
            nic,
            nic_of,
            self._flow_weight(name),
            self._comm_hook(name) if cfg.comm_cpu_s_per_byte > 0 else None,
        )

    # One weight drawer for all links (it draws ahead from their one stream); one hook's part of
    # the transfers' CPU wants per link, in link order (see _comm_hook).
    _weight_draw: Callable[[], float] | None = None
    _comm_parts: tuple[list[tuple[float, ...]], ...] = ()

    def _flow_weight(self, direction: str) -> Callable[[], float] | None:
        """Each transfer's weight on the ``direction`` link (SimulationConfig.flow_weight_cv,
        the uplink's own flow_weight_cv_push); None: equal. Both links draw from one stream."""
        cfg = self.config
        cv = cfg.weight_cv_of(direction)
        if cv <= 0:
            return None
        base = cfg.flow_weight_cv if cfg.flow_weight_cv > 0 else cv
        if self._weight_draw is None:
            self._weight_draw = lognormal_weights(base, self._link_rng)
        if cv == base:
            return self._weight_draw
        return rescaled_weights(self._weight_draw, base, cv)

    def _make_host_cpus(self) -> list[Link]:
        """One CPU per host when co-located workers share it: a link of ``host_cpu_cores``
        whose flows are computations, each limited to ``worker_cpu_cores``. With
        ``comm_cpu_s_per_byte`` the computations get what a max-min fair share with the
        transfers' wants leaves them (``_comm_load_changed`` keeps the wants current)."""
        cfg = self.config
        cores, per_op = cfg.host_cpu_cores, cfg.worker_cores
        if cores is None or per_op is None:
            return []

        if cfg.comm_cpu_s_per_byte > 0:  # the general link, with what the transfers leave
            caps = [per_op] * cfg.workers
            self._comm_demands: list[list[float]] = [[] for _ in range(cfg.hosts)]
            demands = self._comm_demands  # the hooks update each host's list in place

            def left_for_computing(host: int) -> Callable[[int], float]:
                return partial(fair_share_of_flows, cores, cap=per_op, other_demands=demands[host])

            return [
                RateLink(
                    self.env,
                    f"cpu[{h}]",
                    [cores],
                    ProcessorSharing(),
                    caps,
                    True,
                    None,
                    capacity_of=left_for_computing(h),
                )
                for h in range(cfg.hosts)
            ]

        def share_of_n(n: int) -> float:
            share = cores / n
            return share if share < per_op else per_op

        return [VirtualTimeLink(self.env, f"cpu[{h}]", cores, share_of_n) for h in range(cfg.hosts)]

    def _make_comm_cpus(self) -> list[Link]:
        """Per host, what a parameter-server worker's communication thread runs on when its
        work is the CPU beyond the computation (``comm_thread_s_per_step``): the cores the
        computations leave (SEMANTICS.md). Empty: the comm slot shares the cores alike."""
        cfg = self.config
        if cfg.comm_thread_s_per_step <= 0 or not self.host_cpus:
            return []
        cores, per_op = cfg.host_cpu_cores, cfg.worker_cores
        assert cores is not None and per_op is not None  # host_cpus exist only then
        out: list[Link] = []
        for h, cpu in enumerate(self.host_cpus):
            assert isinstance(cpu, VirtualTimeLink)  # config: not with comm_cpu_s_per_byte
            out.append(LeftoverLink(self.env, f"comm-cpu[{h}]", cores, per_op, cpu))
        return out

    def _comm_hook(self, name: str) -> Callable[[], None]:
        """The hook link ``name`` calls after each re-plan (see :meth:`_comm_load_changed`)."""
        if not RateLink.fast_paths:  # the reference: every link's wants from scratch
            return self._comm_load_changed
        cfg = self.config
        per_bps = cfg.comm_cpu_cores_per_bps
        host_of = [cfg.host_of(w) for w in range(cfg.workers)]
        hosts = range(cfg.hosts)
        parts: list[tuple[float, ...]] = [() for _ in hosts]  # this link's wants per host
        self._comm_parts = (*self._comm_parts, parts)

        def changed() -> None:
            # Only this link's rates changed since the last call (rates change only in a
            # re-plan, and every re-plan calls its hook), so a host's wants changed iff this
            # link's part of them did: the same hosts refresh, in the same order, as
            # _comm_load_changed would.
            all_parts, demands, cpus = self._comm_parts, self._comm_demands, self.host_cpus
            link = self.links[name]
            assert isinstance(link, RateLink)
            now: list[tuple[float, ...]] = [()] * len(parts)
            for worker, rate in link.worker_rates():
                if rate > 0.0:
                    h = host_of[worker]
                    now[h] = (*now[h], rate * per_bps)
            for h in hosts:
                if now[h] != parts[h]:
                    parts[h] = now[h]
                    demands[h][:] = [x for p in all_parts for x in p[h]]
                    cpu = cpus[h]
                    assert isinstance(cpu, RateLink)
                    cpu.refresh()

        return changed

    def _comm_load_changed(self) -> None:
        """A network link re-planned: tell each host CPU what its transfers now want of it.

        A transfer at r bit/s wants ``r * comm_cpu_cores_per_bps`` cores of its worker's host;
        the host's computations share the cores with these demands max-min fairly.
        """
        cfg = self.config
        per_bps = cfg.comm_cpu_cores_per_bps
        demands: list[list[float]] = [[] for _ in range(cfg.hosts)]
        for link in self.links.values():
            assert isinstance(link, RateLink)
            for worker, rate in link.worker_rates():
                if rate > 0.0:
                    demands[cfg.host_of(worker)].append(rate * per_bps)
        for h, (cpu, wanted) in enumerate(zip(self.host_cpus, demands, strict=True)):
            if wanted != self._comm_demands[h]:
                self._comm_demands[h][:] = wanted
                assert isinstance(cpu, RateLink)
                cpu.refresh()

    def _worker_rows(
        self, w: int, tables: dict[tuple[int, float], list[list[float]]]
    ) -> list[list[float]]:
        """The profiled steps' durations for worker w, with its speed factor applied.

        ``tables`` caches them per (DAG, speed); workers only read them.
        """
        d = self.worker_dag[w]
        speed = 1.0 if self.config.speed_factors is None else self.config.speed_factors[w]
        rows = tables.get((d, speed))
        if rows is None:
            dag = self.dags[d]
            table = dag.durations
            if speed != 1.0:
                table = np.where(dag.scalable, table / speed, table)
            rows = tables[(d, speed)] = table.tolist()
        return rows

    def _make_worker(self, w: int) -> WorkerState:
        d = self.worker_dag[w]
        dag = self.dags[d]
        env = self.env
        state = WorkerState(env, w, dag.dependents, dag.ndeps, dag.roots, dag.bits)
        state.recorder = self.recorder  # before the slots, which pick their callbacks from it
        state.op_offset = sum(self.dags[i].n_ops for i in range(d))
        slot_offset = sum(len(self.dags[i].slots) for i in range(d))
        context = StreamContext(
            n_ops=dag.n_ops,
            critical_path_s=dag.critical_path_s(self.config.bandwidth_bps)
            if self.config.scheduler == "critical-path"
            else [],
            window_bits=8.0 * self.config.window_bytes,
            rank=random_rank(dag.n_ops, self.sched_rng)
            if self.config.scheduler == "random"
            else [],
        )
        slots: list[Any] = []
        ring = self.config.arch == "allreduce"
        # A pipelined ring's messages carry their own latency and its collectives wait for each
        # other in the DAG (DDP's always do); otherwise the connection stays busy for the
        # ring's latency.
        hold_s = 0.0
        if ring and not self.config.ring_pipelined:
            hold_s = ring_latency_s(self.config.latency_s, self.config.workers)
        local = self.config.server_is_local(w)
        server_cpu = self._server_cpu()
        for i, spec in enumerate(dag.slots):
            sid = slot_offset + i
            if spec.is_network and local:
                slots.append(DelaySlot(env, state, sid))  # on the server's machine: no network
            elif spec.resource == Resource.PS.value and server_cpu is not None:
                # The servers' work for this worker (updates, parsing) on their host's cores,
                # beside that host's workers' computation, with the cores a profiled op held.
                cores = self.config.worker_cores
                assert cores is not None  # host_cpus exist only then
                slots.append(SharedComputeSlot(env, state, sid, server_cpu, cores))
            elif spec.is_network:
                queue = make_stream_scheduler(self.config.scheduler, context)
                slots.append(
                    NetSlot(env, state, sid, self.links[spec.resource], spec.server, queue, hold_s)
                )
            elif spec.resource == "latency":
                slots.append(DelaySlot(env, state, sid))
            elif spec.resource == RENDEZVOUS:
                slots.append(RendezvousSlot(env, state, sid, self.rendezvous, dag.op_ids))
            elif spec.resource in (Resource.WORKER.value, COMM) and self.host_cpus:
                # The computation and the communication thread (parse_placement="pipelined")
                # share the host's cores alike; a parameter-server worker's comm thread takes
                # what the computations leave (comm_thread_s_per_step).
                host = self.config.host_of(w)
                on_leftover = spec.resource == COMM and self.comm_cpus
                cpu = self.comm_cpus[host] if on_leftover else self.host_cpus[host]
                cores = self.config.worker_cores
                assert cores is not None  # host_cpus exist only then
                slots.append(SharedComputeSlot(env, state, sid, cpu, cores))
            else:
                slots.append(ComputeSlot(env, state, sid))
        state.offers = [slots[s].offer for s in dag.slot_of]
        state.on_step_end = self._on_step_end
        return state

    def _server_cpu(self) -> Link | None:
        """The host CPU the parameter servers compute on: their host's, when they run on a
        training host whose cores are shared (``server_host``, ``host_cpu_cores``); None: a
        core of their own per worker (SEMANTICS.md)."""
        host = self.config.server_host
        return self.host_cpus[host] if host is not None and self.host_cpus else None

    # ----------------------------------------------------------------- running
    def _durations(self, w: int) -> list[float]:
        rows = self._rows[w]
        rng = self.rngs[w]
        cfg = self.config
        s = int(rng.integers(len(rows))) if len(rows) > 1 else 0
        self.profile_step[w] = s
        if cfg.jitter == "none" and cfg.jitter_cv == 0.0:
            return rows[s]
        row = np.asarray(rows[s])
        if cfg.jitter == "resample" and len(rows) > 1:
            table = np.asarray(rows)
            picks = rng.integers(len(rows), size=table.shape[1])
            row = table[picks, np.arange(table.shape[1])]
        if cfg.jitter == "exponential":  # computation here, transfer sizes in _begin
            row = np.where(self._computation[w], rng.exponential(row), row)
        if cfg.jitter_cv > 0.0:  # computation only: latency stays fixed, transfers are 0 here
            factor = np.maximum(0.0, 1.0 + cfg.jitter_cv * rng.standard_normal(row.shape))
            row = np.where(self._computation[w], row * factor, row)
        out: list[float] = row.tolist()
        return out

    def _begin(self, w: int, step: int) -> None:
        durations = self._durations(w)
        if self.config.jitter == "exponential":  # each transfer's bits, mean the op's size
            bits = self.dags[self.worker_dag[w]].bits
            self.workers[w].bits = tuple(self.rngs[w].exponential(bits).tolist())
        self.workers[w].begin(step, durations)

    def _on_step_end(self, state: WorkerState) -> None:
        if self.config.mode == "async":
            self._step_done(state.index, state.step, self.env.now)
            if state.step + 1 < self.config.steps:
                self._begin(state.index, state.step + 1)
            return
        self._pending -= 1
        if not self._pending:
            assert self._barrier is not None
            self._barrier.succeed()

    def _async_worker(self, w: int) -> Generator[simpy.Event, Any, None]:
        """Async-SGD: each worker starts its next step as soon as its own step ends."""
        self._begin(w, 0)
        yield self._all_done[w]

    def _sync_driver(self) -> Generator[simpy.Event, Any, None]:
        """Sync-SGD, the server side: start all workers, wait for the barrier, repeat."""
        for step in range(self.config.steps):
            self._barrier = simpy.Event(self.env)
            self._pending = self.config.workers
            for w in range(self.config.workers):
                self._begin(w, step)
            yield self._barrier
            for w in range(self.config.workers):
                self._step_done(w, step, self.env.now)

    def _step_done(self, w: int, step: int, now: float) -> None:
        cfg = self.config
        start = self.last_end[w]
        self.last_end[w] = now
        if self.recorder is not None:
            self.step_records.append((w, step, start, now, self.profile_step[w]))
        self.step_ends[w, step] = now
        col = self._boundary_col.get(step)
        if col is not None:
            self.ends[w, col] = now
        if step >= cfg.warmup_steps:
            self._moments(w, now - start)
        if step == cfg.warmup_steps - 1:
            self._warmed += 1
            if self._warmed == cfg.workers:
                self._window_start = (now, self._counters(now))
        if step == cfg.steps - 1:
            if self._window_end is None:
                self._window_end = (now, self._counters(now))
            if cfg.mode == "async":
                self._all_done[w].succeed()
        self._steps_done += 1
        if (
            self._steps_done % self._progress_every == 0
            or self._steps_done == cfg.workers * cfg.steps
        ):
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Every 1% of the run or CHECKPOINT_STEPS: report progress, collect young garbage.

        The run pauses automatic collections (see :mod:`simcore.gc_pause`); collecting the
        young generations here keeps memory bounded even with a policy that makes cycles.
        """
        gc.collect(1)
        if self.progress is not None:
            self.progress(self._steps_done, self._progress_total)

    def _moments(self, w: int, x: float) -> None:
        m = self.moments[w]
        m[0] += 1
        delta = x - m[1]
        m[1] += delta / m[0]
        m[2] += delta * (x - m[1])
        m[3] = max(m[3], x)
        self.step_min[w] = min(self.step_min[w], x)

    def _counters(self, now: float) -> list[LinkCounters]:
        return [c for link in self.links.values() for c in link.counters(now)]

    def run(self) -> RunRecord:
        """Run the replication to the end and return its record."""
        cfg = self.config
        self._all_done = [simpy.Event(self.env) for _ in range(cfg.workers)]
        if cfg.warmup_steps == 0:
            self._window_start = (0.0, self._counters(0.0))
        if cfg.mode == "async":
            for w in range(cfg.workers):  # started in index order at t=0
                self.env.process(self._async_worker(w))
        else:
            self.env.process(self._sync_driver())
        with gc_paused():  # see _checkpoint: young garbage is still collected
            self.env.run()
        if (
            self._window_end is None
            or any(s.step < cfg.steps - 1 for s in self.workers)
            or any(s.left for s in self.workers)
        ):
            raise SimulationError(
                "simulation stalled before every worker finished its steps: a sharing policy "
                f"({self.policy.name}) left flows without bandwidth"
            )
        return self._record()

    def _record(self) -> RunRecord:
        end = self.env.now
        assert self._window_end is not None
        start = self._window_start
        if (
            start is None or start[0] >= self._window_end[0]
        ):  # no common steady state: use the whole run
            start = (0.0, [self._zero(c) for c in self._window_end[1]])
        return RunRecord(
            boundaries=self.boundaries,
            ends=self.ends,
            step_moments=self.moments,
            step_min=self.step_min,
            step_ends=self.step_ends,
            window_s=(start[0], self._window_end[0]),
            links=tuple(zip(start[1], self._window_end[1], strict=True)),
            dedicated=self.policy.dedicated,
            ops_done=sum(s.ops_done for s in self.workers),
            end_s=end,
            recorder=self.recorder,
            step_records=tuple(self.step_records),
        )

    @staticmethod
    def _zero(c: LinkCounters) -> LinkCounters:
        return LinkCounters(c.name, c.channel, c.capacity_bps, 0.0, 0.0, 0.0, 0.0, 0.0)
