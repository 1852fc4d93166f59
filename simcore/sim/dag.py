"""Compile a trace into flat arrays for the engine, applying the architecture's transforms.

The engine never touches ``Op`` objects: it works on op indices, dependency counts, dependents
lists and slot ids precomputed here once per run, so that the inner loop does no lookups by name
and creates no objects per op.

Transforms (in this order), all expressed as changes of the step DAG:

- **strict phases** (``overlap="none"``, TPDS'22 Fig. 4): the worker's computation ops without
  a computation predecessor also wait for every pull, and every push also waits for every
  computation op without a computation successor, so all pulls end before any computation starts
  and all computation ends before any push starts; server updates keep their own push only;
- **ring AllReduce** (TPDS'22 3.2.2): downlink ops are dropped (their dependents inherit their
  dependencies) and each uplink op carries ``2(K-1)/K`` times its bytes, sent at the worker's full
  bandwidth by the ``allreduce`` policy;
- **latency**: a pure delay op ``latency:<id>`` after each transfer, on no resource; a ring
  AllReduce of K participants pays it ``2(K-1)`` times (its messages go in sequence), one
  participant not at all;
- **parsing overhead** (ICPE'20 3.2.1): a receiver-side op ``parse:<id>`` of
  ``alpha * bytes + beta`` seconds after each transfer, on the worker's compute for pulls (and
  AllReduce) and on the server's compute for pushes; the transfer's dependents wait for it;
- **pipelined ring AllReduce** (``parse_placement="pipelined"`` or ``ring_segment_bytes``,
  K > 1): each all-reduce is its messages in sequence (2(K-1) of 1/K of the layer's bytes, or
  gloo's segments: :func:`ring_message_count`; the first keeps the op's id, then ``<id>#1``
  ...), each followed by a ``latency:<id>#j`` op, and each message's share of the
  parsing op (``parse:<id>#j``) runs once it has arrived, on the worker's ``comm`` resource (its
  communication thread, one op at a time, sharing the host's cores with the computation)
  while the next message moves; a zero-time ``join:<id>`` waits for the last message and the
  last work, and the worker's next all-reduce waits for it (one collective at a time);
- **hosts of G devices** (``devices_per_host``, TPDS'22 4.4): before each push (or ring
  AllReduce) an ``intra-reduce:<id>`` op, after each pull (or ring AllReduce, and after its
  latency and parsing) an ``intra-broadcast:<id>`` op, each (G-1)/G of the layer's bytes over the
  intra-host link on the host's ``intra`` resource; a step then trains G times the batch;
- **placement** of layers on parameter servers: each server has its own downlink, uplink and
  compute, so a worker has one connection per server and direction.

Inserted ops follow their transfer in trace order, so trace-order tie-breaks stay meaningful.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from simcore.errors import ConfigError
from simcore.gc_pause import gc_paused
from simcore.sim.config import SimulationConfig
from simcore.sim.dag_ops import (
    COMM,
    DELAY,
    INTRA,
    INTRA_BROADCAST,
    INTRA_REDUCE,
    OTHER,
    RENDEZVOUS,
    DagNode,
    delay_node,
    intra_host_op,
    ring_latency_s,
    ring_message_count,
    ring_messages,
    strict_phase_deps,
)
from simcore.sim.ddp_dag import ddp_nodes
from simcore.trace.model import Resource, Trace

# Names other modules import from here.
__all__ = [
    "COMM",
    "DELAY",
    "INTRA",
    "INTRA_BROADCAST",
    "INTRA_REDUCE",
    "RENDEZVOUS",
    "CompiledDag",
    "SlotSpec",
    "assign_servers",
    "compile_trace",
    "ring_latency_s",
    "ring_message_count",
]


@dataclass(frozen=True)
class SlotSpec:
    """One resource of a worker: ``resource`` (downlink/worker/uplink/ps/latency) at ``server``."""

    resource: str
    server: int

    @property
    def is_network(self) -> bool:
        return self.resource in (Resource.DOWNLINK.value, Resource.UPLINK.value)

    @property
    def label(self) -> str:
        return self.resource if self.server == 0 else f"{self.resource}[{self.server}]"


@dataclass(frozen=True)
class CompiledDag:
    """A step DAG as arrays indexed by op (trace order); see the module docstring."""

    op_ids: tuple[str, ...]
    kinds: tuple[str, ...]
    slot_of: tuple[int, ...]
    slots: tuple[SlotSpec, ...]
    dependents: tuple[tuple[int, ...], ...]
    ndeps: tuple[int, ...]
    roots: tuple[int, ...]
    bits: tuple[float, ...]  # bits sent by network ops, 0.0 for others
    durations: np.ndarray  # (profiled steps, ops) seconds; 0 for network ops
    scalable: np.ndarray  # bool per op: a worker-compute op that speed factors scale
    computation: np.ndarray  # bool per op: on a compute resource (worker, ps); jitter_cv varies
    batch_size: int

    @property
    def n_ops(self) -> int:
        return len(self.op_ids)

    def critical_path_s(self, bandwidth_bps: float) -> list[float]:
        """Per op, the longest path (s) from its start to the end of the step."""
        return self._tails(self.durations.mean(axis=0) + np.asarray(self.bits) / bandwidth_bps)

    def step_lower_bounds_s(
        self, bandwidth_bps: float, speed: float = 1.0, per_op: bool = False
    ) -> list[float]:
        """Per profiled step, a lower bound (s) on the duration of a simulated step.

        The step's longest path with computation ``speed`` times faster than profiled and every
        transfer at ``bandwidth_bps`` (no flow ever gets more): contention, queues and barriers
        only add to it. ``per_op`` (``jitter="resample"``): one bound, each op at its shortest
        profiled duration.
        """
        table = np.where(self.scalable, self.durations / speed, self.durations)
        rows = table.min(axis=0, keepdims=True) if per_op else table
        transfer = np.asarray(self.bits) / bandwidth_bps
        order = _topological(self.dependents, self.ndeps)  # once for every profiled step
        return [max(self._tails(row + transfer, order), default=0.0) for row in rows]

    def _tails(self, cost: np.ndarray, order: Sequence[int] | None = None) -> list[float]:
        """Per op, the longest path from its start to the end of the step, op costs ``cost``.

        ``order`` is a topological order of the ops (computed when not given).
        """
        if order is None:
            order = _topological(self.dependents, self.ndeps)
        costs: list[float] = cost.tolist()
        dependents = self.dependents
        tail = [0.0] * self.n_ops
        for op in reversed(order):
            after = 0.0
            for d in dependents[op]:
                if tail[d] > after:
                    after = tail[d]
            tail[op] = costs[op] + after
        return tail


def _topological(dependents: Sequence[Sequence[int]], ndeps: Sequence[int]) -> list[int]:
    waiting = list(ndeps)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order: list[int] = []
    while ready:
        op = ready.pop()
        order.append(op)
        for d in dependents[op]:
            waiting[d] -= 1
            if waiting[d] == 0:
                ready.append(d)
    return order


def assign_servers(
    trace: Trace, servers: int, placement: str | Mapping[str, int]
) -> dict[str, int]:
    """Server index of each layer (layers without parameters go to server 0).

    ``greedy`` walks the layers in trace order and puts each on the server holding the fewest
    parameter bytes so far (ties: lowest index), as TensorFlow does (ICPE'20 section 5).
    """
    result = {layer.name: 0 for layer in trace.layers}
    if isinstance(placement, Mapping):
        result.update(placement)
        return result
    load = [0] * servers
    with_params = [layer for layer in trace.layers if layer.param_nbytes > 0]
    for i, layer in enumerate(with_params):
        if placement == "round-robin":
            server = i % servers
        else:
            server = min(range(servers), key=lambda s: (load[s], s))
        result[layer.name] = server
        load[server] += layer.param_nbytes
    return result


def compile_trace(trace: Trace, config: SimulationConfig) -> CompiledDag:
    """Compile ``trace`` for ``config`` (see the module docstring).

    Takes time linear in the number of ops and dependencies.
    """
    with gc_paused():  # several objects per op, all kept
        return _compile(trace, config)


def _compile(trace: Trace, config: SimulationConfig) -> CompiledDag:
    nodes, alias = _transform(trace, config)
    index = {node.op_id: i for i, node in enumerate(nodes)}
    slot_index: dict[tuple[str, int], int] = {}
    slot_of = [slot_index.setdefault((n.resource, n.server), len(slot_index)) for n in nodes]
    dependents: list[list[int]] = [[] for _ in nodes]
    ndeps = []
    for i, node in enumerate(nodes):
        # Trace ops wait for the last op inserted after each transfer they depend on; inserted ops
        # (source < 0) name their predecessor directly.
        names = node.deps if node.source < 0 else [alias.get(d, d) for d in node.deps]
        deps = {index[d] for d in names}
        ndeps.append(len(deps))
        for d in deps:
            dependents[d].append(i)  # in increasing i: each list ends up sorted
    if config.overlap == "none" and len(_topological(dependents, ndeps)) < len(nodes):
        raise ConfigError(
            f"overlap: 'none' (strict phases) does not fit trace {trace.source}: some pull "
            "depends on computation, or some computation on a push; use overlap='layerwise'"
        )
    resources = [n.resource for n in nodes]
    return CompiledDag(
        op_ids=tuple(n.op_id for n in nodes),
        kinds=tuple(n.kind for n in nodes),
        slot_of=tuple(slot_of),
        slots=tuple(SlotSpec(resource, server) for resource, server in slot_index),
        dependents=tuple(tuple(d) for d in dependents),
        ndeps=tuple(ndeps),
        roots=tuple(i for i, n in enumerate(ndeps) if n == 0),
        bits=tuple(n.bits for n in nodes),
        durations=_durations(trace, nodes),
        scalable=np.array(
            [r == _WORKER and n.source >= 0 for r, n in zip(resources, nodes, strict=True)],
            dtype=bool,
        ),
        computation=np.array([r in (_WORKER, _PS) for r in resources], dtype=bool),
        batch_size=trace.metadata.batch_size * config.devices_per_host,
    )


_WORKER, _PS = Resource.WORKER.value, Resource.PS.value
_NETWORK = (Resource.DOWNLINK.value, Resource.UPLINK.value)


def _durations(trace: Trace, nodes: Sequence[DagNode]) -> np.ndarray:
    """(profiled steps, nodes) seconds: a trace op's measured durations, 0 for its transfers
    (their time comes from the link), an inserted op's constant."""
    raw = np.array(
        [[np.nan if d is None else d for d in step.duration_s] for step in trace.steps], float
    ).reshape(len(trace.steps), len(trace.ops))
    measured = np.array([n.source >= 0 and n.resource not in _NETWORK for n in nodes], bool)
    source = np.array([max(n.source, 0) for n in nodes], dtype=np.intp)
    constant = np.array([n.constant_s for n in nodes], dtype=float)
    return np.where(measured, raw[:, source], constant)


def _transform(trace: Trace, config: SimulationConfig) -> tuple[list[DagNode], dict[str, str]]:
    """The transformed op list in trace order, and op id -> id of the op its dependents wait for."""
    if config.arch == "ddp":
        return ddp_nodes(trace, config)
    ring = config.arch == "allreduce"
    k = config.workers
    servers = assign_servers(trace, config.servers, config.placement)
    dropped = {op.id: op.deps for op in trace.ops if ring and op.resource is Resource.DOWNLINK}

    def resolve(deps: Sequence[str]) -> list[str]:
        out: list[str] = []
        for d in deps:
            out.extend(resolve(dropped[d]) if d in dropped else [d])
        return out

    phases = strict_phase_deps(trace) if config.overlap == "none" else {}
    intra = intra_host_op(config)
    nodes: list[DagNode] = []
    alias: dict[str, str] = {}
    parse = config.parse_alpha_s_per_byte > 0 or config.parse_beta_s > 0
    pipelined = config.ring_pipelined
    previous: str | None = None  # the worker's last pipelined all-reduce so far
    comm_s_per_byte = _comm_thread_s_per_byte(trace, config)
    for col, op in enumerate(trace.ops):
        if op.id in dropped:
            continue
        server = servers.get(op.layer, 0) if op.layer is not None else 0
        server = 0 if op.resource is Resource.WORKER else server
        bits = 8.0 * op.nbytes if op.nbytes is not None and op.is_communication else 0.0
        if ring and op.resource is Resource.UPLINK:
            bits *= 2.0 * (k - 1) / k
        deps = resolve([*op.deps, *phases.get(op.id, ())])
        if intra is not None and op.resource is Resource.UPLINK:
            # The host's devices first reduce this layer's gradients onto the one that sends.
            nodes.append(intra(f"{INTRA_REDUCE}:{op.id}", op.nbytes or 0, deps))
            deps = [nodes[-1].op_id]
        resource = op.resource.value
        if ring and op.resource is Resource.PS:
            # No server: the worker applies the update itself, on its own device, in turn with
            # its computation (as the distributed runner does after each AllReduce).
            resource, server = Resource.WORKER.value, 0
        if pipelined and op.resource is Resource.UPLINK:
            if previous is not None:
                deps = [*deps, previous]  # collectives one at a time, in the order issued
            work_s = config.parse_alpha_s_per_byte * (op.nbytes or 0) + config.parse_beta_s
            # gloo's segments with the work "after": all of it once the last message is in,
            # on the worker's computation (as after a ring's one transfer); else per message.
            after = config.parse_placement == "after"
            nodes.extend(
                ring_messages(
                    op.id,
                    op.kind.value,
                    op.resource.value,
                    op.nbytes or 0,
                    bits,
                    deps,
                    0 if after else work_s,
                    config,
                    source=col,
                    server=server,
                )
            )
            last = previous = nodes[-1].op_id
            if after and work_s > 0:
                worker = Resource.WORKER.value
                nodes.append(DagNode(f"parse:{op.id}", OTHER, worker, 0, 0.0, -1, work_s, [last]))
                last = nodes[-1].op_id
            if intra is not None:
                nodes.append(intra(f"{INTRA_BROADCAST}:{op.id}", op.nbytes or 0, [last]))
                last = nodes[-1].op_id
            alias[op.id] = last
            continue
        nodes.append(DagNode(op.id, op.kind.value, resource, server, bits, col, 0.0, deps))
        if not op.is_communication:
            continue
        last = op.id
        latency_s = ring_latency_s(config.latency_s, k) if ring else config.latency_s
        if latency_s > 0:
            nodes.append(delay_node(f"latency:{op.id}", latency_s, [last]))
            last = nodes[-1].op_id
        if parse:
            to_worker = op.resource is Resource.DOWNLINK or ring
            where = Resource.WORKER if to_worker else Resource.PS
            cost = config.parse_alpha_s_per_byte * (op.nbytes or 0) + config.parse_beta_s
            nodes.append(
                DagNode(
                    f"parse:{op.id}",
                    OTHER,
                    where.value,
                    0 if to_worker else server,
                    0.0,
                    -1,
                    cost,
                    [last],
                )
            )
            last = nodes[-1].op_id
        if comm_s_per_byte > 0 and op.nbytes:
            # Beside, not in the way: the step ends only once it is done, but no op waits for
            # it. A pull's work follows its arrival (receiving, copying in); a push's starts
            # with the push (copying out, sending), as the sender's does.
            sent = op.resource is Resource.UPLINK
            nodes.append(
                DagNode(
                    f"{COMM}:{op.id}",
                    OTHER,
                    COMM,
                    0,
                    0.0,
                    -1,
                    comm_s_per_byte * op.nbytes,
                    [alias.get(d, d) for d in deps] if sent else [op.id],
                )
            )
        if intra is not None and (op.resource is Resource.DOWNLINK or ring):
            # New parameters (pulled, or all-reduced between hosts) reach the other devices.
            nodes.append(intra(f"{INTRA_BROADCAST}:{op.id}", op.nbytes or 0, [last]))
            last = nodes[-1].op_id
        alias[op.id] = last
    return nodes, alias


def _comm_thread_s_per_byte(trace: Trace, config: SimulationConfig) -> float:
    """``config.comm_thread_s_per_step`` per byte a worker moves in a step (0 without transfers)."""
    if config.comm_thread_s_per_step <= 0:
        return 0.0
    moved = trace.transfer_nbytes
    return config.comm_thread_s_per_step / moved if moved else 0.0
