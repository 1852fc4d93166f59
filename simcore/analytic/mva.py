"""Mean value analysis of a :class:`ClosedNetwork` (TPDS'22 Eq. 1-2).

For a job of class c arriving at shared station l when the population is n, MVA uses the mean
values of the network with that job removed, n - e_c:

- processor sharing (Eq. 1): ``T_c^l(n) = S_c^l (1 + sum_j N_j^l(n - e_c))``;
- FCFS as TPDS'22 writes it (Eq. 2):
  ``T_c^l(n) = S_c^l + sum_j S_j^l (N_j^l(n - e_c) - rho_j^l(n - e_c) / 2)``;
- then ``X_c(n) = n_c / (Z_c + sum_l T_c^l(n))``, ``N_c^l = X_c T_c^l``, ``rho_c^l = X_c S_c^l``.

Solvers:

- ``singleton``: every job its own class, recursion over all of {0,1}^K (the paper's form;
  2^K population vectors);
- ``grouped``: exact too, over the populations (n_1, ..., n_G) of G classes of identical jobs:
  prod(N_g + 1) vectors, so 1024 identical workers cost 1025 vectors (a chain in plain floats,
  2 ms), and 1024 + 1024 of two types 263,169, solved a level of equal total population at a
  time (0.2 s); the same numbers as the vector-by-vector recursion ``singleton`` runs;
- ``bard-schweitzer``: approximate, the fixed point of ``N_j(n - e_c) ~ N_j(n) (n_j - [j=c]) / n_j``
  (and the same for rho), for many distinct classes;
- ``auto``: ``grouped`` when its lattice has at most ``EXACT_MAX_STATES`` vectors, otherwise
  ``bard-schweitzer``. The result names the solver used.
"""

from __future__ import annotations

import math

import numpy as np

from simcore.analytic.network import ClosedNetwork, MvaResult
from simcore.errors import ConfigError, SgdsimError

__all__ = ["EXACT_MAX_STATES", "SOLVERS", "lattice_size", "solve"]

SOLVERS = ("auto", "singleton", "grouped", "bard-schweitzer")
EXACT_MAX_STATES = 500_000  # auto: exact up to this many population vectors (about 0.5 s)
SINGLETON_MAX_CLASSES = 26  # 2^26 vectors: beyond that the arrays alone need gigabytes
BS_TOLERANCE = 1e-12  # relative change of the queue lengths that ends the fixed point
BS_MAX_ITERATIONS = 100_000


def lattice_size(populations: tuple[int, ...]) -> int:
    """Population vectors the exact recursion visits: prod(n_g + 1)."""
    return math.prod(n + 1 for n in populations)


def solve(network: ClosedNetwork, solver: str = "auto") -> MvaResult:
    """Solve ``network`` by MVA; see the module docstring for ``solver``.

    Raises
    ------
    ConfigError
        ``solver`` is unknown, or ``singleton`` is asked for more than
        ``SINGLETON_MAX_CLASSES`` jobs.
    """
    if solver not in SOLVERS:
        raise ConfigError(f"solver: {solver!r} is not one of {', '.join(SOLVERS)}")
    if solver == "auto":
        exact = lattice_size(network.populations) <= EXACT_MAX_STATES
        solver = "grouped" if exact else "bard-schweitzer"
    if solver == "grouped":
        recursion = _one_class if network.n_classes == 1 else _by_levels
        x, t, visited = recursion(network)
        return MvaResult(network, "grouped", x, t, visited)
    if solver == "bard-schweitzer":
        x, t, iterations = _bard_schweitzer(network)
        return MvaResult(network, "bard-schweitzer", x, t, iterations)
    return _singleton(network)


def _singleton(network: ClosedNetwork) -> MvaResult:
    """Split every class into jobs of population 1, solve over {0,1}^K, sum back per class."""
    jobs = sum(network.populations)
    if jobs > SINGLETON_MAX_CLASSES:
        raise ConfigError(
            f"solver: 'singleton' visits 2^K population vectors; K = {jobs} jobs is more than "
            f"{SINGLETON_MAX_CLASSES}: use 'grouped' or 'bard-schweitzer'"
        )
    owner = [g for g, n in enumerate(network.populations) for _ in range(n)]
    split = ClosedNetwork(
        populations=(1,) * jobs,
        delay_s=tuple(network.delay_s[g] for g in owner),
        service_s=tuple(network.service_s[g] for g in owner),
        disciplines=network.disciplines,
        station_names=network.station_names,
    )
    x, t, visited = _exact(split)
    classes = network.n_classes
    x_g = np.zeros(classes)
    t_g = np.zeros((classes, network.n_stations))
    for job, g in enumerate(owner):  # jobs of one class are identical: average their T
        x_g[g] += x[job]
        t_g[g] += t[job] / network.populations[g]
    return MvaResult(network, "singleton", x_g, t_g, visited)


def _exact(net: ClosedNetwork) -> tuple[np.ndarray, np.ndarray, int]:
    """Exact recursion over the mixed-radix lattice of populations; X and T at the full one.

    Vector n has index sum_g n_g * stride_g, so n - e_c (index - stride_c) always comes first.
    Per vector only station totals are kept: sum_j N_j^l, sum_j S_j^l N_j^l, sum_j S_j^l rho_j^l.
    """
    pops = np.asarray(net.populations, dtype=np.int64)
    strides = np.concatenate(([1], np.cumprod(pops + 1)[:-1])).astype(np.int64)
    total = int(np.prod(pops + 1))
    service = net.service_array()
    delay = np.asarray(net.delay_s, dtype=float)
    fcfs = net.fcfs_mask()
    tot_n = np.zeros((total, net.n_stations))
    tot_sn = np.zeros_like(tot_n)
    tot_sr = np.zeros_like(tot_n)
    n = np.zeros(len(pops), dtype=np.int64)
    x = np.zeros(len(pops))
    t = np.zeros_like(service)
    for idx in range(1, total):
        _increment(n, pops)
        active = np.flatnonzero(n)
        prev = idx - strides[active]
        s = service[active]
        t = np.where(fcfs, s + tot_sn[prev] - 0.5 * tot_sr[prev], s * (1.0 + tot_n[prev]))
        x = n[active] / (delay[active] + t.sum(axis=1))
        xt = x[:, None] * t
        tot_n[idx] = xt.sum(axis=0)
        tot_sn[idx] = (s * xt).sum(axis=0)
        tot_sr[idx] = (s * s * x[:, None]).sum(axis=0)
    return x, t, total  # at the last index every class is active, in class order


def _one_class(net: ClosedNetwork) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`_exact` for one class of identical jobs, in plain floats: the recursion is a
    chain n = 1..N with a few stations, where numpy's cost per call would be most of the work
    (1024 workers: 2 ms instead of 20). The same operations in the same order as
    :func:`_exact`, so the same numbers."""
    (population,) = net.populations
    service = [float(v) for v in net.service_array()[0]]
    delay = float(net.delay_s[0])
    fcfs = [bool(f) for f in net.fcfs_mask()]
    tot_n = [0.0] * len(service)
    tot_sn = [0.0] * len(service)
    tot_sr = [0.0] * len(service)
    x, t = 0.0, service
    for n in range(1, population + 1):
        t = [
            s + sn - 0.5 * sr if f else s * (1.0 + q)
            for s, sn, sr, q, f in zip(service, tot_sn, tot_sr, tot_n, fcfs, strict=True)
        ]
        x = n / (delay + _sum(t))
        tot_n = [x * ts for ts in t]
        tot_sn = [s * (x * ts) for s, ts in zip(service, t, strict=True)]
        tot_sr = [s * s * x for s in service]
    return np.array([x]), np.array([t]), population + 1


def _sum(values: list[float]) -> float:
    """Left to right, as numpy sums a handful of values along an axis."""
    total = 0.0
    for v in values:
        total += v
    return total


def _by_levels(net: ClosedNetwork) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`_exact` a level of the lattice at a time: every vector with k jobs in all needs
    only vectors with k - 1, so each level is one set of array operations over its vectors
    instead of one per vector (1024 + 1024 workers of two types: 263,169 vectors in 2,049
    levels). Inactive classes (n_c = 0) take part with x = 0, which adds nothing."""
    pops = np.asarray(net.populations, dtype=np.int64)
    classes = len(pops)
    strides = np.concatenate(([1], np.cumprod(pops + 1)[:-1])).astype(np.int64)
    total = int(np.prod(pops + 1))
    service = net.service_array()
    delay = np.asarray(net.delay_s, dtype=float)
    fcfs = net.fcfs_mask()
    index = np.arange(total, dtype=np.int64)
    digits = (index[:, None] // strides[None, :]) % (pops + 1)[None, :]  # n_g of each vector
    level = digits.sum(axis=1)
    order = np.argsort(level, kind="stable")
    bounds = np.searchsorted(level[order], np.arange(int(level[-1]) + 2))
    tot_n = np.zeros((total, net.n_stations))
    tot_sn = np.zeros_like(tot_n)
    tot_sr = np.zeros_like(tot_n)
    s2 = service * service
    x = np.zeros(classes)
    t = np.zeros_like(service)
    for k in range(1, int(level[-1]) + 1):
        idx = order[bounds[k] : bounds[k + 1]]  # the vectors with k jobs, in index order
        n = digits[idx]  # (vectors, classes)
        active = n > 0
        prev = np.where(active, idx[:, None] - strides[None, :], 0)  # n - e_c (any, if n_c = 0)
        t_all = np.where(
            fcfs[None, None, :],
            service[None] + tot_sn[prev] - 0.5 * tot_sr[prev],
            service[None] * (1.0 + tot_n[prev]),
        )
        t_all = np.where(active[:, :, None], t_all, 0.0)
        x_all = np.where(active, n / np.where(active, delay[None] + t_all.sum(axis=2), 1.0), 0.0)
        xt = x_all[:, :, None] * t_all
        tot_n[idx] = xt.sum(axis=1)
        tot_sn[idx] = (service[None] * xt).sum(axis=1)
        tot_sr[idx] = (s2[None] * x_all[:, :, None]).sum(axis=1)
        x, t = x_all[-1], t_all[-1]  # the level's last vector; at the top: the full population
    return x, t, total


def _increment(n: np.ndarray, pops: np.ndarray) -> None:
    """The next population vector in mixed-radix order (digit 0 fastest)."""
    g = 0
    n[0] += 1
    while n[g] > pops[g]:
        n[g] = 0
        g += 1
        n[g] += 1


def _bard_schweitzer(net: ClosedNetwork) -> tuple[np.ndarray, np.ndarray, int]:
    """Bard-Schweitzer approximate MVA: X and T at the fixed point, and the iterations taken."""
    pops = np.asarray(net.populations, dtype=float)
    service = net.service_array()
    delay = np.asarray(net.delay_s, dtype=float)
    fcfs = net.fcfs_mask()
    x = pops / (delay + service.sum(axis=1))  # start: no waiting anywhere
    q = x[:, None] * service  # N_c^l
    rho = q.copy()
    t = service
    for iteration in range(1, BS_MAX_ITERATIONS + 1):
        own = q / pops[:, None]  # one job of class c removed: N_c (n_c - 1)/n_c = N_c - N_c/n_c
        seen_n = q.sum(axis=0) - own
        seen_sn = (service * q).sum(axis=0) - service * own
        seen_sr = (service * rho).sum(axis=0) - service * rho / pops[:, None]
        t = np.where(fcfs, service + seen_sn - 0.5 * seen_sr, service * (1.0 + seen_n))
        x = pops / (delay + t.sum(axis=1))
        q_new = x[:, None] * t
        rho = x[:, None] * service
        change = np.max(np.abs(q_new - q) / np.maximum(pops[:, None], 1.0))
        q = q_new
        if change < BS_TOLERANCE:
            return x, t, iteration
    raise SgdsimError(  # not seen in practice on these networks
        f"solver: Bard-Schweitzer did not converge in {BS_MAX_ITERATIONS} iterations; "
        "use 'grouped' or 'singleton'"
    )
