"""The network link a command simulates or analyzes: from its options, else a measured profile.

``simulate``, ``analyze`` and ``advise`` all take ``--bandwidth`` and ``--network`` (and
``simulate`` also ``--latency``); this is the one place that turns them into numbers.
"""

from __future__ import annotations

from simcore.network import NetworkProfile
from simcore.network_io import load_network_profile
from simcore.units import parse_bandwidth, parse_duration

DEFAULT_BANDWIDTH = "10Gbps"


def load_network_option(name_or_path: str | None) -> NetworkProfile | None:
    """The profile ``--network`` names, or None when it was not given."""
    return load_network_profile(name_or_path) if name_or_path else None


def resolve_link(
    bandwidth: str | None,
    latency: str | None,
    network: NetworkProfile | None,
) -> tuple[float, float]:
    """(bandwidth in bit/s, per-transfer latency in s).

    An option given explicitly wins; otherwise the network profile's fitted value; otherwise
    :data:`DEFAULT_BANDWIDTH` and no latency.
    """
    if bandwidth is not None:
        bandwidth_bps = parse_bandwidth(bandwidth, name="--bandwidth")
    elif network is not None:
        bandwidth_bps = network.bandwidth_bps
    else:
        bandwidth_bps = parse_bandwidth(DEFAULT_BANDWIDTH, name="--bandwidth")
    if latency is not None:
        latency_s = parse_duration(latency, name="--latency", positive=False)
    else:
        latency_s = network.latency_s if network is not None else 0.0
    return bandwidth_bps, latency_s
