"""Measure a shaped link on one machine: two nodes of an emulated cluster, one link shaped.

The testbed is a two-node :func:`~profilers.netns_cluster.emulated_cluster` with node 0's link
shaped by ``tc tbf`` in both directions (so both legs of the ping-pong are shaped once), and a
bucket of 100 us at the rate so that even small messages are shaped. It runs rank 0 of
:mod:`profilers.netprofile` in node 0's namespace and rank 1 in node 1's with ``ip netns exec``,
and tears down only what it created, always: first the two rank processes, then the namespaces.

It needs Linux, root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2 (``ip``, ``tc``)::

    sudo python -m profilers.netns_testbed --rate 1Gbit/s -o veth-1gbit.json

The transfers' CPU cost is measured apart, on a link with the bucket the validation's cluster
gives its links (1 ms at the rate), which is what the testbed's runs pay (below ~545 Mbit/s tbf
then segments TCP's GSO packets in software, and the cost is ~20x a real NIC's:
``scenarios/research/testbed_segmentation.py``). Besides the fit and that cost it records how
unevenly concurrent flows share the shaped link and a ring AllReduce's goodput for W = 2..4 with
every node shaped alike, and what the link carries with transfers both ways at once
(:mod:`profilers.network_measure`); ``--keep-fit FILE`` keeps an earlier profile's fit and adds
only these measurements.

If the process is killed with SIGKILL the namespaces stay behind; they are named
``sgdsim-<random>-...`` (see ``ip netns list``) and ``ip netns del NAME`` removes them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from profilers.netns import (
    TBF_GSO_PACKET_NBYTES,
    check_permitted,
    tbf_burst_nbytes,
    tbf_segments_gso,
)
from profilers.netns_cluster import BURST_S, emulated_cluster
from simcore.errors import ConfigError, ProfilingError, SgdsimError
from simcore.network import NetworkProfile, network_profile_table
from simcore.network_io import load_network_profile, save_network_profile
from simcore.units import parse_bandwidth, parse_duration, parse_size

__all__ = ["check_permitted", "measure_shaped"]

_PORT = 29555  # free in a namespace that was just created
_BURST_S = 100e-6  # a small bucket: the ping-pong's small messages are shaped too


def measure_shaped(
    rate_bps: float = 1e9,
    *,
    min_nbytes: int = 1 << 10,
    max_nbytes: int = 64 << 20,
    repeats: int = 10,
    warmup: int = 3,
    timeout_s: float = 60.0,
    cpu_repeats: int = 10,
) -> NetworkProfile:
    """Measure the network profile of a veth link shaped to ``rate_bps``.

    The fit on a link with a bucket of 100 us at the rate, so that small messages are shaped
    too; the transfers' CPU cost (``cpu_repeats`` round trips of ``max_nbytes``, 0: none) on a
    link with the bucket the validation's cluster gives its links
    (:data:`~profilers.netns_cluster.BURST_S`): a bucket smaller than one of TCP's GSO packets
    makes tbf segment every send in software (:func:`profilers.netns.tbf_segments_gso`), so the
    cost depends on the bucket (100 us at 1 Gbit/s: 2.1 ns/B; 1 ms: ~0.2), and this one is what
    the testbed's runs at the rate pay.

    Parameters
    ----------
    rate_bps : float
        Shaped rate, bits per second.
    min_nbytes, max_nbytes : int
        Smallest and largest message in bytes (sizes double in between).
    repeats, warmup : int
        Timed and untimed round trips per size (see :func:`profilers.netprofile.measure_network`).
    timeout_s : float
        Each rank's rendezvous and per-operation limit, seconds; the whole run is stopped after
        ``timeout_s`` times (number of sizes + 2).
    cpu_repeats : int
        Round trips of the largest message over which the ranks measure their CPU time.

    Returns
    -------
    NetworkProfile
        Rank 0's profile, with ``endpoints`` describing the testbed.

    Raises
    ------
    ConfigError
        Not permitted here, or a bad argument.
    ProfilingError
        A command or a rank failed or timed out.
    """
    if cpu_repeats < 0:
        raise ConfigError(f"cpu_repeats: must be >= 0 round trips, got {cpu_repeats}")
    n_sizes = max(max_nbytes // max(min_nbytes, 1), 1).bit_length()
    fit_options = (
        f"--min-size={min_nbytes} --max-size={max_nbytes} --repeats={repeats} "
        f"--warmup={warmup} --timeout={timeout_s}s --no-cpu"
    )
    profile = _measure_between_two(rate_bps, _BURST_S, fit_options, timeout_s * (n_sizes + 2))
    if not cpu_repeats:
        return profile
    cpu_options = (
        # two sizes, the least the ranks fit a line to (the fit is the first run's)
        f"--min-size={max(max_nbytes // 2, 1)} --max-size={max_nbytes} --repeats=1 --warmup=1 "
        f"--timeout={timeout_s}s --cpu-repeats={cpu_repeats}"
    )
    measured = _measure_between_two(rate_bps, BURST_S, cpu_options, timeout_s * 4)
    cpu = measured.transfer_cpu
    if cpu is None:  # (the ranks always measure it with --cpu-repeats > 0)
        raise ProfilingError("the testbed's ranks measured no transfer CPU cost")
    bucket = tbf_burst_nbytes(rate_bps, BURST_S)
    split = "splits them" if tbf_segments_gso(rate_bps, BURST_S) else "passes them whole"
    method = (
        f"{cpu.method}; on the link with the validation cluster's tbf bucket "
        f"({BURST_S * 1e3:g} ms at the rate, {bucket} B; TCP's GSO packets are "
        f"{TBF_GSO_PACKET_NBYTES} B to tbf: it {split})"
    )
    return dataclasses.replace(profile, transfer_cpu=dataclasses.replace(cpu, method=method))


def _measure_between_two(
    rate_bps: float, burst_s: float, options: str, limit_s: float
) -> NetworkProfile:
    """``python -m profilers.netprofile OPTIONS``, rank 0 and rank 1 on two nodes with node 0's
    link shaped to ``rate_bps`` with a tbf bucket of ``burst_s`` at it: rank 0's profile."""
    cluster = emulated_cluster(2, {0: rate_bps}, burst_s=burst_s)
    with cluster as bed, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.json"
        common = options.split() + (
            f"--master-addr={bed.addrs[0]} --master-port={_PORT} --quiet".split()
        )
        commands = [
            ["ip", "netns", "exec", bed.namespaces[rank], sys.executable, "-m"]
            + ["profilers.netprofile", f"--rank={rank}", f"--ifname={bed.ifname}"]
            + common
            + ([f"--out={out}"] if rank == 0 else [])
            for rank in (0, 1)
        ]
        _run_ranks(commands, limit_s)
        profile = load_network_profile(out)
    return dataclasses.replace(profile, endpoints=bed.describe(), source="<memory>")


def _run_ranks(commands: Sequence[Sequence[str]], limit_s: float) -> None:
    """Start both ranks, wait for them (at most ``limit_s`` in all), and leave none running."""
    procs: list[subprocess.Popen[str]] = []
    try:
        for cmd in commands:
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,  # its own process group, so that kill reaches all
                )
            )
        for rank, proc in enumerate(procs):
            try:
                _, stderr = proc.communicate(timeout=limit_s)
            except subprocess.TimeoutExpired as err:
                raise ProfilingError(f"rank {rank} did not finish within {limit_s:.0f} s") from err
            if proc.returncode != 0:
                raise ProfilingError(f"rank {rank} failed: {stderr.strip()[-2000:]}")
    finally:
        for proc in procs:
            _kill(proc)


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _with_effects(
    profile: NetworkProfile, args: argparse.Namespace, rate_bps: float, timeout_s: float
) -> NetworkProfile:
    """``profile`` (or ``--keep-fit``'s, with this one's CPU cost) with the shaped link's flow
    sharing, ring goodput, duplex goodput and duplex interference, unless skipped."""
    from profilers.network_measure import (
        duplex_effect,
        flow_sharing_effect,
        interference_effect,
        ring_effect,
    )

    def say(line: str) -> None:
        print(line, file=sys.stderr)

    cpu = profile.transfer_cpu
    if cpu is not None and args.note:
        cpu = dataclasses.replace(cpu, method=f"{cpu.method}; {args.note}")
    if args.keep_fit:
        profile = load_network_profile(args.keep_fit)
    profile = dataclasses.replace(profile, transfer_cpu=cpu, source="<memory>")
    if not args.no_sharing:
        sharing = flow_sharing_effect(
            rate_bps,
            shaped=True,
            seconds_per_flow=0.5,
            timeout_s=timeout_s,
            note=args.note,
            say=say,
        )
        profile = dataclasses.replace(profile, flow_sharing=sharing)
    if not args.no_ring and args.ring_max >= 2:
        ring = ring_effect(
            args.ring_max,
            link_rate_bps=rate_bps,
            bandwidth_bps=profile.bandwidth_bps,
            timeout_s=timeout_s,
            note=args.note,
            say=say,
        )
        profile = dataclasses.replace(profile, ring_goodput=ring)
    if not args.no_duplex:
        duplex = duplex_effect(link_rate_bps=rate_bps, timeout_s=timeout_s, note=args.note, say=say)
        interference = interference_effect(
            link_rate_bps=rate_bps, timeout_s=timeout_s, note=args.note, say=say
        )
        profile = dataclasses.replace(profile, duplex=duplex, duplex_interference=interference)
    return profile


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 on an sgdsim error)."""
    parser = argparse.ArgumentParser(
        prog="python -m profilers.netns_testbed",
        description="Measure a veth link between two network namespaces shaped with tc tbf.",
    )
    parser.add_argument("--rate", default="1Gbit/s", help="shaped rate (default 1Gbit/s)")
    parser.add_argument("--min-size", default="1KiB", help="smallest message (default 1KiB)")
    parser.add_argument("--max-size", default="64MiB", help="largest message (default 64MiB)")
    parser.add_argument("--repeats", type=int, default=10, help="timed round trips per size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed round trips per size")
    parser.add_argument("--timeout", default="60s", help="per-rank operation limit (60s)")
    parser.add_argument("-o", "--out", help="write the network profile JSON here")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    parser.add_argument("--no-sharing", action="store_true", help="skip how flows share it")
    parser.add_argument("--ring-max", type=int, default=4, help="ring goodput for W = 2..N (4)")
    parser.add_argument("--no-ring", action="store_true", help="skip the ring goodput")
    parser.add_argument(
        "--no-duplex",
        action="store_true",
        help="skip what its two directions carry at once and how each slows beside the other",
    )
    parser.add_argument(
        "--keep-fit", metavar="FILE", help="keep this profile's fit; add the effects measured"
    )
    parser.add_argument("--note", default="", help="a note for the methods of what is measured")
    args = parser.parse_args(argv)
    try:
        rate_bps = parse_bandwidth(args.rate, name="--rate")
        timeout_s = parse_duration(args.timeout, name="--timeout", default_unit="s")
        profile = measure_shaped(
            rate_bps,
            min_nbytes=parse_size(args.min_size, name="--min-size"),
            max_nbytes=parse_size(args.max_size, name="--max-size"),
            repeats=args.repeats,
            warmup=args.warmup,
            timeout_s=timeout_s,
        )
        profile = _with_effects(profile, args, rate_bps, timeout_s)
        if args.out:
            save_network_profile(profile, args.out, overwrite=args.force)
    except SgdsimError as err:
        print(f"netns_testbed: error: {err}", file=sys.stderr)
        return 2
    print(network_profile_table(profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
