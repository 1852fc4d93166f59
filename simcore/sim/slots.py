"""A worker's resources ("slots") and its step state: the engine's inner loop.

Each worker owns one slot per resource it uses (compute, the ps core, one network connection per
server and direction, and the unlimited latency pseudo-resource). A slot serves one op (or chunk)
at a time from its ready queue. Ops run by SimPy timeouts with callbacks, one event per op: no
SimPy process per op, no object per op beyond the timeout itself. The worker's step loop is a SimPy
process in :mod:`simcore.sim.engine`.

Order rules (documented in SEMANTICS.md):

- an op becomes ready when its last dependency completes, and is offered to its slot at once;
- when a slot finishes an op it first releases the op's dependents, then takes the next op of its
  queue, so an op made ready by the completion competes with the ops already waiting;
- computation queues are FIFO: order of readiness, ties in trace order.
"""

from __future__ import annotations

from array import array
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

import simpy

from simcore.sim.streams import StreamScheduler

if TYPE_CHECKING:
    from simcore.sim.links import Link

Timeout = simpy.Timeout  # bound once: created for every op


class Recorder:
    """Timeline columns (compact arrays): worker, step, op, slot, start, end, bits."""

    def __init__(self) -> None:
        self.worker = array("i")
        self.step = array("i")
        self.op = array("i")  # global op id (offset of the worker's DAG + op index)
        self.slot = array("i")  # global slot id
        self.start = array("d")
        self.end = array("d")
        self.bits = array("d")

    def add(
        self, worker: int, step: int, op: int, slot: int, start: float, end: float, bits: float
    ) -> None:
        self.worker.append(worker)
        self.step.append(step)
        self.op.append(op)
        self.slot.append(slot)
        self.start.append(start)
        self.end.append(end)
        self.bits.append(bits)


class WorkerState:
    """The DAG state of one worker's current step; ``complete`` is the hot path."""

    def __init__(
        self,
        env: simpy.Environment,
        index: int,
        dependents: tuple[tuple[int, ...], ...],
        ndeps: tuple[int, ...],
        roots: tuple[int, ...],
        bits: tuple[float, ...],
    ) -> None:
        self.env = env
        self.index = index
        self.dependents = dependents
        self.ndeps = list(ndeps)
        self.roots = roots
        self.bits = bits
        self.n_ops = len(ndeps)
        self.offers: list[Any] = []  # per op: the offer method of its slot
        self.waiting: list[int] = []
        self.left = 0
        self.step = -1
        self.dur: list[float] = []
        self.on_step_end: Any = None  # set by the engine: called with this worker
        self.recorder: Recorder | None = None
        self.op_offset = 0  # to turn op indices into global ids in the timeline
        self.ops_done = 0

    def begin(self, step: int, durations: list[float]) -> None:
        """Start ``step`` with per-op ``durations`` (s): every op without dependencies is ready."""
        self.step = step
        self.dur = durations
        self.waiting = self.ndeps[:]
        self.left = self.n_ops
        offers = self.offers
        for op in self.roots:
            offers[op](op)

    def complete(self, op: int) -> None:
        """``op`` finished now: release its dependents; end the step after its last op."""
        waiting = self.waiting
        offers = self.offers
        for d in self.dependents[op]:
            n = waiting[d] - 1
            waiting[d] = n
            if not n:
                offers[d](d)
        self.left -= 1
        if not self.left:
            self.ops_done += self.n_ops
            self.on_step_end(self)


class ComputeSlot:
    """A computation resource (worker device or its core at a server): FIFO, one op at a time."""

    __slots__ = ("_callback", "_heap", "busy", "env", "op", "slot_id", "t0", "worker")

    def __init__(self, env: simpy.Environment, worker: WorkerState, slot_id: int) -> None:
        self.env = env
        self.worker = worker
        self.slot_id = slot_id
        self._heap: list[tuple[float, int]] = []
        self.busy = False
        self.op = -1
        self.t0 = 0.0
        self._callback = self._done if worker.recorder is None else self._done_rec

    def offer(self, op: int) -> None:
        if self.busy:
            heappush(self._heap, (self.env.now, op))
        else:
            self._start(op)

    def _start(self, op: int) -> None:
        self.busy = True
        self.op = op
        Timeout(self.env, self.worker.dur[op]).callbacks.append(self._callback)
        self.t0 = self.env.now

    def _done(self, event: Any) -> None:
        op = self.op
        if self._heap:
            self.worker.complete(op)
            self._start(heappop(self._heap)[1])
        else:
            # Nothing waits: free the slot first so that a dependent on this slot starts at once
            # (same order as queueing it, since it would be the only and first entry).
            self.busy = False
            self.worker.complete(op)

    def _done_rec(self, event: Any) -> None:
        w = self.worker
        assert w.recorder is not None
        w.recorder.add(
            w.index, w.step, w.op_offset + self.op, self.slot_id, self.t0, self.env.now, 0.0
        )
        self._done(event)


class SharedComputeSlot:
    """A worker's computation on a CPU shared with the other workers of its host.

    Like :class:`ComputeSlot` (FIFO, one op at a time), but an op is a flow of
    ``duration * cores`` core-seconds on the host's CPU, a link whose capacity is the host's
    cores (see ``colocated_workers`` in SEMANTICS.md). Implements the link's ``FlowOwner``.
    """

    __slots__ = (
        "_heap",
        "busy",
        "channel",
        "cores",
        "departing",
        "env",
        "hold_s",
        "link",
        "op",
        "slot_id",
        "t0",
        "worker",
        "worker_state",
    )

    def __init__(
        self, env: simpy.Environment, worker: WorkerState, slot_id: int, link: Link, cores: float
    ) -> None:
        self.env = env
        self.worker_state = worker
        self.worker = worker.index  # FlowOwner.worker
        self.channel = 0
        self.departing = False
        self.slot_id = slot_id
        self.link = link
        self.cores = cores
        self._heap: list[tuple[float, int]] = []
        self.busy = False
        self.op = -1
        self.t0 = 0.0

    def offer(self, op: int) -> None:
        if self.busy:
            heappush(self._heap, (self.env.now, op))
        else:
            self._start(op)

    def _start(self, op: int) -> None:
        self.busy = True
        self.op = op
        self.t0 = self.env.now
        self.link.transmit(self, self.worker_state.dur[op] * self.cores)

    def flow_done(self) -> None:
        op = self.op
        w = self.worker_state
        if w.recorder is not None:
            w.recorder.add(
                w.index, w.step, w.op_offset + op, self.slot_id, self.t0, self.env.now, 0.0
            )
        w.complete(op)  # dependents offered here queue behind the busy slot
        if self._heap:
            self._start(heappop(self._heap)[1])
        else:
            self.busy = False


class DelaySlot:
    """The latency pseudo-resource: every op is a pure delay, nothing ever waits."""

    __slots__ = ("env", "slot_id", "worker")

    def __init__(self, env: simpy.Environment, worker: WorkerState, slot_id: int) -> None:
        self.env = env
        self.worker = worker
        self.slot_id = slot_id

    def offer(self, op: int) -> None:
        event = simpy.Timeout(self.env, self.worker.dur[op], (op, self.env.now))
        event.callbacks.append(self._done)

    def _done(self, event: Any) -> None:
        op, start = event.value
        w = self.worker
        if w.recorder is not None:
            w.recorder.add(
                w.index, w.step, w.op_offset + op, self.slot_id, start, self.env.now, 0.0
            )
        w.complete(op)


class NetSlot:
    """A worker's connection on a link (one per server and direction): sends one stream at a time.

    Implements the link's ``FlowOwner`` protocol. With a chunking scheduler (HTTP/2) a preempted
    stream re-enters the queue with ready time = the end of its chunk.
    """

    __slots__ = (
        "busy",
        "channel",
        "chunking",
        "departing",
        "env",
        "hold_s",
        "immediate",
        "kick_pending",
        "last",
        "link",
        "op",
        "queue",
        "remaining",
        "sent",
        "slot_id",
        "t0",
        "worker",
        "worker_state",
    )

    def __init__(
        self,
        env: simpy.Environment,
        worker: WorkerState,
        slot_id: int,
        link: Link,
        channel: int,
        queue: StreamScheduler,
        hold_s: float = 0.0,
    ) -> None:
        self.env = env
        self.worker_state = worker
        # Time the connection stays busy after each completed op: a ring AllReduce's per-hop
        # latency, during which the ring's next collective cannot start (ring_latency_s).
        self.hold_s = hold_s
        self.worker = worker.index  # FlowOwner.worker
        self.slot_id = slot_id
        self.link = link
        self.channel = channel
        self.queue = queue
        self.chunking = queue.chunking
        self.immediate = queue.immediate
        self.kick_pending = False
        self.remaining: dict[int, float] = {}
        self.busy = False
        self.departing = False
        self.op = -1
        self.last = True
        self.sent = 0.0
        self.t0 = 0.0

    def offer(self, op: int) -> None:
        if self.busy:
            self.queue.push(op, self.env.now)
        elif self.immediate:
            self._start(op)
        else:
            # Let the scheduler choose among every op that becomes ready at this instant.
            self.queue.push(op, self.env.now)
            if not self.kick_pending:
                self.kick_pending = True
                simpy.Timeout(self.env, 0.0).callbacks.append(self._kick)

    def _kick(self, event: Any) -> None:
        self.kick_pending = False
        if not self.busy and len(self.queue):
            self._start(self.queue.pop())

    def _start(self, op: int) -> None:
        self.busy = True
        self.op = op
        bits = self.worker_state.bits[op]
        if self.chunking:
            bits = self.remaining.pop(op, bits)
            send, self.last = self.queue.chunk(op, bits)
            if not self.last:
                self.remaining[op] = bits - send
            bits = send
        self.sent = bits
        self.t0 = self.env.now
        self.link.transmit(self, bits)

    def flow_done(self) -> None:
        op = self.op
        w = self.worker_state
        now = self.env.now
        if w.recorder is not None:
            w.recorder.add(w.index, w.step, w.op_offset + op, self.slot_id, self.t0, now, self.sent)
        queue = self.queue
        if self.last:
            w.complete(op)
            if self.hold_s > 0.0:
                simpy.Timeout(self.env, self.hold_s).callbacks.append(self._release)
                return
        else:
            queue.push(op, now)  # preempted: ready again at the end of its first chunk
        if len(queue):
            self._start(queue.pop())
        else:
            self.busy = False

    def _release(self, event: Any) -> None:
        if len(self.queue):
            self._start(self.queue.pop())
        else:
            self.busy = False


class Rendezvous:
    """Ops that all workers must reach before any of them completes: a collective's start and
    end (DDP's ``gate:`` and ``done:`` ops). Shared by the workers' :class:`RendezvousSlot`.

    The op that arrives last completes everyone's at once, in worker index order (as workers
    start at a barrier), each recorded from its own arrival: its wait for the others. Sync-SGD
    keeps every worker in the same step, so an op's id is the whole key.
    """

    __slots__ = ("env", "waiting", "workers")

    def __init__(self, env: simpy.Environment, workers: int) -> None:
        self.env = env
        self.workers = workers
        self.waiting: dict[str, list[tuple[int, RendezvousSlot, int, float]]] = {}

    def arrive(self, key: str, slot: RendezvousSlot, op: int) -> None:
        arrived = self.waiting.setdefault(key, [])
        arrived.append((slot.worker.index, slot, op, self.env.now))
        if len(arrived) < self.workers:
            return
        del self.waiting[key]
        arrived.sort(key=lambda entry: entry[0])
        for _, member, member_op, t0 in arrived:
            member.release(member_op, t0)


class RendezvousSlot:
    """A worker's side of the :class:`Rendezvous`: offers wait there, take no time of their own."""

    __slots__ = ("env", "keys", "rendezvous", "slot_id", "worker")

    def __init__(
        self,
        env: simpy.Environment,
        worker: WorkerState,
        slot_id: int,
        rendezvous: Rendezvous,
        keys: tuple[str, ...],
    ) -> None:
        self.env = env
        self.worker = worker
        self.slot_id = slot_id
        self.rendezvous = rendezvous
        self.keys = keys  # per op of the worker's DAG: what the workers meet on (its op id)

    def offer(self, op: int) -> None:
        self.rendezvous.arrive(self.keys[op], self, op)

    def release(self, op: int, t0: float) -> None:
        w = self.worker
        if w.recorder is not None:
            w.recorder.add(w.index, w.step, w.op_offset + op, self.slot_id, t0, self.env.now, 0.0)
        w.complete(op)
