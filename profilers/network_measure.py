"""``sgdsim network measure`` (and ``python -m profilers.netprofile``): a whole network profile.

Measures, between two ranks of this machine over loopback (or, with ``--rank``, between two
hosts), what a network profile (:mod:`simcore.network`; schema version 4 with a ring's terms)
records:

1. the ping-pong fit, latency and bandwidth (:func:`profilers.netprofile.measure_network`), and
   the transfers' CPU cost per byte (``--cpu-repeats`` round trips of the largest message);
2. how unevenly concurrent flows share the link (:func:`profilers.link_sharing.
   measure_link_sharing` over loopback, flows sized by the fitted bandwidth): the simulator's
   ``flow_weight_cv``, pooled and per direction;
3. a gloo ring AllReduce's goodput for W = 2..``--ring-max`` ranks
   (:func:`profilers.distributed.ring_goodput.measure_ring_goodput`), with the terms the
   simulator's ring takes from it: the cost per message, each W's bytes' rate and the CPU per
   byte (:func:`ring_effect`);
4. what a parameter server's link carries with pulls and pushes at once, over one direction
   (:func:`profilers.distributed.link_duplex.measure_duplex`), and how much each direction slows
   beside the other's transfers
   (:func:`profilers.distributed.link_interference.measure_interference`).

``--no-sharing``, ``--no-cpu``, ``--no-ring`` and ``--no-duplex`` (both measurements of 4)
skip the slower parts; ``--keep-fit PROFILE`` keeps a profile's fit and CPU cost and measures
only 2 to 4 (those not skipped) again.
Between the user's hosts (``--rank``/``--world-size``, or torchrun's ``RANK``/``WORLD_SIZE``
environment) everything is measured between them instead, by
:mod:`profilers.cluster_measure`, with message sizes adapted to the link.

This module imports torch only when a measurement runs, so that the command line can take its
options from here without loading torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from profilers.cluster_measure import ClusterOptions, World, measure_cluster, world_from
from simcore.errors import ConfigError, SgdsimError
from simcore.network import NetworkProfile, network_profile_table
from simcore.network_effects import Duplex, DuplexInterference, FlowSharing, RingGoodput
from simcore.network_io import load_network_profile, save_network_profile
from simcore.units import format_bandwidth, format_bytes, format_seconds, parse_duration, parse_size

if TYPE_CHECKING:
    from profilers.link_sharing import LinkSharingReport

__all__ = [
    "MeasureOptions",
    "add_measure_arguments",
    "main",
    "measure",
    "measure_profile",
    "options_from_args",
]

Progress = Callable[[int, int], None]
Say = Callable[[str], None]
# A model's layers, all-reduced one after another: 4 KiB to 4 MiB, two of each (16 MiB in 22
# layers). The small ones' messages show the ring's fixed cost per message, the large ones its
# bytes' rate; layers of one size could not tell the two apart.
RING_LAYER_NBYTES = tuple(4096 << k for k in range(11) for _ in range(2))
SHARING_MAX_NBYTES = 64 << 20  # per flow: four senders hold a payload each in memory


@dataclass(frozen=True)
class MeasureOptions:
    """What :func:`measure_profile` measures, and how (sizes in bytes, times in seconds)."""

    min_nbytes: int = 1 << 10
    max_nbytes: int = 64 << 20
    repeats: int = 20
    warmup: int = 5
    timeout_s: float = 60.0
    # Between the user's hosts (None: both ends here, over loopback; then every effect is
    # this machine's). Only the fit's options below apply there, with its own defaults.
    world: World | None = None
    size_time_s: float = 0.05  # between hosts: sizes double until one transfer takes this long
    ifname: str | None = None
    cpu_repeats: int = 10  # 0: no transfer CPU cost
    sharing: bool = True
    sharing_seconds: float = 0.1  # one flow alone, at the fitted bandwidth
    sharing_repeats: int = 3
    ring_max: int | None = 4  # < 2: no ring goodput; None: every rank (between hosts)
    ring_repeats: int = 5
    duplex: bool = True
    note: str = ""  # added to every method text, e.g. "the machine was busy with other jobs"
    # A profile whose fit (and transfer CPU cost, which the ping-pong measures) to keep: no
    # ping-pong runs, and the effects measured replace its own (those skipped stay).
    keep_fit: str | None = None


def add_measure_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a network measurement (``sgdsim network measure``, ``python -m
    profilers.netprofile``)."""
    parser.add_argument("-o", "--out", help="write the network profile JSON here")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    parser.add_argument("--min-size", help="smallest message (default 1KiB)")
    parser.add_argument("--max-size", help="largest message (default 64MiB)")
    parser.add_argument("--repeats", type=int, help="timed round trips per size (20)")
    parser.add_argument("--warmup", type=int, help="untimed round trips per size (5)")
    parser.add_argument("--timeout", default="60s", help="rendezvous/operation limit (60s)")
    parser.add_argument(
        "--rank",
        type=int,
        help="this process's rank among --world-size processes on your hosts (default: RANK "
        "from the environment, as torchrun sets it; neither: both ends here over loopback)",
    )
    parser.add_argument(
        "--world-size",
        type=int,
        help="processes measuring, one per host (default: WORLD_SIZE, else 2); rank 0 plays "
        "the parameter server",
    )
    parser.add_argument(
        "--master-addr", help="address of rank 0 (default: MASTER_ADDR, else 127.0.0.1)"
    )
    parser.add_argument(
        "--master-port", type=int, help="port of rank 0 (default: MASTER_PORT; needed with --rank)"
    )
    parser.add_argument(
        "--size-time",
        help="between hosts: message sizes double until one transfer takes this long (50ms)",
    )
    parser.add_argument("--ifname", help="network interface for gloo (GLOO_SOCKET_IFNAME)")
    parser.add_argument(
        "--cpu-repeats",
        type=int,
        help="round trips of the largest message over which the transfers' CPU cost is "
        "measured (default 10)",
    )
    parser.add_argument("--no-cpu", action="store_true", help="skip the transfers' CPU cost")
    parser.add_argument(
        "--no-sharing", action="store_true", help="skip how concurrent flows share the link"
    )
    parser.add_argument(
        "--ring-max",
        type=int,
        help="measure a ring AllReduce's goodput for W = 2..N ranks (default: every rank "
        "between hosts, 4 over loopback)",
    )
    parser.add_argument("--no-ring", action="store_true", help="skip the ring AllReduce goodput")
    parser.add_argument(
        "--no-duplex",
        action="store_true",
        help="skip what a server's link carries with pulls and pushes at once and how much "
        "each direction slows beside the other's transfers",
    )
    parser.add_argument(
        "--note", default="", help="a note for the profile's methods, e.g. how busy the host was"
    )
    parser.add_argument(
        "--keep-fit",
        metavar="PROFILE",
        help="keep this profile's fit and transfer CPU cost (no ping-pong) and re-measure its "
        "other effects; those skipped (--no-sharing, --no-ring, --no-duplex) stay as they are",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress or table")


# The ping-pong's options (--keep-fit keeps a fit instead of running it) and their defaults.
PING_PONG_OPTIONS = {
    "min_size": "1KiB",
    "max_size": "64MiB",
    "repeats": MeasureOptions.repeats,
    "warmup": MeasureOptions.warmup,
    "cpu_repeats": MeasureOptions.cpu_repeats,
}
# Between hosts the sizes stop growing at --size-time and each size gets as many round trips as
# fit in about a second (at most --repeats): fewer warm-ups and CPU round trips keep a slow
# link's measurement under a minute (profilers.cluster_measure).
CLUSTER_DEFAULTS = {
    **PING_PONG_OPTIONS,
    "warmup": ClusterOptions.warmup,
    "cpu_repeats": ClusterOptions.cpu_repeats,
}


def options_from_args(args: argparse.Namespace) -> MeasureOptions:
    """The :class:`MeasureOptions` of parsed :func:`add_measure_arguments` options.

    Raises
    ------
    ConfigError : a value out of range, or an option that would do nothing (the ping-pong's
        beside --keep-fit, a ring of fewer than 2 ranks, --keep-fit with nothing to measure),
        named as given.
    """
    given = {key: getattr(args, key) for key in PING_PONG_OPTIONS}
    if args.keep_fit is not None:
        for key, value in [*given.items(), ("no_cpu", args.no_cpu or None)]:
            if value is not None:
                raise ConfigError(
                    f"--{key.replace('_', '-')}: not with --keep-fit (it keeps that profile's "
                    "fit and transfer CPU cost instead of measuring them)"
                )
        if args.no_sharing and args.no_ring and args.no_duplex:
            raise ConfigError(
                "--keep-fit: with --no-sharing, --no-ring and --no-duplex nothing is left to "
                "measure"
            )
    world = world_from(args.rank, args.world_size, args.master_addr, args.master_port, os.environ)
    defaults = PING_PONG_OPTIONS if world is None else CLUSTER_DEFAULTS
    value = {key: defaults[key] if v is None else v for key, v in given.items()}
    if args.size_time is not None and world is None:
        raise ConfigError("--size-time: only between hosts (with --rank or RANK)")
    if args.keep_fit is not None and world is not None:
        raise ConfigError("--keep-fit: measures this host's effects; not with --rank or RANK")
    ring_max = args.ring_max
    if ring_max is None and world is None:
        ring_max = 4
    options = MeasureOptions(
        min_nbytes=parse_size(value["min_size"], name="--min-size"),
        max_nbytes=parse_size(value["max_size"], name="--max-size"),
        repeats=value["repeats"],
        warmup=value["warmup"],
        timeout_s=parse_duration(args.timeout, name="--timeout", default_unit="s"),
        world=world,
        size_time_s=parse_duration(args.size_time or "50ms", name="--size-time"),
        ifname=args.ifname,
        cpu_repeats=0 if args.no_cpu else value["cpu_repeats"],
        sharing=not args.no_sharing,
        ring_max=0 if args.no_ring else ring_max,
        duplex=not args.no_duplex,
        note=args.note,
        keep_fit=args.keep_fit,
    )
    if options.min_nbytes > options.max_nbytes:
        raise ConfigError(
            f"--min-size {value['min_size']}: more than --max-size {value['max_size']}"
        )
    for option, number, low in (
        ("--repeats", options.repeats, 1),
        ("--warmup", options.warmup, 0),
        ("--cpu-repeats", value["cpu_repeats"], 1),
    ):
        if number < low:
            raise ConfigError(f"{option}: must be an integer >= {low}, got {number}")
    if not args.no_ring and ring_max is not None and ring_max < 2:
        raise ConfigError(
            f"--ring-max: must be >= 2 (rings of 2..N ranks; --no-ring skips them), got "
            f"{args.ring_max}"
        )
    return options


def measure(
    options: MeasureOptions, progress: Progress | None = None, say: Say | None = None
) -> NetworkProfile | None:
    """What ``sgdsim network measure`` runs: :func:`measure_profile` here, or between hosts
    (``options.world``) :func:`profilers.cluster_measure.measure_cluster`, which gives None on
    a rank that another rank of its host measures for."""
    if options.world is not None:
        return measure_cluster(options.world, cluster_options(options), say)
    return measure_profile(options, progress, say)


def measure_profile(
    options: MeasureOptions, progress: Progress | None = None, say: Say | None = None
) -> NetworkProfile:
    """Measure a network profile over this machine's loopback with every effect ``options``
    ask for (see the module).

    ``progress(done, total)`` follows the ping-pong's sizes; ``say`` gets a line per later part.

    Raises
    ------
    ConfigError
        An option is out of range.
    ProfilingError
        A measurement failed (a rank died or hung, the fit failed).
    """
    from profilers.netprofile import doubling_sizes, measure_network

    tell = say or (lambda _line: None)
    if options.world is not None:
        raise ConfigError("measure_profile: measures loopback; between hosts use measure()")
    if options.keep_fit is not None:
        kept = load_network_profile(options.keep_fit)
        tell(f"kept the fit and transfer CPU cost of {options.keep_fit}")
        return _with_effects(dataclasses.replace(kept, source="<memory>"), options, tell)
    profile = measure_network(
        doubling_sizes(options.min_nbytes, options.max_nbytes),
        repeats=options.repeats,
        warmup=options.warmup,
        timeout_s=options.timeout_s,
        progress=progress,
        ifname=options.ifname,
        cpu_repeats=options.cpu_repeats,
    )
    profile = dataclasses.replace(profile, method=_noted(profile.method, options.note))
    if profile.transfer_cpu is not None:
        cpu = profile.transfer_cpu
        tell(f"transfer CPU {cpu.s_per_byte * 1e9:.3g} ns/B on {cpu.host_cpu_cores:g} cores")
        profile = dataclasses.replace(
            profile, transfer_cpu=dataclasses.replace(cpu, method=_noted(cpu.method, options.note))
        )
    return _with_effects(profile, options, tell)


def cluster_options(options: MeasureOptions) -> ClusterOptions:
    """What of ``options`` a measurement between hosts uses."""
    return ClusterOptions(
        min_nbytes=options.min_nbytes,
        max_nbytes=options.max_nbytes,
        size_time_s=options.size_time_s,
        repeats=options.repeats,
        warmup=options.warmup,
        timeout_s=options.timeout_s,
        ifname=options.ifname,
        cpu_repeats=options.cpu_repeats,
        sharing=options.sharing,
        sharing_repeats=options.sharing_repeats,
        ring_max=options.ring_max,
        ring_repeats=options.ring_repeats,
        duplex=options.duplex,
        note=options.note,
    )


def _with_effects(profile: NetworkProfile, options: MeasureOptions, tell: Say) -> NetworkProfile:
    """``profile`` with the effects ``options`` ask for measured over loopback."""
    if options.sharing:
        seconds = min(options.sharing_seconds, 8 * SHARING_MAX_NBYTES / profile.bandwidth_bps)
        sharing = flow_sharing_effect(
            profile.bandwidth_bps,
            seconds_per_flow=seconds,
            repeats=options.sharing_repeats,
            timeout_s=options.timeout_s,
            note=options.note,
            say=tell,
        )
        profile = dataclasses.replace(profile, flow_sharing=sharing)
    if options.ring_max is not None and options.ring_max >= 2:
        ring = ring_effect(
            options.ring_max,
            bandwidth_bps=profile.bandwidth_bps,
            repeats=options.ring_repeats,
            timeout_s=options.timeout_s,
            note=options.note,
            say=tell,
        )
        profile = dataclasses.replace(profile, ring_goodput=ring)
    if options.duplex:
        duplex = duplex_effect(timeout_s=options.timeout_s, note=options.note, say=tell)
        interference = interference_effect(timeout_s=options.timeout_s, note=options.note, say=tell)
        profile = dataclasses.replace(profile, duplex=duplex, duplex_interference=interference)
    return profile


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _noted(method: str, note: str) -> str:
    return f"{method}; {note}" if note else method


def flow_sharing_effect(
    rate_bps: float,
    *,
    shaped: bool = False,
    seconds_per_flow: float = 0.1,
    repeats: int = 3,
    timeout_s: float = 60.0,
    note: str = "",
    say: Say | None = None,
) -> FlowSharing | None:
    """How unevenly concurrent flows share the link (:func:`profilers.link_sharing.
    measure_link_sharing`): over loopback, flows sized by ``rate_bps``, or (``shaped``) on the
    emulated cluster with node 0's link shaped to it. None (and ``say`` is told why) when the
    flows did not behave as sharing one bottleneck."""
    from profilers.link_sharing import measure_link_sharing

    tell = say or (lambda _line: None)
    report = measure_link_sharing(
        rate_bps,
        flows=(1, 2, 4),
        seconds_per_flow=seconds_per_flow,
        repeats=repeats,
        timeout_s=timeout_s,
        shaped=shaped,
    )
    where = f"a link shaped to {format_bandwidth(rate_bps)} (tc tbf)" if shaped else "loopback"
    return flow_sharing_of(report, where, repeats, note, tell)


def flow_sharing_of(
    report: LinkSharingReport, where: str, repeats: int, note: str, tell: Say
) -> FlowSharing | None:
    """The effect a :class:`~profilers.link_sharing.LinkSharingReport` measured ``where``
    (for its method text) shows; None (and ``tell`` says why) when its flows did not behave as
    sharing one bottleneck."""
    implausible = report.implausible_ratios()
    if implausible:
        tell(
            f"flow sharing not recorded: {implausible} of {len(report.share_ratios())} pairs of "
            "flows did not share as on one bottleneck (a flow ended before it could have, or "
            "starved; on loopback the flows compete for busy cores, not for a link); measure "
            "on a quieter machine, or give --flow-weight-cv when predicting"
        )
        return None
    method = (
        f"profilers.link_sharing over {where}: 1, 2 and 4 TCP flows of "
        f"{report.trials[0].nbytes} B started together and pairs started half a flow apart, "
        f"{repeats} of each per direction; cv of lognormal weights from the spread of "
        "ln(share ratio) of the pairs"
    )
    sharing = FlowSharing(
        report.weight_cv(),
        pull_cv=report.weight_cv("out of"),
        push_cv=report.weight_cv("into"),
        fcfs_index=report.fcfs_index(),
        method=_noted(method, note),
        created_utc=_now(),
    )
    tell(f"flow weight cv {sharing.weight_cv:.3g}")
    return sharing


def ring_effect(
    ring_max: int,
    *,
    link_rate_bps: float | None = None,
    bandwidth_bps: float | None = None,
    repeats: int = 5,
    timeout_s: float = 60.0,
    note: str = "",
    say: Say | None = None,
) -> RingGoodput:
    """A gloo ring AllReduce's goodput for W = 2..``ring_max`` over loopback, or on the
    emulated cluster with every node's link shaped to ``link_rate_bps``.

    Given the profile's ``bandwidth_bps`` (its one flow's rate), also the terms with which the
    simulator predicts a ring as the validation does (version 4): the ring of two's fixed cost
    per message beyond its bytes at that rate, each W's bytes' rate given that cost
    (:func:`profilers.distributed.ring_goodput.ring_model_terms`), and a rank's CPU per byte it
    sends or receives, from the ring of two's ranks' CPU time
    (:meth:`~profilers.distributed.ring_goodput.RingGoodput.cpu_costs`)."""
    from profilers.distributed.ring_goodput import measure_ring_goodput

    tell = say or (lambda _line: None)
    rings = []
    for workers in range(2, ring_max + 1):
        ring = measure_ring_goodput(
            RING_LAYER_NBYTES,
            workers=workers,
            link_rate_bps=link_rate_bps,
            repeats=repeats,
            timeout_s=timeout_s,
        )
        rings.append(ring)
        tell(f"ring AllReduce W={workers}: {format_bandwidth(ring.goodput_bps())}")
    where = (
        "loopback"
        if link_rate_bps is None
        else f"every node's link shaped to {format_bandwidth(link_rate_bps)} (tc tbf)"
    )
    return ring_goodput_of(rings, where, bandwidth_bps, repeats, note, tell)


def ring_goodput_of(
    rings: Sequence[Any],
    where: str,
    bandwidth_bps: float | None,
    repeats: int,
    note: str,
    tell: Say,
) -> RingGoodput:
    """The effect measured rings (:class:`profilers.distributed.ring_goodput.RingGoodput`, one
    per W, all of the same layers) show, measured ``where`` (for the method text); with the
    profile's one-flow ``bandwidth_bps``, the simulator's ring terms too (:func:`ring_effect`)."""
    from profilers.distributed.ring_goodput import ring_model_terms

    layers = rings[0].layer_nbytes
    sizes = f"{format_bytes(min(layers))} to {format_bytes(max(layers))}"
    method = (
        f"profilers.distributed.ring_goodput over {where}: gloo all_reduce of "
        f"{len(layers)} float32 buffers of {sizes} "
        f"({format_bytes(sum(layers))}) back to back, median of {repeats} after 2 "
        "warm-up; goodput = 2(W-1)/W * 8 * bytes / time"
    )
    points = tuple((r.workers, r.goodput_bps()) for r in rings)
    if bandwidth_bps is None:
        return RingGoodput(points, _noted(method, note), _now())
    terms = ring_model_terms(rings, bandwidth_bps)
    cost = rings[0].cpu_costs()
    method += (
        f"; cost per message: the ring of 2's time beyond its bytes at the profile's "
        f"{format_bandwidth(bandwidth_bps)}, over gloo's segments of at most "
        f"{format_bytes(terms.segment_bytes)}; the bytes' rate per W: each ring's time beyond "
        "that cost (at most the profile's bandwidth); CPU per byte: the ring of 2's ranks' CPU "
        "time (all threads) alone, less its messages' share"
    )
    tell(
        f"ring AllReduce: {format_seconds(terms.message_latency_s)} per message, "
        + (f"CPU {cost.s_per_byte * 1e9:.3g} ns/B" if cost is not None else "CPU not measured")
    )
    return RingGoodput(
        points,
        _noted(method, note),
        _now(),
        message_latency_s=terms.message_latency_s,
        cpu_s_per_byte=cost.s_per_byte if cost is not None else None,
        segment_bytes=terms.segment_bytes,
        bandwidths=terms.bandwidths,
    )


def _server_link(link_rate_bps: float | None) -> str:
    """Where a server-and-workers measurement ran, for its method text."""
    if link_rate_bps is None:
        return "loopback"
    return f"the server's link shaped to {format_bandwidth(link_rate_bps)} (tc tbf)"


def duplex_effect(
    *,
    link_rate_bps: float | None = None,
    repeats: int = 12,
    timeout_s: float = 60.0,
    note: str = "",
    say: Say | None = None,
) -> Duplex:
    """What a server's link carries both ways at once over one way
    (:func:`profilers.distributed.link_duplex.measure_duplex`, a server and two workers): over
    loopback, or on the emulated cluster with the server's link shaped to ``link_rate_bps``."""
    from profilers.distributed.link_duplex import duplex_text, measure_duplex

    tell = say or (lambda _line: None)
    report = measure_duplex(
        workers=2, link_rate_bps=link_rate_bps, repeats=repeats, timeout_s=timeout_s
    )
    tell(duplex_text(report))
    where = _server_link(link_rate_bps)
    method = (
        f"profilers.distributed.link_duplex over {where}: a server rank and {report.workers} "
        f"worker ranks, gloo transfers of {report.nbytes} B, the workers to the server, the "
        f"server to the workers, then both at once, {repeats} of each after 1 warm-up; ratio = "
        "bits per second both at once over one way (total bits over total time)"
    )
    return Duplex(report.ratio(), _noted(method, note), _now())


def interference_effect(
    *,
    link_rate_bps: float | None = None,
    repeats: int = 8,
    timeout_s: float = 60.0,
    note: str = "",
    say: Say | None = None,
) -> DuplexInterference:
    """How much each direction of a server's link slows beside the other's transfers
    (:func:`profilers.distributed.link_interference.measure_interference`, a server and up to
    four workers): over loopback, or on the emulated cluster with the server's link shaped to
    ``link_rate_bps``."""
    from profilers.distributed.link_interference import (
        fit_interference,
        interference_report_text,
        measure_interference,
    )

    tell = say or (lambda _line: None)
    report = measure_interference(link_rate_bps=link_rate_bps, repeats=repeats, timeout_s=timeout_s)
    where = _server_link(link_rate_bps)
    method = (
        f"profilers.distributed.link_interference over {where}: gloo transfers of "
        f"{report.nbytes} B, one transfer alone, beside one the other way, and against two and "
        f"three the other way, {repeats} of each after 1 warm-up; fitted by fit_interference"
    )
    effect = fit_interference(report.slowdowns(), _noted(method, note), _now())
    tell(interference_report_text(report, effect))
    return effect


def add_to_profile(path: str, say: Say, **effects: Any) -> None:
    """Rewrite the network profile at ``path`` in place with ``effects`` (its fields, e.g.
    ``duplex=...``) and its other fields kept; ``--add-to`` of the measurements' commands."""
    profile = dataclasses.replace(load_network_profile(path), **effects, source="<memory>")
    save_network_profile(profile, path, overwrite=True)
    say(f"added to {path}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m profilers.netprofile``: the same as ``sgdsim network measure``."""
    parser = argparse.ArgumentParser(
        prog="python -m profilers.netprofile",
        description="Measure a network profile with torch.distributed (gloo): latency and "
        "bandwidth fit, transfer CPU cost, flow sharing, ring goodput. Without --rank both "
        "ranks run here over loopback.",
    )
    add_measure_arguments(parser)
    args = parser.parse_args(argv)
    try:
        progress = None if args.quiet else _print_progress
        say = None if args.quiet else (lambda line: print(line, file=sys.stderr))
        options = options_from_args(args)
        profile = measure(options, progress, say)
        if profile is None or (options.world is not None and options.world.rank != 0):
            return 0  # rank 0 writes and prints
        if args.out:
            save_network_profile(profile, args.out, overwrite=args.force)
    except SgdsimError as err:
        print(f"netprofile: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(network_profile_table(profile))
    return 0


def _print_progress(done: int, total: int) -> None:
    print(f"network: {done}/{total}", file=sys.stderr)
