"""Hosts with 8 GPUs behind a capped network: where does the coarse model go wrong, and why?

Question
    ResNet-50 trains on AWS p3.16xlarge-like hosts: 8 GPUs joined by NVLink, a 25 Gbit/s NIC,
    and a cloud network that gives a single flow at most 10 Gbit/s (TPDS'22 section 4.4, Fig.
    22-23). How does throughput grow with the number of hosts for a parameter server (Async- and
    Sync-SGD) and for ring AllReduce, what does the per-flow cap cost, and why does the
    coarse-grained model, which lets a flow alone use the whole 25 Gbit/s, overestimate with few
    hosts?

Setup
    - trace: the shipped ``resnet50-b32`` sample (97.5 MiB of parameters), every computation
      (forward, backward, update) sped up ``SPEED`` times to stand in for a V100
      (:func:`simcore.trace.transform.with_faster_computation`; the sample was profiled on a CPU,
      and a V100 runs a batch of 32 through ResNet-50 in about a tenth of a second);
    - topology: the shipped ``aws-p3.16xlarge`` host type (``simcore/data/topologies``): each
      host reduces gradients among its 8 GPUs per layer, one GPU per host talks to the parameter
      server (on a host of its own, same NIC) or joins the inter-host ring, then broadcasts the
      new parameters to the others; H = 1..8 hosts;
    - every configuration twice: with the topology's 10 Gbit/s per-flow cap and without it;
      each runs until the 95% confidence interval of its examples/s is within ``--precision``
      (1%; at most ``--max-steps`` 1000 steps per host; ``--steps`` fixes the length), a tenth
      of each run left out as warm-up; all of them run at once on the cores ``--jobs`` allows;
    - strict phases by default (``--overlap none``: all pulls, then the computation, then all
      pushes), the setting the coarse model's closed forms describe exactly, so that the cap is
      the one thing the coarse model misses; ``--overlap layerwise`` overlaps per layer;
    - coarse model: each host as one coarse worker (:func:`simcore.analytic.host_worker_type`):
      the mean value analysis with processor-sharing links for Async-SGD (Eq. 4), Eq. 7 for
      Sync-SGD and Eq. 11 for the ring, or with ``--overlap layerwise`` their overlap variants
      (Eq. 6, Eq. 10); it has no notion of a per-flow cap.

Output
    A table per architecture (simulated examples/s with and without the cap with 95% CI
    half-widths, the coarse model and its error against the capped simulation, and the rate one
    flow gets when every host transfers at once), the finding, and in ``--out`` (default
    ``results/multi_gpu/``) ``multi_gpu.csv`` and ``multi_gpu.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

from simcore.analytic import (
    Cluster,
    WorkerType,
    host_worker_type,
    predict_async,
    predict_sync,
    worker_type_from_trace,
)
from simcore.cli.progress import Progress
from simcore.plots import new_figure, save_figure
from simcore.report import (
    Column,
    ScenarioOutput,
    Table,
    base_config,
    run_scenario,
    scenario_parser,
)
from simcore.report.architectures import DATA_PARALLEL, Architecture
from simcore.report.scenario import grouped_precision_notes, length_setup, simulate_points
from simcore.sim import Estimate, SimulationResult
from simcore.topology import Topology
from simcore.topology_io import load_topology
from simcore.trace.io import load_trace
from simcore.trace.transform import with_faster_computation

NAME = "multi_gpu"
TRACE = "resnet50-b32"
TOPOLOGY = "aws-p3.16xlarge"
HOSTS = (1, 2, 3, 4, 6, 8)
SEED = 1
SPEED = 80.0  # the CPU-profiled computation / SPEED is about a V100's
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"


ARCHITECTURES = DATA_PARALLEL

COLUMNS = (
    Column("hosts", "hosts"),
    Column("gpus", "GPUs"),
    Column("capped", "examples/s capped"),
    Column("capped_ci_half", "±"),
    Column("uncapped", "no cap"),
    Column("uncapped_ci_half", "±"),
    Column("coarse", "coarse model"),
    Column("coarse_error_pct", "coarse vs capped %", "{:+.0f}"),
    Column("flow_gbps", "one flow Gbit/s"),
    Column("capped_steps", "steps capped", "{}"),
    Column("uncapped_steps", "steps no cap", "{}"),
)


def coarse_examples_per_s(
    device: WorkerType, arch: Architecture, topo: Topology, overlap: str
) -> float:
    """The coarse model for ``topo``: each host one worker, no per-flow cap."""
    host = host_worker_type(device, topo.devices_per_host, topo.intra_bandwidth_bps)
    if arch.arch == "allreduce":
        ring = Cluster.homogeneous(host, topo.hosts, topo.nic_bandwidth_bps)
        return predict_sync(ring).allreduce.examples_per_s
    cluster = Cluster.homogeneous(host, topo.hosts, topo.server_link_bps)
    variant = "overlap" if overlap == "layerwise" else "ps"
    prediction = predict_async(cluster) if arch.mode == "async" else predict_sync(cluster)
    return float(getattr(prediction, variant).examples_per_s)


def flow_rate_bps(arch: Architecture, topo: Topology, capped: bool) -> float:
    """What one flow gets when every host transfers at once (processor sharing)."""
    share = topo.nic_bandwidth_bps
    if arch.arch == "ps":
        share = topo.server_link_bps / topo.hosts
    cap = topo.flow_cap_bps if capped and topo.flow_cap_bps is not None else float("inf")
    return min(share, cap)


def half_width(est: Estimate) -> float | None:
    return est.half_width


def run(args: argparse.Namespace) -> tuple[list[Table], str, str]:
    """Simulate every architecture, host count and cap setting; returns tables, a setup line
    and the runs that stopped short of the precision target (note lines, '' if none)."""
    trace = with_faster_computation(load_trace(args.trace), args.speed)
    host_type = load_topology(args.topology)
    device = worker_type_from_trace(trace)
    setup = (
        f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/GPU, "
        f"{trace.param_nbytes / 2**20:.1f} MiB of parameters, computation / {args.speed:g} "
        f"({(device.forward_s + device.backward_s) * 1e3:.0f} ms per step); hosts: "
        f"{host_type.summary().split(', ', 1)[1]}; overlap {args.overlap}; "
        f"{length_setup(args).replace('steps/worker', 'steps/host')}"
    )
    # The links come from the topology; base_config gives the length (a pilot under the rule).
    base, _ = base_config(args, overlap=args.overlap)
    configs = []
    for arch in ARCHITECTURES:
        for hosts in args.workers:
            topo = host_type.with_hosts(hosts)
            for capped in (True, False):
                cluster = topo if capped else dataclasses.replace(topo, flow_cap_bps=None)
                config = dataclasses.replace(base, workers=hosts, arch=arch.arch, mode=arch.mode)
                configs.append(cluster.simulation_config(config))
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    runs = iter(simulate_points(trace, configs, args, progress))  # all at once: --jobs
    tables, groups = [], []
    for arch in ARCHITECTURES:
        table = Table(arch.label, COLUMNS)
        points: dict[bool, list[SimulationResult]] = {True: [], False: []}
        for hosts in args.workers:
            topo = host_type.with_hosts(hosts)
            results: dict[bool, Estimate] = {}
            for capped in (True, False):
                points[capped].append(next(runs))
                results[capped] = points[capped][-1].examples_per_s
            coarse = coarse_examples_per_s(device, arch, topo, args.overlap)
            table.add(
                hosts=hosts,
                gpus=topo.devices,
                capped=results[True].value,
                capped_ci_half=half_width(results[True]),
                uncapped=results[False].value,
                uncapped_ci_half=half_width(results[False]),
                coarse=coarse,
                coarse_error_pct=100.0 * (coarse / results[True].value - 1.0),
                flow_gbps=flow_rate_bps(arch, topo, capped=True) / 1e9,
                capped_steps=points[True][-1].config.steps,
                uncapped_steps=points[False][-1].config.steps,
            )
        tables.append(table)
        for capped, label in ((True, "capped"), (False, "no cap")):
            groups.append((points[capped], f"{arch.label}, {label}"))
    return tables, setup, grouped_precision_notes(groups)


def finding(tables: Sequence[Table], nic_gbps: float, cap_gbps: float) -> str:
    """What the PS Sync-SGD and ring tables show, in words (true of the numbers printed)."""
    by_title = {t.title: t for t in tables}
    ps = by_title["PS Sync-SGD"].rows
    ring = by_title["ring AllReduce"].rows
    first, last = ps[0], ps[-1]
    lines = [
        f"finding: one host's flow gets {first['flow_gbps']:.0f} of {nic_gbps:.0f} Gbit/s, and "
        f"the coarse model, which gives it the whole link, is off by "
        f"{first['coarse_error_pct']:+.0f}% (PS Sync-SGD)."
    ]
    if float(last["flow_gbps"]) < cap_gbps:  # type: ignore[arg-type]
        gap = 100.0 * (float(last["uncapped"]) / float(last["capped"]) - 1.0)  # type: ignore[arg-type]
        lines.append(
            f"At {last['hosts']} hosts each flow's share of the server's link "
            f"({last['flow_gbps']:.1f} Gbit/s) is below the cap: the cap costs {gap:.0f}% and "
            f"the coarse model is off by {last['coarse_error_pct']:+.0f}%."
        )
    else:
        lines.append(f"Up to {last['hosts']} hosts every flow is held at the cap.")
    lines.append(
        f"A ring sends one flow per host, so there the cap binds at every size (coarse model "
        f"{ring[-1]['coarse_error_pct']:+.0f}% at {ring[-1]['hosts']} hosts)."
    )
    return "\n".join(lines)


def plot(tables: Sequence[Table], out: ScenarioOutput, title: str, per_host: int) -> None:
    fig, axes = new_figure(1, len(tables), size=(4.0 * len(tables), 4.0), sharey=False)
    for ax, table in zip(axes, tables, strict=True):
        gpus = table.column("gpus")
        capped = [float(v) for v in table.column("capped")]  # type: ignore[arg-type]
        half = [float(v or 0.0) for v in table.column("capped_ci_half")]  # type: ignore[arg-type]
        ax.plot(gpus, capped, "-o", ms=4, color="C0", label="simulated, 10 Gbit/s per flow")
        ax.fill_between(
            gpus,
            [c - h for c, h in zip(capped, half, strict=True)],
            [c + h for c, h in zip(capped, half, strict=True)],
            color="C0",
            alpha=0.2,
        )
        ax.plot(gpus, table.column("uncapped"), "-s", ms=4, color="C1", label="simulated, no cap")
        ax.plot(gpus, table.column("coarse"), "--", color="C2", label="coarse model (no cap)")
        ax.set_title(table.title, fontsize=10)
        ax.set_xlabel(f"devices ({per_host} per host)")
        ax.set_ylabel("throughput (examples/s)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scenario_parser(
        NAME,
        __doc__,
        trace=TRACE,
        workers=HOSTS,
        seed=SEED,
        bandwidth="25Gbps",
        precision=True,
    )
    parser.add_argument(
        "--topology", default=TOPOLOGY, help=f"host type: file or sample (default {TOPOLOGY})"
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=SPEED,
        help=f"computation speed-up over the trace (default {SPEED:g}: CPU profile -> V100)",
    )
    parser.add_argument(
        "--overlap",
        choices=("none", "layerwise"),
        default="none",
        help="strict phases (default, as the coarse model) or per-layer overlap",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, FIGURE_FILE], force=args.force)
        tables, setup, notes = run(args)
        host_type = load_topology(args.topology)
        print(setup)
        for table in tables:
            print("\n" + table.text())
        cap_bps = host_type.flow_cap_bps or float("inf")
        print("\n" + finding(tables, host_type.nic_bandwidth_bps / 1e9, cap_bps / 1e9))
        if notes:
            print("\n" + notes)
        out.write_csv(CSV_FILE, tables)
        title = (
            f"{setup.split(',')[0]}, batch/device as profiled, on {args.topology} hosts (predicted)"
        )
        plot(tables, out, title, host_type.devices_per_host)
        print("\n" + out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
