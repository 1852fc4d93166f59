"""Does a second parameter server double the throughput, and how much does the layer split cost?

Question
    When one parameter server's link is the bottleneck, TensorFlow lets you add a second one and
    splits the model between them layer by layer: in trace order, each layer goes to the server
    holding the fewest bytes so far (ICPE'20 section 5). Whole layers rarely split evenly, so
    one server carries more than half of the traffic. How does throughput against W compare for
    one server, two servers with that greedy split, and two servers with the most even split of
    whole layers (ICPE'20 Fig. 23-25)?

Setup
    - trace: the shipped ``resnet18-b32`` sample (44.6 MiB of parameters in 41 layers);
    - each server behind its own link of ``BANDWIDTH`` per direction, shared by processor
      sharing; each worker's NIC has the same bandwidth (a worker talking to both servers splits
      it between them);
    - placements: one server; two with ``placement="greedy"``; two with an explicit mapping,
      the best 2-way partition of the layers' bytes (subset sum, exact to 1/65536 of the model);
    - Async-SGD and Sync-SGD, W in ``--workers``; each point runs until the 95% confidence
      interval of its examples/s is within ``--precision`` (1%; at most ``--max-steps`` 1000
      steps per worker; ``--steps`` fixes the length), a tenth of each run left out as warm-up;
      all points run at once on the cores ``--jobs`` allows.
    - ``--trace cnn-b32 --bandwidth 1Gbps`` shows the VGG-11 case of ICPE'20 Fig. 25(h): one layer
      holds 84% of the bytes, no split of whole layers balances it, a second server adds 10-20%.

Output
    The bytes each server holds under each placement and the link bound they imply, a table per
    mode, a finding, and in ``--out`` (default ``results/two_servers/``): ``two_servers.csv``
    (throughput), ``two_servers_bytes.csv`` (the split) and ``two_servers.png`` (throughput
    against W per mode, with each placement's link bound).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from simcore.cli.progress import Progress
from simcore.plots import new_figure, save_figure
from simcore.report import (
    Column,
    ScenarioOutput,
    Table,
    base_config,
    estimate_cells,
    estimate_columns,
    finding_line,
    run_scenario,
    scenario_parser,
)
from simcore.report.scenario import grouped_precision_notes, length_setup, simulate_points
from simcore.sim import SimulationResult
from simcore.sim.dag import assign_servers
from simcore.trace.io import load_trace
from simcore.trace.model import Trace

NAME = "two_servers"
TRACE = "resnet18-b32"
BANDWIDTH = "500Mbps"
WORKERS = (1, 2, 4, 6, 8, 12, 16)
SEED = 1
PARTITION_UNITS = 65536  # the subset-sum grid: bytes are rounded to 1/65536 of the model
CSV_FILE = f"{NAME}.csv"
BYTES_CSV_FILE = f"{NAME}_bytes.csv"
FIGURE_FILE = f"{NAME}.png"
MODES = (("Async-SGD", "async"), ("Sync-SGD", "sync"))
MIB = 2**20
CONVOY_GAP = 0.1  # one server's async share of its bound this far below two servers': convoys


@dataclass(frozen=True)
class Placement:
    """A way to put the layers on servers: a label, the server count and the placement."""

    label: str
    servers: int
    placement: str | Mapping[str, int]


COLUMNS = (
    Column("workers", "W"),
    Column("placement", "placement"),
    *estimate_columns(),
    Column("steps_per_s", "steps/s"),
    Column("link_bound_examples_per_s", "link bound"),
    Column("steps", "steps", "{}"),
)
BYTES_COLUMNS = (
    Column("placement", "placement"),
    Column("server", "server"),
    Column("layers", "layers"),
    Column("mib", "MiB"),
    Column("share_percent", "share %"),
)


def balanced_placement(trace: Trace) -> dict[str, int]:
    """The most even split of the layers with parameters between 2 servers (by bytes).

    A subset sum over the layers' sizes rounded to ``PARTITION_UNITS`` of the model: the subset
    closest to half the bytes from below goes to server 1, the rest to server 0.
    """
    layers = [layer for layer in trace.layers if layer.param_nbytes > 0]
    unit = max(1, -(-trace.param_nbytes // PARTITION_UNITS))
    sizes = [round(layer.param_nbytes / unit) for layer in layers]
    reachable = [1]  # reachable[i]: bit s set when some subset of the first i layers sums to s
    for size in sizes:
        reachable.append(reachable[-1] | (reachable[-1] << size))
    best = sum(sizes) // 2
    while not (reachable[-1] >> best) & 1:
        best -= 1
    mapping = {layer.name: 0 for layer in layers}
    for i in range(len(layers), 0, -1):
        if not (reachable[i - 1] >> best) & 1:  # layer i-1 is needed to reach ``best``
            mapping[layers[i - 1].name] = 1
            best -= sizes[i - 1]
    return mapping


def server_bytes(trace: Trace, placement: Placement) -> list[tuple[int, int]]:
    """(layers, bytes) each server holds under ``placement``."""
    where = assign_servers(trace, placement.servers, placement.placement)
    held = [(0, 0)] * placement.servers
    for layer in trace.layers:
        if layer.param_nbytes > 0:
            count, nbytes = held[where[layer.name]]
            held[where[layer.name]] = (count + 1, nbytes + layer.param_nbytes)
    return held


def link_bound(trace: Trace, placement: Placement, bandwidth_bps: float, mode: str) -> float:
    """Saturated examples/s the busiest server's link allows.

    Every worker-step moves each server's share down and up; the busiest link carries at most
    ``B / (8 * its bytes)`` worker-steps per second in each direction. Sync-SGD with processor
    sharing pulls and pushes in separate phases of the barrier, so it saturates at half of it.
    """
    busiest = max(nbytes for _, nbytes in server_bytes(trace, placement))
    steps_per_s = bandwidth_bps / (8 * busiest)
    return trace.metadata.batch_size * steps_per_s / (2 if mode == "sync" else 1)


@dataclass(frozen=True)
class Curve:
    mode: str
    placement: Placement
    points: tuple[SimulationResult, ...]
    bound: float

    @property
    def workers(self) -> list[int]:
        return [p.config.workers for p in self.points]


def placements(trace: Trace) -> tuple[Placement, ...]:
    return (
        Placement("1 server", 1, "greedy"),
        Placement("2 servers, greedy split", 2, "greedy"),
        Placement("2 servers, even split", 2, balanced_placement(trace)),
    )


def bytes_table(trace: Trace, options: Sequence[Placement]) -> Table:
    table = Table("bytes held by each server", BYTES_COLUMNS)
    for option in options:
        for server, (count, nbytes) in enumerate(server_bytes(trace, option)):
            table.add(
                placement=option.label,
                server=server,
                layers=count,
                mib=nbytes / MIB,
                share_percent=100.0 * nbytes / trace.param_nbytes,
            )
    return table


def run(args: argparse.Namespace) -> tuple[list[Curve], Table, str, str]:
    """Simulate every placement and mode at every W.

    Returns the curves, the bytes table, a line describing the setup and the figure's title.
    """
    trace = load_trace(args.trace)
    base, link = base_config(args, sharing="ps")
    bandwidth_bps = base.bandwidth_bps
    options = placements(trace)
    model = f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker"
    setup = (
        f"{model}, {trace.param_nbytes / MIB:.2f} MiB of parameters in "
        f"{sum(1 for la in trace.layers if la.param_nbytes)} layers; each server's link "
        f"{link}, processor sharing; {length_setup(args)}"
    )
    configs = [
        replace(base, workers=w, mode=mode, servers=option.servers, placement=option.placement)
        for _, mode in MODES
        for option in options
        for w in args.workers
    ]
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    results = iter(simulate_points(trace, configs, args, progress))  # all at once: --jobs
    curves = []
    for _, mode in MODES:
        for option in options:
            points = tuple(next(results) for _ in args.workers)
            bound = link_bound(trace, option, bandwidth_bps, mode)
            curves.append(Curve(mode, option, points, bound))
    return curves, bytes_table(trace, options), setup, f"{model}, {link} per server link"


def mode_table(curves: Sequence[Curve], label: str, mode: str) -> Table:
    table = Table(label, COLUMNS)
    for curve in (c for c in curves if c.mode == mode):
        for p in curve.points:
            est = p.examples_per_s
            table.add(
                workers=p.config.workers,
                placement=curve.placement.label,
                **estimate_cells(est),
                steps_per_s=p.steps_per_s.value,
                link_bound_examples_per_s=curve.bound,
                steps=p.config.steps,
            )
    return table


def finding(curves: Sequence[Curve], split: Table) -> str:
    """The saturated (best) throughput of each placement relative to one server, per mode."""
    gains = []
    for label, mode in MODES:
        mine = [c for c in curves if c.mode == mode]
        best = [max(p.examples_per_s.value for p in c.points) for c in mine]
        top = max(range(1, len(mine)), key=lambda i: best[i])
        gains.append(f"{label} {best[top] / best[0]:.2f}x ({mine[top].placement.label})")
    lines = [
        finding_line(
            "two parameter servers raise the best throughput over one server by "
            + ", ".join(gains)
            + "."
        ),
        "best examples/s over W, relative to one server:",
    ]
    for label, mode in MODES:
        mine = [c for c in curves if c.mode == mode]
        best = [max(p.examples_per_s.value for p in c.points) for c in mine]
        parts = [
            f"{c.placement.label} {b:.1f} ({b / best[0]:.2f}x)"
            for c, b in zip(mine, best, strict=True)
        ]
        lines.append(f"  {label}: " + ", ".join(parts))
    greedy = [r for r in split.rows if r["placement"] == "2 servers, greedy split"]
    shares = ", ".join(f"{float(r['share_percent']):.0f}%" for r in greedy)  # type: ignore[arg-type]
    mine = [c for c in curves if c.mode == "async"]
    reached = [max(p.examples_per_s.value for p in c.points) / c.bound for c in mine]
    lines.append(
        f"  The greedy split leaves the servers {shares} of the bytes: the busier link caps "
        "the throughput (each placement's\n  link bound). Async-SGD reaches "
        + ", ".join(f"{r:.0%}" for r in reached)
        + " of those bounds."
    )
    if reached[0] < min(reached[1:]) - CONVOY_GAP:
        lines.append(
            "  With one server its workers travel in convoys (pulling together, pushing "
            "together), which two servers break up."
        )
    return "\n".join(lines)


def plot(curves: Sequence[Curve], out: ScenarioOutput, title: str) -> None:
    fig, axes = new_figure(1, len(MODES), size=(11.0, 4.4))
    colors = ("C0", "C1", "C2")
    for ax, (label, mode) in zip(axes, MODES, strict=True):
        mine = [c for c in curves if c.mode == mode]
        for curve, color in zip(mine, colors, strict=False):
            est = [p.examples_per_s for p in curve.points]
            ax.plot(
                curve.workers,
                [e.value for e in est],
                "-o",
                color=color,
                ms=4,
                label=curve.placement.label,
            )
            if all(e.ci_low is not None and e.ci_high is not None for e in est):
                low = [e.ci_low for e in est]
                high = [e.ci_high for e in est]
                ax.fill_between(curve.workers, low, high, color=color, alpha=0.15)
            ax.axhline(curve.bound, color=color, ls=":", lw=1)
        ax.plot([], [], ls=":", color="0.4", label="link bound of each (dotted)")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("workers W")
        ax.set_ylabel("training throughput (examples/s)")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0, top=1.12 * max(c.bound for c in mine))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"One or two parameter servers: {title} (predicted)", fontsize=11)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scenario_parser(
        NAME,
        __doc__,
        trace=TRACE,
        workers=WORKERS,
        seed=SEED,
        bandwidth=BANDWIDTH,
        precision=True,
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, BYTES_CSV_FILE, FIGURE_FILE], force=args.force)
        curves, split, setup, title = run(args)
        tables = [mode_table(curves, label, mode) for label, mode in MODES]
        print(setup)
        print("\n" + split.text())
        for table in tables:
            print("\n" + table.text())
        print("\n" + finding(curves, split))
        labels = {mode: label for label, mode in MODES}
        notes = grouped_precision_notes(
            (c.points, f"{labels[c.mode]}, {c.placement.label}") for c in curves
        )
        if notes:
            print("\n" + notes)
        out.write_csv(CSV_FILE, tables)
        out.write_csv(BYTES_CSV_FILE, split)
        plot(curves, out, title)
        print("\n" + out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
