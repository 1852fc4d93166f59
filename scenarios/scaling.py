"""How far does data-parallel training scale, and where does it saturate?

Question
    ResNet-50 at batch 32 per worker is to be trained on W rented machines behind a 1 Gbit/s
    network. How many workers are worth renting: where does throughput stop growing, and which
    architecture (a parameter server with Async- or Sync-SGD, or ring AllReduce) gets the most
    out of them?

Setup
    - trace: the shipped ``resnet50-b32`` sample, profiled on one worker with ``sgdsim profile``;
    - network: the shipped ``veth-1gbit`` profile (a tc-shaped 1 Gbit/s veth pair measured with
      gloo; its fitted bandwidth and per-transfer latency are used); with a parameter server it
      is the server's link, with ring AllReduce every worker's link;
    - W = 1..16 workers; one parameter server whose link is shared by processor sharing
      (``--sharing fcfs`` for first-come-first-served);
    - each simulation runs until the 95% confidence interval of its throughput is within 1%
      (``--precision``; at most 1000 steps per worker, ``--max-steps``; the stopping rule of
      :mod:`simcore.sim.precision`), a tenth of each run left out as warm-up; ``--steps`` fixes
      the length instead. The interval comes from batch means, or for Async-SGD with W >= 2
      from 5 seeds. Beside each simulated point, the
      coarse-grained model of TPDS'22 at the same settings: its variants with overlap of
      communication and computation for the parameter server (Eq. 6, mean value analysis, for
      Async-SGD; Eq. 10 for Sync-SGD), since the simulator overlaps per layer too, and Eq. 11
      for ring AllReduce. The coarse model has no latency term and one sharing assumption
      (its hybrid), whatever ``--sharing`` says.

Output
    A table per architecture; its saturation point (:mod:`simcore.saturation`: the fewest workers
    reaching 95% of the best throughput); the best configuration. In ``--out`` (default
    ``results/scaling/``): ``scaling.csv`` (every point) and ``scaling.png`` (the curves).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcore.analytic import Cluster, predict_async, predict_sync, worker_type_from_trace
from simcore.cli.progress import Progress
from simcore.plots import Curve, plot_throughput_curves
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
from simcore.report.architectures import DATA_PARALLEL, Architecture
from simcore.report.scenario import grouped_precision_notes, length_setup, simulate_points
from simcore.saturation import SATURATION_SHARE, saturation_point
from simcore.sim import SimulationResult
from simcore.trace.io import load_trace
from simcore.trace.model import Trace
from simcore.units import format_number

NAME = "scaling"
TRACE = "resnet50-b32"
NETWORK = "veth-1gbit"
WORKERS = (1, 2, 3, 4, 6, 8, 10, 12, 14, 16)
SEED = 1
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"


ARCHITECTURES = DATA_PARALLEL

COLUMNS = (
    Column("workers", "W"),
    *estimate_columns(),
    Column("per_worker", "per worker"),
    Column("coarse_examples_per_s", "coarse model"),
    Column("steps", "steps", "{}"),
)


@dataclass(frozen=True)
class ScalingCurve:
    """One architecture's simulated points and the coarse model's values at the same W."""

    architecture: Architecture
    points: tuple[SimulationResult, ...]
    coarse: tuple[float, ...]

    @property
    def label(self) -> str:
        return self.architecture.label

    @property
    def workers(self) -> list[int]:
        return [p.config.workers for p in self.points]

    @property
    def examples_per_s(self) -> list[float]:
        return [p.examples_per_s.value for p in self.points]

    @property
    def saturation(self) -> int | None:
        return saturation_point(self.workers, self.examples_per_s)

    def table(self) -> Table:
        table = Table(self.label, COLUMNS)
        for p, coarse in zip(self.points, self.coarse, strict=True):
            est = p.examples_per_s
            table.add(
                workers=p.config.workers,
                **estimate_cells(est),
                per_worker=est.value / p.config.workers,
                coarse_examples_per_s=coarse,
                steps=p.config.steps,
            )
        return table


def coarse_examples_per_s(
    trace: Trace, arch: Architecture, workers: int, bandwidth_bps: float
) -> float:
    """The TPDS'22 coarse-grained prediction (examples/s) at the simulated settings: Eq. 6 or
    Eq. 10 (with overlap) for a parameter server, Eq. 11 for ring AllReduce."""
    cluster = Cluster.homogeneous(worker_type_from_trace(trace), workers, bandwidth_bps)
    if arch.arch == "allreduce":
        return predict_sync(cluster).allreduce.examples_per_s
    if arch.mode == "async":
        return predict_async(cluster).overlap.examples_per_s
    return predict_sync(cluster).overlap.examples_per_s


def run(args: argparse.Namespace) -> tuple[list[ScalingCurve], str, str]:
    """Simulate every architecture at every worker count.

    Returns the curves, a line describing the setup and a title for the figure.
    """
    trace = load_trace(args.trace)
    base, link = base_config(args)
    bandwidth_bps = base.bandwidth_bps
    setup = (
        f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker, "
        f"{trace.param_nbytes / 2**20:.1f} MiB of parameters; link {link}; PS links shared by "
        f"{'processor sharing' if args.sharing == 'ps' else 'FCFS'}; {length_setup(args)}"
    )
    configs = [
        replace(
            base,
            workers=w,
            arch=arch.arch,
            mode=arch.mode,
            sharing=args.sharing if arch.arch == "ps" else None,
        )
        for arch in ARCHITECTURES
        for w in args.workers
    ]
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    results = iter(simulate_points(trace, configs, args, progress))  # all at once: --jobs
    curves = []
    for arch in ARCHITECTURES:
        points = tuple(next(results) for _ in args.workers)
        coarse = tuple(coarse_examples_per_s(trace, arch, w, bandwidth_bps) for w in args.workers)
        curves.append(ScalingCurve(arch, points, coarse))
    title = (
        f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker, "
        f"link {link} (predicted)"
    )
    return curves, setup, title


def saturation_text(curve: ScalingCurve) -> str:
    w = curve.saturation
    if w is None:
        return f"still growing at W = {curve.workers[-1]}: no saturation in range"
    return f"saturates at W = {w} ({SATURATION_SHARE:.0%} of its best)"


def report(curves: Sequence[ScalingCurve]) -> str:
    lines = []
    for curve in curves:
        lines += ["", curve.table().text(), f"  {saturation_text(curve)}"]
    best_curve, best = max(
        ((c, p) for c in curves for p in c.points), key=lambda cp: cp[1].examples_per_s.value
    )
    lines.append(
        "\n"
        + finding_line(
            f"{best_curve.label} is the fastest, {format_number(best.examples_per_s.value)} "
            f"examples/s with W = {best.config.workers}, and {saturation_text(best_curve)}."
        )
    )
    notes = grouped_precision_notes((curve.points, curve.label) for curve in curves)
    if notes:
        lines.append(notes)
    return "\n".join(lines)


def plot(curves: Sequence[ScalingCurve], out: ScenarioOutput, title: str) -> None:
    colors = ("C0", "C1", "C2")
    lines = []
    markers: dict[str, tuple[int, float]] = {}
    for curve, color in zip(curves, colors, strict=False):
        est = [p.examples_per_s for p in curve.points]
        lines.append(
            Curve(
                f"{curve.label} (simulated)",
                curve.workers,
                curve.examples_per_s,
                [e.ci_low if e.ci_low is not None else e.value for e in est],
                [e.ci_high if e.ci_high is not None else e.value for e in est],
                style="-o",
                color=color,
            )
        )
        lines.append(
            Curve(
                f"{curve.label} (coarse model)",
                curve.workers,
                curve.coarse,
                style="--",
                color=color,
            )
        )
        w_sat = curve.saturation
        if w_sat is not None:
            at = curve.examples_per_s[curve.workers.index(w_sat)]
            markers[f"{curve.label} saturates: W = {w_sat}"] = (w_sat, at)
    first = curves[0].points[0]
    if first.config.workers == 1:
        ideal = [first.examples_per_s.value * w for w in curves[0].workers]
        lines.append(
            Curve("linear scaling from W = 1", curves[0].workers, ideal, style=":", color="0.5")
        )
    plot_throughput_curves(
        lines, out.path(FIGURE_FILE), title=title, markers=markers, overwrite=out.force
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scenario_parser(
        NAME,
        __doc__,
        trace=TRACE,
        workers=WORKERS,
        seed=SEED,
        network=NETWORK,
        precision=True,
    )
    parser.add_argument(
        "--sharing",
        choices=("ps", "fcfs"),
        default="ps",
        help="how the parameter server's link is shared (default: processor sharing)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, FIGURE_FILE], force=args.force)
        curves, setup, title = run(args)
        print(setup)
        print(report(curves))
        out.write_csv(CSV_FILE, [c.table() for c in curves])
        plot(curves, out, title)
        print("\n" + out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
