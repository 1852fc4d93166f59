"""How much does overlapping communication with computation buy, and when does it stop mattering?

Question
    Frameworks send and compute layer by layer: a layer's forward starts as soon as its
    parameters have arrived, a layer's gradients leave as soon as its backward is done (TPDS'22
    Fig. 4a). Coarse models assume strict phases instead: every pull, then the whole forward and
    backward pass, then every push. For a model whose communication and computation take about
    as long, how much faster is a step with per-layer overlap, and how does the gain change as
    more workers share the parameter server's link, with Async- and Sync-SGD?

Setup
    - trace: the shipped ``cnn-b32`` sample (a small CNN, batch 32: about 25 ms of computation
      and 2.37 MiB of parameters, 20 ms each way at 1 Gbit/s);
    - one parameter server behind a 1 Gbit/s link shared by processor sharing;
    - every W in ``--workers`` is simulated twice, with ``overlap="layerwise"`` (the trace's
      per-layer DAG) and ``overlap="none"`` (strict phases, a compile-time transform of the same
      DAG; see ``simcore/sim/SEMANTICS.md``), for PS Async-SGD and PS Sync-SGD; each point runs
      until the 95% confidence interval of its examples/s is within ``--precision`` (1%; at most
      ``--max-steps`` 1000 steps per worker; ``--steps`` fixes the length), a tenth of each run
      left out as warm-up; all points run at once on the cores ``--jobs`` allows;
    - one worker's timeline (two steps after the first) with and without overlap: a fixed
      number of steps (``TIMELINE_STEPS``), since it pictures given steps rather than estimates.

Output
    A table per mode (examples/s and each worker's mean step time with and without overlap, and
    the gain), a finding, and in ``--out`` (default ``results/overlap/``): ``overlap.csv`` (the
    tables), ``overlap.png`` (throughput and step time against W), ``overlap_timeline.csv`` and
    ``overlap_timeline.png`` (the one-worker Gantt charts).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcore.cli.progress import Progress
from simcore.plots import new_figure, save_figure
from simcore.plots.timeline import draw_timeline
from simcore.report import (
    Column,
    ScenarioOutput,
    Table,
    base_config,
    finding_line,
    run_scenario,
    scenario_parser,
)
from simcore.report.scenario import grouped_precision_notes, length_setup, simulate_points
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.io import load_trace
from simcore.trace.model import OpKind, Trace

NAME = "overlap"
TRACE = "cnn-b32"
BANDWIDTH = "1Gbps"
WORKERS = (1, 2, 3, 4, 6, 8, 12, 16)
SEED = 1
TIMELINE_STEPS = (1, 2)  # the steps drawn in the one-worker timeline (step 0 starts cold)
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"
TIMELINE_CSV_FILE = f"{NAME}_timeline.csv"
TIMELINE_FILE = f"{NAME}_timeline.png"

MODES = (("PS Async-SGD", "async"), ("PS Sync-SGD", "sync"))
OVERLAPS = (("with overlap", "layerwise"), ("strict phases", "none"))

COLUMNS = (
    Column("workers", "W"),
    Column("overlap_examples_per_s", "overlap ex/s"),
    Column("overlap_ci_low", "95% CI low"),
    Column("overlap_ci_high", "high"),
    Column("strict_examples_per_s", "strict ex/s"),
    Column("strict_ci_low", "95% CI low"),
    Column("strict_ci_high", "high"),
    Column("overlap_step_ms", "overlap step ms"),
    Column("strict_step_ms", "strict step ms"),
    Column("gain_percent", "gain %", "{:+.1f}"),
    Column("overlap_steps", "overlap steps", "{}"),
    Column("strict_steps", "strict steps", "{}"),
)
TIMELINE_COLUMNS = (
    Column("overlap", "overlap"),
    Column("step", "step"),
    Column("resource", "resource"),
    Column("op", "op"),
    Column("kind", "kind"),
    Column("start_ms", "start ms"),
    Column("end_ms", "end ms"),
)
ROWS = ("downlink", "worker", "uplink", "ps")  # the resources of the timeline CSV


@dataclass(frozen=True)
class ModeCurves:
    """One mode's results at every W, with overlap and with strict phases."""

    label: str
    overlap: tuple[SimulationResult, ...]
    strict: tuple[SimulationResult, ...]

    @property
    def workers(self) -> list[int]:
        return [p.config.workers for p in self.overlap]

    def table(self) -> Table:
        table = Table(self.label, COLUMNS)
        for lay, strict in zip(self.overlap, self.strict, strict=True):
            a, b = lay.examples_per_s, strict.examples_per_s
            table.add(
                workers=lay.config.workers,
                overlap_examples_per_s=a.value,
                overlap_ci_low=a.ci_low,
                overlap_ci_high=a.ci_high,
                strict_examples_per_s=b.value,
                strict_ci_low=b.ci_low,
                strict_ci_high=b.ci_high,
                overlap_step_ms=1e3 * step_s(lay),
                strict_step_ms=1e3 * step_s(strict),
                gain_percent=100.0 * (a.value / b.value - 1.0),
                overlap_steps=lay.config.steps,
                strict_steps=strict.config.steps,
            )
        return table


def step_s(result: SimulationResult) -> float:
    """Each worker's mean step time (s): W over the job's steps per second."""
    return result.config.workers / result.steps_per_s.value


def run(
    args: argparse.Namespace,
) -> tuple[list[ModeCurves], list[SimulationResult], str, str]:
    """Simulate both modes with and without overlap at every W, and the one-worker timelines.

    Returns the curves, the one-worker runs (with their timelines), a line describing the setup
    and the figures' title.
    """
    trace = load_trace(args.trace)
    base, link = base_config(args, sharing="ps")
    model = f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker"
    setup = (
        f"{model}, {trace.param_nbytes / 2**20:.2f} MiB of parameters, "
        f"{compute_ms(trace):.1f} ms of computation per step; one PS, link {link}, processor "
        f"sharing; {length_setup(args)}"
    )
    configs = [
        replace(base, workers=w, mode=mode, overlap=overlap)
        for _, mode in MODES
        for _, overlap in OVERLAPS
        for w in args.workers
    ]
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    results = iter(simulate_points(trace, configs, args, progress))  # all at once: --jobs
    curves = []
    for label, _ in MODES:
        by_overlap = {o: tuple(next(results) for _ in args.workers) for _, o in OVERLAPS}
        curves.append(ModeCurves(label, by_overlap["layerwise"], by_overlap["none"]))
    return curves, one_worker_runs(trace, base), setup, f"{model}, one PS, {link} (predicted)"


def compute_ms(trace: Trace) -> float:
    """Mean forward + backward time of the profiled steps (ms)."""
    kinds = (OpKind.FORWARD, OpKind.BACKWARD)
    per_step = [sum(trace.phase_time_s(i, k) for k in kinds) for i in range(trace.n_steps)]
    return 1e3 * sum(per_step) / trace.n_steps


def one_worker_runs(trace: Trace, base: SimulationConfig) -> list[SimulationResult]:
    """One worker with a timeline, with overlap and with strict phases (``OVERLAPS`` order).
    Both runs sample the same profiled steps (same seed, same draws)."""
    # A fixed length, not the stopping rule: these runs picture given steps, they estimate nothing.
    config = replace(base, workers=1, steps=max(TIMELINE_STEPS) + 1, warmup_steps=0, batches=2)
    return [simulate(trace, replace(config, overlap=o, timeline=True)) for _, o in OVERLAPS]


def timeline_table(runs: Sequence[SimulationResult]) -> Table:
    """The ops of ``TIMELINE_STEPS`` in each run, times from the first drawn step's start (ms)."""
    table = Table("one worker's timeline", TIMELINE_COLUMNS)
    for (label, _), result in zip(OVERLAPS, runs, strict=True):
        assert result.timeline is not None
        t0 = min(s.start_s for s in result.timeline.steps if s.step == TIMELINE_STEPS[0])
        for r in result.timeline:
            if r.step in TIMELINE_STEPS and r.resource in ROWS:
                table.add(
                    overlap=label,
                    step=r.step,
                    resource=r.resource,
                    op=r.op,
                    kind=r.kind,
                    start_ms=1e3 * (r.start_s - t0),
                    end_ms=1e3 * (r.end_s - t0),
                )
    return table


def report(curves: Sequence[ModeCurves]) -> str:
    lines = []
    for curve in curves:
        lines += ["", curve.table().text()]
    lines += ["", finding(curves)]
    return "\n".join(lines)


def finding(curves: Sequence[ModeCurves]) -> str:
    """The gain and the step time saved at the smallest and the largest W, per mode."""
    parts = []
    for curve in curves:
        gains = curve.table().column("gain_percent")
        parts.append(
            f"{curve.label} {gains[0]:+.0f}% at W = {curve.workers[0]} and {gains[-1]:+.0f}% at "
            f"W = {curve.workers[-1]}"
        )
    lines = [
        finding_line(
            "overlapping each layer's transfers with computation gains " + "; ".join(parts) + "."
        )
    ]
    for curve in curves:
        table = curve.table()
        gains = table.column("gain_percent")
        saved = [
            1e3 * (step_s(b) - step_s(a)) for a, b in zip(curve.overlap, curve.strict, strict=True)
        ]
        lines.append(
            f"  {curve.label}: overlap gains {gains[0]:+.0f}% (saves {saved[0]:.0f} ms a step) "
            f"at W = {curve.workers[0]}, {gains[-1]:+.0f}% ({saved[-1]:.0f} ms) at "
            f"W = {curve.workers[-1]}"
        )
    lines.append(
        "  Overlap hides computation under the worker's own transfers. As W grows the shared "
        "link becomes the bottleneck:\n  the time a barrier-bound (Sync) step saves stays, but "
        "the transfers grow with W; without a barrier (Async)\n  other workers' transfers fill "
        "the link while one computes, so strict phases cost little once it saturates."
    )
    return "\n".join(lines)


def plot_curves(curves: Sequence[ModeCurves], out: ScenarioOutput, title: str) -> None:
    fig, (left, right) = new_figure(1, 2, size=(11.0, 4.4))
    for curve, color in zip(curves, ("C0", "C1"), strict=False):
        table = curve.table()
        w = table.column("workers")
        for (label, _), key, style in zip(
            OVERLAPS, ("overlap", "strict"), ("-o", "--s"), strict=True
        ):
            name = f"{curve.label}, {label}"
            ys = table.column(f"{key}_examples_per_s")
            left.plot(w, ys, style, color=color, label=name, ms=4)
            low, high = table.column(f"{key}_ci_low"), table.column(f"{key}_ci_high")
            if None not in low and None not in high:
                left.fill_between(w, low, high, color=color, alpha=0.15)
            right.plot(w, table.column(f"{key}_step_ms"), style, color=color, label=name, ms=4)
    left.set_title("throughput", fontsize=10)
    left.set_ylabel("training throughput (examples/s)")
    right.set_title("each worker's step time", fontsize=10)
    right.set_ylabel("mean step time per worker (ms)")
    for ax in (left, right):
        ax.set_xlabel("workers W")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right" if ax is left else "upper left")
    fig.suptitle(f"Overlapping communication and computation: {title}", fontsize=11)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def plot_timeline(runs: Sequence[SimulationResult], out: ScenarioOutput, title: str) -> None:
    """The one-worker Gantt charts, stacked on one time scale (``simcore.plots.timeline``)."""
    fig, axes = new_figure(len(OVERLAPS), 1, size=(10.0, 4.6))
    windows = []
    for result in runs:
        assert result.timeline is not None
        steps = [s for s in result.timeline.steps if s.step in TIMELINE_STEPS]
        windows.append(max(s.end_s for s in steps) - min(s.start_s for s in steps))
    for i, (ax, result, (label, _)) in enumerate(zip(axes, runs, OVERLAPS, strict=True)):
        assert result.timeline is not None
        draw_timeline(
            ax,
            result.timeline,
            steps=(TIMELINE_STEPS[0], TIMELINE_STEPS[-1]),
            xlim_s=max(windows),
            unit="ms",
            legend=i == 0,
            step_labels=False,
        )
        ax.set_title(f"one worker, {label}", fontsize=10, loc="left")
        ax.set_ylabel("resource")
        ax.set_xlabel("")
    axes[-1].set_xlabel(f"time from the start of step {TIMELINE_STEPS[0]} (ms)")
    fig.suptitle(f"Steps {TIMELINE_STEPS[0]}-{TIMELINE_STEPS[-1]}: {title}", fontsize=11)
    fig.tight_layout()
    save_figure(fig, out.path(TIMELINE_FILE), overwrite=out.force)


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
        files = [CSV_FILE, FIGURE_FILE, TIMELINE_CSV_FILE, TIMELINE_FILE]
        out = ScenarioOutput(args.out, files, force=args.force)
        curves, runs, setup, title = run(args)
        timeline = timeline_table(runs)
        print(setup)
        print(report(curves))
        notes = grouped_precision_notes(
            (points, f"{c.label}, {kind}")
            for c in curves
            for (kind, _), points in zip(OVERLAPS, (c.overlap, c.strict), strict=True)
        )
        if notes:
            print("\n" + notes)
        out.write_csv(CSV_FILE, [c.table() for c in curves])
        out.write_csv(TIMELINE_CSV_FILE, timeline)
        plot_curves(curves, out, title)
        plot_timeline(runs, out, title)
        print("\n" + out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
