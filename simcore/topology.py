"""The hosts a job runs on: how many, how many devices each, and the links inside and between them.

TPDS'22 section 4.4 trains on hosts of several GPUs (AWS p3.16xlarge: 8 V100s joined by NVLink,
a 25 Gbit/s NIC whose single flows reach only 10 Gbit/s). A :class:`Topology` describes such a
cluster as data; :meth:`Topology.simulation_config` turns it into the simulator's settings
(each simulated worker is then a host, see ``devices_per_host`` in
:class:`~simcore.sim.SimulationConfig` and SEMANTICS.md).

This module is pure: the dataclass and its versioned JSON form (``schema`` ``"sgdsim.topology"``,
fields with units in their names). Files are read by :mod:`simcore.topology_io`. A file may leave
``hosts`` out and describe a host type only (the shipped ``aws-p3.16xlarge``); the number of
hosts then comes from the command line.

JSON form, version 1::

    {"schema": "sgdsim.topology", "version": 1,
     "hosts": 4,                        # optional in a file
     "devices_per_host": 8,
     "intra_bandwidth_bps": 2.4e12,     # needed when devices_per_host > 1
     "nic_bandwidth_bps": 25e9,         # each host's NIC, per direction
     "flow_cap_bps": 10e9,              # optional: the network's limit per flow
     "server_bandwidth_bps": 25e9,      # optional: the parameter server host's NIC (default: nic)
     "server_host": 0,                  # optional: the training host that runs the servers
     "description": "..."}              # optional

Without ``server_host`` the parameter servers run on a machine of their own; with it they run on
that training host, whose own transfers to them then stay on the machine.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simcore.errors import ConfigError, TraceError
from simcore.sim.config import SimulationConfig
from simcore.units import check_bandwidth_range, format_bandwidth

__all__ = [
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "Topology",
    "topology_from_dict",
    "topology_to_dict",
]

SCHEMA_NAME = "sgdsim.topology"
SCHEMA_VERSION = 1
_FIELDS = (
    "hosts",
    "devices_per_host",
    "intra_bandwidth_bps",
    "nic_bandwidth_bps",
    "flow_cap_bps",
    "server_bandwidth_bps",
    "server_host",
    "description",
)


@dataclass(frozen=True)
class Topology:
    """H hosts of G devices; bandwidths in bit/s per direction.

    Attributes
    ----------
    hosts : H, training hosts (>= 1).
    devices_per_host : G, devices per host, each running the profiled step (>= 1).
    nic_bandwidth_bps : each host's NIC.
    intra_bandwidth_bps : the link between a host's devices; needed when G > 1.
    flow_cap_bps : the most one flow can get on the network (AWS: 10 Gbit/s); None = no cap.
    server_bandwidth_bps : the parameter server host's NIC; None = ``nic_bandwidth_bps``.
    server_host : the training host (0..H-1) that also runs the parameter servers; None = a
        machine of their own.
    description : free text.
    """

    hosts: int = 1
    devices_per_host: int = 1
    nic_bandwidth_bps: float = 10e9
    intra_bandwidth_bps: float | None = None
    flow_cap_bps: float | None = None
    server_bandwidth_bps: float | None = None
    server_host: int | None = None
    description: str = ""

    def __post_init__(self) -> None:
        for name in ("hosts", "devices_per_host"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}: must be an integer >= 1, got {value!r}")
        for name in (
            "nic_bandwidth_bps",
            "intra_bandwidth_bps",
            "flow_cap_bps",
            "server_bandwidth_bps",
        ):
            value = getattr(self, name)
            if value is None and name != "nic_bandwidth_bps":
                continue
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not ok or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name}: must be a finite number of bit/s > 0, got {value!r}")
            check_bandwidth_range(name, value)
        host = self.server_host
        if host is not None and (
            isinstance(host, bool) or not isinstance(host, int) or not 0 <= host < self.hosts
        ):
            raise ConfigError(
                f"server_host: must be a host index 0..{self.hosts - 1}, got {host!r}"
            )
        if self.devices_per_host > 1 and self.intra_bandwidth_bps is None:
            raise ConfigError(
                f"intra_bandwidth_bps: needed with devices_per_host={self.devices_per_host} "
                "(the link between a host's devices, e.g. 300GB/s for NVLink)"
            )

    @property
    def devices(self) -> int:
        """H * G, the devices that train."""
        return self.hosts * self.devices_per_host

    @property
    def server_link_bps(self) -> float:
        """The parameter servers' link: their host's NIC, by default the same as every host's."""
        return self.server_bandwidth_bps or self.nic_bandwidth_bps

    def with_hosts(self, hosts: int) -> Topology:
        return dataclasses.replace(self, hosts=hosts)

    def simulation_config(self, base: SimulationConfig) -> SimulationConfig:
        """``base`` with this cluster's workers (hosts), devices, links and flow cap.

        A parameter server's link is the server host's NIC and each host's NIC limits its
        leader's traffic; in a ring every host's link is its NIC.
        """
        ring = base.is_collective
        return dataclasses.replace(
            base,
            workers=self.hosts,
            devices_per_host=self.devices_per_host,
            intra_bandwidth_bps=self.intra_bandwidth_bps,
            bandwidth_bps=self.nic_bandwidth_bps if ring else self.server_link_bps,
            worker_bandwidth_bps=None if ring else self.nic_bandwidth_bps,
            flow_cap_bps=self.flow_cap_bps,
            server_host=None if ring else self.server_host,
        )

    def summary(self) -> str:
        """One line, e.g. ``4 hosts x 8 devices, 2.40 Tbit/s inside, NIC 25.0 Gbit/s``."""
        parts = [
            f"{self.hosts} host{'s' if self.hosts > 1 else ''} x {self.devices_per_host} "
            f"device{'s' if self.devices_per_host > 1 else ''}"
        ]
        if self.intra_bandwidth_bps is not None and self.devices_per_host > 1:
            parts.append(f"{format_bandwidth(self.intra_bandwidth_bps)} inside")
        parts.append(f"NIC {format_bandwidth(self.nic_bandwidth_bps)}")
        if self.flow_cap_bps is not None:
            parts.append(f"{format_bandwidth(self.flow_cap_bps)} per flow")
        if self.server_bandwidth_bps is not None:
            parts.append(f"server NIC {format_bandwidth(self.server_bandwidth_bps)}")
        if self.server_host is not None:
            parts.append(f"servers on host {self.server_host}")
        return ", ".join(parts)


def topology_from_dict(doc: Any, source: str = "<topology>") -> Topology:
    """Validate the JSON form (see the module docstring); errors name the file and field."""
    if not isinstance(doc, Mapping):
        raise TraceError(f"{source}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA_NAME:
        raise TraceError(f"{source}: 'schema' must be {SCHEMA_NAME!r}, got {doc.get('schema')!r}")
    if doc.get("version") != SCHEMA_VERSION:
        raise TraceError(
            f"{source}: 'version' {doc.get('version')!r} is not supported (this sgdsim reads "
            f"version {SCHEMA_VERSION})"
        )
    unknown = sorted(set(doc) - {"schema", "version", *_FIELDS})
    if unknown:
        raise TraceError(
            f"{source}: unknown field(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}"
        )
    if "nic_bandwidth_bps" not in doc:
        raise TraceError(f"{source}: 'nic_bandwidth_bps' is required")
    fields = {k: doc[k] for k in _FIELDS if k in doc}
    if not isinstance(fields.get("description", ""), str):
        raise TraceError(f"{source}: 'description' must be a string")
    try:
        return Topology(**fields)
    except ConfigError as err:
        raise TraceError(f"{source}: {err}") from err


def topology_to_dict(topology: Topology) -> dict[str, Any]:
    """The JSON form; optional fields left out when unset."""
    doc: dict[str, Any] = {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION}
    for name in _FIELDS:
        value = getattr(topology, name)
        if value is not None and value != "":
            doc[name] = value
    return doc
