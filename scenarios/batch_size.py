"""How does the batch size per worker change how far training scales?

Question
    The same CNN trained with 8, 32, 64 or 128 examples per worker per step: every step moves the
    same parameters down and the same gradients up, but a larger batch computes longer per byte
    exchanged. How do throughput (examples/s) and steps/s grow with the number of workers W for
    each batch size, where does each saturate, and at what ceiling (ICPE'20 Fig. 2)?

Setup
    - traces: the shipped ``cnn-b8``, ``cnn-b32``, ``cnn-b64`` and ``cnn-b128`` samples (one CNN
      profiled at four batch sizes; 2.37 MiB of parameters each way per step); ``--traces``
      takes others, comma-separated;
    - one parameter server behind a ``BANDWIDTH`` link shared by processor sharing, where the
      small batch is network-bound (a step's pulls take 20 ms, about twice its computation);
    - PS Async-SGD (``--mode sync`` for Sync-SGD), per-layer overlap of communication and
      computation (``--overlap none`` for strict phases), W in ``--workers``; each point runs
      until the 95% confidence interval of its examples/s is within ``--precision`` (1%; at most
      ``--max-steps`` 1000 steps per worker; ``--steps`` fixes the length), a tenth of each run
      left out as warm-up; a trace's points run at once on the cores ``--jobs`` allows.

Output
    A summary per batch size (computation and transfer time per step, the link's ceiling, the
    best throughput and the saturation point), a table per batch size, a finding, and in
    ``--out`` (default ``results/batch_size/``): ``batch_size.csv`` (every point),
    ``batch_size_summary.csv`` and ``batch_size.png`` (examples/s and steps/s against W).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcore.cli.progress import Progress
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.report import (
    Column,
    ScenarioOutput,
    Table,
    base_config,
    estimate_cells,
    estimate_columns,
    run_scenario,
    scenario_parser,
)
from simcore.report.scenario import grouped_precision_notes, length_setup, simulate_points
from simcore.saturation import SATURATION_SHARE, saturation_point
from simcore.sim import SimulationResult
from simcore.sim.config import MODES, OVERLAPS
from simcore.trace.io import load_trace
from simcore.trace.model import OpKind, Trace

NAME = "batch_size"
TRACES = ("cnn-b8", "cnn-b32", "cnn-b64", "cnn-b128")
BANDWIDTH = "1Gbps"
WORKERS = (1, 2, 3, 4, 6, 8, 12, 16)
SEED = 1
CSV_FILE = f"{NAME}.csv"
SUMMARY_CSV_FILE = f"{NAME}_summary.csv"
FIGURE_FILE = f"{NAME}.png"

COLUMNS = (
    Column("workers", "W"),
    *estimate_columns(),
    Column("steps_per_s", "steps/s"),
    Column("per_worker", "ex/s per worker"),
    Column("steps", "steps", "{}"),
)
SUMMARY_COLUMNS = (
    Column("trace", "trace"),
    Column("batch", "batch"),
    Column("compute_ms", "compute ms/step"),
    Column("transfer_ms", "transfer ms each way"),
    Column("link_bound_examples_per_s", "link ceiling ex/s"),
    Column("best_examples_per_s", "best ex/s"),
    Column("best_share_percent", "% of ceiling"),
    Column("saturation_workers", "saturates at W"),
)


@dataclass(frozen=True)
class BatchCurve:
    """One trace's results at every W, and its per-step costs."""

    trace: Trace
    name: str
    points: tuple[SimulationResult, ...]
    bandwidth_bps: float

    @property
    def batch(self) -> int:
        return self.trace.metadata.batch_size

    @property
    def label(self) -> str:
        return f"batch {self.batch} ({self.name})"

    @property
    def workers(self) -> list[int]:
        return [p.config.workers for p in self.points]

    @property
    def examples_per_s(self) -> list[float]:
        return [p.examples_per_s.value for p in self.points]

    @property
    def transfer_s(self) -> float:
        """One direction's transfer of the whole model at the full bandwidth (s)."""
        return 8 * self.trace.param_nbytes / self.bandwidth_bps

    @property
    def link_bound(self) -> float:
        """Examples/s at which one direction of the server's link is always busy: each
        worker-step moves the whole model each way (Async-SGD's ceiling; Sync-SGD with
        processor sharing saturates near half of it)."""
        return self.batch / self.transfer_s

    def table(self) -> Table:
        table = Table(self.label, COLUMNS)
        for p in self.points:
            est = p.examples_per_s
            table.add(
                workers=p.config.workers,
                **estimate_cells(est),
                steps_per_s=p.steps_per_s.value,
                per_worker=est.value / p.config.workers,
                steps=p.config.steps,
            )
        return table


def compute_s(trace: Trace) -> float:
    """Mean forward + backward time of the profiled steps (s)."""
    kinds = (OpKind.FORWARD, OpKind.BACKWARD)
    per_step = [sum(trace.phase_time_s(i, k) for k in kinds) for i in range(trace.n_steps)]
    return sum(per_step) / trace.n_steps


def run(args: argparse.Namespace) -> tuple[list[BatchCurve], str, str]:
    """Simulate every trace at every W; returns the curves, a setup line and the title."""
    traces = [(name, load_trace(name)) for name in trace_list(args.trace)]
    base, link = base_config(args, mode=args.mode, sharing="ps", overlap=args.overlap)
    bandwidth_bps = base.bandwidth_bps
    models = sorted({t.metadata.model_name for _, t in traces})
    label = "PS Async-SGD" if args.mode == "async" else "PS Sync-SGD"
    overlap = "per-layer overlap" if args.overlap == "layerwise" else "strict phases"
    setup = (
        f"{', '.join(models)} at batch sizes "
        f"{', '.join(str(t.metadata.batch_size) for _, t in traces)}; {label}, {overlap}; one "
        f"PS, link {link}, processor sharing; {length_setup(args)}"
    )
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    curves = []
    for name, trace in traces:  # a trace's points at once (--jobs), then the next trace's
        configs = [replace(base, workers=w) for w in args.workers]
        points = simulate_points(trace, configs, args, progress)
        curves.append(BatchCurve(trace, name, tuple(points), bandwidth_bps))
    return curves, setup, f"{', '.join(models)}, {label}, one PS, {link} (predicted)"


def summary_table(curves: Sequence[BatchCurve]) -> Table:
    title = f"per batch size (saturation: the fewest W within {SATURATION_SHARE:.0%} of the best)"
    table = Table(title, SUMMARY_COLUMNS)
    for curve in curves:
        best = max(curve.examples_per_s)
        table.add(
            trace=curve.name,
            batch=curve.batch,
            compute_ms=1e3 * compute_s(curve.trace),
            transfer_ms=1e3 * curve.transfer_s,
            link_bound_examples_per_s=curve.link_bound,
            best_examples_per_s=best,
            best_share_percent=100.0 * best / curve.link_bound,
            saturation_workers=saturation_point(curve.workers, curve.examples_per_s),
        )
    return table


def finding(curves: Sequence[BatchCurve]) -> str:
    small, large = min(curves, key=lambda c: c.batch), max(curves, key=lambda c: c.batch)
    best_small, best_large = max(small.examples_per_s), max(large.examples_per_s)
    steps = [max(p.steps_per_s.value for p in c.points) for c in curves]
    return (
        f"finding: batch {large.batch} reaches {best_large:.0f} examples/s "
        f"({best_large / large.link_bound:.0%} of its link ceiling), "
        f"{best_large / best_small:.1f}x "
        f"batch {small.batch}'s {best_small:.0f} ({best_small / small.link_bound:.0%}).\n"
        f"  Every step moves the same bytes, so the link caps steps/s alike (best "
        f"{min(steps):.0f}..{max(steps):.0f} steps/s, ceiling {1 / small.transfer_s:.0f});\n"
        "  a larger batch packs more examples into each step, and its longer computation hides "
        "the transfers better,\n  so it gets closer to the ceiling."
    )


def plot(curves: Sequence[BatchCurve], out: ScenarioOutput, title: str) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, (left, right) = new_figure(1, 2, size=(11.0, 5.2))
    for i, curve in enumerate(curves):
        color = f"C{i}"
        est = [p.examples_per_s for p in curve.points]
        left.plot(curve.workers, curve.examples_per_s, "-o", color=color, ms=4, label=curve.label)
        if all(e.ci_low is not None and e.ci_high is not None for e in est):
            low = [e.ci_low for e in est]
            high = [e.ci_high for e in est]
            left.fill_between(curve.workers, low, high, color=color, alpha=0.15)
        left.axhline(curve.link_bound, color=color, ls=":", lw=1)
        steps = [p.steps_per_s.value for p in curve.points]
        right.plot(curve.workers, steps, "-o", color=color, ms=4, label=curve.label)
    left.plot([], [], ls=":", color="0.4", label="link ceiling of each (dotted)")
    if curves:
        right.axhline(1.0 / curves[0].transfer_s, color="0.4", ls=":", lw=1)
        right.plot([], [], ls=":", color="0.4", label="link ceiling (same for all)")
    left.set_title("throughput", fontsize=10)
    left.set_ylabel("training throughput (examples/s)")
    left.set_yscale("log")
    left.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    left.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    left.yaxis.set_minor_formatter(NullFormatter())
    right.set_title("steps per second", fontsize=10)
    right.set_ylabel("steps per second, all workers (steps/s)")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xlabel("workers W")
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3)
    fig.suptitle(f"Batch size and scaling: {title}", fontsize=11)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def trace_list(text: str) -> tuple[str, ...]:
    """``a,b,c`` as trace names or files; ConfigError when empty."""
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names:
        raise ConfigError(f"--traces: {text!r} names no trace; give names or files, e.g. a,b")
    return names


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = scenario_parser(
        NAME,
        __doc__,
        trace=",".join(TRACES),
        workers=WORKERS,
        seed=SEED,
        bandwidth=BANDWIDTH,
        precision=True,
    )
    # --trace (the standard option) takes a comma-separated list here; --traces says so.
    parser.add_argument(
        "--traces",
        dest="trace",
        help="traces (files or samples), comma-separated; same as --trace "
        f"(default {','.join(TRACES)})",
    )
    parser.add_argument("--mode", choices=MODES, default="async", help="default async")
    parser.add_argument(
        "--overlap",
        choices=OVERLAPS,
        default="layerwise",
        help="per-layer overlap (layerwise, default) or strict phases (none)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, SUMMARY_CSV_FILE, FIGURE_FILE], force=args.force)
        curves, setup, title = run(args)
        summary = summary_table(curves)
        print(setup)
        for curve in curves:
            print("\n" + curve.table().text())
        print("\n" + summary.text())
        print("\n" + finding(curves))
        notes = grouped_precision_notes((c.points, c.label) for c in curves)
        if notes:
            print("\n" + notes)
        out.write_csv(CSV_FILE, [c.table() for c in curves])
        out.write_csv(SUMMARY_CSV_FILE, summary)
        plot(curves, out, title)
        print("\n" + out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
