"""Linux network namespaces and tc shaping: the primitives the emulated testbeds are built from.

Everything here needs Linux, root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2 (``ip``,
``tc``). :func:`check_permitted` says clearly when one of them is missing; a command refused by
the kernel raises :class:`~simcore.errors.ConfigError` naming the capability, any other failure
:class:`~simcore.errors.ProfilingError` with the command and its message.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from simcore.errors import ConfigError, ProfilingError, SgdsimError

__all__ = [
    "TBF_GSO_PACKET_NBYTES",
    "TBF_LATENCY",
    "check_permitted",
    "delete_namespaces",
    "enter_namespace",
    "run_ip",
    "tbf_burst_nbytes",
    "tbf_options",
    "tbf_segments_gso",
    "tbf_whole_packets_burst_s",
]

_CMD_TIMEOUT_S = 30.0  # one ip/tc command
_CLONE_NEWNET = 0x40000000  # <sched.h>: setns() into a network namespace
TBF_LATENCY = "50ms"  # longest a packet may wait in a tbf queue (sets its byte limit)
# The length tbf sees of the largest packet TCP hands a qdisc: the kernel's GSO packets of up to
# 64 KiB (gso_max_size), 45 segments of 1448 B of payload, counted with each wire segment's 66 B
# of headers (qdisc_pkt_len). A bucket smaller than this cannot send such a packet whole, and tbf
# splits it into wire-size packets in software (net/sched/sch_tbf.c, tbf_segment). On the testbed
# a bucket of 67,000 B split them and one of 69,000 B did not
# (scenarios/research/testbed_segmentation.py measures what that costs).
TBF_GSO_PACKET_NBYTES = 45 * (1448 + 66)


def check_permitted(what: str = "netns testbed") -> None:
    """Raise ConfigError unless this is Linux, run as root, with ``ip`` and ``tc`` installed."""
    if not sys.platform.startswith("linux"):
        raise ConfigError(f"{what}: needs Linux network namespaces, not {sys.platform}")
    if os.geteuid() != 0:
        raise ConfigError(
            f"{what}: needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) to create network "
            "namespaces; run it with sudo"
        )
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise ConfigError(f"{what}: `{tool}` not found; install iproute2")


def run_ip(*cmd: str) -> str:
    """Run one ip/tc command and return what it printed; ConfigError when not permitted,
    ProfilingError on other failures."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_CMD_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ProfilingError(f"`{' '.join(cmd)}` could not run: {err}") from err
    if done.returncode == 0:
        return done.stdout
    message = done.stderr.strip() or f"exit code {done.returncode}"
    if "not permitted" in message or "Permission denied" in message:
        raise ConfigError(
            f"`{' '.join(cmd)}`: {message}; the testbed needs CAP_SYS_ADMIN and CAP_NET_ADMIN "
            "(a container may need --privileged or --cap-add)"
        )
    raise ProfilingError(f"`{' '.join(cmd)}` failed: {message}")


def tbf_burst_nbytes(rate_bps: float, burst_s: float = 100e-6) -> int:
    """tbf bucket size: ``burst_s`` at the rate, at least two 1500-byte frames.

    A small bucket shapes even small messages, as a real link of that rate would (a large one lets
    them through at memory speed); tbf splits larger GSO packets to fit it. Each refill is a timer
    interrupt and a softirq on some core, so a bucket of a few packets costs the CPU thousands of
    wake-ups a second at 100 Mbit/s.
    """
    return max(round(rate_bps / 8 * burst_s), 3000)


def tbf_segments_gso(rate_bps: float, burst_s: float) -> bool:
    """Whether a tbf bucket of ``burst_s`` at ``rate_bps`` is too small for one GSO packet
    (:data:`TBF_GSO_PACKET_NBYTES`), so that tbf segments every large TCP send in software.

    Then every byte a rank sends or receives costs its host's CPU per wire packet, sending and
    receiving (on the testbed ~5 ns per byte against ~0.2 with the packets whole), work a real
    NIC's segmentation offload and receive coalescing do not leave to the host's cores. With
    the cluster's 1 ms bucket this holds below ~545 Mbit/s.
    """
    return tbf_burst_nbytes(rate_bps, burst_s) < TBF_GSO_PACKET_NBYTES


def tbf_whole_packets_burst_s(rate_bps: float, packets: int = 2) -> float:
    """A bucket of ``packets`` GSO packets (:data:`TBF_GSO_PACKET_NBYTES`) as time at
    ``rate_bps``: tbf then passes TCP's sends whole, as a real NIC's segmentation offload
    would, and the shaping costs the ranks no CPU per wire packet."""
    return packets * TBF_GSO_PACKET_NBYTES * 8 / rate_bps


def tbf_options(rate_bps: float, burst_s: float = 100e-6) -> list[str]:
    """The arguments after ``tc qdisc add dev X root tbf`` for a link of ``rate_bps``."""
    burst = tbf_burst_nbytes(rate_bps, burst_s)
    return f"rate {round(rate_bps)}bit burst {burst} latency {TBF_LATENCY}".split()


def delete_namespaces(names: Sequence[str]) -> list[str]:
    """Delete ``names`` (best effort, all of them, last first); return those that remain.

    Deleting a namespace deletes the interfaces and qdiscs inside it (and a veth's peer).
    """
    leftovers = []
    for ns in reversed(names):
        try:
            run_ip("ip", "netns", "del", ns)
        except SgdsimError:
            leftovers.append(ns)
    return leftovers


def enter_namespace(name: str) -> None:
    """Move the calling thread into network namespace ``name`` (made by ``ip netns add``).

    Only this thread moves (a thread's network namespace is its own); threads it starts afterwards
    and the sockets it opens belong to the new namespace. Call it first thing in a fresh process
    or thread. Python 3.12 has ``os.setns``; this uses libc so that 3.11 works too.
    """
    path = f"/run/netns/{name}"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as err:
        raise ConfigError(f"network namespace {name!r}: cannot open {path}: {err}") from err
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise ConfigError(f"network namespace {name!r}: setns failed: {os.strerror(errno)}")
    finally:
        os.close(fd)
