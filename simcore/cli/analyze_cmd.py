"""``sgdsim analyze``: the TPDS'22 coarse-grained predictions for a range of worker counts.

Async-SGD solves the closed queueing network of TPDS'22 Fig. 5 by mean value analysis and prints
the processor-sharing (Eq. 4), FCFS (Eq. 3), hybrid (Eq. 5) and overlap-corrected (Eq. 6)
throughputs; Sync-SGD prints Eq. 7 (PS), 8 (FCFS), 9 (hybrid), 10 (hybrid with overlap) and
ring AllReduce (Eq. 11). Milliseconds per worker count, against seconds for ``sgdsim simulate``.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from typing import Any

from simcore.analytic.async_model import DEFAULT_RHO_T, OVERLAP_RULES, predict_async
from simcore.analytic.ddp_model import DdpEstimate, DdpWorker, ddp_worker_from_trace, predict_ddp
from simcore.analytic.mva import SOLVERS
from simcore.analytic.params import Cluster, WorkerType, host_worker_type, worker_type_from_trace
from simcore.analytic.sync_model import predict_sync
from simcore.cli.ddp_options import add_ddp_options, ddp_fields
from simcore.cli.guards import check_rates, fill_defaults, refuse_given
from simcore.cli.host_options import devices_and_intra_link
from simcore.cli.link_options import (
    DEFAULT_BANDWIDTH,
    NETWORK_HELP,
    add_effect_options,
    link_settings,
)
from simcore.cli.output_options import (
    EXIT_INTERRUPTED,
    add_output_options,
    analyze_csv,
    interrupted_note,
    print_csv,
)
from simcore.cli.simulate_cmd import parse_workers
from simcore.errors import ConfigError
from simcore.link_settings import LinkSettings
from simcore.report.output import print_json
from simcore.sim.config import MODES
from simcore.topology import Topology
from simcore.topology_io import load_topology
from simcore.trace.io import load_trace
from simcore.trace.model import Trace
from simcore.units import format_bandwidth, format_bytes, format_number, format_seconds

ASYNC_COLUMNS = ("ps", "fcfs", "hybrid", "overlap")
SYNC_COLUMNS = ("ps", "fcfs", "hybrid", "overlap", "allreduce", "ddp")
Row = dict[str, Any]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "analyze",
        help="coarse analytic predictions (TPDS'22 queueing model and closed forms)",
        description="Predict throughput with the TPDS'22 coarse-grained models: mean value "
        "analysis of the Async-SGD queueing network, or the Sync-SGD closed forms. "
        "--workers takes a count, a list (1,2,4) or a range (1-64).",
    )
    p.add_argument("trace", metavar="TRACE", help="trace file or sample name")
    p.add_argument("--workers", default="1", help="W, a list 1,2,4 or a range 1-64 (default 1)")
    p.add_argument(
        "--bandwidth",
        help=f"server link bandwidth B (default: --network's, else {DEFAULT_BANDWIDTH})",
    )
    p.add_argument("--network", help=NETWORK_HELP)
    p.add_argument("--latency", help="per-transfer latency (the coarse models have none: reported)")
    add_effect_options(p)
    p.add_argument("--mode", choices=MODES, default="async", help="Async- or Sync-SGD")
    p.add_argument(
        "--rho-t",
        type=float,
        help=f"hybrid threshold on the FCFS link utilization (Eq. 5; default {DEFAULT_RHO_T}; "
        "Async-SGD)",
    )
    p.add_argument(
        "--overlap-rule",
        choices=OVERLAP_RULES,
        help="Eq. 6's second solve: pick FCFS/PS again (reselect, the default) or keep the "
        "first pick (Async-SGD)",
    )
    p.add_argument(
        "--solver", choices=SOLVERS, help="MVA solver (default auto; Async-SGD's queueing model)"
    )
    hosts = p.add_argument_group(
        "hosts", "each worker a host of several devices (TPDS'22 4.4): one coarse worker per host"
    )
    hosts.add_argument(
        "--topology", help="host type file or sample (aws-p3.16xlarge); its NIC is B unless given"
    )
    hosts.add_argument("--devices-per-host", type=int, help="devices G per host (default 1)")
    hosts.add_argument("--intra-bandwidth", help="link between a host's devices, e.g. 150GB/s")
    add_ddp_options(p)
    add_output_options(p)
    p.set_defaults(handler=run)


@dataclass(frozen=True)
class DdpColumn:
    """What the ``ddp`` column needs: the trace's DDP step and the options' collective."""

    worker: DdpWorker
    collective: str
    latency_s: float
    devices_per_host: int
    intra_bandwidth_bps: float | None

    @classmethod
    def of(
        cls,
        trace: Trace,
        fields: dict[str, Any],
        latency_s: float,
        devices_per_host: int,
        intra_bandwidth_bps: float | None,
    ) -> DdpColumn:
        worker = ddp_worker_from_trace(
            trace,
            bucket_cap_bytes=fields["bucket_cap_bytes"],
            first_bucket_bytes=fields["first_bucket_bytes"],
            copy_s_per_byte=fields.get("bucket_copy_s_per_byte", 0.0),
            gradient_as_bucket_view=fields["gradient_as_bucket_view"],
            compression=fields["ddp_compression"],
        )
        return cls(worker, fields["collective"], latency_s, devices_per_host, intra_bandwidth_bps)

    def estimate(self, workers: int, bandwidth_bps: float) -> DdpEstimate:
        return predict_ddp(
            [self.worker],
            [workers],
            bandwidth_bps,
            latency_s=self.latency_s,
            collective=self.collective,
            devices_per_host=self.devices_per_host,
            intra_bandwidth_bps=self.intra_bandwidth_bps,
        )


def _rate(steps_per_s: float, examples_per_s: float) -> dict[str, float]:
    return {"examples_per_s": examples_per_s, "steps_per_s": steps_per_s}


def _host(args: argparse.Namespace, device: WorkerType, topology: Topology | None) -> WorkerType:
    """The coarse worker: one device, or a host of ``--devices-per-host`` of them."""
    devices, intra = devices_and_intra_link(args, topology)
    return host_worker_type(device, devices, intra)


def analyze_row(
    args: argparse.Namespace,
    worker: WorkerType,
    workers: int,
    b: float,
    ring_b: float | None = None,
    ddp: DdpColumn | None = None,
) -> Row:
    """The predictions for ``workers`` workers, as a JSON-ready row; ``ring_b``: the ring
    AllReduce's bandwidth (Eq. 11) when it is not ``b`` (a measured ring goodput); ``ddp``:
    what DDP's closed form needs (Sync-SGD)."""
    cluster = Cluster.homogeneous(worker, workers, b)
    if args.mode == "sync":
        s = predict_sync(cluster)
        ring = s if ring_b is None else predict_sync(Cluster.homogeneous(worker, workers, ring_b))
        row: Row = {"workers": workers, "solver": "closed form"}
        for name in SYNC_COLUMNS[:-1]:
            est = getattr(ring if name == "allreduce" else s, name)
            row[name] = {**_rate(est.steps_per_s, est.examples_per_s), "step_s": est.step_s}
        if ddp is not None:
            d = ddp.estimate(workers, b if ring_b is None or ddp.collective != "ring" else ring_b)
            row["ddp"] = {
                **_rate(d.steps_per_s, d.examples_per_s),
                "step_s": d.step_s,
                "exposed_s": d.exposed_s,
                "buckets": d.buckets,
            }
        return row
    a = predict_async(cluster, rho_t=args.rho_t, overlap_rule=args.overlap_rule, solver=args.solver)
    row = {"workers": workers, "solver": a.solver}
    for name in ASYNC_COLUMNS:
        sol = getattr(a, name)
        row[name] = {
            **_rate(sol.steps_per_s, sol.examples_per_s),
            "links": sol.links,
            "link_utilization": sol.link_utilization,
        }
    return row


# Options of the Async-SGD queueing model, with their defaults; the Sync-SGD closed forms have
# no such choice, so one given with --mode sync is refused rather than ignored.
ASYNC_OPTIONS = {"rho_t": DEFAULT_RHO_T, "overlap_rule": "reselect", "solver": "auto"}


def _settle_async_options(args: argparse.Namespace) -> None:
    """The Async-SGD model's options given their defaults (left None for --mode sync, where
    one given is refused); --rho-t checked."""
    if args.mode == "sync":
        refuse_given(
            args,
            ASYNC_OPTIONS,
            "only with --mode async (the Sync-SGD closed forms have no such choice)",
        )
    else:
        fill_defaults(args, ASYNC_OPTIONS)
    if args.rho_t is not None and not (math.isfinite(args.rho_t) and 0 <= args.rho_t <= 1):
        raise ConfigError(f"--rho-t: must be in [0, 1], got {args.rho_t}")


def run(args: argparse.Namespace) -> int:
    counts = parse_workers(args.workers)
    if min(counts) < 1:
        raise ConfigError(f"--workers: counts must be >= 1, got {min(counts)}")
    _settle_async_options(args)
    topology = load_topology(args.topology) if args.topology else None
    link = link_settings(
        args,
        topology_bps=None if topology is None else topology.server_link_bps,
        topology=args.topology,
    )
    b = link.bandwidth_bps.value
    trace = load_trace(args.trace)
    worker = _host(args, worker_type_from_trace(trace), topology)
    fields = ddp_fields(args, used=args.mode == "sync", needs="--mode sync (DDP's closed form)")
    ddp = None
    if args.mode == "sync":
        devices, intra = devices_and_intra_link(args, topology)
        ddp = DdpColumn.of(trace, fields, link.latency_s.value, devices, intra)
    rows: list[Row] = []
    try:
        for w in counts:
            rows.append(analyze_row(args, worker, w, b, _ring_b(args, link, w), ddp))
    except KeyboardInterrupt:  # Ctrl-C: keep the rows that finished, if any
        if not rows:
            raise
    interrupted = len(rows) < len(counts)
    columns = SYNC_COLUMNS if args.mode == "sync" else ASYNC_COLUMNS
    check_rates(
        (f"--workers {row['workers']}, {name} model", row[name]["examples_per_s"])
        for row in rows
        for name in columns
    )
    if args.json:
        context = {
            "trace": trace.source,
            "model": trace.metadata.model_name,
            "mode": args.mode,
            "bandwidth_bps": b,
            "rho_t": args.rho_t,
            "overlap_rule": args.overlap_rule,
            "params": {
                "forward_s": worker.forward_s,
                "backward_s": worker.backward_s,
                "update_s": worker.update_s,
                "model_nbytes": worker.model_nbytes,
                "batch_size": worker.batch_size,
            },
            "link": analytic_link_dict(args, link, counts),
        }
        print_json(args, "analyze", rows, context=context, interrupted=interrupted)
    elif args.csv:
        print_csv(*analyze_csv(rows, columns))
        # stdout holds the CSV alone: where B came from and what was given but not modelled
        # go to stderr, as --json's context has them.
        print("\n".join(analytic_link_lines(args, link, counts)), file=sys.stderr)
    else:
        print(format_table(args, worker, b, rows))
        print("\n".join(analytic_link_lines(args, link, counts)))
    if interrupted:
        interrupted_note("analyze", len(rows), len(counts))
        return EXIT_INTERRUPTED
    return 0


def _ring_b(args: argparse.Namespace, link: LinkSettings, workers: int) -> float | None:
    """The ring's measured goodput for Eq. 11 (sync mode, when the profile has one)."""
    ring = _ring_b_measured(args, link, workers)
    return None if ring is None else ring[1]


def analytic_link_lines(
    args: argparse.Namespace, link: LinkSettings, counts: list[int]
) -> list[str]:
    """Where B came from, the ring's goodput if used, and what the coarse models cannot model."""
    b = link.bandwidth_bps
    lines = [f"link: B {format_bandwidth(b.value)} ({b.source})"]
    rings = sorted({ring for w in counts if (ring := _ring_b_measured(args, link, w))})
    if rings:
        used = ", ".join(f"{format_bandwidth(bps)} (W={w})" for w, bps in rings)
        lines[0] += (
            f"; ring AllReduce (Eq. 11) at the measured ring goodput {used} ({link.profile})"
        )
    effects = link.effects_on()
    off = [link.effect_text(key) for key in effects]
    if off:
        counted = (
            " (the ddp column counts the latency, once per hop of each bucket's AllReduce)"
            if args.mode == "sync" and "latency_s" in effects
            else ""
        )
        lines.append(
            f"not modelled: the coarse models have no per-transfer latency, flow weights, "
            f"duplex limit or transfer CPU cost, so these are ignored: {', '.join(off)} "
            f"(sgdsim simulate uses them){counted}"
        )
    if link.note:
        lines.append(link.note)
    return lines


def _ring_b_measured(
    args: argparse.Namespace, link: LinkSettings, workers: int
) -> tuple[int, float] | None:
    return link.ring_bandwidth(workers) if args.mode == "sync" else None


def analytic_link_dict(
    args: argparse.Namespace, link: LinkSettings, counts: list[int]
) -> dict[str, Any]:
    """The JSON form of :func:`analytic_link_lines`."""
    return {
        "bandwidth_bps": link.bandwidth_bps.to_dict(),
        "ring_bandwidth_bps": {
            str(w): {"value": ring[1], "workers_measured": ring[0], "source": link.profile}
            for w in counts
            if (ring := _ring_b_measured(args, link, w))
        },
        "not_modelled": {key: value.to_dict() for key, value in link.effects_on().items()},
        "profile": link.profile,
        "note": link.note,
    }


def format_table(args: argparse.Namespace, worker: WorkerType, b: float, rows: list[Row]) -> str:
    """The text table: per worker count, examples/s and steps/s of every model."""
    sync = args.mode == "sync"
    columns = SYNC_COLUMNS if sync else ASYNC_COLUMNS
    what = (
        "Sync-SGD, Eq. 7 (ps), 8 (fcfs), 9 (hybrid), 10 (overlap), 11 (allreduce), and DDP's "
        "bucket chain (ddp)"
        if sync
        else f"Async-SGD, MVA of Fig. 5; hybrid Eq. 5 with rho_T {args.rho_t:g}, "
        f"overlap Eq. 6 ({args.overlap_rule})"
    )
    lines = [
        f"{worker.name}, batch {worker.batch_size}/worker: T_F {format_seconds(worker.forward_s)}, "
        f"T_B {format_seconds(worker.backward_s)}, T_S {format_seconds(worker.update_s)}, "
        f"M {format_bytes(worker.model_nbytes)}; B {format_bandwidth(b)}",
        what,
        f"{'':>4} " + " ".join(f"{name:>19}" for name in columns),
        f"{'W':>4} " + " ".join(f"{'examples/s':>10} {'steps/s':>8}" for _ in columns) + "  solver",
    ]
    for row in rows:
        cells = " ".join(
            f"{format_number(row[n]['examples_per_s']):>10} "
            f"{format_number(row[n]['steps_per_s']):>8}"
            for n in columns
        )
        extra = row["solver"] if sync else f"{row['solver']}; hybrid = {row['hybrid']['links']}"
        lines.append(f"{row['workers']:>4} {cells}  {extra}")
    return "\n".join(lines)
