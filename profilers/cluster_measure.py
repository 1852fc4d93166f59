"""``sgdsim network measure`` on the user's own hosts: N ranks, one network profile.

Launched as distributed jobs are (``torchrun --nnodes N --nproc-per-node 1 --no-python sgdsim
network measure ...``, or ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` in each
process's environment, or ``--rank R --world-size N --master-addr A --master-port P``), the N
processes join one gloo group and measure, between the real hosts, what the testbed measures
on its emulated cluster (:mod:`profilers.network_measure` over loopback or netns):

1. the one-flow fit between ranks 0 and 1: ping-pong, message sizes doubling from
   ``--min-size`` until one transfer takes ``--size-time`` (50 ms; so a slow link is not kept
   busy by 64 MiB messages), as many round trips per size as fit in about a second (at least 5,
   at most ``--repeats``); the fit's standard errors by bootstrap over each size's round trips;
2. the transfers' CPU cost per byte on ranks 0 and 1 (round trips of the largest size);
3. how flows share rank 0's link (:mod:`profilers.link_sharing`'s trials, over TCP
   connections between the hosts): 1, 2 and 4 flows into rank 0 (many-to-one, pushes) and out
   of it (one-to-many, pulls), spread over ranks 1..N-1 in turn, plus pairs started half a flow
   apart; the spread per direction;
4. a ring AllReduce's goodput and per-message cost for each W = 2..N (the first W ranks);
5. rank 0's link with pulls and pushes at once (duplex, ranks 1..2) and, from 4 ranks on, how
   much each direction slows beside the other's transfers (interference, up to 4 workers).

With several processes on a host (``--nproc-per-node`` above 1) the first rank of each host
measures and the others leave, since two ranks of one host would measure the host, not the
network; ranks all on one host measure its loopback together.

Sizes follow the fitted bandwidth, so the defaults take well under a minute at 200 Mbit/s; each
part says on stderr what it measured and how long it took. Rank 0 writes the profile; the other
ranks print one line. Rank 0 plays the parameter server: put it on the host the server will run on.

Torch is imported by the functions that measure, not by this module's import.
"""

from __future__ import annotations

import dataclasses
import fcntl
import math
import os
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from simcore.errors import ConfigError, ProfilingError
from simcore.network import NetworkProfile, fit_errors, fit_network_profile
from simcore.network_effects import (
    Duplex,
    DuplexInterference,
    FlowSharing,
    RingGoodput,
    TransferCpu,
)
from simcore.units import format_bandwidth, format_bytes, format_seconds

__all__ = ["ClusterOptions", "World", "measure_cluster", "measuring_ranks", "world_from"]

Say = Callable[[str], None]
MIN_REPEATS = 5  # round trips per size, however slow the size
SECONDS_PER_SIZE = 1.0  # timed round trips per size: as many as fit in this (within the bounds)
SHARING_SECONDS = 0.1  # one flow alone, at the fitted bandwidth
RING_SECONDS = 0.25  # one ring repetition's bytes at the fitted bandwidth
PATTERN_SECONDS = 0.1  # one duplex or interference transfer alone at the fitted bandwidth
_ACK = b"\x01"


@dataclass(frozen=True)
class World:
    """This process's place among the measuring ranks."""

    rank: int
    size: int
    master_addr: str | None  # None: from the environment (env://, as torchrun sets it)
    master_port: int | None

    @property
    def init_method(self) -> str:
        if self.master_addr is None:
            return "env://"
        host = f"[{self.master_addr}]" if ":" in self.master_addr else self.master_addr
        return f"tcp://{host}:{self.master_port}"


def world_from(
    rank: int | None,
    world_size: int | None,
    master_addr: str | None,
    master_port: int | None,
    environ: Mapping[str, str],
) -> World | None:
    """The world the options or the environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
    ``MASTER_PORT``: torchrun's) describe; options win. None: neither names a rank (the
    measurement then runs over this machine's loopback).

    Raises
    ------
    ConfigError : a value out of range or missing, named as given.
    """
    if rank is None and "RANK" in environ:
        rank = _env_int(environ, "RANK")
        world_size = world_size if world_size is not None else _env_int(environ, "WORLD_SIZE", 2)
        if master_addr is None and "MASTER_ADDR" in environ:
            return _checked(World(rank, world_size, None, None), env=True)
    if rank is None:
        if world_size is not None:
            raise ConfigError("--world-size: needs --rank (or RANK in the environment)")
        return None
    size = 2 if world_size is None else world_size
    if master_port is None and "MASTER_PORT" in environ:
        master_port = _env_int(environ, "MASTER_PORT")
    if master_port is None:
        raise ConfigError("--master-port: needed with --rank (the port rank 0 listens on)")
    addr = master_addr or environ.get("MASTER_ADDR") or "127.0.0.1"
    return _checked(World(rank, size, addr, master_port), env=False)


def _env_int(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name)
    if text is None:
        if default is None:
            raise ConfigError(f"environment {name}: not set (needed beside RANK)")
        return default
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"environment {name}: not an integer: {text!r}") from None


def _checked(world: World, env: bool) -> World:
    rank, size = ("RANK", "WORLD_SIZE") if env else ("--rank", "--world-size")
    if world.size < 2:
        raise ConfigError(f"{size}: must be >= 2 (a link has two ends), got {world.size}")
    if not 0 <= world.rank < world.size:
        raise ConfigError(f"{rank}: must be 0..{world.size - 1}, got {world.rank}")
    if world.master_port is not None and not 0 < world.master_port < 65536:
        raise ConfigError(f"--master-port: must be in 1..65535, got {world.master_port}")
    return world


@dataclass(frozen=True)
class ClusterOptions:
    """What :func:`measure_cluster` measures (sizes in bytes, times in seconds)."""

    min_nbytes: int = 1 << 10
    max_nbytes: int = 64 << 20
    size_time_s: float = 0.05  # sizes double until one transfer takes this long
    repeats: int = 20  # at most, per size
    warmup: int = 2
    timeout_s: float = 60.0
    ifname: str | None = None
    cpu_repeats: int = 5  # 0: no transfer CPU cost
    sharing: bool = True
    sharing_repeats: int = 3
    ring_max: int | None = None  # None: every W up to the world's size; < 2: no ring
    ring_repeats: int = 5
    duplex: bool = True
    duplex_repeats: int = 6
    note: str = ""


def measure_cluster(
    world: World, options: ClusterOptions, say: Say | None = None
) -> NetworkProfile | None:
    """Join the world's gloo group and measure every part ``options`` ask for (module doc).
    Every measuring rank returns the same profile (rank 0's measurements, shared); a rank
    another rank of its host measures for (:func:`measuring_ranks`) returns None.

    Raises
    ------
    ConfigError : an option does not fit the world (a ring larger than it).
    ProfilingError : the group could not form, a rank failed or a part went wrong.
    """
    if options.ring_max is not None and options.ring_max > world.size:
        raise ConfigError(
            f"--ring-max: at most the {world.size} ranks measuring, got {options.ring_max}"
        )
    # Rank 0 speaks for all: the others' lines would repeat its own (every rank ends with the
    # same profile).
    tell = say if say is not None and world.rank == 0 else (lambda _line: None)
    import torch.distributed as dist

    if options.ifname is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = options.ifname  # read when the group forms
    began = time.perf_counter()
    try:
        dist.init_process_group(
            "gloo",
            init_method=world.init_method,
            rank=world.rank,
            world_size=world.size,
            timeout=timedelta(seconds=options.timeout_s),
        )
    except (RuntimeError, ValueError, TimeoutError) as err:
        raise ProfilingError(f"rank {world.rank}: could not join the other ranks: {err}") from err
    try:
        return _measure(dist, world, options, tell, began)
    except (RuntimeError, OSError, TimeoutError) as err:  # gloo and sockets report so
        raise ProfilingError(f"rank {world.rank}: network measurement failed: {err}") from err
    finally:
        dist.destroy_process_group()


def _measure(
    dist: Any, world: World, options: ClusterOptions, tell: Say, began: float
) -> NetworkProfile | None:
    everyone: list[Any] = [None] * world.size
    dist.all_gather_object(everyone, (socket.gethostname(), _cores()))
    members = measuring_ranks([name for name, _ in everyone])
    if world.rank not in members:
        return None  # another rank measures this host's link
    if len(members) < world.size:
        tell(
            f"{world.size} ranks on {len(members)} hosts: ranks {members} measure, one per "
            "host (ranks on one host would measure the host, not the network)"
        )
    if options.ring_max is not None and options.ring_max > len(members):
        raise ConfigError(
            f"--ring-max: at most the {len(members)} hosts measuring, got {options.ring_max}"
        )
    if options.ring_max is None:
        options = dataclasses.replace(options, ring_max=len(members))
    view = _Members(dist, members)
    return _measure_members(
        view,
        # places among the measuring ranks; the master's address stays (rank 0's listener for
        # the flows is found by the route to it)
        dataclasses.replace(world, rank=members.index(world.rank), size=len(members)),
        options,
        tell,
        began,
        [everyone[r] for r in members],
    )


def measuring_ranks(hosts: Sequence[str]) -> list[int]:
    """The ranks that measure, given each rank's host: the first of each host, or every rank
    when all share one host (a measurement of that host's loopback, as ``--world-size`` ranks
    started by hand on one machine would mean)."""
    if len(set(hosts)) == 1:
        return list(range(len(hosts)))
    first: dict[str, int] = {}
    for rank, host in enumerate(hosts):
        first.setdefault(host, rank)
    return sorted(first.values())


class _Members:
    """``torch.distributed`` as the measuring ranks see it: ranks 0..K-1 of a group of their
    own (the others may have left), so that every part can name peers by their place."""

    def __init__(self, dist: Any, members: Sequence[int]) -> None:
        self._dist, self._members = dist, list(members)
        self.ReduceOp = dist.ReduceOp
        whole = len(self._members) == dist.get_world_size()
        self._group = None if whole else self._new(self._members)

    def _new(self, ranks: Sequence[int]) -> Any:
        return self._dist.new_group(ranks=list(ranks), use_local_synchronization=True)

    def _in(self, group: Any) -> Any:
        return self._group if group is None else group

    def barrier(self, group: Any = None) -> None:
        self._dist.barrier(group=self._in(group))

    def all_reduce(
        self, tensor: Any, op: Any = None, group: Any = None, async_op: bool = False
    ) -> Any:
        op = self._dist.ReduceOp.SUM if op is None else op
        return self._dist.all_reduce(tensor, op=op, group=self._in(group), async_op=async_op)

    def send(self, tensor: Any, dst: int) -> None:
        self._dist.send(tensor, dst=self._members[dst])

    def recv(self, tensor: Any, src: int) -> None:
        self._dist.recv(tensor, src=self._members[src])

    def isend(self, tensor: Any, dst: int, tag: int = 0) -> Any:
        return self._dist.isend(tensor, dst=self._members[dst], tag=tag)

    def irecv(self, tensor: Any, src: int, tag: int = 0) -> Any:
        return self._dist.irecv(tensor, src=self._members[src], tag=tag)

    def broadcast_object_list(self, objects: list[Any], src: int = 0) -> None:
        self._dist.broadcast_object_list(objects, src=self._members[src], group=self._group)

    def all_gather_object(self, out: list[Any], obj: Any) -> None:
        self._dist.all_gather_object(out, obj, group=self._group)

    def new_group(self, ranks: Sequence[int]) -> Any:
        """A group of the measuring ranks at these places; only they take part in making it."""
        return self._new([self._members[r] for r in ranks])

    def destroy_process_group(self, group: Any) -> None:
        self._dist.destroy_process_group(group)


def _measure_members(
    dist: Any,
    world: World,
    options: ClusterOptions,
    tell: Say,
    began: float,
    hosts: Sequence[Any],
) -> NetworkProfile:
    names = [name for name, _ in hosts]
    tell(f"{world.size} ranks measuring; hosts: {', '.join(names)}")

    def part(text: str, since: float) -> None:
        tell(f"{text} ({time.perf_counter() - since:.1f} s)")

    t = time.perf_counter()
    repetitions = _ping_pong(dist, world.rank, options)
    profile = _fit(repetitions, options, names)
    part(
        f"fit: latency {format_seconds(profile.latency_s)}, bandwidth "
        f"{format_bandwidth(profile.bandwidth_bps)} ± "
        f"{format_bandwidth(profile.bandwidth_se_bps or 0.0)} (the largest sizes' rate; the "
        f"line through all {format_bandwidth(profile.line_bandwidth_bps or 0.0)}), "
        f"{len(repetitions)} sizes up to {format_bytes(repetitions[-1][0])}",
        t,
    )
    rate = profile.bandwidth_bps
    tell(f"the rest takes about {format_seconds(_remaining_s(options, world.size, rate))}")
    if options.cpu_repeats:
        t = time.perf_counter()
        cpu = _transfer_cpu(dist, world.rank, repetitions[-1][0], options, hosts)
        profile = dataclasses.replace(profile, transfer_cpu=cpu)
        part(f"transfer CPU {cpu.s_per_byte * 1e9:.3g} ns/B", t)
    if options.sharing:
        t = time.perf_counter()
        sharing = _flow_sharing(dist, world, rate, options, tell)
        profile = dataclasses.replace(profile, flow_sharing=sharing)
        part("flow sharing" + ("" if sharing is None else f": cv {sharing.weight_cv:.3g}"), t)
    if options.ring_max is not None and options.ring_max >= 2:
        t = time.perf_counter()
        ring = _rings(dist, world, rate, options, tell)
        profile = dataclasses.replace(profile, ring_goodput=ring)
        part("ring AllReduce", t)
    if options.duplex:
        t = time.perf_counter()
        duplex, interference = _duplex(dist, world, rate, options, tell)
        profile = dataclasses.replace(profile, duplex=duplex, duplex_interference=interference)
        part(f"duplex {duplex.ratio:.2f}x one way", t)
    tell(f"measured in {time.perf_counter() - began:.0f} s")
    return profile


def _cores() -> int:
    from profilers.netprofile import host_cores

    return host_cores()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _noted(method: str, note: str) -> str:
    return f"{method}; {note}" if note else method


def _where(names: Sequence[str]) -> str:
    distinct = len(set(names))
    return f"{len(names)} ranks on {distinct} host(s) ({', '.join(names)})"


# ----------------------------------------------------------------------------- the fit
def _ping_pong(dist: Any, rank: int, options: ClusterOptions) -> list[tuple[int, list[float]]]:
    """Ranks 0 and 1 play ping-pong (module doc, 1); every rank returns each size and its
    one-way times (round trip / 2), as rank 0 measured them."""
    import torch

    sizes: list[tuple[int, list[float]]] = []
    if rank <= 1:
        nbytes = options.min_nbytes
        while nbytes:
            # rank 0 decides each block (size, round trips) and tells rank 1 first
            block = torch.zeros(2, dtype=torch.int64)
            buf = torch.zeros(nbytes, dtype=torch.uint8)
            warm = _trips(dist, rank, buf, max(options.warmup, 1))
            count = torch.tensor([_repeats(warm, options)], dtype=torch.int64)
            _exchange(dist, rank, count)
            times = [t / 2 for t in _trips(dist, rank, buf, int(count[0]))]
            if rank == 0:
                sizes.append((nbytes, times))
                grow = statistics.median(times) < options.size_time_s
                block[0] = nbytes * 2 if grow and nbytes * 2 <= options.max_nbytes else 0
            _exchange(dist, rank, block)
            nbytes = int(block[0])
    shared: list[Any] = [sizes]
    dist.broadcast_object_list(shared, src=0)
    result: list[tuple[int, list[float]]] = shared[0]
    if len(result) < 2:
        raise ProfilingError(
            f"the fit needs 2 sizes at least: --min-size {format_bytes(options.min_nbytes)} "
            f"already takes --size-time {format_seconds(options.size_time_s)} or more"
        )
    return result


def _repeats(warm: Sequence[float], options: ClusterOptions) -> int:
    """Timed round trips for a size whose warm-up round trips took ``warm`` (rank 0's)."""
    if not warm:
        return 0
    fit = math.floor(SECONDS_PER_SIZE / max(min(warm), 1e-9))
    return max(MIN_REPEATS, min(options.repeats, fit))


def _trips(dist: Any, rank: int, buf: Any, count: int) -> list[float]:
    from profilers.netprofile import round_trips

    return round_trips(rank, buf, count, dist)


def _exchange(dist: Any, rank: int, tensor: Any) -> None:
    """Rank 0's ``tensor`` to rank 1 (in place)."""
    if rank == 0:
        dist.send(tensor, dst=1)
    else:
        dist.recv(tensor, src=0)


def _fit(
    repetitions: Sequence[tuple[int, Sequence[float]]],
    options: ClusterOptions,
    names: Sequence[str],
) -> NetworkProfile:
    import torch

    medians = [(n, statistics.median(t)) for n, t in repetitions]
    latency_se, bandwidth_se = fit_errors(repetitions)
    method = (
        f"torch {torch.__version__} gloo send/recv ping-pong of uint8 tensors between ranks 0 "
        f"and 1 ({names[0]}, {names[1]}); sizes doubling from {format_bytes(options.min_nbytes)} "
        f"until one-way >= {format_seconds(options.size_time_s)}; one-way time = median of "
        f"{MIN_REPEATS}..{options.repeats} round trips (about {SECONDS_PER_SIZE:g} s per size) "
        f"/ 2 after {max(options.warmup, 1)} warm-up; bandwidth: the sustained rate of the "
        "sizes taking 1/8 of the longest or more (simcore.network.sustained_bandwidth); "
        "standard errors by bootstrap over each size's round trips"
    )
    profile = fit_network_profile(
        medians,
        backend="gloo",
        endpoints=_where(names),
        method=_noted(method, options.note),
        host=names[0],
        created_utc=_now(),
    )
    return dataclasses.replace(profile, latency_se_s=latency_se, bandwidth_se_bps=bandwidth_se)


def _remaining_s(options: ClusterOptions, world: int, rate_bps: float) -> float:
    """About how long the parts after the fit take at ``rate_bps`` (for the user's patience)."""
    total = 0.0
    if options.sharing:  # per direction: k = 1, 2, 4 flows, and the staggered pairs
        total += 2 * options.sharing_repeats * SHARING_SECONDS * (1 + 2 + 4 + 1.5)
    if options.ring_max is not None and options.ring_max >= 2:
        for w in range(2, options.ring_max + 1):
            total += (options.ring_repeats + 2) * 2 * RING_SECONDS * 2 * (w - 1) / w
    if options.duplex:
        workers = min(2, world - 1)
        total += (options.duplex_repeats + 1) * PATTERN_SECONDS * workers * 4
        if world >= 4:
            total += (options.duplex_repeats + 1) * PATTERN_SECONDS * 16
    return total


# ----------------------------------------------------------------------------- CPU cost
def _transfer_cpu(
    dist: Any, rank: int, nbytes: int, options: ClusterOptions, hosts: Sequence[Any]
) -> TransferCpu:
    """Ranks 0 and 1's CPU seconds per byte they send or receive in round trips of ``nbytes``,
    less their idle CPU rate over as long; the mean of the two, on rank 1's host's cores."""
    import torch

    from profilers.netprofile import transfer_cpu_s_per_byte

    per_byte = transfer_cpu_s_per_byte(rank, nbytes, options.cpu_repeats, dist, rank <= 1)
    cost = torch.tensor([per_byte], dtype=torch.float64)
    dist.all_reduce(cost)
    method = (
        f"CPU time (getrusage, all threads) of ranks 0 and 1 over {options.cpu_repeats} round "
        f"trips of {nbytes} B, less their idle CPU over as long, per byte sent and received; "
        f"mean of the two; cores: rank 1's host ({hosts[1][0]})"
    )
    return TransferCpu(float(cost[0]) / 2, float(hosts[1][1]), _noted(method, options.note), _now())


# ----------------------------------------------------------------------------- flow sharing
def _flow_sharing(
    dist: Any, world: World, rate_bps: float, options: ClusterOptions, tell: Say
) -> FlowSharing | None:
    """The trials of :mod:`profilers.link_sharing` between rank 0 and the others."""
    from profilers.link_sharing import DIRECTIONS, LinkSharingReport, SharingTrial
    from profilers.network_measure import flow_sharing_of

    nbytes = max(round(rate_bps / 8 * SHARING_SECONDS), 1 << 16)
    listener = _listen(options.timeout_s) if world.rank == 0 else None
    where: list[Any] = [None if listener is None else _address(listener, world, options)]
    dist.broadcast_object_list(where, src=0)
    trials: list[SharingTrial] = []
    try:
        for direction in DIRECTIONS:
            for k in (1, 2, 4):
                for _ in range(options.sharing_repeats):
                    ends = _flows(dist, world, listener, where[0], direction, nbytes, [0.0] * k)
                    if ends is not None:
                        trials.append(SharingTrial(direction, nbytes, tuple(sorted(ends))))
            for _ in range(options.sharing_repeats):
                alone = [
                    t.completion_s[0] for t in trials if t.flows == 1 and t.direction == direction
                ]
                delay = statistics.fmean(alone) / 2 if alone else SHARING_SECONDS / 2
                shared = [delay]
                dist.broadcast_object_list(shared, src=0)
                ends = _flows(dist, world, listener, where[0], direction, nbytes, [0.0, shared[0]])
                if ends is not None:
                    trials.append(SharingTrial(direction, nbytes, tuple(ends), shared[0]))
    finally:
        if listener is not None:
            listener.close()
    result: list[Any] = [None]
    if world.rank == 0:
        report = LinkSharingReport(rate_bps, tuple(trials), shaped=False)
        flows = f"flows from ranks 1..{world.size - 1} in turn, over TCP"
        result[0] = flow_sharing_of(
            report, f"{_where_short(world)}: {flows}", options.sharing_repeats, options.note, tell
        )
    dist.broadcast_object_list(result, src=0)
    sharing: FlowSharing | None = result[0]
    return sharing


def _where_short(world: World) -> str:
    return f"the links between {world.size} ranks (rank 0's link shared)"


def _listen(timeout_s: float) -> socket.socket:
    server = socket.create_server(("", 0), backlog=16)
    server.settimeout(timeout_s)
    return server


def _address(listener: socket.socket, world: World, options: ClusterOptions) -> tuple[str, int]:
    """Where the other ranks reach rank 0's listener: the address of ``--ifname``, else the one
    this host reaches the group's master from."""
    port = listener.getsockname()[1]
    if options.ifname is not None:
        return _interface_address(options.ifname), port
    master = world.master_addr or os.environ.get("MASTER_ADDR", "127.0.0.1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((master, 9))  # no packet is sent: it only picks the route
            return probe.getsockname()[0], port
        except OSError:
            return socket.gethostbyname(socket.gethostname()), port


def _interface_address(ifname: str) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(
                probe.fileno(), 0x8915, struct.pack("256s", ifname[:15].encode())
            )  # SIOCGIFADDR
        except OSError as err:
            raise ConfigError(f"--ifname {ifname}: no IPv4 address ({err.strerror})") from None
    return socket.inet_ntoa(packed[20:24])


def _flows(
    dist: Any,
    world: World,
    listener: socket.socket | None,
    where: tuple[str, int],
    direction: str,
    nbytes: int,
    delays: Sequence[float],
) -> list[float] | None:
    """One trial: flow f between rank 0 and rank ``1 + f % (N-1)``, started ``delays[f]`` after
    a common barrier, into rank 0 or out of it; rank 0 returns each flow's end (when the last
    byte arrived, or for one out of it when the receiver's acknowledgement did), the others None.
    Every rank calls it."""
    from profilers.link_sharing import CHUNK, receive_exactly

    peers = world.size - 1
    mine = [f for f in range(len(delays)) if 1 + f % peers == world.rank]
    conns: dict[int, socket.socket] = {}
    if world.rank == 0:
        assert listener is not None
        for _ in delays:
            conn, _addr = listener.accept()
            conn.settimeout(listener.gettimeout())
            flow = struct.unpack("!I", _read(conn, 4))[0]
            conns[flow] = conn
    else:
        for f in mine:
            conn = socket.create_connection(where, timeout=60.0)
            conn.sendall(struct.pack("!I", f))
            conns[f] = conn
    ends: dict[int, float] = {}
    errors: list[BaseException] = []
    payload = bytes(nbytes)

    def run(flow: int, conn: socket.socket, start: float) -> None:
        try:
            sending = (world.rank == 0) == (direction == "out of")
            if sending:
                time.sleep(max(delays[flow] - (time.perf_counter() - start), 0.0))
                conn.sendall(payload)
                if world.rank == 0:
                    _read(conn, 1)  # the receiver has it all
                    ends[flow] = time.perf_counter() - start
            else:
                receive_exactly(conn, nbytes, bytearray(CHUNK), f"flow {flow}")
                if world.rank == 0:
                    ends[flow] = time.perf_counter() - start
                else:
                    conn.sendall(_ACK)
        except BaseException as err:  # reported below, in the caller's thread
            errors.append(err)

    dist.barrier()
    start = time.perf_counter()
    threads = [threading.Thread(target=run, args=(f, c, start)) for f, c in conns.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for conn in conns.values():
        conn.close()
    failed = _any_rank(dist, bool(errors))
    if failed:
        raise ProfilingError(f"flow sharing: a flow failed: {errors[0] if errors else 'elsewhere'}")
    return [ends[f] for f in range(len(delays))] if world.rank == 0 else None


def _any_rank(dist: Any, flag: bool) -> bool:
    """Whether any rank raised ``flag`` (every rank calls it)."""
    import torch

    value = torch.tensor([1 if flag else 0], dtype=torch.int64)
    dist.all_reduce(value)
    return bool(value[0])


def _read(conn: socket.socket, nbytes: int) -> bytes:
    data = b""
    while len(data) < nbytes:
        chunk = conn.recv(nbytes - len(data))
        if not chunk:
            raise ProfilingError("flow sharing: a peer closed its connection early")
        data += chunk
    return data


# ----------------------------------------------------------------------------- ring
def _rings(
    dist: Any, world: World, rate_bps: float, options: ClusterOptions, tell: Say
) -> RingGoodput:
    """A ring of the first W ranks for each W = 2..ring_max, on layers of the model-like sizes
    of :data:`profilers.network_measure.RING_LAYER_NBYTES` cut to about RING_SECONDS."""
    import torch

    from profilers.distributed.ring_goodput import RingGoodput as RingRun
    from profilers.distributed.ring_goodput import time_ring
    from profilers.network_measure import ring_goodput_of

    sizes = _ring_sizes(rate_bps)
    assert options.ring_max is not None
    rings = []
    for workers in range(2, options.ring_max + 1):
        if world.rank < workers:
            group = dist.new_group(ranks=list(range(workers)))  # its ranks alone make it
            times, cpu, flat = time_ring(dist, sizes, options.ring_repeats, 2, group=group)
            slowest = torch.tensor(times, dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
            cpus = torch.tensor([cpu, flat], dtype=torch.float64)
            dist.all_reduce(cpus, group=group)
            cpus /= workers
            run = RingRun(workers, sizes, tuple(slowest.tolist()), None, *map(tuple, cpus.tolist()))
            rings.append(run)
            tell(f"ring AllReduce W={workers}: {format_bandwidth(run.goodput_bps())}")
            dist.destroy_process_group(group)
        dist.barrier()
    where = f"the links between {world.size} ranks, a ring of the first W of them"
    result: list[Any] = [None]
    if world.rank == 0:
        result[0] = ring_goodput_of(
            rings, where, rate_bps, options.ring_repeats, options.note, tell
        )
    dist.broadcast_object_list(result, src=0)
    ring: RingGoodput = result[0]
    return ring


def _ring_sizes(rate_bps: float) -> tuple[int, ...]:
    """The model-like layers (4 KiB up, two of each size) whose total takes about RING_SECONDS
    at ``rate_bps``; at least the first eight."""
    from profilers.network_measure import RING_LAYER_NBYTES

    budget = rate_bps / 8 * RING_SECONDS
    sizes: list[int] = []
    for n in RING_LAYER_NBYTES:
        if len(sizes) >= 8 and sum(sizes) + n > budget:
            break
        sizes.append(n)
    return tuple(sizes)


# ----------------------------------------------------------------------------- duplex
def _duplex(
    dist: Any, world: World, rate_bps: float, options: ClusterOptions, tell: Say
) -> tuple[Duplex, DuplexInterference | None]:
    """Rank 0's link with pulls and pushes at once (ranks 1..2) and, with 3 or more workers,
    each direction's slowdown beside the other's transfers (the patterns that fit)."""
    from profilers.distributed.link_duplex import MODES, DuplexReport
    from profilers.distributed.link_interference import (
        PATTERNS,
        InterferenceReport,
        fit_interference,
    )
    from profilers.distributed.transfer_patterns import pattern_times, run_patterns

    nbytes = max(round(rate_bps / 8 * PATTERN_SECONDS), 4096)
    nbytes -= nbytes % 4
    workers = min(2, world.size - 1)
    both_ways = {"push": (True, False), "pull": (False, True), "both": (True, True)}
    duplex_plans = {mode: (both_ways[mode],) * workers for mode in MODES}
    fitting = {name: plan for name, plan in PATTERNS.items() if len(plan) < world.size}
    interfere = world.size >= 4  # each direction against two others at least
    plans = {**duplex_plans, **(fitting if interfere else {})}
    mine = run_patterns(dist, world.rank, world.size, plans, nbytes, options.duplex_repeats, 1)
    every: list[Any] = [None] * world.size
    dist.all_gather_object(every, mine)
    timed = pattern_times(plans, every)
    push, pull, both = (timed[mode].span_s for mode in MODES)
    report = DuplexReport(workers, nbytes, push, pull, both)
    method = (
        f"profilers.distributed.link_duplex between {world.size} ranks: rank 0 as the server "
        f"and {workers} worker rank(s), gloo transfers of {nbytes} B, the workers to the "
        f"server, the server to the workers, then both at once, {options.duplex_repeats} of "
        "each after 1 warm-up; ratio = bits per second both at once over one way"
    )
    duplex = Duplex(report.ratio(), _noted(method, options.note), _now())
    if not interfere:
        tell("interference not measured: needs 4 hosts (a server and 3 workers)")
        return duplex, None
    pulls = {
        n: t.pull_end_s[min(t.pull_end_s)]
        for n, t in timed.items()
        if n in fitting and t.pull_end_s
    }
    pushes = {
        n: t.push_end_s[min(t.push_end_s)]
        for n, t in timed.items()
        if n in fitting and t.push_end_s
    }
    interference = InterferenceReport(nbytes, pulls, pushes)
    method = (
        f"profilers.distributed.link_interference between {world.size} ranks: gloo transfers "
        f"of {nbytes} B, one alone, beside one the other way, against "
        f"{'two and three' if world.size >= 5 else 'two'} the other way, "
        f"{options.duplex_repeats} of each after 1 warm-up; fitted by fit_interference"
    )
    effect = fit_interference(interference.slowdowns(), _noted(method, options.note), _now())
    slowdowns = ", ".join(f"{k} {v:.2f}x" for k, v in interference.slowdowns().items())
    tell(f"interference: {slowdowns}; {effect.text()}")
    return duplex, effect
