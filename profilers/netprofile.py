"""Measure point-to-point transfer time vs message size with ``torch.distributed`` (gloo).

Two processes play ping-pong with a ``uint8`` tensor of each size: rank 0 sends it, rank 1 receives
it and sends it back. Rank 0 times each round trip; after a few warm-up round trips (connection
set-up, page faults on the fresh buffer) it keeps ``repeats`` of them and stores the median round
trip divided by two as the one-way time. Round trip / 2 is used because the two ends have no common
clock, so a single one-way send cannot be timed; it assumes the path is symmetric, which holds for
loopback and for a link shaped alike in both directions. The median resists the occasional
scheduler hiccup. A line (TPDS'22 Fig. 6) is then fitted with
:func:`simcore.network.fit_linear_transfer`.

With ``cpu_repeats`` the ranks also measure the transfers' CPU cost: each rank's CPU time
(``resource.getrusage``: every thread of the process, gloo's included) over ``cpu_repeats``
round trips of the largest message, less what the rank spends idle over as long (measured right
after, asleep), per byte the rank sent and received; the profile keeps the mean of the two ranks
(:class:`simcore.network_effects.TransferCpu`, the simulator's ``comm_cpu_s_per_byte``).

Both ranks are spawned on this machine and talk over loopback (``python -m profilers.netprofile``
is ``sgdsim network measure``, :mod:`profilers.network_measure`); between the user's hosts,
:mod:`profilers.cluster_measure` measures instead. With ``rank`` (0 or 1) this process is one of
two ranks joining at ``master_addr:master_port``.

Time is bounded: ``timeout_s`` limits the rendezvous and every gloo operation, and the parent ends
the measurement with a ProfilingError when a spawned rank dies or makes no progress for that long;
spawned ranks are always terminated before :func:`measure_network` returns or raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import os
import queue
import resource
import socket
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from simcore.errors import ConfigError, ProfilingError
from simcore.network import NetworkProfile, fit_network_profile
from simcore.network_effects import TransferCpu

__all__ = ["DEFAULT_SIZES", "doubling_sizes", "host_cores", "main", "measure_network"]

Progress = Callable[[int, int], None]


def doubling_sizes(min_nbytes: int, max_nbytes: int) -> tuple[int, ...]:
    """Log-spaced message sizes in bytes: ``min_nbytes``, doubling, up to ``max_nbytes``."""
    if min_nbytes < 1 or max_nbytes < min_nbytes:
        raise ConfigError(
            f"sizes: need 1 <= min_nbytes <= max_nbytes, got {min_nbytes} and {max_nbytes}"
        )
    sizes = [min_nbytes]
    while sizes[-1] * 2 <= max_nbytes:
        sizes.append(sizes[-1] * 2)
    return tuple(sizes)


DEFAULT_SIZES = doubling_sizes(1 << 10, 64 << 20)  # 1 KiB .. 64 MiB, 17 sizes
DEFAULT_REPEATS = 20
DEFAULT_WARMUP = 5  # loopback TCP settles (buffer autotuning) within a few round trips
DEFAULT_TIMEOUT_S = 60.0
_GRACE_S = 10.0  # the parent waits this much longer than a rank's own gloo timeout
_STOP_WAIT_S = 3.0  # how long a terminated rank gets to exit before it is killed


@dataclass(frozen=True)
class _RunConfig:
    """Everything a rank needs; picklable so that a spawned child receives it."""

    sizes: tuple[int, ...]
    repeats: int
    warmup: int
    master_addr: str
    master_port: int
    timeout_s: float
    ifname: str | None
    cpu_repeats: int = 0


def measure_network(
    sizes: Sequence[int] | None = None,
    repeats: int = DEFAULT_REPEATS,
    warmup: int = DEFAULT_WARMUP,
    master_addr: str = "127.0.0.1",
    master_port: int | None = None,
    rank: int | None = None,
    world_size: int = 2,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    ifname: str | None = None,
    cpu_repeats: int = 0,
) -> NetworkProfile:
    """Measure one-way transfer time vs message size between two ranks and fit a line.

    Parameters
    ----------
    sizes : sequence of int, optional
        Message sizes in bytes; default :data:`DEFAULT_SIZES` (1 KiB .. 64 MiB, doubling).
    repeats : int
        Timed round trips per size (>= 1); the median is kept.
    warmup : int
        Untimed round trips per size before the timed ones (>= 0).
    master_addr : str
        Address of rank 0, where the rendezvous store listens.
    master_port : int, optional
        Port of the rendezvous store; required with ``rank``. Without ``rank`` a free port is
        chosen.
    rank : int, optional
        None (default): spawn both ranks on this machine (loopback). 0 or 1: run that rank in
        this process; run the other one on the other host with the same address and port.
    world_size : int
        Must be 2 (point-to-point).
    timeout_s : float
        Limit in seconds on the rendezvous, on each gloo operation and on the parent's wait for
        progress. Raise it for slow links (one 64 MiB round trip takes 11 s at 100 Mbit/s).
    progress : callable, optional
        Called as ``progress(done, total)`` after each message size.
    ifname : str, optional
        Network interface gloo uses (``GLOO_SOCKET_IFNAME``); default: the loopback interface
        when both ranks are spawned here on a loopback ``master_addr``, gloo's own choice
        otherwise.
    cpu_repeats : int
        Round trips of the largest message over which the ranks measure their CPU time per byte
        (see the module); 0: not measured.

    Returns
    -------
    NetworkProfile
        Per-size medians of the one-way time and the fitted latency, bandwidth and r², and with
        ``cpu_repeats`` the transfers' CPU cost; with ``rank`` given, both ranks return the same
        profile (rank 0 shares its timings).

    Raises
    ------
    ConfigError
        An argument is out of range.
    ProfilingError
        torch.distributed is unavailable, a rank failed, died or hung, or the fit failed.
    """
    cfg = _config(sizes, repeats, warmup, master_addr, master_port, rank, world_size, timeout_s)
    if cpu_repeats < 0:
        raise ConfigError(f"cpu_repeats: must be >= 0 round trips, got {cpu_repeats}")
    cfg = dataclasses.replace(cfg, cpu_repeats=cpu_repeats)
    if not dist.is_available():
        raise ProfilingError("torch.distributed is not available in this torch build")
    report = progress if progress is not None else _no_progress
    if rank is None:
        if ifname is None and _is_loopback(cfg.master_addr):
            ifname = _loopback_ifname()
        cfg = dataclasses.replace(cfg, ifname=ifname)
        medians, cpu = _measure_spawned(cfg, report)
        via = f"interface {ifname}" if ifname else "gloo's default interface"
        endpoints = f"{cfg.master_addr} ({via}), two processes on one host"
    else:
        cfg = dataclasses.replace(cfg, ifname=ifname)
        medians, cpu = _measure_here(rank, cfg, report)
        endpoints = f"two hosts; rank 0 at {cfg.master_addr}:{cfg.master_port}, this is rank {rank}"
    profile = _profile(cfg, medians, endpoints)
    if cpu is None:
        return profile
    method = (
        f"CPU time (getrusage, all threads) of each rank over {cfg.cpu_repeats} round trips of "
        f"{max(cfg.sizes)} B, less its idle CPU over as long, per byte it sent and received; "
        "mean of the two ranks"
    )
    cost = TransferCpu(cpu, float(host_cores()), method, profile.created_utc)
    return dataclasses.replace(profile, transfer_cpu=cost)


def host_cores() -> int:
    """The cores this process may run on (its affinity, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _no_progress(done: int, total: int) -> None:
    """The default progress callback: report nothing."""


def _config(
    sizes: Sequence[int] | None,
    repeats: int,
    warmup: int,
    master_addr: str,
    master_port: int | None,
    rank: int | None,
    world_size: int,
    timeout_s: float,
) -> _RunConfig:
    """Validate the arguments of :func:`measure_network`, naming the culprit."""
    chosen = tuple(DEFAULT_SIZES if sizes is None else sizes)
    if not chosen or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in chosen):
        raise ConfigError(f"sizes: need message sizes in bytes >= 1, got {list(chosen)}")
    if len(set(chosen)) < 2:
        raise ConfigError(f"sizes: need at least 2 distinct sizes to fit a line, got {chosen}")
    if repeats < 1 or warmup < 0:
        raise ConfigError(f"repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}")
    if world_size != 2:
        raise ConfigError(f"world_size: point-to-point needs exactly 2 ranks, got {world_size}")
    if rank not in (None, 0, 1):
        raise ConfigError(f"rank: must be 0 or 1 (or None to spawn both here), got {rank!r}")
    if rank is not None and master_port is None:
        raise ConfigError("master_port: required with rank; use the same port on both hosts")
    if master_port is not None and not 0 < master_port < 65536:
        raise ConfigError(f"master_port: must be in 1..65535, got {master_port}")
    if not timeout_s > 0:
        raise ConfigError(f"timeout_s: must be > 0 s, got {timeout_s!r}")
    port = master_port if master_port is not None else _free_port(master_addr)
    return _RunConfig(chosen, repeats, warmup, master_addr, port, float(timeout_s), None)


def _free_port(addr: str) -> int:
    """A port that is free on ``addr`` now (the OS picks it for port 0)."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((addr, 0))
            port: int = sock.getsockname()[1]
    except OSError as err:
        raise ConfigError(
            f"master_addr: cannot listen on {addr!r} ({err.strerror or err}); without rank both "
            "ranks run here, so it must be an address of this machine"
        ) from err
    return port


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:  # a host name
        return addr == "localhost"


def _loopback_ifname() -> str | None:
    """The loopback interface's name (``lo`` on Linux, ``lo0`` on macOS), if there is one."""
    names = {name for _, name in socket.if_nameindex()}
    return next((name for name in ("lo", "lo0") if name in names), None)


@contextlib.contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    """Set environment variable ``name`` for the duration of the block (None: leave it)."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


Measured = tuple[list[float], float | None]  # per-size medians (s); CPU s per byte, or None


def _run_rank(rank: int, cfg: _RunConfig, progress: Progress) -> Measured:
    """Join the group, play ping-pong at every size, and return rank 0's per-size medians (s)
    and (``cfg.cpu_repeats``) the two ranks' mean CPU seconds per byte."""
    host = f"[{cfg.master_addr}]" if ":" in cfg.master_addr else cfg.master_addr
    with _env("GLOO_SOCKET_IFNAME", cfg.ifname):  # gloo reads it when the group is created
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{host}:{cfg.master_port}",
            rank=rank,
            world_size=2,
            timeout=timedelta(seconds=cfg.timeout_s),
        )
    try:
        medians = torch.zeros(len(cfg.sizes), dtype=torch.float64)
        for i, nbytes in enumerate(cfg.sizes):
            buf = torch.zeros(nbytes, dtype=torch.uint8)
            round_trips(rank, buf, cfg.warmup)
            times = round_trips(rank, buf, cfg.repeats)
            if rank == 0:
                medians[i] = statistics.median(times) / 2
            progress(i + 1, len(cfg.sizes))
        dist.broadcast(medians, src=0)  # so that rank 1 returns the same profile
        result: list[float] = medians.tolist()
        if not cfg.cpu_repeats:
            return result, None
        costs = torch.tensor([_cpu_s_per_byte(rank, cfg)], dtype=torch.float64)
        dist.all_reduce(costs)
        return result, float(costs[0]) / 2
    finally:
        dist.destroy_process_group()


def _cpu_s_per_byte(rank: int, cfg: _RunConfig) -> float:
    """This rank's CPU seconds per byte it sends or receives in round trips of the largest
    message, less its idle CPU rate (gloo's threads, the interpreter) over the same time."""
    return transfer_cpu_s_per_byte(rank, max(cfg.sizes), cfg.cpu_repeats)


def transfer_cpu_s_per_byte(
    rank: int, nbytes: int, repeats: int, comm: Any = dist, takes_part: bool = True
) -> float:
    """What :func:`_cpu_s_per_byte` measures, in any group ``comm`` (torch.distributed or a
    view of it): ranks 0 and 1 play ``repeats`` round trips of ``nbytes``; every rank of the
    group calls it (those not taking part, ``takes_part=False``, only join its barriers and
    return 0)."""
    buf = torch.zeros(nbytes, dtype=torch.uint8)
    if takes_part:
        round_trips(rank, buf, 1, comm)  # the buffer's pages, the connection
    comm.barrier()
    cpu_0, wall_0 = _cpu_s(), time.perf_counter()
    if takes_part:
        round_trips(rank, buf, repeats, comm)
    busy_s, wall_s = _cpu_s() - cpu_0, time.perf_counter() - wall_0
    comm.barrier()
    idle_wall_s = min(max(wall_s, 0.2), 2.0)  # long enough to see a rate, short enough to wait
    cpu_0 = _cpu_s()
    time.sleep(idle_wall_s)
    idle_rate = (_cpu_s() - cpu_0) / idle_wall_s
    if not takes_part:
        return 0.0
    moved = 2 * nbytes * repeats  # every round trip: sent once, received once
    return max(busy_s - idle_rate * wall_s, 0.0) / moved


def _cpu_s() -> float:
    """CPU seconds (user + system) this process has used, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def round_trips(rank: int, buf: torch.Tensor, count: int, comm: Any = dist) -> list[float]:
    """``count`` ping-pongs of ``buf`` between ranks 0 and 1 of ``comm`` (torch.distributed,
    or a view of it that names ranks its own way); rank 0 returns each round trip's seconds."""
    times = []
    for _ in range(count):
        if rank == 0:
            start = time.perf_counter()
            comm.send(buf, dst=1)
            comm.recv(buf, src=1)
            times.append(time.perf_counter() - start)
        else:
            comm.recv(buf, src=0)
            comm.send(buf, dst=0)
    return times


def _measure_here(rank: int, cfg: _RunConfig, progress: Progress) -> Measured:
    """Run ``rank`` in this process (the two-host case)."""
    try:
        return _run_rank(rank, cfg, progress)
    except (RuntimeError, ValueError) as err:  # gloo and the store report failures this way
        raise ProfilingError(f"rank {rank}: network measurement failed: {err}") from err


def _child_main(rank: int, cfg: _RunConfig, messages: Any) -> None:
    """Entry point of a spawned rank: reports progress, the result or its error on ``messages``."""

    def report(done: int, total: int) -> None:
        if rank == 0:
            messages.put(("progress", done, total))

    try:
        measured = _run_rank(rank, cfg, report)
    except BaseException as err:
        messages.put(("error", rank, "".join(traceback.format_exception_only(err)).strip()))
        raise SystemExit(1) from err
    if rank == 0:
        messages.put(("result", measured))


def _measure_spawned(cfg: _RunConfig, progress: Progress) -> Measured:
    """Spawn both ranks on this machine, relay their progress and return rank 0's medians."""
    ctx = mp.get_context("spawn")
    messages = ctx.Queue()
    ranks = [ctx.Process(target=_child_main, args=(r, cfg, messages), daemon=True) for r in (0, 1)]
    try:
        for proc in ranks:
            proc.start()
        return _collect(ranks, messages, cfg.timeout_s + _GRACE_S, progress)
    finally:
        _stop(ranks)
        messages.close()


def _collect(ranks: list[Any], messages: Any, idle_limit_s: float, progress: Progress) -> Measured:
    """Wait for the result, relaying progress; fail on a rank's error, death or silence."""
    last_news = time.monotonic()
    while True:
        try:
            message = messages.get(timeout=0.2)
        except queue.Empty:
            if any(proc.exitcode is not None for proc in ranks):
                # A rank ended: its last words may still be in the pipe; they explain more.
                message = _last_message(messages) or _death_notice(ranks)
            elif time.monotonic() - last_news > idle_limit_s:
                raise ProfilingError(
                    f"no progress for {idle_limit_s:.0f} s: a rank hangs; check the network, or "
                    "raise timeout_s for slow links"
                ) from None
            else:
                continue
        last_news = time.monotonic()
        if message[0] == "progress":
            progress(message[1], message[2])
        elif message[0] == "error":
            who = "" if message[1] is None else f"rank {message[1]}: "
            raise ProfilingError(f"{who}network measurement failed: {message[2]}")
        else:
            measured: Measured = message[1]
            return measured


def _last_message(messages: Any) -> tuple[Any, ...] | None:
    try:
        message: tuple[Any, ...] = messages.get(timeout=1.0)
    except queue.Empty:
        return None
    return message


def _death_notice(ranks: list[Any]) -> tuple[Any, ...]:
    codes = ", ".join(f"rank {r} exit code {proc.exitcode}" for r, proc in enumerate(ranks))
    return ("error", None, f"a rank ended without reporting a result ({codes})")


def _stop(ranks: list[Any]) -> None:
    """Terminate ranks still running, then kill any that ignore it; leaves no orphans."""
    for proc in ranks:
        if proc.is_alive():
            proc.terminate()
    for proc in ranks:
        if proc.pid is None:  # never started
            continue
        proc.join(_STOP_WAIT_S)
        if proc.is_alive():
            proc.kill()
            proc.join(_STOP_WAIT_S)


def _profile(cfg: _RunConfig, medians: Sequence[float], endpoints: str) -> NetworkProfile:
    method = (
        f"torch {torch.__version__} gloo send/recv ping-pong of uint8 tensors; one-way time = "
        f"median of {cfg.repeats} round trips / 2, after {cfg.warmup} warm-up round trips per "
        "size; bandwidth: the sustained rate of the largest sizes (simcore.network."
        "sustained_bandwidth)"
    )
    return fit_network_profile(
        list(zip(cfg.sizes, medians, strict=True)),
        backend="gloo",
        endpoints=endpoints,
        method=method,
        host=socket.gethostname(),
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m profilers.netprofile``: the same as ``sgdsim network measure``."""
    from profilers.network_measure import main as measure_main

    return measure_main(argv)


if __name__ == "__main__":
    sys.exit(main())
