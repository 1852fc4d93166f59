"""The network link a command simulates or analyzes: from its options, else a measured profile.

``simulate``, ``timeline``, ``analyze``, ``advise`` and ``validate`` take ``--network`` (a measured
profile) and options for each of its values; this is the one place that turns them into numbers,
as a :class:`~simcore.link_settings.LinkSettings` whose every value says where it came from. An
option given explicitly wins; then a topology's link (``simulate``, ``timeline``, ``analyze``: the
bandwidth only); then the profile; then the default.
"""

from __future__ import annotations

import argparse
import math

from simcore.cli.guards import check_range
from simcore.errors import ConfigError
from simcore.link_settings import FULL_DUPLEX, LinkSettings, Sourced
from simcore.network import NetworkProfile, profile_note
from simcore.network_io import load_network_profile
from simcore.sim.config import MAX_INTERFERENCE_EXPONENT
from simcore.units import (
    check_bandwidth_range,
    check_duration_range,
    parse_bandwidth,
    parse_duration,
)

DEFAULT_BANDWIDTH = "10Gbps"
MAX_COMM_CPU_NS = 1e9  # --comm-cpu, ns per byte
MAX_FLOW_WEIGHT_CV = 100.0  # --flow-weight-cv; measured links show 0.05-0.3
NETWORK_HELP = (
    "measured network profile, a file or sample (`sgdsim network show`): its bandwidth, "
    "per-transfer latency, flow weight cv, transfer CPU cost, ring goodput and duplex goodput, "
    "unless options say otherwise"
)


def add_effect_options(p: argparse.ArgumentParser, *, cpu: bool = True) -> None:
    """``--flow-weight-cv`` and (``cpu``) ``--comm-cpu`` and ``--host-cores``, for commands
    whose host options do not already have the latter two."""
    p.add_argument(
        "--flow-weight-cv",
        type=float,
        metavar="CV",
        help="unequal shares of a parameter server's ps link: per-transfer lognormal weights "
        "with this coefficient of variation (default: --network's, else 0)",
    )
    p.add_argument(
        "--duplex",
        type=float,
        metavar="RATIO",
        help="what a parameter server's link carries in both directions at once, as a multiple "
        "of one direction: 2 = full duplex, 1 = half duplex (default: --network's, else 2)",
    )
    p.add_argument(
        "--duplex-interference",
        metavar="EFF,PULL,PUSH",
        help="instead of --duplex: each direction of a parameter server's link keeps its "
        "bandwidth but slows beside the other's transfers, to EFF * min(1, n/m) ** PULL (pulls) "
        "or ** PUSH (pushes) of it with n transfers facing m (default: --network's if it has "
        "one and --duplex is not given; profilers.distributed.link_interference measures it)",
    )
    if cpu:
        p.add_argument(
            "--comm-cpu",
            type=float,
            metavar="NS_PER_BYTE",
            help="CPU time transfers cost their host, ns per byte sent or received (default: "
            "--network's, else 0); with --host-cores",
        )
        p.add_argument(
            "--host-cores",
            type=float,
            help="CPU cores of a worker's host (default: those --network's cost was measured on)",
        )


def load_network_option(name_or_path: str | None) -> NetworkProfile | None:
    """The profile ``--network`` names (None without it), its link in the range sgdsim
    computes with; a ConfigError names the file and the field otherwise."""
    if not name_or_path:
        return None
    profile = load_network_profile(name_or_path)
    check_bandwidth_range(f"{name_or_path}: bandwidth_bps", profile.bandwidth_bps)
    check_duration_range(f"{name_or_path}: latency_s", profile.latency_s)
    return profile


def link_settings(
    args: argparse.Namespace,
    *,
    topology_bps: float | None = None,
    topology: str | None = None,
) -> LinkSettings:
    """The link ``args`` describe: each value from its option, else ``topology_bps`` (the
    bandwidth of ``--topology``), else ``--network``'s profile, else the default.

    Options a command does not have count as not given.

    Raises
    ------
    ConfigError
        An option's value is out of range (naming it); ``--network`` names no profile.
    TraceError
        The profile is malformed.
    """
    name = getattr(args, "network", None)
    profile = load_network_option(name)
    return LinkSettings(
        bandwidth_bps=_bandwidth(args, profile, name, topology_bps, topology),
        latency_s=_latency(args, profile, name),
        flow_weight_cv=_flow_weight_cv(args, profile, name),
        flow_weight_cv_push=_push_cv(args, profile, name),
        comm_cpu_s_per_byte=_comm_cpu(args, profile, name),
        host_cpu_cores=_host_cores(args, profile, name),
        duplex_ratio=_duplex(args, profile, name),
        duplex_interference=_interference(args, profile, name),
        ring=profile.ring_goodput if profile is not None else None,
        profile=name,
        note=profile_note(profile, name) if profile is not None else "",
        ring_cpu_placement=getattr(args, "parse_placement", None),
    )


def _bandwidth(
    args: argparse.Namespace,
    profile: NetworkProfile | None,
    name: str | None,
    topology_bps: float | None,
    topology: str | None,
) -> Sourced[float]:
    text = getattr(args, "bandwidth", None)
    if text is not None:
        return Sourced(parse_bandwidth(text, name="--bandwidth"), "--bandwidth")
    if topology_bps is not None:
        return Sourced(topology_bps, f"topology {topology}")
    if profile is not None and name is not None:
        return Sourced(profile.bandwidth_bps, name)
    return Sourced(parse_bandwidth(DEFAULT_BANDWIDTH, name="--bandwidth"))


def _latency(
    args: argparse.Namespace, profile: NetworkProfile | None, name: str | None
) -> Sourced[float]:
    text = getattr(args, "latency", None)
    if text is not None:
        return Sourced(parse_duration(text, name="--latency", positive=False), "--latency")
    if profile is not None and name is not None:
        return Sourced(profile.latency_s, name)
    return Sourced(0.0)


def _flow_weight_cv(
    args: argparse.Namespace, profile: NetworkProfile | None, name: str | None
) -> Sourced[float]:
    value = getattr(args, "flow_weight_cv", None)
    if value is not None:
        check_range("--flow-weight-cv", value, 0, MAX_FLOW_WEIGHT_CV)
        return Sourced(float(value), "--flow-weight-cv")
    if profile is None or name is None or profile.flow_sharing is None:
        return Sourced(0.0)
    sharing = profile.flow_sharing
    if sharing.pull_cv is not None and sharing.push_cv is not None:
        return Sourced(sharing.pull_cv, name)  # the downlink's; the uplink's: _push_cv
    return Sourced(sharing.weight_cv, name)


def _duplex(
    args: argparse.Namespace, profile: NetworkProfile | None, name: str | None
) -> Sourced[float]:
    value = getattr(args, "duplex", None)
    if value is not None:
        check_range("--duplex", value, 1.0, FULL_DUPLEX)
        return Sourced(float(value), "--duplex")
    if profile is not None and name is not None and profile.duplex is not None:
        return Sourced(min(profile.duplex.ratio, FULL_DUPLEX), name)
    return Sourced(FULL_DUPLEX)


def _interference(
    args: argparse.Namespace, profile: NetworkProfile | None, name: str | None
) -> Sourced[tuple[float, float, float]] | None:
    """``--duplex-interference``, else the profile's unless ``--duplex`` chose the other model
    (both options: ConfigError)."""
    text = getattr(args, "duplex_interference", None)
    if text is not None:
        if getattr(args, "duplex", None) is not None:
            raise ConfigError(
                "--duplex and --duplex-interference: two models of the same link's two "
                "directions; give one"
            )
        return Sourced(parse_interference(text), "--duplex-interference")
    if getattr(args, "duplex", None) is not None or profile is None or name is None:
        return None
    effect = profile.duplex_interference
    return Sourced(effect.parameters, name) if effect is not None else None


def parse_interference(text: str) -> tuple[float, float, float]:
    """``EFF,PULL,PUSH`` as three numbers, checked as the simulator checks them; ConfigError
    naming the option."""
    parts = [part.strip() for part in str(text).split(",")]
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ConfigError(
            f"--duplex-interference: expected three numbers EFF,PULL,PUSH (e.g. 0.94,0.72,0.17), "
            f"got {text!r}"
        )
    efficiency, pull, push = values
    check_range("--duplex-interference efficiency", efficiency, 0.0, 1.0, low_open=True)
    check_range("--duplex-interference PULL", pull, 0.0, MAX_INTERFERENCE_EXPONENT)
    check_range("--duplex-interference PUSH", push, 0.0, MAX_INTERFERENCE_EXPONENT)
    return (efficiency, pull, push)


def _push_cv(
    args: argparse.Namespace, profile: NetworkProfile | None, name: str | None
) -> Sourced[float] | None:
    """The uplink's own cv when the profile measured the directions apart and no option set
    one value for both (then ``flow_weight_cv`` is the downlink's)."""
    if getattr(args, "flow_weight_cv", None) is not None or profile is None or name is None:
        return None
    sharing = profile.flow_sharing
    if sharing is None or sharing.pull_cv is None or sharing.push_cv is None:
        return None
    return Sourced(sharing.push_cv, name)


def _comm_cpu(
    args: argparse.Namespace, profile: NetworkProfile | None, name: str | None
) -> Sourced[float]:
    value = getattr(args, "comm_cpu", None)
    if value is not None:
        if not (math.isfinite(value) and 0 <= value <= MAX_COMM_CPU_NS):
            raise ConfigError(
                f"--comm-cpu: must be >= 0 ns per byte and <= {MAX_COMM_CPU_NS:g} (1 s per "
                f"byte), got {value:g}"
            )
        return Sourced(value * 1e-9, "--comm-cpu")
    if profile is not None and name is not None and profile.transfer_cpu is not None:
        return Sourced(profile.transfer_cpu.s_per_byte, name)
    return Sourced(0.0)


def _host_cores(
    args: argparse.Namespace, profile: NetworkProfile | None, name: str | None
) -> Sourced[float | None]:
    value = getattr(args, "host_cores", None)
    if value is not None:
        return Sourced(float(value), "--host-cores")
    if profile is not None and name is not None and profile.transfer_cpu is not None:
        return Sourced(profile.transfer_cpu.host_cpu_cores, name)
    return Sourced(None)


def link_lines(settings: LinkSettings, describe: str) -> list[str]:
    """The lines a command prints about its link: ``describe`` (a :meth:`LinkSettings.describe`
    line) and the profile's note, if any."""
    return [describe, *([settings.note] if settings.note else [])]


def resolve_link(
    bandwidth: str | None,
    latency: str | None,
    network: NetworkProfile | None,
) -> tuple[float, float]:
    """(bandwidth in bit/s, per-transfer latency in s), for the scenarios' link options: an
    option given explicitly wins; otherwise the network profile's fitted value; otherwise
    :data:`DEFAULT_BANDWIDTH` and no latency. (The scenarios set the effects themselves.)"""
    args = argparse.Namespace(bandwidth=bandwidth, latency=latency, network=None)
    settings = link_settings(args)
    if network is None:
        return settings.bandwidth_bps.value, settings.latency_s.value
    return (
        network.bandwidth_bps if bandwidth is None else settings.bandwidth_bps.value,
        network.latency_s if latency is None else settings.latency_s.value,
    )
