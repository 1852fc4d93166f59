"""Shared links: own the flows on a link and their timing; a sharing policy decides the rates.

A *flow* is the op (or HTTP/2 chunk) a worker is sending on a link, with its remaining bits. Each
worker has at most one flow per link (its connection serves one op or chunk at a time), so the
number of flows is the number of active workers (sharing counts workers, not queued ops).

When the set of flows changes the link re-plans the remaining work and arms one SimPy timeout for
the next departure; a superseded timeout is ignored when it fires (SimPy cannot cancel events).

Protocol with the engine: ``transmit(owner, bits)`` starts a flow. When a flow finishes the link
marks its owner ``departing`` and calls ``owner.flow_done()``; if the owner calls ``transmit``
again from inside that call (its next op on this link was already queued), the worker *continues*:
it stays active and keeps its place in the activation order. Otherwise it leaves, and a later
``transmit`` makes it rejoin at the back.

Three timing strategies:

- :class:`VirtualTimeLink` for equal-share policies (``ps``, ``allreduce``, scalar caps): all flows
  progress at the same rate, so a flow's finish is a fixed *virtual* tag ``V(arrival) + bits`` and
  only the rate of ``V`` changes with ``n``: a change costs O(log n) (a heap operation).
- :class:`OrderedLink` for ``fcfs`` without redistribution: only the front flow moves; O(1).
- :class:`~simcore.sim.rate_link.RateLink` for any policy, per-worker caps, max-min caps and
  several parameter servers whose links are coupled by the workers' NICs: every change re-plans
  every flow, O(n).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any, Protocol

import simpy

# Flows whose virtual finish tags differ by less than this fraction finish together: it only
# merges events that floating point split apart (1e-12 of a tag is far below a nanosecond).
TIE_RELATIVE = 1e-12

Timeout = simpy.Timeout  # bound once: created on every re-plan


class FlowOwner(Protocol):
    """What a link needs from the worker connection that owns a flow."""

    worker: int
    channel: int
    departing: bool

    def flow_done(self) -> None: ...


@dataclass(frozen=True, slots=True)
class LinkCounters:
    """Integrals of one link (or one server's link) since time 0, for windowed statistics."""

    name: str
    channel: int
    capacity_bps: float
    area_flows: float  # integral of the number of active flows, flow-seconds
    area_rate_bits: float  # integral of the total rate, bits
    bits_done: float  # bits of completed flows
    peak_rate_bps: float  # largest total rate seen
    peak_flow_rate_bps: float  # largest rate of one flow seen


class Link:
    """Base class: capacity, statistics and the arming of the next-departure timeout."""

    def __init__(self, env: simpy.Environment, name: str, capacity_bps: float) -> None:
        self.env = env
        self.name = name
        self.capacity_bps = capacity_bps
        self.bits_done = 0.0
        self.peak_rate_bps = 0.0
        self.peak_flow_rate_bps = 0.0
        self._armed: Any = None
        self._fire_cb = self._fire  # bound once: appended to every armed timeout
        self._in_cb = False
        self._t = 0.0  # time up to which state and statistics are integrated
        self._n = 0
        self._total_rate = 0.0
        self._area_flows = 0.0
        self._area_rate = 0.0

    def transmit(self, owner: FlowOwner, bits: float) -> None:
        """Start a flow of ``bits`` for ``owner`` now (see the module docstring)."""
        raise NotImplementedError

    def _advance(self, now: float) -> None:
        dt = now - self._t
        if dt > 0.0:
            self._area_flows += self._n * dt
            self._area_rate += self._total_rate * dt
            self._t = now

    def counters(self, now: float) -> list[LinkCounters]:
        """The link's integrals up to ``now`` (one entry per channel)."""
        self._advance(now)
        return [
            LinkCounters(
                self.name,
                0,
                self.capacity_bps,
                self._area_flows,
                self._area_rate,
                self.bits_done,
                self.peak_rate_bps,
                self.peak_flow_rate_bps,
            )
        ]

    def _arm(self, delay: float) -> None:
        event = Timeout(self.env, delay if delay > 0.0 else 0.0)
        event.callbacks.append(self._fire_cb)
        self._armed = event

    def _fire(self, event: Any) -> None:
        if event is self._armed:  # otherwise a re-plan superseded it
            self._armed = None
            self._on_due()

    def _on_due(self) -> None:
        raise NotImplementedError


class VirtualTimeLink(Link):
    """Equal sharing with virtual finish tags: O(log n) per change.

    ``V`` counts the bits each active flow has received since the link was last idle; it grows at
    the current per-flow rate ``share(n)``. A flow arriving at ``V0`` with ``b`` bits finishes when
    ``V`` reaches ``V0 + b``, whatever happens to ``n`` in between, so only the heap head matters.
    """

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        capacity_bps: float,
        share_of_n: Callable[[int], float],
    ) -> None:
        super().__init__(env, name, capacity_bps)
        self._share = share_of_n
        self._v = 0.0
        self._rate = 0.0  # per-flow rate, bit/s
        self._heap: list[tuple[float, int, FlowOwner, float]] = []
        self._seq = 0
        self._armed_head: Any = None
        # Called after every re-plan: a LeftoverLink of this link's capacity re-plans with it.
        self.on_replan: Callable[[], None] | None = None

    def transmit(self, owner: FlowOwner, bits: float) -> None:
        if self._in_cb:
            heappush(self._heap, (self._v + bits, self._seq, owner, bits))
            self._seq += 1
            if owner.departing:
                owner.departing = False  # continues: stays active, n unchanged
            else:
                self._n += 1
            return
        now = self.env.now
        self._advance(now)
        heappush(self._heap, (self._v + bits, self._seq, owner, bits))
        self._seq += 1
        self._n += 1
        self._replan()

    def _advance(self, now: float) -> None:
        dt = now - self._t
        if dt > 0.0:
            rate = self._rate
            self._v += rate * dt
            self._area_flows += self._n * dt
            self._area_rate += self._n * rate * dt
            self._t = now

    def _replan(self) -> None:
        self._plan()
        if self.on_replan is not None:
            self.on_replan()

    def _plan(self) -> None:
        heap = self._heap
        if not heap:
            self._rate = self._total_rate = 0.0
            self._v = 0.0  # idle: restart virtual time so tags stay small
            self._armed = None
            return
        rate = self._share(self._n)
        self._total_rate = total = rate * self._n
        if total > self.peak_rate_bps:
            self.peak_rate_bps = total
        head = heap[0]
        if rate != self._rate or head is not self._armed_head or self._armed is None:
            if rate > self.peak_flow_rate_bps:
                self.peak_flow_rate_bps = rate
            self._rate = rate
            self._armed_head = head
            self._arm((head[0] - self._v) / rate)

    def _on_due(self) -> None:
        self._advance(self.env.now)
        heap = self._heap
        first = heappop(heap)
        tag = first[0]
        if tag > self._v:
            self._v = tag  # snap: by construction the head is due now
        limit = tag + TIE_RELATIVE * abs(tag)
        done = [first]
        while heap and heap[0][0] <= limit:
            done.append(heappop(heap))
        for entry in done:
            entry[2].departing = True
        self._in_cb = True
        for entry in done:
            self.bits_done += entry[3]
            entry[2].flow_done()
        self._in_cb = False
        for entry in done:
            owner = entry[2]
            if owner.departing:  # did not continue: leaves the link
                owner.departing = False
                self._n -= 1
        self._armed_head = None
        self._replan()


class LeftoverLink(VirtualTimeLink):
    """Equal shares of what a :class:`VirtualTimeLink`'s flows leave of its capacity: flows of
    a lower priority. Each gets ``min((capacity - foreground's total rate) / n, per_flow_cap)``;
    none moves while the foreground takes it all. It re-plans whenever the foreground does.
    """

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        capacity: float,
        per_flow_cap: float,
        foreground: VirtualTimeLink,
    ) -> None:
        def share_of_n(n: int) -> float:
            left = capacity - foreground._total_rate
            share = left / n if left > 0.0 else 0.0
            return share if share < per_flow_cap else per_flow_cap

        super().__init__(env, name, capacity, share_of_n)
        foreground.on_replan = self._follow

    def _follow(self) -> None:
        if self._heap:  # progress at the old rate up to now, then the new rate from now on
            self._advance(self.env.now)
            self._plan()

    def _plan(self) -> None:
        if self._heap and self._share(self._n) <= 0.0:
            self._rate = self._total_rate = 0.0
            self._armed = None  # nothing moves: no departure until the foreground leaves room
            return
        super()._plan()


class OrderedLink(Link):
    """First come, first served: workers in activation order, only the front one sends.

    ``caps_bps[w]`` limits worker w's rate (the front gets ``min(capacity, cap)``; the rest of the
    link stays unused, TPDS'22 4.4). A worker whose next op was already queued keeps the front.
    """

    def __init__(
        self, env: simpy.Environment, name: str, capacity_bps: float, caps_bps: Sequence[float]
    ) -> None:
        super().__init__(env, name, capacity_bps)
        self._caps = caps_bps
        self._queue: deque[tuple[FlowOwner, float]] = deque()

    def transmit(self, owner: FlowOwner, bits: float) -> None:
        queue = self._queue
        if self._in_cb:
            if owner.departing:
                owner.departing = False
                queue.appendleft((owner, bits))  # continues at the front
            else:
                queue.append((owner, bits))
            return
        self._advance(self.env.now)
        queue.append((owner, bits))
        self._n = len(queue)
        if self._n == 1:
            self._start_front()

    def _start_front(self) -> None:
        owner, bits = self._queue[0]
        cap = self._caps[owner.worker]
        rate = cap if cap < self.capacity_bps else self.capacity_bps
        self._total_rate = rate
        if rate > self.peak_rate_bps:
            self.peak_rate_bps = self.peak_flow_rate_bps = rate
        self._arm(bits / rate)

    def _on_due(self) -> None:
        self._advance(self.env.now)
        owner, bits = self._queue.popleft()
        self.bits_done += bits
        owner.departing = True
        self._in_cb = True
        owner.flow_done()
        self._in_cb = False
        owner.departing = False
        self._n = len(self._queue)
        if self._n:
            self._start_front()
        else:
            self._total_rate = 0.0
