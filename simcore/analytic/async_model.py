"""Async-SGD with a parameter server as the closed queueing network of TPDS'22 Fig. 5.

Every worker owns one job that cycles through four stations: the shared downlink D (pull the
model, M/B), its own compute station (forward and backward, T_F + T_B; it only ever holds this
worker's job, so it is a delay station), the shared uplink U (push the gradients, M/B) and the
parameter server S (apply them, T_S). S is always processor sharing; D and U are processor
sharing (Eq. 4) or FCFS (Eq. 3). Workers of one type form one class whose population is their
count (exact, and what makes 1024 identical workers cheap; see :mod:`.mva`).

- Eq. 3/4: job throughput ``X = sum_k 1 / cycle_k`` with FCFS or PS links, in steps/s.
- Eq. 5 (hybrid): the FCFS solution when the FCFS solution's network utilization
  ``rho^FCFS = max(rho^D, rho^U)`` is at most ``rho_t`` (default 0.6), else the PS solution.
- Eq. 6 (overlap): replace each class's compute time by
  ``max(0, T_F - T^D) + max(0, T_B - T^U)``, with ``T^D`` and ``T^U`` the link response times of
  the hybrid solution, and solve again. Which link model the second solve uses, the paper leaves
  open; ``overlap_rule`` chooses:

  - ``"reselect"`` (default): the second solve is a hybrid solve of its own: both link models
    are solved with the new compute times and Eq. 5 picks again, on the new ``rho^FCFS``;
  - ``"keep"``: the second solve uses the link model that Eq. 5 picked in the first solve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simcore.analytic.mva import solve
from simcore.analytic.network import ClosedNetwork, MvaResult
from simcore.analytic.params import Cluster
from simcore.errors import ConfigError

__all__ = [
    "DEFAULT_RHO_T",
    "OVERLAP_RULES",
    "STATIONS",
    "AsyncPrediction",
    "SharingSolution",
    "fig5_network",
    "predict_async",
]

DEFAULT_RHO_T = 0.6
OVERLAP_RULES = ("reselect", "keep")
STATIONS = ("downlink", "uplink", "server")  # shared stations, in this order
DOWN, UP = 0, 1


@dataclass(frozen=True)
class SharingSolution:
    """One solve of the Fig. 5 network with the links processor-sharing or FCFS.

    ``steps_per_s`` sums every worker's steps; ``examples_per_s`` weighs them by batch size;
    ``link_utilization`` is the busier link's utilization (the paper's rho for Eq. 5).
    """

    links: str
    steps_per_s: float
    examples_per_s: float
    link_utilization: float
    mva: MvaResult


@dataclass(frozen=True)
class AsyncPrediction:
    """The coarse Async-SGD predictions for one cluster (TPDS'22 Eq. 3-6).

    ``hybrid`` is ``fcfs`` or ``ps`` as Eq. 5 picks; ``overlap`` is Eq. 6's second solve.
    ``solver`` is the MVA solver of the solves (all use the same one).
    """

    cluster: Cluster
    ps: SharingSolution
    fcfs: SharingSolution
    hybrid: SharingSolution
    overlap: SharingSolution
    rho_t: float
    overlap_rule: str

    @property
    def solver(self) -> str:
        return self.ps.mva.solver


def fig5_network(cluster: Cluster, links: str, compute_s: tuple[float, ...]) -> ClosedNetwork:
    """The Fig. 5 network of ``cluster`` with ``links`` (``"ps"``/``"fcfs"``) at D and U.

    ``compute_s`` is each worker type's time at its compute station (T_F + T_B, or Eq. 6's).
    """
    b = cluster.bandwidth_bps
    return ClosedNetwork(
        populations=cluster.counts,
        delay_s=compute_s,
        service_s=tuple(
            (w.transfer_s(b), w.transfer_s(b), w.update_s) for w in cluster.worker_types
        ),
        disciplines=(links, links, "ps"),
        station_names=STATIONS,
    )


def _solve(
    cluster: Cluster, links: str, compute_s: tuple[float, ...], solver: str
) -> SharingSolution:
    mva = solve(fig5_network(cluster, links, compute_s), solver)
    batch = np.array([w.batch_size for w in cluster.worker_types], dtype=float)
    util = mva.station_utilization
    return SharingSolution(
        links=links,
        steps_per_s=float(mva.throughput_per_s.sum()),
        examples_per_s=float((mva.throughput_per_s * batch).sum()),
        link_utilization=float(max(util[DOWN], util[UP])),
        mva=mva,
    )


def _hybrid(fcfs: SharingSolution, ps: SharingSolution, rho_t: float) -> SharingSolution:
    """Eq. 5."""
    return fcfs if fcfs.link_utilization <= rho_t else ps


def predict_async(
    cluster: Cluster,
    *,
    rho_t: float = DEFAULT_RHO_T,
    overlap_rule: str = "reselect",
    solver: str = "auto",
) -> AsyncPrediction:
    """PS, FCFS, hybrid and overlap-corrected Async-SGD throughput of ``cluster``.

    Raises
    ------
    ConfigError
        ``rho_t`` outside [0, 1], an unknown ``overlap_rule`` or ``solver``.
    """
    if not (isinstance(rho_t, int | float) and math.isfinite(rho_t) and 0 <= rho_t <= 1):
        raise ConfigError(f"rho_t: must be a number in [0, 1], got {rho_t!r}")
    if overlap_rule not in OVERLAP_RULES:
        raise ConfigError(
            f"overlap_rule: {overlap_rule!r} is not one of {', '.join(OVERLAP_RULES)}"
        )
    compute = tuple(w.compute_s for w in cluster.worker_types)
    ps = _solve(cluster, "ps", compute, solver)
    fcfs = _solve(cluster, "fcfs", compute, solver)
    hybrid = _hybrid(fcfs, ps, rho_t)
    t = hybrid.mva.response_s
    overlapped = tuple(
        max(0.0, w.forward_s - float(t[g, DOWN])) + max(0.0, w.backward_s - float(t[g, UP]))
        for g, w in enumerate(cluster.worker_types)
    )
    if overlap_rule == "keep":
        overlap = _solve(cluster, hybrid.links, overlapped, solver)
    else:
        overlap = _hybrid(
            _solve(cluster, "fcfs", overlapped, solver),
            _solve(cluster, "ps", overlapped, solver),
            rho_t,
        )
    return AsyncPrediction(cluster, ps, fcfs, hybrid, overlap, rho_t, overlap_rule)
