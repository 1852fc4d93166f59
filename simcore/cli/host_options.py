"""The host options of ``simulate`` and ``timeline``: hosts of several devices (TPDS'22 4.4), or
several worker processes per host, given one by one or as a topology file; options given
explicitly win over the topology's values.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from simcore.cli.guards import check_range
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig
from simcore.topology import Topology
from simcore.topology_io import load_topology
from simcore.trace.cpu import CommThreadCpu, measured_comm_thread, measured_worker_cores
from simcore.trace.model import Trace
from simcore.units import parse_bandwidth, parse_duration

MAX_CORES = 1e6  # --host-cores, --worker-cores


def add_host_options(p: argparse.ArgumentParser, *, hosts_list: bool = True) -> None:
    """Add the host options; ``--hosts`` takes a list/range when ``hosts_list``, else one count."""
    group = p.add_argument_group(
        "hosts", "hosts of several devices (TPDS'22 4.4), or several worker processes per host"
    )
    group.add_argument(
        "--topology",
        help="host type file or sample (e.g. aws-p3.16xlarge): devices per host, intra-host "
        "bandwidth, NIC, per-flow cap; options given explicitly win",
    )
    what = "count, list or range" if hosts_list else "a count"
    group.add_argument("--hosts", help=f"hosts H (instead of --workers): {what}")
    group.add_argument("--devices-per-host", type=int, help="devices G per host (default 1)")
    group.add_argument("--intra-bandwidth", help="link between a host's devices, e.g. 150GB/s")
    group.add_argument(
        "--server-host",
        type=int,
        help="the host (with --colocated 1: the worker) whose machine also runs the parameter "
        "servers; with --host-cores their updates share its cores, and without --own-nics its "
        "workers' transfers to them stay on the machine (default: a machine of their own)",
    )
    group.add_argument(
        "--colocated", type=int, default=1, help="worker processes per host (default 1)"
    )
    group.add_argument(
        "--own-nics",
        action="store_true",
        help="every process on a host has a network link of its own: co-located workers, and "
        "the servers with --server-host (a VM or container per process with its own virtual "
        "NIC, the emulated cluster of `sgdsim validate --testbed`); by default they share "
        "their host's NIC. A worker alone on its host has its own NIC anyway",
    )
    group.add_argument(
        "--host-cores",
        type=float,
        help="CPU cores per host, shared by them (default: none shared; with a transfer CPU "
        "cost, the cores --network's cost was measured on)",
    )
    group.add_argument(
        "--worker-cores",
        type=float,
        help="cores one worker used when profiled alone (default: the trace's CPU time over "
        "its wall time, if it recorded both, else --host-cores)",
    )
    group.add_argument(
        "--comm-cpu",
        type=float,
        metavar="NS_PER_BYTE",
        help="CPU time a worker's transfers cost its host, ns per byte sent or received "
        "(default: --network's, else 0); needs host cores (--host-cores or the profile's)",
    )
    group.add_argument(
        "--comm-thread",
        metavar="CPU_PER_STEP",
        help="--arch ps: CPU a worker's communication threads spend per step beyond the trace's "
        "computation, e.g. 3ms, shared over its transfers; with --host-cores on the cores the "
        "computation leaves, else on a core of its own (default: with --host-cores, what the "
        "trace measured if it ran beside a parameter server and recorded its CPU time, else 0; "
        "SEMANTICS.md)",
    )


def workers_text(args: argparse.Namespace, default: str = "1") -> str:
    """What ``--hosts`` or ``--workers`` says (a host is a worker); not both."""
    if args.hosts is not None and args.workers is not None:
        raise ConfigError("--hosts: give --hosts or --workers, not both (a host is a worker)")
    text: str = args.hosts or args.workers or default
    return text


def load_topology_option(args: argparse.Namespace) -> Topology | None:
    return load_topology(args.topology) if args.topology else None


def topology_bandwidth_bps(args: argparse.Namespace, topology: Topology | None) -> float | None:
    """The link ``topology`` implies when ``--bandwidth`` is not given: the servers' NIC for a
    parameter server, each host's NIC for a ring; None without a topology."""
    if args.bandwidth is not None or topology is None:
        return None
    if args.arch != "ps":
        return topology.nic_bandwidth_bps
    return topology.server_link_bps


def devices_and_intra_link(
    args: argparse.Namespace, topology: Topology | None
) -> tuple[int, float | None]:
    """Devices per host and the intra-host link (bit/s) from ``--devices-per-host`` and
    ``--intra-bandwidth``, falling back on ``topology``'s; checked."""
    devices = args.devices_per_host
    if devices is None:
        devices = topology.devices_per_host if topology is not None else 1
    if devices < 1:
        raise ConfigError(f"--devices-per-host: must be an integer >= 1, got {devices}")
    intra = _bandwidth(args.intra_bandwidth, "--intra-bandwidth")
    if intra is None and topology is not None:
        intra = topology.intra_bandwidth_bps
    if devices > 1 and intra is None:
        raise ConfigError(
            f"--intra-bandwidth: needed with {devices} devices per host (the link between a "
            "host's devices, e.g. 150GB/s for NVLink)"
        )
    check_intra_bandwidth_used(args.intra_bandwidth, devices)
    return devices, intra


def check_intra_bandwidth_used(given: str | None, largest_devices: int) -> None:
    """ConfigError for ``--intra-bandwidth`` given where no host has several devices (it
    would do nothing)."""
    if given is not None and largest_devices == 1:
        raise ConfigError(
            f"--intra-bandwidth {given}: only with --devices-per-host above 1 (one device per "
            "host has no link between devices)"
        )


def apply_host_options(
    args: argparse.Namespace,
    config: SimulationConfig,
    topology: Topology | None,
    traces: Sequence[Trace] = (),
) -> SimulationConfig:
    """``config`` with the host options, falling back on ``topology``'s values (the transfers'
    CPU cost, ``--comm-cpu``, is the link's: :mod:`simcore.cli.link_options`), and a parameter
    server's communication threads from the trace's own CPU time (:func:`trace_comm_thread`)."""
    ring = config.is_collective
    devices, intra = devices_and_intra_link(args, topology)
    # --own-nics with one worker per host and no server there changes nothing, and is taken
    # all the same: one command line then describes a whole sweep over W (W = 1 included).
    changes: dict[str, Any] = {
        "devices_per_host": devices,
        "intra_bandwidth_bps": intra,
        "colocated_workers": args.colocated,
        "host_cpu_cores": args.host_cores,
        "worker_cpu_cores": args.worker_cores,
        "shared_nic": not args.own_nics,
    }
    if args.comm_thread is not None:
        changes["comm_thread_s_per_step"] = parse_duration(
            args.comm_thread, name="--comm-thread", positive=False
        )
    check_range("--host-cores", args.host_cores, 0, MAX_CORES, low_open=True)
    check_range("--worker-cores", args.worker_cores, 0, MAX_CORES, low_open=True)
    if args.server_host is not None:
        changes["server_host"] = args.server_host
    elif topology is not None and topology.server_host is not None and not ring:
        changes["server_host"] = topology.server_host
    if args.own_nics and changes.get("server_host") is not None:
        changes["server_nic"] = "own"  # the servers' process has its link, as the workers'
    if topology is not None:
        if getattr(args, "flow_cap", None) is None:
            changes["flow_cap_bps"] = topology.flow_cap_bps
        if getattr(args, "worker_bandwidth", None) is None and not ring:
            changes["worker_bandwidth_bps"] = topology.nic_bandwidth_bps
    config = dataclasses.replace(config, **changes)
    cores = trace_worker_cores(args, config, traces)
    if cores is not None:
        config = dataclasses.replace(config, worker_cpu_cores=cores)
    cpu = trace_comm_thread(args, config, traces)
    if cpu is not None:
        config = dataclasses.replace(config, comm_thread_s_per_step=cpu.beyond_s)
    return config


def trace_worker_cores(
    args: argparse.Namespace, config: SimulationConfig, traces: Sequence[Trace]
) -> float | None:
    """The cores one worker's computation held when profiled, as the trace measured them
    (:func:`simcore.trace.cpu.measured_worker_cores`, at most the host's cores): what
    ``--worker-cores`` would set when workers share a host's cores. None when the option is
    given, the cores are not shared, or the workers replay several traces."""
    if args.worker_cores is not None or config.host_cpu_cores is None or len(traces) != 1:
        return None
    measured = measured_worker_cores(traces[0])
    return None if measured is None else min(measured, config.host_cpu_cores)


def host_sources(args: argparse.Namespace, config: SimulationConfig) -> dict[str, str]:
    """Where the host settings a trace can supply came from, by config name."""
    return {
        "worker_cpu_cores": worker_cores_source(args, config),
        "comm_thread_s_per_step": comm_thread_source(args, config),
    }


def worker_cores_source(args: argparse.Namespace, config: SimulationConfig) -> str:
    """Where ``config.worker_cpu_cores`` came from: ``--worker-cores``, ``trace`` (its CPU over
    wall time) or ``default`` (the host's cores, or no shared cores)."""
    if args.worker_cores is not None:
        return "--worker-cores"
    return "trace" if config.worker_cpu_cores is not None else "default"


def comm_thread_source(args: argparse.Namespace, config: SimulationConfig) -> str:
    """Where ``config.comm_thread_s_per_step`` (as :func:`apply_host_options` set it) came
    from: ``--comm-thread``, ``trace`` (its measured CPU time) or ``default`` (none)."""
    if args.comm_thread is not None:
        return "--comm-thread"
    return "trace" if config.comm_thread_s_per_step > 0 else "default"


def trace_comm_thread(
    args: argparse.Namespace, config: SimulationConfig, traces: Sequence[Trace]
) -> CommThreadCpu | None:
    """What a parameter server's workers spend per step beyond their trace's computation, when
    the trace measured it (a run beside a real server that recorded its CPU time,
    :func:`simcore.trace.cpu.measured_comm_thread`) and the workers share cores
    (``--host-cores``): what ``--comm-thread`` would set. None when an option decides
    (``--comm-thread``, or ``--comm-cpu``'s per-byte model of the same work), for a ring, for
    workers of several traces, or on hosts of their own (the trace already ran beside its
    transfers on one)."""
    if config.arch != "ps" or config.host_cpu_cores is None or len(traces) != 1:
        return None
    if args.comm_thread is not None or args.comm_cpu is not None:
        return None
    measured = measured_comm_thread(traces[0])
    return measured if measured is not None and measured.beyond_s > 0 else None


def _bandwidth(text: str | None, name: str) -> float | None:
    return None if text is None else parse_bandwidth(text, name=name)
