"""The epoch time of Yan et al. (KDD'15), sections 4.1 and 4.2, for one configuration.

Per sample and layer l (segment p, thread h, replica r; all segments of a layer are equal in
size, and the slowest one sets the layer's time):

- U_f = C_interf(H) (C_muladd W(l)/P + C_act N(l)/P)                       (Eq. 5, 9)
- U_b = C_interf(H) (C_muladd W(l+1)/P + C_err N(l)/P)                     (Eq. 7, 9)
- U_w = C_interf(H) C_muladd W(l)/P                                        (Eq. 8, 9)
- M_f = C_ncost + A(l, p) C_bits / (C_nbw / H): A remote activations from layer l-1 (Eq. 6)
- M_b = C_ncost + E(l, p) C_bits / (C_nbw / H): E remote error terms from layer l+1

and the parameter-server read time M_w between M_w^max (Eq. 10: every replica reads from one
server at once) and M_w^min (Eq. 11: one replica reads from min(N_ps, N_wr) servers in
parallel). The epoch, with no overlap of computation and reads, is

    T_epoch = M_w N_sample / N_read + sum_l (U_f + M_f + U_b + M_b + U_w)(l) N_sample / Q(l),

Q(l) = H(l) R(l) N_mr. Choices the paper leaves open, made here:

- Layers are cut into P equal row stripes (the paper's footnote 3). A segment needs the rows of
  the layer below within half its receptive fraction on either side (all of it for ``fc``);
  the rows held by the segment of the layer below on the same worker are local, all others
  remote. A replicated segment reads from the co-located segment below when there is one.
- C_ncost is charged only when a segment receives something remote; C_ncost(H) = C_ncost.
- Layer replicas each read their own copy of the weights, so W(l) in Eq. 10-11 is counted
  R(l) times (the paper's section 6.4: replication doubles the weight traffic); R(l) = 1
  gives the equations exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simcore.analytic.yan.model import (
    Configuration,
    HardwareConstants,
    Layer,
    LayerPlan,
    Network,
    validate_configuration,
    validate_hardware,
    validate_network,
)

_EPS = 1e-12
Mapping = tuple[int, ...]


@dataclass(frozen=True)
class EpochTime:
    """The model's answer for one configuration: epoch seconds and their breakdown.

    Per-layer tuples hold seconds per sample for one segment (the slowest); ``parallelism`` is
    Q(l). ``m_w_s`` lies between ``m_w_min_s`` and ``m_w_max_s`` (seconds per read).
    """

    epoch_s: float
    u_f_s: tuple[float, ...]
    m_f_s: tuple[float, ...]
    u_b_s: tuple[float, ...]
    m_b_s: tuple[float, ...]
    u_w_s: tuple[float, ...]
    parallelism: tuple[int, ...]
    m_w_min_s: float
    m_w_max_s: float
    m_w_s: float
    read_s: float
    mapping: tuple[Mapping, ...]

    @property
    def layers_s(self) -> float:
        """Epoch seconds spent in the layers (computation and activation/error messages)."""
        return self.epoch_s - self.read_s


def epoch_time(network: Network, hw: HardwareConstants, config: Configuration) -> EpochTime:
    """Validate the inputs, then compute the epoch time of ``config``.

    Raises
    ------
    simcore.errors.ConfigError
        naming the field and value when an input is out of range.
    """
    validate_network(network)
    validate_hardware(hw)
    validate_configuration(config, network, hw)
    return epoch_time_unchecked(network, hw, config)


def epoch_time_unchecked(
    network: Network, hw: HardwareConstants, config: Configuration
) -> EpochTime:
    """:func:`epoch_time` for inputs already validated (the optimizers' inner loop)."""
    layers, plans = network.layers, config.plans
    mapping = config.mapping or greedy_mapping(layers, plans, config.n_wr)
    n = network.samples_per_epoch
    comp = [compute_terms(layers, i, plans[i], hw) for i in range(len(layers))]
    m_f = [forward_comm_s(layers, plans, mapping, i, hw) for i in range(len(layers))]
    m_b = [backward_comm_s(layers, plans, mapping, i, hw) for i in range(len(layers))]
    q = [p.threads * p.replicas * config.n_mr for p in plans]
    w_min, w_max = read_bounds_s(layers, plans, hw, config.n_ps, config.n_mr, config.n_wr)
    m_w = w_min + config.read_bound * (w_max - w_min)
    read_s = m_w * n / config.read_every_samples
    per_sample = [sum(c) + f + b for c, f, b in zip(comp, m_f, m_b, strict=True)]
    layers_s = sum(t * n / qi for t, qi in zip(per_sample, q, strict=True))
    return EpochTime(
        epoch_s=read_s + layers_s,
        u_f_s=tuple(c[0] for c in comp),
        m_f_s=tuple(m_f),
        u_b_s=tuple(c[1] for c in comp),
        m_b_s=tuple(m_b),
        u_w_s=tuple(c[2] for c in comp),
        parallelism=tuple(q),
        m_w_min_s=w_min,
        m_w_max_s=w_max,
        m_w_s=m_w,
        read_s=read_s,
        mapping=mapping,
    )


def compute_terms(
    layers: Sequence[Layer], i: int, plan: LayerPlan, hw: HardwareConstants
) -> tuple[float, float, float]:
    """(U_f, U_b, U_w) of one segment of layer ``i``, seconds per sample (Eq. 5, 7, 8, 9)."""
    layer, p = layers[i], plan.partitions
    above = layers[i + 1].connections if i + 1 < len(layers) else 0
    k = hw.interf(plan.threads)
    u_f = k * (hw.muladd_s * layer.connections + hw.act_s * layer.neurons) / p
    u_b = k * (hw.muladd_s * above + hw.err_s * layer.neurons) / p
    u_w = k * hw.muladd_s * layer.connections / p
    return u_f, u_b, u_w


def read_bounds_s(
    layers: Sequence[Layer],
    plans: Sequence[LayerPlan],
    hw: HardwareConstants,
    n_ps: int,
    n_mr: int,
    n_wr: int,
) -> tuple[float, float]:
    """(M_w^min, M_w^max): one replica's weight read, best and worst case (Eq. 11, 10)."""
    lo = hi = 0.0
    for layer, plan in zip(layers, plans, strict=True):
        lo_l, hi_l = layer_read_s(layer, plan, hw, n_ps, n_mr, n_wr)
        lo, hi = lo + lo_l, hi + hi_l
    return lo, hi


def layer_read_s(
    layer: Layer, plan: LayerPlan, hw: HardwareConstants, n_ps: int, n_mr: int, n_wr: int
) -> tuple[float, float]:
    """One layer's share of (M_w^min, M_w^max), seconds."""
    seconds = plan.replicas * layer.weights * hw.bits_per_value * plan.threads / hw.bandwidth_bps
    return hw.latency_s + seconds / min(n_ps, n_wr), hw.latency_s + n_mr * seconds


def stripe(p: int, partitions: int) -> tuple[float, float]:
    """Rows [a, b) of stripe ``p`` out of ``partitions``, as shares of the layer."""
    return p / partitions, (p + 1) / partitions


def needed(p: int, partitions: int, reach: float) -> tuple[float, float]:
    """Rows of the neighbouring layer that stripe ``p`` is connected to."""
    if reach >= 1.0:
        return 0.0, 1.0
    a, b = stripe(p, partitions)
    return max(0.0, a - reach / 2), min(1.0, b + reach / 2)


def overlap(x: tuple[float, float], y: tuple[float, float]) -> float:
    return max(0.0, min(x[1], y[1]) - max(x[0], y[0]))


def remote_share(p: int, parts: int, reach: float, held: int | None, held_parts: int) -> float:
    """Share of the neighbouring layer that stripe ``p`` needs but its worker does not hold.

    ``held`` is the stripe (out of ``held_parts``) of the neighbouring layer on the same worker,
    or None when that worker holds none of it.
    """
    want = needed(p, parts, reach)
    local = 0.0 if held is None else overlap(want, stripe(held, held_parts))
    share = want[1] - want[0] - local
    return share if share > _EPS else 0.0


def holdings(plan: LayerPlan, workers: Mapping) -> dict[int, int]:
    """Worker -> the stripe of this layer it runs."""
    return {w: s % plan.partitions for s, w in enumerate(workers)}


def message_s(values: float, threads: int, hw: HardwareConstants) -> float:
    """C_ncost + values * C_bits / (C_nbw / H), or 0 when nothing is remote."""
    if values <= 0:
        return 0.0
    return hw.latency_s + values * hw.bits_per_value * threads / hw.bandwidth_bps


def forward_comm_s(
    layers: Sequence[Layer],
    plans: Sequence[LayerPlan],
    mapping: Sequence[Mapping],
    i: int,
    hw: HardwareConstants,
) -> float:
    """M_f of layer ``i``: the slowest segment's wait for remote activations of layer i-1."""
    if i == 0:
        return 0.0
    plan, below = plans[i], plans[i - 1]
    held = holdings(below, mapping[i - 1])
    worst = max(
        remote_share(
            s % plan.partitions, plan.partitions, layers[i].reach, held.get(w), below.partitions
        )
        for s, w in enumerate(mapping[i])
    )
    return message_s(worst * layers[i - 1].neurons, plan.threads, hw)


def backward_comm_s(
    layers: Sequence[Layer],
    plans: Sequence[LayerPlan],
    mapping: Sequence[Mapping],
    i: int,
    hw: HardwareConstants,
) -> float:
    """M_b of layer ``i``: the slowest segment's wait for remote error terms of layer i+1."""
    if i + 1 == len(layers):
        return 0.0
    plan, above = plans[i], plans[i + 1]
    held = holdings(above, mapping[i + 1])
    worst = max(
        remote_share(
            s % plan.partitions, plan.partitions, layers[i + 1].reach, held.get(w), above.partitions
        )
        for s, w in enumerate(mapping[i])
    )
    return message_s(worst * layers[i + 1].neurons, plan.threads, hw)


def greedy_layer_mapping(
    layer: Layer, plan: LayerPlan, below: LayerPlan | None, below_map: Mapping | None, n_wr: int
) -> Mapping:
    """Map each segment of a layer, in order, to the free worker holding most of its inputs.

    Ties go to a worker holding nothing of the layer below (it cannot serve a later segment
    better), then to the lowest stripe held, then to the lowest index; the cost of the result
    thus does not depend on how the layer below was numbered. With no layer below, segment s
    goes to worker s.
    """
    if below is None or below_map is None:
        return tuple(range(plan.segments))
    held = holdings(below, below_map)
    free = set(range(n_wr))
    chosen = []
    for s in range(plan.segments):
        want = needed(s % plan.partitions, plan.partitions, layer.reach)

        def score(w: int, want: tuple[float, float] = want) -> tuple[float, bool, int, int]:
            h = held.get(w)
            local = 0.0 if h is None else overlap(want, stripe(h, below.partitions))
            return round(local, 12), h is None, -(h or 0), -w

        best = max(free, key=score)
        free.remove(best)
        chosen.append(best)
    return tuple(chosen)


def greedy_mapping(
    layers: Sequence[Layer], plans: Sequence[LayerPlan], n_wr: int
) -> tuple[Mapping, ...]:
    """Greedy mapping of every layer in turn (section 5.3) onto workers 0..n_wr-1."""
    out: list[Mapping] = []
    for i, (layer, plan) in enumerate(zip(layers, plans, strict=True)):
        below = plans[i - 1] if i else None
        out.append(greedy_layer_mapping(layer, plan, below, out[-1] if out else None, n_wr))
    return tuple(out)
