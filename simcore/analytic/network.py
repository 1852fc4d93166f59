"""Closed multi-class queueing networks and the results of their mean value analysis.

A network has G job classes and L shared stations. Class g has ``populations[g]`` jobs; each job
alternates between its own delay (an infinite-server station: no waiting, mean ``delay_s[g]``)
and one visit to every shared station l with mean service ``service_s[g][l]``. Shared stations
are processor sharing (``"ps"``) or first come first served (``"fcfs"``, TPDS'22 Eq. 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simcore.errors import ConfigError

__all__ = ["DISCIPLINES", "ClosedNetwork", "MvaResult"]

DISCIPLINES = ("ps", "fcfs")


@dataclass(frozen=True)
class ClosedNetwork:
    """A closed network to solve; validated on construction (ConfigError naming the field).

    Attributes
    ----------
    populations : jobs per class, each >= 1.
    delay_s : per class, mean time at its own delay station (seconds, >= 0).
    service_s : per class, per shared station, mean service time (seconds, >= 0).
    disciplines : per shared station, ``"ps"`` or ``"fcfs"``.
    station_names : per shared station, a label.
    """

    populations: tuple[int, ...]
    delay_s: tuple[float, ...]
    service_s: tuple[tuple[float, ...], ...]
    disciplines: tuple[str, ...]
    station_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def n_classes(self) -> int:
        return len(self.populations)

    @property
    def n_stations(self) -> int:
        return len(self.disciplines)

    def service_array(self) -> np.ndarray:
        """``service_s`` as a (classes, stations) float array."""
        return np.array(self.service_s, dtype=float).reshape(self.n_classes, self.n_stations)

    def fcfs_mask(self) -> np.ndarray:
        return np.array([d == "fcfs" for d in self.disciplines], dtype=bool)


def _validate(net: ClosedNetwork) -> None:
    g = len(net.populations)
    if g == 0:
        raise ConfigError("populations: at least one class is needed")
    for n in net.populations:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ConfigError(f"populations: each must be an integer >= 1, got {n!r}")
    if len(net.delay_s) != g or len(net.service_s) != g:
        raise ConfigError(
            f"delay_s, service_s: need one entry per class ({g}), "
            f"got {len(net.delay_s)} and {len(net.service_s)}"
        )
    for d in net.disciplines:
        if d not in DISCIPLINES:
            raise ConfigError(f"disciplines: {d!r} is not one of {', '.join(DISCIPLINES)}")
    if net.station_names and len(net.station_names) != len(net.disciplines):
        raise ConfigError("station_names: needs one name per station")
    for c, (z, row) in enumerate(zip(net.delay_s, net.service_s, strict=True)):
        if len(row) != len(net.disciplines):
            raise ConfigError(
                f"service_s: class {c} has {len(row)} service times for "
                f"{len(net.disciplines)} stations"
            )
        for value in (z, *row):
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(
                    f"service_s: class {c} has {value!r}; times must be finite and >= 0"
                )
        if z + sum(row) <= 0:
            raise ConfigError(
                f"service_s: class {c} spends no time anywhere (delay and all services are 0); "
                "its throughput would be unbounded"
            )


@dataclass(frozen=True)
class MvaResult:
    """Mean values of a closed network at its full population.

    Attributes
    ----------
    network : the network solved.
    solver : ``"singleton"``, ``"grouped"`` or ``"bard-schweitzer"``.
    throughput_per_s : per class, completed cycles per second summed over its jobs (X_g).
    response_s : (classes, stations) mean time of one visit, waiting included (T_g^l).
    iterations : fixed-point iterations (Bard-Schweitzer), or the number of population vectors
        the exact recursion visited.
    """

    network: ClosedNetwork
    solver: str
    throughput_per_s: np.ndarray
    response_s: np.ndarray
    iterations: int

    @property
    def cycle_s(self) -> np.ndarray:
        """Per class, the mean time of one cycle through the network (seconds)."""
        cycle: np.ndarray = np.asarray(self.network.delay_s) + self.response_s.sum(axis=1)
        return cycle

    @property
    def queue_length(self) -> np.ndarray:
        """(classes, stations) mean number of class-g jobs at station l (Little: X T)."""
        n: np.ndarray = self.throughput_per_s[:, None] * self.response_s
        return n

    @property
    def utilization(self) -> np.ndarray:
        """(classes, stations) share of time station l serves class g (X S)."""
        rho: np.ndarray = self.throughput_per_s[:, None] * self.network.service_array()
        return rho

    @property
    def station_utilization(self) -> np.ndarray:
        """Per station, its total utilization (sum over classes)."""
        total: np.ndarray = self.utilization.sum(axis=0)
        return total
