"""The scalability optimizer of Yan et al. (KDD'15), section 5: find the fastest configuration.

Two searches over the same space (resources N_ps, N_mr, N_wr with N_ps + N_mr N_wr <= N; per
layer P, H, R with P R <= N_wr and H among the allowed thread counts; the segment-to-worker
mapping of every layer):

- :func:`exhaustive_search` tries every combination, mappings included: exponential in the
  number of layers and machines, feasible only for tiny instances; it is the reference.
- :func:`polynomial_search` is the paper's algorithm: the greedy mapping replaces the search
  over mappings, and dynamic programming over layers replaces the product over layers.

Why the DP can be exact. Only adjacent layers interact (M_f of layer l and M_b of layer l-1
depend on the mappings of l-1 and l). Workers are identical, so the best cost of a layer pair
does not depend on how the layer below was numbered: relabel the workers. Mapping each layer in
turn to be best against the one below therefore attains every pair's minimum at once, and the
epoch time is a sum of per-layer and pair terms, T = sum_l u(l, s_l) + sum_l c(l, s_{l-1}, s_l),
over the per-layer states s_l = (P, H, R), which the DP minimizes in O(L S^2) for S states per
layer. This rests on the paper's claim that the greedy mapping attains each pair's minimum; we
do not prove it for our stripe geometry, and the tests check it against the brute force.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from simcore.analytic.yan.cost import (
    EpochTime,
    compute_terms,
    epoch_time_unchecked,
    greedy_layer_mapping,
    greedy_mapping,
    holdings,
    layer_read_s,
    message_s,
    remote_share,
)
from simcore.analytic.yan.model import (
    Configuration,
    HardwareConstants,
    LayerPlan,
    Network,
    validate_hardware,
    validate_network,
)
from simcore.errors import ConfigError


@dataclass(frozen=True)
class SearchResult:
    """The fastest configuration found, its modelled epoch, and how many candidates were scored.

    ``evaluated`` counts full configurations for the exhaustive search and DP transitions for
    the polynomial one.
    """

    config: Configuration
    epoch: EpochTime
    evaluated: int

    @property
    def epoch_s(self) -> float:
        return self.epoch.epoch_s


@dataclass(frozen=True)
class SearchSpace:
    """What the optimizers may choose. ``machines`` is N; ``threads`` the allowed H(l)
    (default: 1..K, K the cores per machine); ``resources`` fixes (N_ps, N_mr, N_wr) triples
    to try instead of every triple with N_ps + N_mr N_wr <= N."""

    machines: int
    threads: tuple[int, ...] | None = None
    resources: tuple[tuple[int, int, int], ...] | None = None
    read_every_samples: int = 70
    read_bound: float = 0.5


def exhaustive_search(network: Network, hw: HardwareConstants, space: SearchSpace) -> SearchResult:
    """Score every configuration, mappings included (the brute force of section 5.2)."""
    threads = _check(network, hw, space)
    best: tuple[float, Configuration] | None = None
    count = 0
    for n_ps, n_mr, n_wr in _resources(space):
        base = Configuration(n_ps, n_mr, n_wr, (), space.read_every_samples, space.read_bound)
        for plans in itertools.product(_plans(n_wr, threads), repeat=len(network.layers)):
            for mapping in itertools.product(*(_mappings(p, n_wr) for p in plans)):
                config = _with(base, plans, mapping)
                t = epoch_time_unchecked(network, hw, config).epoch_s
                count += 1
                if best is None or t < best[0]:
                    best = (t, config)
    assert best is not None
    return SearchResult(best[1], epoch_time_unchecked(network, hw, best[1]), count)


def polynomial_search(network: Network, hw: HardwareConstants, space: SearchSpace) -> SearchResult:
    """Greedy segment-to-worker mapping plus dynamic programming over layers (section 5.3)."""
    threads = _check(network, hw, space)
    best: tuple[float, Configuration] | None = None
    count = 0
    for n_ps, n_mr, n_wr in _resources(space):
        base = Configuration(n_ps, n_mr, n_wr, (), space.read_every_samples, space.read_bound)
        value, plans, steps = _dp(network, hw, base, _plans(n_wr, threads))
        count += steps
        if best is None or value < best[0]:
            mapping = greedy_mapping(network.layers, plans, n_wr)
            best = (value, _with(base, plans, mapping))
    assert best is not None
    return SearchResult(best[1], epoch_time_unchecked(network, hw, best[1]), count)


def _dp(
    network: Network, hw: HardwareConstants, base: Configuration, states: Sequence[LayerPlan]
) -> tuple[float, tuple[LayerPlan, ...], int]:
    """Minimum epoch seconds over per-layer plans for fixed resources, the plans, and steps."""
    layers, n = network.layers, network.samples_per_epoch
    cost = [_unary(network, hw, base, 0, s) for s in states]
    back: list[list[int]] = []
    shares: dict[tuple[LayerPlan, LayerPlan, int], tuple[float, float]] = {}
    for i in range(1, len(layers)):
        row, arg = [], []
        for s in states:
            q = s.threads * s.replicas * base.n_mr
            options = []
            for j, below in enumerate(states):
                key = (_shape(below), _shape(s), i)
                if key not in shares:
                    shares[key] = _pair_shares(network, i, below, s, base.n_wr)
                fwd, bwd = shares[key]
                m_f = message_s(fwd * layers[i - 1].neurons, s.threads, hw)
                m_b = message_s(bwd * layers[i].neurons, below.threads, hw)
                q_below = below.threads * below.replicas * base.n_mr
                options.append(cost[j] + m_f * n / q + m_b * n / q_below)
            j_best = min(range(len(states)), key=options.__getitem__)
            row.append(options[j_best] + _unary(network, hw, base, i, s))
            arg.append(j_best)
        cost, back = row, [*back, arg]
    k = min(range(len(states)), key=cost.__getitem__)
    chosen = [k]
    for arg in reversed(back):
        chosen.append(arg[chosen[-1]])
    plans = tuple(states[j] for j in reversed(chosen))
    return cost[k], plans, (len(layers) - 1) * len(states) ** 2 + len(states)


def _shape(plan: LayerPlan) -> LayerPlan:
    return LayerPlan(plan.partitions, 1, plan.replicas)


def _pair_shares(
    network: Network, i: int, below: LayerPlan, plan: LayerPlan, n_wr: int
) -> tuple[float, float]:
    """Worst remote shares (activations into layer i, error terms into layer i-1) when layer
    i-1 sits on workers 0.. in order and layer i is mapped greedily against it."""
    layers = network.layers
    below_map = tuple(range(below.segments))
    here = greedy_layer_mapping(layers[i], plan, below, below_map, n_wr)
    held_below, held_here = holdings(below, below_map), holdings(plan, here)
    fwd = max(
        remote_share(
            s % plan.partitions,
            plan.partitions,
            layers[i].reach,
            held_below.get(w),
            below.partitions,
        )
        for s, w in enumerate(here)
    )
    bwd = max(
        remote_share(
            s % below.partitions,
            below.partitions,
            layers[i].reach,
            held_here.get(w),
            plan.partitions,
        )
        for s, w in enumerate(below_map)
    )
    return fwd, bwd


def _unary(
    network: Network, hw: HardwareConstants, base: Configuration, i: int, plan: LayerPlan
) -> float:
    """Epoch seconds of layer i that depend on its own plan only: computation and reads."""
    n = network.samples_per_epoch
    q = plan.threads * plan.replicas * base.n_mr
    lo, hi = layer_read_s(network.layers[i], plan, hw, base.n_ps, base.n_mr, base.n_wr)
    read = (lo + base.read_bound * (hi - lo)) * n / base.read_every_samples
    return sum(compute_terms(network.layers, i, plan, hw)) * n / q + read


def _check(network: Network, hw: HardwareConstants, space: SearchSpace) -> tuple[int, ...]:
    validate_network(network)
    validate_hardware(hw)
    if not isinstance(space.machines, int) or space.machines < 2:
        raise ConfigError(f"search: machines = {space.machines!r}: need at least 2 (PS + worker)")
    threads = space.threads or tuple(range(1, hw.max_threads + 1))
    bad = [h for h in threads if not isinstance(h, int) or not 1 <= h <= hw.max_threads]
    if bad:
        raise ConfigError(f"search: threads {bad!r}: must be in 1..{hw.max_threads} (C2)")
    for triple in space.resources or ():
        if min(triple) < 1 or triple[0] + triple[1] * triple[2] > space.machines:
            raise ConfigError(
                f"search: resources {triple!r}: (n_ps, n_mr, n_wr) must be positive with "
                f"n_ps + n_mr * n_wr <= machines = {space.machines}"
            )
    if not 0 <= space.read_bound <= 1:
        raise ConfigError(f"search: read_bound = {space.read_bound!r}: must be in [0, 1]")
    if not isinstance(space.read_every_samples, int) or space.read_every_samples < 1:
        raise ConfigError(
            f"search: read_every_samples = {space.read_every_samples!r}: must be >= 1"
        )
    return tuple(sorted(set(threads)))


def _resources(space: SearchSpace) -> Iterator[tuple[int, int, int]]:
    if space.resources is not None:
        yield from space.resources
        return
    n = space.machines
    for n_ps in range(1, n):
        for n_wr in range(1, n - n_ps + 1):
            for n_mr in range(1, (n - n_ps) // n_wr + 1):
                yield n_ps, n_mr, n_wr


def _plans(n_wr: int, threads: Sequence[int]) -> list[LayerPlan]:
    return [
        LayerPlan(p, h, r)
        for p in range(1, n_wr + 1)
        for r in range(1, n_wr // p + 1)
        for h in threads
    ]


def _mappings(plan: LayerPlan, n_wr: int) -> Iterator[tuple[int, ...]]:
    return itertools.permutations(range(n_wr), plan.segments)


def _with(
    base: Configuration, plans: tuple[LayerPlan, ...], mapping: tuple[tuple[int, ...], ...]
) -> Configuration:
    return Configuration(
        base.n_ps,
        base.n_mr,
        base.n_wr,
        plans,
        base.read_every_samples,
        base.read_bound,
        mapping,
    )
