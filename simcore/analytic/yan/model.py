"""Inputs of the Yan et al. (KDD'15) performance model: layers, hardware constants, configurations.

All inputs are frozen dataclasses, checked once by :func:`validate`; the cost functions trust them.
Units are in the field names (seconds, bits per second).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from simcore.errors import ConfigError

LayerKind = Literal["conv", "fc"]


@dataclass(frozen=True)
class Layer:
    """One layer of a feed-forward network, as the model sees it (per sample).

    Parameters
    ----------
    name : label used in messages and reports.
    kind : ``"conv"`` (each neuron reads a local window of the layer below) or ``"fc"``
        (each neuron reads every neuron of the layer below).
    neurons : output neurons, i.e. activations produced and error terms computed per sample.
    connections : multiply-adds per sample in the forward pass (W(l) in the paper: connections
        from layer l-1 into this layer; for a convolution, shared weights count once per use).
    weights : trainable parameters, the values read from the parameter servers.
    receptive_fraction : for ``conv``, the share of the layer below (along the partitioned,
        row dimension) that one neuron reads, e.g. kernel rows / input rows; ignored for ``fc``.
    """

    name: str
    kind: LayerKind
    neurons: int
    connections: int
    weights: int
    receptive_fraction: float = 1.0

    @property
    def reach(self) -> float:
        """Share of the layer below one neuron reads (1 for fully connected layers)."""
        return 1.0 if self.kind == "fc" else self.receptive_fraction


@dataclass(frozen=True)
class Network:
    """A DNN as a bottom-to-top sequence of layers, and the samples in one epoch."""

    name: str
    layers: tuple[Layer, ...]
    samples_per_epoch: int


@dataclass(frozen=True)
class HardwareConstants:
    """Per-operation costs and network figures of one (homogeneous) machine type.

    ``interference[h - 1]`` is C_interf(h): the slowdown of one thread's computation when ``h``
    threads train concurrently (1.0 for one thread); its length is the cores per machine, K.
    """

    muladd_s: float
    act_s: float
    err_s: float
    interference: tuple[float, ...]
    latency_s: float
    bandwidth_bps: float
    bits_per_value: int = 32

    @property
    def max_threads(self) -> int:
        return len(self.interference)

    def interf(self, threads: int) -> float:
        return self.interference[threads - 1]


@dataclass(frozen=True)
class LayerPlan:
    """Per-layer choices: stripe partitions P(l), threads H(l) and layer replicas R(l)."""

    partitions: int = 1
    threads: int = 1
    replicas: int = 1

    @property
    def segments(self) -> int:
        """Segments of the layer that need a worker of their own (constraint C3)."""
        return self.partitions * self.replicas


@dataclass(frozen=True)
class Configuration:
    """A system configuration Φ: resources, per-layer plans and (optionally) the mapping.

    ``mapping[l][s]`` is the worker (0..n_wr-1) that runs segment ``s = r * P(l) + p`` of layer
    ``l``; ``None`` means: map greedily, each segment to the free worker holding most of its
    inputs (see :mod:`simcore.analytic.yan.cost`). ``read_every_samples`` is N_read;
    ``read_bound`` places the parameter-server read time between its bounds:
    M_w = M_w^min + read_bound * (M_w^max - M_w^min).
    """

    n_ps: int
    n_mr: int
    n_wr: int
    plans: tuple[LayerPlan, ...]
    read_every_samples: int = 70
    read_bound: float = 0.5
    mapping: tuple[tuple[int, ...], ...] | None = None


def _positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} = {value!r}: must be a positive finite number")


def validate_network(network: Network) -> None:
    """Raise :class:`ConfigError` naming the layer and field that is out of range."""
    if not network.layers:
        raise ConfigError(f"network {network.name!r}: layers is empty; give at least one layer")
    _positive(f"network {network.name!r}: samples_per_epoch", network.samples_per_epoch)
    for i, layer in enumerate(network.layers):
        where = f"layer {i} ({layer.name!r})"
        if layer.kind not in ("conv", "fc"):
            raise ConfigError(f"{where}: kind = {layer.kind!r}: must be 'conv' or 'fc'")
        for field in ("neurons", "connections", "weights"):
            value = getattr(layer, field)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{where}: {field} = {value!r}: must be a positive integer")
        if not 0 < layer.receptive_fraction <= 1:
            raise ConfigError(
                f"{where}: receptive_fraction = {layer.receptive_fraction!r}: must be in (0, 1]"
            )


def validate_hardware(hw: HardwareConstants) -> None:
    """Raise :class:`ConfigError` naming the constant that is not positive and finite."""
    for field in ("muladd_s", "act_s", "err_s", "bandwidth_bps", "bits_per_value"):
        _positive(f"hardware: {field}", getattr(hw, field))
    if not (math.isfinite(hw.latency_s) and hw.latency_s >= 0):
        raise ConfigError(f"hardware: latency_s = {hw.latency_s!r}: must be >= 0 and finite")
    if not hw.interference:
        raise ConfigError("hardware: interference is empty; give C_interf(1) = 1.0 at least")
    for h, value in enumerate(hw.interference, start=1):
        _positive(f"hardware: interference[{h - 1}] (C_interf({h}))", value)


def validate_configuration(
    config: Configuration, network: Network, hw: HardwareConstants, machines: int | None = None
) -> None:
    """Check Φ against the network and the constraints C1-C4 of the paper's Figure 7."""
    for field in ("n_ps", "n_mr", "n_wr", "read_every_samples"):
        value = getattr(config, field)
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"configuration: {field} = {value!r}: must be a positive integer")
    if not 0 <= config.read_bound <= 1:
        raise ConfigError(f"configuration: read_bound = {config.read_bound!r}: must be in [0, 1]")
    used = config.n_ps + config.n_mr * config.n_wr
    if machines is not None and used > machines:
        raise ConfigError(
            f"configuration: n_ps + n_mr * n_wr = {used} machines, more than the {machines} given"
        )
    if len(config.plans) != len(network.layers):
        raise ConfigError(
            f"configuration: plans has {len(config.plans)} entries; the network "
            f"{network.name!r} has {len(network.layers)} layers"
        )
    for i, plan in enumerate(config.plans):
        _validate_plan(i, plan, config.n_wr, hw.max_threads)
    if config.mapping is not None:
        _validate_mapping(config)


def _validate_plan(i: int, plan: LayerPlan, n_wr: int, max_threads: int) -> None:
    for field in ("partitions", "threads", "replicas"):
        value = getattr(plan, field)
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"plans[{i}].{field} = {value!r}: must be a positive integer")
    if plan.threads > max_threads:
        raise ConfigError(
            f"plans[{i}].threads = {plan.threads}: more than the {max_threads} cores (C2)"
        )
    if plan.segments > n_wr:
        raise ConfigError(
            f"plans[{i}]: partitions * replicas = {plan.segments} segments on n_wr = {n_wr} "
            "workers; each segment needs its own worker (C3)"
        )


def _validate_mapping(config: Configuration) -> None:
    assert config.mapping is not None
    if len(config.mapping) != len(config.plans):
        raise ConfigError(
            f"configuration: mapping has {len(config.mapping)} entries for "
            f"{len(config.plans)} layers"
        )
    for i, (plan, workers) in enumerate(zip(config.plans, config.mapping, strict=True)):
        bad = len(workers) != plan.segments or len(set(workers)) != len(workers)
        if bad or any(not 0 <= w < config.n_wr for w in workers):
            raise ConfigError(
                f"mapping[{i}] = {workers!r}: must give {plan.segments} distinct workers "
                f"in 0..{config.n_wr - 1}"
            )
