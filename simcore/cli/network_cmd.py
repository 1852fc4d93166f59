"""``sgdsim network``: measure a network profile (latency + bandwidth fit, and the link's
effects: flow sharing, transfer CPU cost, ring goodput) or show one.

The measuring is :mod:`profilers.network_measure`'s; torch loads only when ``measure`` runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from profilers.cluster_measure import world_from
from profilers.network_measure import add_measure_arguments, measure, options_from_args
from simcore.cli.output_options import add_output_options
from simcore.cli.progress import Progress
from simcore.files import check_output
from simcore.network import network_profile_table, network_profile_to_dict
from simcore.network_io import load_network_profile, network_sample_names, save_network_profile
from simcore.report.output import print_json


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("network", help="measure or show a network profile")
    actions = parser.add_subparsers(dest="network_command", metavar="ACTION", required=True)
    measure = actions.add_parser(
        "measure",
        help="time point-to-point transfers with torch.distributed (gloo) and fit a line, and "
        "measure the link's effects",
        description="Measure transfer time versus message size between two processes and fit "
        "time = latency + bytes / bandwidth; and the transfers' CPU cost per byte, how unevenly "
        "concurrent flows share the link, a ring AllReduce's goodput for W = 2..--ring-max, and "
        "what a server's link carries with pulls and pushes at once (--no-cpu, --no-sharing, "
        "--no-ring, --no-duplex skip them). Without --rank both ranks run here over "
        "loopback. Between your hosts, launch one process per host as for a distributed job "
        "(torchrun --nnodes N --nproc-per-node 1 --no-python sgdsim network measure -o net.json, "
        "or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or --rank/--world-size/--master-addr/"
        "--master-port): every part is then measured between the hosts, rank 0 playing the "
        "parameter server, message sizes adapted to the link, and rank 0 writes the profile.",
    )
    add_measure_arguments(measure)
    add_output_options(measure, table=False)
    measure.set_defaults(handler=run_measure)
    show = actions.add_parser("show", help="print a network profile and its fit")
    show.add_argument(
        "profile", help="profile file or shipped sample name: " + ", ".join(network_sample_names())
    )
    add_output_options(show, table=False)
    show.set_defaults(handler=run_show)


def run_measure(args: argparse.Namespace) -> int:
    world = world_from(args.rank, args.world_size, args.master_addr, args.master_port, os.environ)
    writer = world is None or world.rank == 0  # between hosts rank 0 writes
    if args.out is not None and writer:  # first: before the options' values, torch, the run
        check_output(args.out, "-o/--out", force=args.force)
    options = options_from_args(args)
    loud = writer and not (args.quiet or args.json)
    profile = measure(
        options,
        progress=Progress("network", "message sizes", enabled=loud),
        say=(lambda line: print(line, file=sys.stderr)) if loud else None,
    )
    if not writer or profile is None:
        assert world is not None
        if not args.quiet:
            print(
                f"rank {world.rank}: done; rank 0 "
                + ("wrote the profile" if args.out else "printed the profile")
            )
        return 0
    if args.out:
        save_network_profile(profile, args.out, overwrite=args.force)
    if args.json:
        print_json(args, "network measure", [network_profile_to_dict(profile)])
    elif not args.quiet:
        print(network_profile_table(profile))
    return 0


def run_show(args: argparse.Namespace) -> int:
    profile = load_network_profile(args.profile)
    if args.json:
        print_json(args, "network show", [network_profile_to_dict(profile)])
    else:
        print(network_profile_table(profile))
    return 0
