"""The ops the DAG transforms insert around a trace's own: nodes, collectives' messages, hosts.

:mod:`simcore.sim.dag` (parameter servers, the per-layer ring) and :mod:`simcore.sim.ddp_dag`
(PyTorch DDP's buckets) build their step DAGs from these :class:`DagNode` records before
:func:`~simcore.sim.dag.compile_trace` turns them into arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from simcore.sim.config import SimulationConfig
from simcore.trace.model import OpKind, Resource, Trace

DELAY = "latency"  # the pseudo-resource of latency ops: unlimited, nothing queues there
COMM = "comm"  # a worker's communication thread: its CPU work beside the transfers (one at a time)
INTRA = "intra"  # a host's link between its devices: one intra-host transfer at a time
INTRA_REDUCE = "intra-reduce"
INTRA_BROADCAST = "intra-broadcast"
# The pseudo-resource of a collective's rendezvous: an op there completes when every worker has
# reached it (simcore.sim.slots.Rendezvous); it takes no time of its own.
RENDEZVOUS = "rendezvous"
OTHER = OpKind.OTHER.value


@dataclass
class DagNode:
    """One op of a transformed step: a trace op (``source`` its column in the trace's
    durations) or an inserted one (``source`` -1, ``constant_s`` its duration)."""

    op_id: str
    kind: str
    resource: str
    server: int
    bits: float
    source: int  # column in the trace's durations, or -1
    constant_s: float
    deps: list[str]


def delay_node(op_id: str, seconds: float, deps: list[str]) -> DagNode:
    """A pure delay of ``seconds`` after ``deps`` (latency; 0 s: a marker in the timeline)."""
    return DagNode(op_id, OTHER, DELAY, 0, 0.0, -1, seconds, deps)


def ring_messages(
    op_id: str,
    kind: str,
    resource: str,
    nbytes: float,
    bits: float,
    deps: list[str],
    work_s: float,
    config: SimulationConfig,
    *,
    source: int = -1,
    server: int = 0,
) -> list[DagNode]:
    """A pipelined ring all-reduce ``op_id`` of ``nbytes`` (``bits`` in all on the link) as its
    messages (:func:`ring_message_count`: 2(K-1), or gloo's segments), each followed by its
    latency and its share of ``work_s`` on the worker's ``comm`` resource, and a
    ``join:<id>`` that completes when the last message has arrived and the last work is done.

    The work on a message can only start once it has arrived, and runs while the next one
    moves, as a ring implementation reduces one chunk while it receives the next: the work
    keeps pace with the bytes when the CPU has room and falls behind them when it has not,
    and the all-reduce then ends with its work rather than with its bytes. The first message
    keeps ``op_id`` (and ``source``, a trace op's column); the others are ``<id>#j``.
    """
    n = ring_message_count(nbytes, config.workers, config.ring_segment_bytes)
    nodes: list[DagNode] = []
    after = deps
    work = ""
    for j in range(n):
        message = op_id if j == 0 else f"{op_id}#{j}"
        column = source if j == 0 else -1
        nodes.append(DagNode(message, kind, resource, server, bits / n, column, 0.0, after))
        arrived = message
        if config.latency_s > 0:
            nodes.append(delay_node(f"latency:{op_id}#{j}", config.latency_s, [message]))
            arrived = nodes[-1].op_id
        if work_s > 0:
            work = f"parse:{op_id}#{j}"
            nodes.append(DagNode(work, OTHER, COMM, 0, 0.0, -1, work_s / n, [arrived]))
        after = [arrived]
    # The comm resource runs its ops one at a time in the order they arrive, so the last
    # message's work ends after every earlier one's.
    ends = [after[0], work] if work else after
    nodes.append(delay_node(f"join:{op_id}", 0.0, ends))
    return nodes


def ring_message_count(nbytes: float, k: int, segment_bytes: float | None = None) -> int:
    """The messages a ring AllReduce of ``nbytes`` among k participants sends one after another.

    The paper's ring (``segment_bytes`` None): a reduce-scatter and an all-gather of k-1 steps,
    2(k-1) messages of 1/k of the bytes. gloo's (``gloo::allreduce``, its ``ring``): the bytes
    in S segments of at most ``segment_bytes``, at least two per rank (one in flight while the
    other is reduced) and a multiple of k; each phase sends the S - S/k segments not yet
    complete, 2 S (k-1)/k messages in all. A model of small layers thus sends twice the
    paper's count, and a layer of many segments more, each a segment's share of the bytes.
    """
    if k < 2:
        return 0
    if segment_bytes is None:
        return 2 * (k - 1)
    segments = max(math.ceil(nbytes / segment_bytes), 2 * k)
    segments = math.ceil(segments / k) * k
    return 2 * segments * (k - 1) // k


def ring_latency_s(latency_s: float, k: int) -> float:
    """The fixed cost of one ring AllReduce of k participants: 2(k-1) messages in sequence.

    A ring AllReduce is a reduce-scatter and an all-gather of k-1 steps each; every step sends
    one chunk of 1/k of the data to the next rank and must receive the previous rank's chunk
    before it can go on, so a message's fixed cost (the network profile's latency, the intercept
    of its linear fit) is paid 2(k-1) times one after another: the alpha-beta cost
    2(k-1) alpha + 2(k-1)/k M/B. One participant exchanges nothing and pays nothing.
    """
    return ring_message_count(0, k) * latency_s


IntraHostOp = Callable[[str, float, list[str]], DagNode]


def intra_host_op(config: SimulationConfig) -> IntraHostOp | None:
    """A maker of intra-host transfer ops ``(op_id, nbytes, deps)``, or None for one device per
    host (the flat case).

    Each moves (G-1)/G of the bytes over the intra-host link: the reduce-scatter half of a ring
    AllReduce among the G devices before a push, the all-gather half after a pull, so that one
    host alone (no server traffic) costs exactly a ring AllReduce, 2(G-1)/G * bytes / B_intra.
    They run on the host's ``intra`` resource one after another, a fixed time each.
    """
    g = config.devices_per_host
    if g == 1 or config.intra_bandwidth_bps is None:
        return None
    seconds_per_byte = 8.0 * (g - 1) / g / config.intra_bandwidth_bps

    def make(op_id: str, nbytes: float, deps: list[str]) -> DagNode:
        return DagNode(op_id, OTHER, INTRA, 0, 0.0, -1, seconds_per_byte * nbytes, deps)

    return make


def strict_phase_deps(trace: Trace) -> dict[str, tuple[str, ...]]:
    """Extra dependencies (op id -> op ids) that turn ``trace``'s step into strict phases.

    Computation ops (on the worker) that depend on no other computation op wait for every pull;
    every other computation op follows one of them. Every push waits for every computation op
    that no other computation op depends on, which all computation precedes. Joining at these
    sources and sinks adds O(pulls + pushes) edges for a chain-like model instead of one per
    (pull, computation) pair, so the engine's per-step work hardly grows.
    """
    compute = {op.id for op in trace.ops if op.resource is Resource.WORKER}
    has_compute_dependent: set[str] = set()
    extra: dict[str, tuple[str, ...]] = {}
    pulls = tuple(op.id for op in trace.ops if op.resource is Resource.DOWNLINK)
    for op in trace.ops:
        if op.id in compute:
            before = [d for d in op.deps if d in compute]
            has_compute_dependent.update(before)
            if not before:
                extra[op.id] = pulls
    last = compute - has_compute_dependent  # once: inside the loop it made this quadratic
    sinks = tuple(op.id for op in trace.ops if op.id in last)
    for op in trace.ops:
        if op.resource is Resource.UPLINK:
            extra[op.id] = sinks
    return extra
