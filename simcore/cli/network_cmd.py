"""``sgdsim network``: measure a network profile (latency + bandwidth fit) or show one.

torch loads only when ``measure`` runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from simcore.cli.progress import Progress
from simcore.files import check_output
from simcore.network import network_profile_table
from simcore.network_io import load_network_profile, network_sample_names, save_network_profile
from simcore.units import parse_duration, parse_size


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("network", help="measure or show a network profile")
    actions = parser.add_subparsers(dest="network_command", metavar="ACTION", required=True)
    measure = actions.add_parser(
        "measure",
        help="time point-to-point transfers with torch.distributed (gloo) and fit a line",
        description="Measure transfer time versus message size between two processes and fit "
        "time = latency + bytes / bandwidth. Without --rank both ranks run here over loopback; "
        "between two hosts run it on both with --rank 0 / --rank 1 and the same --master-addr "
        "and --master-port.",
    )
    add_measure_arguments(measure)
    measure.set_defaults(handler=run_measure)
    show = actions.add_parser("show", help="print a network profile and its fit")
    show.add_argument(
        "profile", help="profile file or shipped sample name: " + ", ".join(network_sample_names())
    )
    show.set_defaults(handler=run_show)


def add_measure_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a network measurement (shared with ``python -m profilers.netprofile``)."""
    parser.add_argument("-o", "--out", help="write the network profile JSON here")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    parser.add_argument("--min-size", default="1KiB", help="smallest message (default 1KiB)")
    parser.add_argument("--max-size", default="64MiB", help="largest message (default 64MiB)")
    parser.add_argument("--repeats", type=int, default=20, help="timed round trips per size (20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed round trips per size (5)")
    parser.add_argument("--timeout", default="60s", help="rendezvous/operation limit (60s)")
    parser.add_argument("--rank", type=int, choices=(0, 1), help="run one rank (two hosts)")
    parser.add_argument("--master-addr", default="127.0.0.1", help="address of rank 0")
    parser.add_argument("--master-port", type=int, help="port of rank 0 (needed with --rank)")
    parser.add_argument("--ifname", help="network interface for gloo (GLOO_SOCKET_IFNAME)")
    parser.add_argument("--quiet", action="store_true", help="no progress or table")


def run_measure(args: argparse.Namespace) -> int:
    if args.out is not None:  # before torch loads and the measurement runs, not after
        check_output(args.out, "-o/--out", force=args.force)
    from profilers.netprofile import doubling_sizes, measure_network

    sizes = doubling_sizes(
        parse_size(args.min_size, name="--min-size"), parse_size(args.max_size, name="--max-size")
    )
    profile = measure_network(
        sizes,
        repeats=args.repeats,
        warmup=args.warmup,
        master_addr=args.master_addr,
        master_port=args.master_port,
        rank=args.rank,
        timeout_s=parse_duration(args.timeout, name="--timeout", default_unit="s"),
        progress=Progress("network", enabled=not args.quiet),
        ifname=args.ifname,
    )
    if args.out:
        save_network_profile(profile, args.out, overwrite=args.force)
    if not args.quiet:
        print(network_profile_table(profile))
    return 0


def run_show(args: argparse.Namespace) -> int:
    print(network_profile_table(load_network_profile(args.profile)))
    return 0
