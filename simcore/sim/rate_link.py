"""The general link: any sharing policy, several servers coupled by the workers' NICs; O(n).

See :mod:`simcore.sim.links` for the flow protocol. Every change advances every flow by its rate,
asks the policy for new rates (per server channel, then caps, then NIC limits) and arms the
earliest finish.

One channel without NIC limits (every measured-network run: flow weights, host CPUs) takes a
lean path: the same floating-point operations in the same order as the general one, without its
per-channel lists and policy calls, so results are bit-identical (``RateLink.fast_paths = False``
forces the general path; tests/test_rate_link_fast.py compares the two).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import ClassVar

import simpy

from simcore.sim.links import FlowOwner, Link, LinkCounters
from simcore.sim.sharing import (
    EqualSharePolicy,
    SharingPolicy,
    capped_rates,
    nic_limited_rates,
)

# A flow is done when at most this fraction of its bits remains (floating point leaves slivers).
DONE_RELATIVE = 1e-9


class _Flow:
    __slots__ = ("bits", "done", "owner", "rate", "remaining", "weight")

    def __init__(self, owner: FlowOwner, bits: float, weight: float) -> None:
        self.owner = owner
        self.bits = bits
        self.remaining = bits
        self.rate = 0.0
        self.done = False
        self.weight = weight


class RateLink(Link):
    """Any policy, O(n) per change; one channel per parameter server, coupled by worker NICs.

    Each channel ``c`` has capacity ``capacities_bps[c]`` and divides it with ``policy`` among its
    flows (in activation order), then per-flow caps apply (``maxmin`` or clip), then each worker's
    flows on all channels are limited to its NIC (``nic_bps``; None = no NIC limit). With
    ``nic_of``, workers share NICs: worker ``w``'s flows count against ``nic_bps[nic_of[w]]``
    (co-located workers behind their host's NIC). With ``flow_weight`` (a processor-sharing
    policy only), every transfer draws a weight from it when it starts and a channel is divided
    in proportion to the weights of its flows (discriminatory processor sharing,
    :mod:`simcore.sim.flow_weights`) instead of by the policy.
    """

    #: Take the lean one-channel path where it applies (False: always the general re-plan; the
    #: equivalence test flips it).
    fast_paths: ClassVar[bool] = True

    def __init__(
        self,
        env: simpy.Environment,
        name: str,
        capacities_bps: Sequence[float],
        policy: SharingPolicy,
        caps_bps: Sequence[float],
        maxmin: bool,
        nic_bps: Sequence[float] | None,
        nic_of: Sequence[int] | None = None,
        flow_weight: Callable[[], float] | None = None,
        on_rates: Callable[[], None] | None = None,
        capacity_of: Callable[[int], float] | None = None,
    ) -> None:
        super().__init__(env, name, max(capacities_bps))
        self._caps_c = list(capacities_bps)
        self._policy = policy
        self._caps = caps_bps
        self._maxmin = maxmin
        self._nic = nic_bps
        self._nic_of = nic_of  # worker -> index into nic_bps; None: every worker has its own
        self._weight = flow_weight
        self._on_rates = on_rates  # told after every re-plan (transfers' CPU load)
        # One channel whose capacity depends on its number of flows (a host CPU that threads
        # outside the link also want): n -> capacity; None: the fixed capacity.
        self._capacity_of = capacity_of
        self._flows: list[_Flow] = []
        nch = len(capacities_bps)
        self._n_c = [0] * nch
        self._rate_c = [0.0] * nch
        self._area_flows_c = [0.0] * nch
        self._area_rate_c = [0.0] * nch
        self._bits_c = [0.0] * nch
        self._peak_c = [0.0] * nch
        self._peak_flow_c = [0.0] * nch
        # The lean path: one channel, no NIC limits, and the policy's rates are its equal share
        # (or the flows' weights); caps then only matter when a rate exceeds the smallest cap.
        self._single = self.fast_paths and nch == 1 and nic_bps is None
        self._share_of_n: Callable[[int, float], float] | None = (
            policy.share_bps
            if isinstance(policy, EqualSharePolicy) and type(policy).rates is EqualSharePolicy.rates
            else None
        )
        self._min_cap = min(caps_bps, default=math.inf)
        self._uniform_cap = all(c == self._min_cap for c in caps_bps)
        # The other direction of a duplex-limited server link (couple_duplex); None: none.
        self._partner: RateLink | None = None
        self._duplex_bps = math.inf
        # couple_interference instead: (efficiency, this direction's exponent); None: not it.
        self._interference: tuple[float, float] | None = None
        self._told_partner = 0  # the number of flows the partner last planned with

    def transmit(self, owner: FlowOwner, bits: float) -> None:
        if self._in_cb and owner.departing:
            owner.departing = False
            for flow in self._flows:  # continues in the place it had
                if flow.owner is owner and flow.done:
                    flow.bits = flow.remaining = bits
                    flow.done = False
                    flow.weight = self._weight() if self._weight is not None else 1.0
                    return
        weight = self._weight() if self._weight is not None else 1.0
        if self._in_cb:
            self._flows.append(_Flow(owner, bits, weight))
            return
        self._advance(self.env.now)
        self._flows.append(_Flow(owner, bits, weight))
        self._replan()

    def _advance(self, now: float) -> None:
        dt = now - self._t
        if dt > 0.0:
            for flow in self._flows:
                flow.remaining -= flow.rate * dt
            for c, n in enumerate(self._n_c):
                self._area_flows_c[c] += n * dt
                self._area_rate_c[c] += self._rate_c[c] * dt
            self._t = now

    def couple_duplex(self, partner: RateLink, duplex_bps: float) -> None:
        """Share ``duplex_bps`` with ``partner`` (the other direction of the same server's link)
        while both carry transfers: see :func:`duplex_capacity`. Call it on both links."""
        self._partner, self._duplex_bps = partner, duplex_bps

    def couple_interference(self, partner: RateLink, efficiency: float, exponent: float) -> None:
        """Carry ``interfered_capacity`` of this direction's bandwidth while ``partner`` (the
        other direction of the same server's link) carries transfers too. Call it on both
        links, each with its own ``exponent``."""
        self._partner, self._interference = partner, (efficiency, exponent)

    def _active(self) -> int:
        return sum(1 for f in self._flows if not f.done)

    def _duplex_share(self, capacity: float, n: int) -> float:
        """This direction's capacity with ``n`` flows beside the partner's (interfered_capacity
        or duplex_capacity, whichever it was coupled with)."""
        partner = self._partner
        assert partner is not None
        if self._interference is not None:
            efficiency, exponent = self._interference
            return interfered_capacity(capacity, n, partner._active(), efficiency, exponent)
        return duplex_capacity(capacity, n, partner._caps_c[0], partner._active(), self._duplex_bps)

    def _replan(self) -> None:
        if self._single:
            self._replan_single()
        else:
            self._replan_general()
        partner = self._partner
        if partner is not None:  # the partner's capacity follows this link's number of flows
            n = self._active()
            if n != self._told_partner:
                self._told_partner = n
                partner.refresh()

    def _replan_single(self) -> None:
        """The general re-plan for one channel without NIC limits, in the same float order."""
        flows = self._flows
        n = len(flows)
        if n == 1 and self._solo(flows[0]):
            return
        best = math.inf
        total = 0.0
        if n:
            capacity = self._caps_c[0] if self._capacity_of is None else self._capacity_of(n)
            if self._partner is not None:
                capacity = self._duplex_share(capacity, n)
            rates: Sequence[float]
            if self._weight is not None:
                weights = [f.weight for f in flows]
                wsum = sum(weights)
                rates = [capacity * w / wsum for w in weights]
                if max(rates) > self._min_cap:  # someone is capped: the general rule
                    rates = weighted_rates(weights, capacity, self._flow_caps(flows), self._maxmin)
            elif self._share_of_n is not None:
                share = self._share_of_n(n, capacity)
                if share > self._min_cap:
                    rates = self._capped_equal(flows, n, capacity)
                else:
                    rates = [share] * n
            else:
                rates = self._policy_rates(flows, capacity)
            peak_flow = self._peak_flow_c[0]
            for flow, rate in zip(flows, rates, strict=True):
                flow.rate = rate
                total += rate
                if rate > peak_flow:
                    peak_flow = rate
                if rate > 0.0:
                    t = flow.remaining / rate
                    if t < best:
                        best = t
            self._peak_flow_c[0] = peak_flow
            if total > self._peak_c[0]:
                self._peak_c[0] = total
        self._n_c[0] = n
        self._rate_c[0] = total
        if best < math.inf:
            self._arm(best)
        else:
            self._armed = None
        if self._on_rates is not None:
            self._on_rates()

    def _solo(self, flow: _Flow) -> bool:
        """Re-plan a lone flow as :meth:`_replan_single` would (a host CPU with one worker is
        never busier); False, having done nothing, where its rate needs the general rules."""
        capacity = self._caps_c[0] if self._capacity_of is None else self._capacity_of(1)
        if self._partner is not None:
            capacity = self._duplex_share(capacity, 1)
        if self._weight is not None:
            weight = flow.weight
            rate = capacity * weight / (0 + weight)  # what weighted sharing gives it
        elif self._share_of_n is not None:
            rate = self._share_of_n(1, capacity)
        else:
            return False
        if rate > self._min_cap:
            return False
        flow.rate = rate  # the sum of the rates is 0.0 + rate = rate
        if rate > self._peak_flow_c[0]:
            self._peak_flow_c[0] = rate
        if rate > self._peak_c[0]:
            self._peak_c[0] = rate
        self._n_c[0] = 1
        self._rate_c[0] = rate
        due = flow.remaining / rate if rate > 0.0 else math.inf
        if due < math.inf:
            self._arm(due)
        else:
            self._armed = None
        if self._on_rates is not None:
            self._on_rates()
        return True

    def _capped_equal(self, flows: list[_Flow], n: int, capacity: float) -> list[float]:
        """Equal shares above the smallest cap: what capped_rates makes of them."""
        if self._uniform_cap:  # everyone capped at the same cap (clip or max-min alike)
            return [self._min_cap] * n
        return self._policy_rates(flows, capacity)

    def _policy_rates(self, flows: list[_Flow], capacity: float) -> list[float]:
        workers = [f.owner.worker for f in flows]
        return capped_rates(self._policy, workers, capacity, self._flow_caps(flows), self._maxmin)

    def _flow_caps(self, flows: list[_Flow]) -> list[float]:
        caps = self._caps
        return [caps[f.owner.worker] for f in flows]

    def _replan_general(self) -> None:
        flows = self._flows
        rates = [0.0] * len(flows)
        capacity_of = self._capacity_of
        for c, capacity in enumerate(self._caps_c):
            idx = [i for i, f in enumerate(flows) if f.owner.channel == c]
            if not idx:
                continue
            workers = [flows[i].owner.worker for i in idx]
            caps = [self._caps[w] for w in workers]
            if capacity_of is not None:
                capacity = capacity_of(len(idx))
            if self._partner is not None:
                capacity = self._duplex_share(capacity, len(idx))
            if self._weight is None:
                share = capped_rates(self._policy, workers, capacity, caps, self._maxmin)
            else:
                weights = [flows[i].weight for i in idx]
                share = weighted_rates(weights, capacity, caps, self._maxmin)
            for i, r in zip(idx, share, strict=True):
                rates[i] = r
        if self._nic is not None:
            owners = [f.owner.worker for f in flows]
            if self._nic_of is not None:
                owners = [self._nic_of[w] for w in owners]
            rates = nic_limited_rates(rates, owners, self._nic)
        self._n_c = [0] * len(self._caps_c)
        self._rate_c = [0.0] * len(self._caps_c)
        best = float("inf")
        for flow, rate in zip(flows, rates, strict=True):
            flow.rate = rate
            c = flow.owner.channel
            self._n_c[c] += 1
            self._rate_c[c] += rate
            self._peak_flow_c[c] = max(self._peak_flow_c[c], rate)
            if rate > 0.0:
                best = min(best, flow.remaining / rate)
        for c, total in enumerate(self._rate_c):
            self._peak_c[c] = max(self._peak_c[c], total)
        if best < float("inf"):
            self._arm(best)
        else:
            self._armed = None
        if self._on_rates is not None:
            self._on_rates()

    def worker_rates(self) -> list[tuple[int, float]]:
        """(worker, rate) of every flow on the link now."""
        return [(f.owner.worker, f.rate) for f in self._flows]

    def refresh(self) -> None:
        """Re-plan now because ``capacity_of`` changed (what else wants the CPU changed).

        From inside this link's own completion callback it does nothing: the re-plan that ends
        the callback sees the change.
        """
        if self._in_cb:
            return
        flows = self._flows
        if len(flows) == 1 and self._single:  # _advance and _replan_single, in fewer calls
            flow = flows[0]
            now = self.env.now
            dt = now - self._t
            if dt > 0.0:
                flow.remaining -= flow.rate * dt
                self._area_flows_c[0] += self._n_c[0] * dt
                self._area_rate_c[0] += self._rate_c[0] * dt
                self._t = now
            if not self._solo(flow):
                self._replan_single()
            return
        if not (flows or self._on_rates or self._partner):
            return  # nothing runs: the re-plan would change nothing (no rate, no timeout)
        self._advance(self.env.now)
        self._replan()

    def _on_due(self) -> None:
        flows = self._flows
        if len(flows) == 1 and flows[0].rate > 0.0:  # the lone flow is due: the steps below
            self._advance(self.env.now)
            self._finish_lone(flows[0])
            return
        self._advance(self.env.now)
        done = [
            f
            for f in self._flows
            if f.rate > 0.0 and f.remaining <= DONE_RELATIVE * max(f.bits, 1.0)
        ]
        if not done:  # floating point left a sliver: take the flow closest to its end
            done = [
                min((f for f in self._flows if f.rate > 0.0), key=lambda f: f.remaining / f.rate)
            ]
        for flow in done:
            flow.done = True
            flow.owner.departing = True
            self._bits_c[flow.owner.channel] += flow.bits
            self.bits_done += flow.bits
        self._in_cb = True
        for flow in done:
            flow.owner.flow_done()
        self._in_cb = False
        for flow in done:
            flow.owner.departing = False
        self._flows = [f for f in self._flows if not f.done]
        self._replan()

    def _finish_lone(self, flow: _Flow) -> None:
        """What :meth:`_on_due` does when its one flow is done (done or a sliver: it is the
        flow closest to its end either way), without building its lists."""
        owner = flow.owner
        flow.done = True
        owner.departing = True
        self._bits_c[owner.channel] += flow.bits
        self.bits_done += flow.bits
        self._in_cb = True
        owner.flow_done()
        self._in_cb = False
        owner.departing = False
        flows = self._flows
        if len(flows) != 1 or flow.done:  # it left, or another owner joined meanwhile
            self._flows = [f for f in flows if not f.done]
        self._replan()

    def counters(self, now: float) -> list[LinkCounters]:
        self._advance(now)
        return [
            LinkCounters(
                f"{self.name}[server {c}]" if len(self._caps_c) > 1 else self.name,
                c,
                self._caps_c[c],
                self._area_flows_c[c],
                self._area_rate_c[c],
                self._bits_c[c],
                self._peak_c[c],
                self._peak_flow_c[c],
            )
            for c in range(len(self._caps_c))
        ]


def duplex_capacity(
    capacity_bps: float, flows: int, other_bps: float, other_flows: int, duplex_bps: float
) -> float:
    """What one direction of a link may carry (bit/s) when the two directions together carry at
    most ``duplex_bps``: max-min fair between all the transfers in flight, ``flows`` in this
    direction (at most ``capacity_bps`` together) and ``other_flows`` in the other (at most
    ``other_bps``). With the other direction idle, its own capacity.

    Every transfer gets the same level until a constraint binds: the shared one (each direction
    then carries its flows' part of ``duplex_bps``), or one direction's own capacity (that one
    carries its capacity and the other what the shared limit leaves, up to its own).
    """
    if other_flows == 0 or flows == 0:
        return capacity_bps
    shared = duplex_bps / (flows + other_flows)
    own, other = capacity_bps / flows, other_bps / other_flows
    if shared <= own and shared <= other:
        return min(capacity_bps, shared * flows)
    if own <= other:
        return capacity_bps  # this direction is full first; the other gets what is left
    return max(min(capacity_bps, duplex_bps - other_bps), 0.0)


def interfered_capacity(
    capacity_bps: float, flows: int, other_flows: int, efficiency: float, exponent: float
) -> float:
    """What one direction of a link may carry (bit/s) with ``flows`` transfers while the other
    direction carries ``other_flows`` (the ``duplex_interference`` model): its own capacity
    when either is idle, else ``efficiency * min(1, flows / other_flows) ** exponent`` of it.

    Each transfer is clocked by ACKs that travel the other way and wait in that direction's
    queue; the more transfers the other direction carries, the longer its queue stands and the
    slower this direction's ACKs return. A direction carrying as many transfers or more loses
    only ``efficiency``.
    """
    if flows == 0 or other_flows == 0:
        return capacity_bps
    return capacity_bps * efficiency * float(min(1.0, flows / other_flows) ** exponent)


def weighted_rates(
    weights: Sequence[float], capacity_bps: float, caps_bps: Sequence[float], maxmin: bool
) -> list[float]:
    """Discriminatory processor sharing: rates in proportion to ``weights``, then per-flow caps
    (clipped, or with ``maxmin`` the spare capacity handed to the uncapped flows by weight)."""
    return capped_rates(_ByWeight(weights), range(len(weights)), capacity_bps, caps_bps, maxmin)


class _ByWeight(SharingPolicy):
    """Shares in proportion to fixed weights; its "workers" are indices into them."""

    name = "by-weight"

    def __init__(self, weights: Sequence[float]) -> None:
        self.weights = weights

    def rates(self, workers: Sequence[int], capacity_bps: float) -> Sequence[float]:
        total = sum(self.weights[i] for i in workers)
        return [capacity_bps * self.weights[i] / total for i in workers]
