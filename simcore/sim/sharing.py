"""Link sharing policies: how a link's capacity is divided among the workers active on it.

A policy only decides rates; the link (:mod:`simcore.sim.links`) owns the flows and their timing.
Each concrete policy overrides exactly one hook:

- :class:`SharingPolicy` — ``rates(workers, capacity_bps)``: the rate of every active flow, the
  flows given in the order their workers became active (earliest first). Used by the general link,
  which re-plans all flows on every change (O(n)).
- :class:`EqualSharePolicy` — ``share_bps(n_active, capacity_bps)``: every active flow gets the
  same rate, which depends only on how many flows are active. The link then keeps virtual finish
  times and re-plans a change in O(log n).
- :class:`FirstComeFirstServed` — the front flow gets the whole link; served by an O(1) FIFO link.

Sharing counts **workers**, not ops: a worker is active on a link while it has an op (or an HTTP/2
chunk) being served there; ops waiting in its queue do not add to ``n`` (TPDS'22 Alg. 1,
``active``).

Per-flow caps (TPDS'22 section 4.4: 10 Gbps per flow on a 25 Gbps link) are applied by
:func:`capped_rates`: ``clip`` gives a capped flow ``min(share, cap)`` and redistributes nothing
(the paper's way); ``maxmin`` hands the spare capacity to the flows below their caps (progressive
filling with the policy as the inner rule), i.e. max-min fairness for ``ps``.

Users add policies with :func:`register_sharing_policy`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from simcore.errors import ConfigError

__all__ = [
    "AllReduceSharing",
    "EqualSharePolicy",
    "FirstComeFirstServed",
    "ProcessorSharing",
    "SharingPolicy",
    "capped_rates",
    "get_sharing_policy",
    "nic_limited_rates",
    "register_sharing_policy",
    "sharing_policy_names",
]


class SharingPolicy(ABC):
    """Decides the rate of each flow active on a link; one hook: :meth:`rates`."""

    #: Registry name, e.g. ``"ps"``.
    name: ClassVar[str] = ""
    #: True when every flow has a link of its own of ``capacity_bps`` (ring AllReduce: each worker
    #: sends at its full bandwidth), so rates of different flows may add up past the capacity.
    dedicated: ClassVar[bool] = False

    @abstractmethod
    def rates(self, workers: Sequence[int], capacity_bps: float) -> Sequence[float]:
        """Rates in bit/s of the active flows.

        Parameters
        ----------
        workers : the worker of each active flow, in the order the workers became active.
        capacity_bps : the link's capacity in bit/s.

        Returns
        -------
        One rate (bit/s, >= 0) per flow, same order; they must sum to at most ``capacity_bps``
        unless the policy is ``dedicated``.
        """


class EqualSharePolicy(SharingPolicy):
    """Every active flow gets the same rate; one hook: :meth:`share_bps`."""

    @abstractmethod
    def share_bps(self, n_active: int, capacity_bps: float) -> float:
        """The rate in bit/s of each of ``n_active`` (>= 1) flows."""

    def rates(self, workers: Sequence[int], capacity_bps: float) -> Sequence[float]:
        if not workers:
            return []
        return [self.share_bps(len(workers), capacity_bps)] * len(workers)


class ProcessorSharing(EqualSharePolicy):
    """``ps``: each of n active flows gets B/n (TPDS'22 Alg. 1, Share line 5; ICPE'20 3.1)."""

    name = "ps"

    def share_bps(self, n_active: int, capacity_bps: float) -> float:
        return capacity_bps / n_active


class AllReduceSharing(EqualSharePolicy):
    """``allreduce``: every flow runs at the full bandwidth on its own ring link (TPDS'22 3.2.2)."""

    name = "allreduce"
    dedicated = True

    def share_bps(self, n_active: int, capacity_bps: float) -> float:
        return capacity_bps


class FirstComeFirstServed(SharingPolicy):
    """``fcfs``: the worker that became active first gets the whole link, the others wait."""

    name = "fcfs"

    def rates(self, workers: Sequence[int], capacity_bps: float) -> Sequence[float]:
        return [capacity_bps] + [0.0] * (len(workers) - 1) if workers else []


_POLICIES: dict[str, type[SharingPolicy]] = {}


def register_sharing_policy(name: str, cls: type[SharingPolicy]) -> None:
    """Make ``cls`` available as sharing policy ``name`` (replacing a policy of that name).

    Raises
    ------
    ConfigError
        If ``name`` is empty or ``cls`` is not a :class:`SharingPolicy` subclass.
    """
    if not name or not isinstance(name, str):
        raise ConfigError(f"sharing policy name must be a non-empty string, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, SharingPolicy)):
        raise ConfigError(f"sharing policy {name!r}: {cls!r} is not a SharingPolicy subclass")
    _POLICIES[name] = cls


def sharing_policy_names() -> list[str]:
    """The registered sharing policy names, sorted."""
    return sorted(_POLICIES)


def get_sharing_policy(name: str) -> SharingPolicy:
    """A new instance of the policy registered as ``name``; ConfigError lists the known ones."""
    try:
        return _POLICIES[name]()
    except KeyError:
        known = ", ".join(sharing_policy_names())
        raise ConfigError(f"sharing: unknown policy {name!r}; registered: {known}") from None


for _cls in (ProcessorSharing, FirstComeFirstServed, AllReduceSharing):
    register_sharing_policy(_cls.name, _cls)


def capped_rates(
    policy: SharingPolicy,
    workers: Sequence[int],
    capacity_bps: float,
    caps_bps: Sequence[float],
    maxmin: bool,
) -> list[float]:
    """The policy's rates with per-flow caps applied (``math.inf`` = uncapped).

    ``maxmin=False`` clips each rate to its cap and leaves the rest unused (TPDS'22 4.4).
    ``maxmin=True`` repeatedly fixes the flows whose share exceeds their cap at the cap and lets
    the policy divide what is left among the others (progressive filling).
    """
    raw = policy.rates(workers, capacity_bps)
    if not maxmin or policy.dedicated:
        return [min(r, c) for r, c in zip(raw, caps_bps, strict=True)]
    rates = [0.0] * len(workers)
    free = list(range(len(workers)))
    left = capacity_bps
    while free and left > 0.0:
        share = policy.rates([workers[i] for i in free], left)
        over = {i for i, r in zip(free, share, strict=True) if r > caps_bps[i]}
        if not over:
            for i, r in zip(free, share, strict=True):
                rates[i] = r
            break
        for i in over:
            rates[i] = caps_bps[i]
            left -= caps_bps[i]
        free = [i for i in free if i not in over]
    return rates


def nic_limited_rates(
    rates: Sequence[float], workers: Sequence[int], nic_bps: Sequence[float]
) -> list[float]:
    """Limit each worker's total rate to its NIC by max-min filling among its own flows.

    The flows of one worker to several parameter servers share its NIC (ICPE'20 section 5): a
    worker alone on server 1 but one of n on server 2 gets B/n to server 2 and only up to B - B/n
    to server 1. ``rates`` are the servers' shares (the demands); ``workers[i]`` is the NIC of flow
    i (its worker, or its host when workers share one) and ``nic_bps[k]`` the bandwidth of NIC k.
    """
    out = list(rates)
    by_worker: dict[int, list[int]] = {}
    for i, w in enumerate(workers):
        by_worker.setdefault(w, []).append(i)
    for w, flows in by_worker.items():
        nic = nic_bps[w]
        if len(flows) < 2 and rates[flows[0]] <= nic:
            continue
        if sum(rates[i] for i in flows) <= nic:
            continue
        left, pending = nic, sorted(flows, key=lambda i: rates[i])
        while pending:
            fair = left / len(pending)
            i = pending[0]
            if rates[i] <= fair:
                out[i] = rates[i]
                left -= rates[i]
                pending.pop(0)
            else:
                for j in pending:
                    out[j] = fair
                break
    return out


def fair_share_of_flows(
    capacity: float, n: int, cap: float, other_demands: Sequence[float]
) -> float:
    """What ``n`` flows, each wanting at most ``cap``, get together when they share
    ``capacity`` max-min fairly with other users that want ``other_demands`` (progressive
    filling: whoever wants less than an equal share gets it, the rest split what remains).

    A host CPU's computations (``n`` threads of at most ``cap`` cores) beside the threads that
    move the transfers, as a fair scheduler would share the cores between them.
    """
    wants = sorted([*other_demands, *([cap] * n)])
    left = capacity
    for i, want in enumerate(wants):
        share = left / (len(wants) - i)
        if want > share:
            return n * min(cap, share)
        left -= want
    return n * cap
