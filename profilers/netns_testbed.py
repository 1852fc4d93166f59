"""Measure a shaped link on one machine: two network namespaces joined by a veth pair.

The testbed creates two network namespaces, a veth pair with one end in each, and a ``tc tbf``
qdisc with the same rate on both ends (so both directions of the ping-pong are shaped); then it
runs rank 0 of :mod:`profilers.netprofile` in one namespace and rank 1 in the other with
``ip netns exec``. It tears down only what it created, always: first the two rank processes, then
its two namespaces (deleting a namespace deletes the veth end and qdisc inside it).

It needs Linux, root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2 (``ip``, ``tc``)::

    sudo python -m profilers.netns_testbed --rate 1Gbit/s -o veth-1gbit.json

If the process is killed with SIGKILL the namespaces stay behind; they are named
``sgdsim-<random>-a`` / ``-b`` (see ``ip netns list``) and ``ip netns del NAME`` removes them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from simcore.errors import ConfigError, ProfilingError, SgdsimError
from simcore.network import NetworkProfile, network_profile_table
from simcore.network_io import load_network_profile, save_network_profile
from simcore.units import format_bandwidth, parse_bandwidth, parse_duration, parse_size

__all__ = ["Testbed", "check_permitted", "measure_shaped", "shaped_veth"]

_ADDRS = ("10.213.0.1", "10.213.0.2")  # private to the two namespaces; they cannot clash
_PORT = 29555  # free in a namespace that was just created
_CMD_TIMEOUT_S = 30.0  # one ip/tc command
_TBF_LATENCY = "50ms"  # longest a packet may wait in the tbf queue (sets its byte limit)


@dataclass(frozen=True)
class Testbed:
    """The namespaces, interfaces and addresses of a running testbed (index 0: rank 0's side)."""

    namespaces: tuple[str, str]
    ifnames: tuple[str, str]
    addrs: tuple[str, str]
    rate_bps: float
    burst_nbytes: int

    def describe(self) -> str:
        """One line for the profile's ``endpoints`` field."""
        return (
            f"veth pair between network namespaces on one host ({self.addrs[0]} <-> "
            f"{self.addrs[1]}), both ends shaped by tc tbf rate {format_bandwidth(self.rate_bps)} "
            f"burst {self.burst_nbytes} B latency {_TBF_LATENCY}"
        )


def check_permitted() -> None:
    """Raise ConfigError unless this is Linux, run as root, with ``ip`` and ``tc`` installed."""
    if not sys.platform.startswith("linux"):
        raise ConfigError(f"netns testbed: needs Linux network namespaces, not {sys.platform}")
    if os.geteuid() != 0:
        raise ConfigError(
            "netns testbed: needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) to create network "
            "namespaces; run it with sudo"
        )
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise ConfigError(f"netns testbed: `{tool}` not found; install iproute2")


def _run(*cmd: str) -> None:
    """Run one ip/tc command; ConfigError when not permitted, ProfilingError on other failures."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_CMD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ProfilingError(f"`{' '.join(cmd)}` could not run: {err}") from err
    if done.returncode == 0:
        return
    message = done.stderr.strip() or f"exit code {done.returncode}"
    if "not permitted" in message or "Permission denied" in message:
        raise ConfigError(
            f"`{' '.join(cmd)}`: {message}; the testbed needs CAP_SYS_ADMIN and CAP_NET_ADMIN "
            "(a container may need --privileged or --cap-add)"
        )
    raise ProfilingError(f"`{' '.join(cmd)}` failed: {message}")


def _burst_nbytes(rate_bps: float) -> int:
    """tbf bucket size: 100 us at the rate, at least two 1500-byte frames.

    A small bucket shapes even small messages, as a real link of that rate would (a large one lets
    them through at memory speed); tbf splits larger GSO packets to fit it.
    """
    return max(round(rate_bps / 8 * 100e-6), 3000)


@contextlib.contextmanager
def shaped_veth(rate_bps: float = 1e9) -> Iterator[Testbed]:
    """Create the two namespaces, the veth pair and the tbf shaping; remove them on exit.

    Parameters
    ----------
    rate_bps : float
        Shaped rate of each direction, bits per second.

    Yields
    ------
    Testbed
        Names and addresses to run the ranks with.

    Raises
    ------
    ConfigError
        Not permitted here (see :func:`check_permitted`).
    ProfilingError
        An ``ip``/``tc`` command failed, or a namespace could not be removed afterwards.
    """
    check_permitted()
    tag = secrets.token_hex(3)  # unique per testbed, so two runs never touch each other's
    bed = Testbed(
        namespaces=(f"sgdsim-{tag}-a", f"sgdsim-{tag}-b"),
        ifnames=(f"sgdsim{tag}a", f"sgdsim{tag}b"),  # <= 15 characters, the kernel's limit
        addrs=_ADDRS,
        rate_bps=rate_bps,
        burst_nbytes=_burst_nbytes(rate_bps),
    )
    created: list[str] = []
    try:
        for ns in bed.namespaces:
            _run("ip", "netns", "add", ns)
            created.append(ns)
        _build_link(bed)
        yield bed
    finally:
        leftovers = _delete_namespaces(created)
        if leftovers:
            warnings.warn(f"could not delete network namespaces {leftovers}", stacklevel=2)
    if leftovers:
        raise ProfilingError(
            f"could not delete network namespaces {leftovers}; remove them with `ip netns del`"
        )


def _build_link(bed: Testbed) -> None:
    (ns_a, ns_b), (if_a, if_b) = bed.namespaces, bed.ifnames
    # The names are ours and contain no spaces, so commands can be written as one string.
    _run(*f"ip link add {if_a} netns {ns_a} type veth peer name {if_b} netns {ns_b}".split())
    tbf = f"rate {round(bed.rate_bps)}bit burst {bed.burst_nbytes} latency {_TBF_LATENCY}"
    for ns, ifname, addr in zip(bed.namespaces, bed.ifnames, bed.addrs, strict=True):
        _run(*f"ip -n {ns} addr add {addr}/30 dev {ifname}".split())
        _run(*f"ip -n {ns} link set {ifname} up".split())
        _run(*f"ip -n {ns} link set lo up".split())
        _run(*f"ip netns exec {ns} tc qdisc add dev {ifname} root tbf {tbf}".split())


def _delete_namespaces(names: Sequence[str]) -> list[str]:
    """Delete ``names`` (best effort, all of them); return those that could not be deleted."""
    leftovers = []
    for ns in reversed(names):
        try:
            _run("ip", "netns", "del", ns)
        except SgdsimError:
            leftovers.append(ns)
    return leftovers


def measure_shaped(
    rate_bps: float = 1e9,
    *,
    min_nbytes: int = 1 << 10,
    max_nbytes: int = 64 << 20,
    repeats: int = 10,
    warmup: int = 3,
    timeout_s: float = 60.0,
) -> NetworkProfile:
    """Measure the network profile of a veth link shaped to ``rate_bps``.

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

    Returns
    -------
    NetworkProfile
        Rank 0's profile, with ``endpoints`` describing the testbed.

    Raises
    ------
    ConfigError
        Not permitted here.
    ProfilingError
        A command or a rank failed or timed out.
    """
    n_sizes = max(max_nbytes // max(min_nbytes, 1), 1).bit_length()
    with shaped_veth(rate_bps) as bed, tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.json"
        options = (
            f"--min-size={min_nbytes} --max-size={max_nbytes} --repeats={repeats} "
            f"--warmup={warmup} --timeout={timeout_s}s --master-addr={bed.addrs[0]} "
            f"--master-port={_PORT} --quiet"
        ).split()
        commands = [
            ["ip", "netns", "exec", bed.namespaces[rank], sys.executable, "-m"]
            + ["profilers.netprofile", f"--rank={rank}", f"--ifname={bed.ifnames[rank]}"]
            + options
            + ([f"--out={out}"] if rank == 0 else [])
            for rank in (0, 1)
        ]
        _run_ranks(commands, timeout_s * (n_sizes + 2))
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
    args = parser.parse_args(argv)
    try:
        profile = measure_shaped(
            parse_bandwidth(args.rate, name="--rate"),
            min_nbytes=parse_size(args.min_size, name="--min-size"),
            max_nbytes=parse_size(args.max_size, name="--max-size"),
            repeats=args.repeats,
            warmup=args.warmup,
            timeout_s=parse_duration(args.timeout, name="--timeout", default_unit="s"),
        )
        if args.out:
            save_network_profile(profile, args.out, overwrite=args.force)
    except SgdsimError as err:
        print(f"netns_testbed: error: {err}", file=sys.stderr)
        return 2
    print(network_profile_table(profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
