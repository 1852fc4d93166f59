"""How close are sgdsim's predictions to real distributed training on this machine?

Question
    For a model and batch size, profile one worker with the real distributed runner, predict the
    throughput of W = 1..Wmax workers with the simulator and the coarse model, then run the real
    job for each W: how large is each prediction's error, and how much do co-located workers
    slow each other's computation?

Setup
    - the runner (``profilers.distributed``): torch.distributed with gloo, one parameter server
      process (PS Async-SGD, PS Sync-SGD) or none (ring AllReduce), W worker processes, a
      learnable synthetic task; per-layer pulls and pushes overlapped with computation
      (``--overlap layerwise``) or strict phases. With two or more cores the server is pinned
      to the first core and the workers share the others;
    - the network: loopback, or with ``--testbed RATE`` (root) the emulated cluster, one network
      namespace per rank on a bridge, the server's link (ring: every worker's) shaped by
      ``tc`` to RATE. The link is measured first: one flow's goodput (the bandwidth to predict
      with, unless ``--bandwidth`` is given), how concurrent flows share it (FCFS index), and
      for ring AllReduce the goodput of a ring of two nodes all-reducing the model's layers
      alone (what it took beyond its bytes is the ring's cost per message), for a parameter
      server what its link carries with pulls and pushes at once (the duplex limit);
    - the solo profile: one-worker PS Async-SGD runs (``--profile-runs``, 3), their steps pooled
      into a trace with measured compute and transfers (on loopback the bandwidth is fitted to
      their transfers);
    - predictions: ``simcore.sim.simulate`` with the workers sharing their cores but not their
      links, and the measured unequal sharing of the server's link (``flow_weight_cv``); the
      same as if every worker had a host of its own and the link shared equally ("ideal"); the
      coarse model (``simcore.analytic``);
    - every W is run ``--repetitions`` times; throughput counts each worker's steps after
      ``--warmup``.

Output
    A table per architecture (measured examples/s and spread, each prediction and its error, the
    compute slowdown against the solo profile), the mean and maximum absolute errors, and in
    ``--out`` (default ``results/validate/``):

    - ``validate.csv`` and ``validate.png``: measured against predicted, per architecture;
    - ``validate-timeline-ARCH.png``: per architecture, a real run with the most workers above
      the simulated run (two steps of each, one time scale): where the model departs from the
      real run, the bars stop lining up;
    - ``validate-runs.json.gz``: every run's timestamps and the link measurement, written
      after every point (if a run fails, what was measured before it is there).
      ``--from-runs`` predicts them again in seconds, without training (after a change to the
      model, or with another ``--bandwidth``);
    - ``validate-solo-trace.json``, the solo profile, ``validate-alone-trace.json``, its
      computation measured without transfers, and ``validate-network.json``, the link as
      measured (a network profile), to predict other settings from them later: the output
      ends with the ``sgdsim simulate`` command lines that give this validation's predictions
      from these files (when the link is the measured one and the ring the default).

On a machine shared with other jobs the measured numbers say little about accuracy: run it on an
idle machine (and with ``--repetitions 3`` or more) before drawing conclusions.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from profilers.distributed.export import run_timeline_spans
from profilers.distributed.validation import (
    PREDICTORS,
    RING_CPU_PLACEMENT,
    ValidationReport,
    report_tables,
    report_text,
    simulate_argv,
)
from simcore.cli.validate_cmd import (
    ARCH_CHOICES,
    add_run_options,
    validate_keeping_runs,
    validate_with,
)
from simcore.network_io import save_network_profile
from simcore.plots import new_figure, save_figure
from simcore.plots.timeline import plot_measured_vs_simulated
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import add_output_options, bare_scenario_parser
from simcore.trace.io import save_trace
from simcore.units import format_bandwidth

NAME = "validate"
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"
TRACE_FILE = f"{NAME}-solo-trace.json"  # to predict other settings later without new runs
ALONE_TRACE_FILE = f"{NAME}-alone-trace.json"  # the computation without transfers, likewise
NETWORK_FILE = f"{NAME}-network.json"  # the link as measured, for `sgdsim simulate --network`
LINK_OPTIONS = (
    "network",
    "bandwidth",
    "latency",
    "flow_weight_cv",
    "comm_cpu",
    "duplex",
    "duplex_interference",
)
RUNS_FILE = f"{NAME}-runs.json.gz"  # every run's timestamps: --from-runs assesses them again
TIMELINE_FILES = {arch: f"{NAME}-timeline-{arch}.png" for arch in ARCH_CHOICES}
SHOWN_STEPS = 2  # steps of each timeline figure


def plot(report: ValidationReport, out: ScenarioOutput) -> None:
    """Measured (mean, with the repetitions' range) and predicted examples/s against W."""
    tables = report_tables(report)
    fig, axes = new_figure(1, len(tables), size=(4.2 * len(tables), 4.0))
    axes = list(axes) if len(tables) > 1 else [axes]
    for ax, table in zip(axes, tables, strict=True):
        points = [p for p in report.points if p.name == table.title]
        w = [p.workers for p in points]
        low = [p.measured_mean - min(p.measured) for p in points]
        high = [max(p.measured) - p.measured_mean for p in points]
        ax.errorbar(
            w,
            table.column("measured"),
            yerr=[low, high],
            fmt="ko",
            ms=5,
            capsize=3,
            label="measured",
        )
        for (key, label), style in zip(PREDICTORS, ("-", "--", ":"), strict=True):
            ax.plot(w, table.column(key), style, label=label)
        ax.set_title(table.title, fontsize=10)
        ax.set_xlabel("workers W")
        ax.set_xticks(w)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("examples/s (all workers)")
    axes[0].legend(fontsize=8, loc="lower right")
    where = "loopback" if report.link_rate_bps is None else "emulated cluster"
    fig.suptitle(
        f"Measured vs predicted: {report.model_name}, batch {report.batch_size}, {where}, "
        f"link {format_bandwidth(report.bandwidth_bps)}",
        fontsize=11,
    )
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def plot_timelines(report: ValidationReport, out: ScenarioOutput) -> None:
    """Per architecture, its largest W: the first repetition's timeline above the simulated one
    (the simulator's first replication), two steps from the middle of each run; none for an
    architecture whose runs there kept no timeline (a compacted file's, with fewer workers
    selected)."""
    measured, predictor = report.measurements, report.predictor
    if measured is None or predictor is None:
        return
    largest = measured.largest_points()
    predicted = {(p.name, p.workers): p.simulated for p in report.points}
    for arch, point in largest.items():  # DDP: the first bucket setting's (one file each)
        run = next((r for r in point.runs if r.spans), None)
        if run is None:  # a compacted file keeps the spans of the most workers' first run only
            continue
        first = run.config.warmup + (run.config.steps - run.config.warmup - SHOWN_STEPS) // 2
        result = predictor.for_point(arch, point.runs).simulation(
            arch, point.workers, timeline=True
        )
        sim_config = result.config
        sim_first = sim_config.warmup_steps + (sim_config.steps - sim_config.warmup_steps) // 2
        plot_measured_vs_simulated(
            run_timeline_spans(run),
            result,
            out.path(TIMELINE_FILES[arch.value]),
            measured_steps=(first, first + SHOWN_STEPS - 1),
            simulated_steps=(sim_first, sim_first + SHOWN_STEPS - 1),
            trace=predictor.replayed_trace(arch),
            title=f"{report.model_name}, {point.name}, W = {point.workers}: a measured run "
            f"({run.examples_per_s:.1f} examples/s) and the simulator "
            f"({predicted[point.name, point.workers]:.1f}, mean of its replications)",
            overwrite=out.force,
        )


def simulate_commands(
    report: ValidationReport, args: argparse.Namespace, out: ScenarioOutput
) -> str:
    """The ``sgdsim simulate`` command lines that predict each architecture's largest W as this
    validation did, from the files it wrote; "" when options replaced the measured link or the
    ring's placement (the files then do not hold what the predictions used)."""
    given = [name for name in LINK_OPTIONS if getattr(args, name, None) is not None]
    placement = getattr(args, "ring_cpu_work", None) or RING_CPU_PLACEMENT
    measured = report.measurements
    if given or placement != RING_CPU_PLACEMENT or report.network is None or measured is None:
        return ""
    files = {
        "trace_file": str(out.folder / TRACE_FILE),
        "alone_file": str(out.folder / ALONE_TRACE_FILE),
        "network_file": str(out.folder / NETWORK_FILE),
    }
    lines = ["the same predictions from the files written, with `sgdsim simulate`:"]
    for point in measured.largest_named_points().values():
        argv = simulate_argv(report, point.architecture, point.workers, runs=point.runs, **files)
        lines.append("  " + " ".join(argv))
    return "\n".join(lines)


def finding(report: ValidationReport) -> str:
    """How far each predictor is from the real runs, in one sentence."""
    errors = []
    for key, _ in PREDICTORS:
        values = report.abs_errors(key)
        errors.append(
            f"{SHORT_LABELS.get(key, key)} {100 * sum(values) / len(values):.1f}% on average "
            f"({100 * max(values):.1f}% at most)"
        )
    return finding_line(
        f"against the real runs of {report.model_name} on this machine the predictions are off "
        "by: " + ", ".join(errors) + "."
    )


SHORT_LABELS = {
    "simulated": "the simulator",
    "simulated_ideal": "the simulator on ideal hosts",
    "coarse": "the coarse model",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    add_run_options(parser)
    add_output_options(parser, NAME)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        files = [CSV_FILE, FIGURE_FILE, TRACE_FILE, ALONE_TRACE_FILE, NETWORK_FILE, RUNS_FILE]
        out = ScenarioOutput(args.out, [*files, *TIMELINE_FILES.values()], force=args.force)
        if args.from_runs:
            report = validate_with(args)
        else:
            # Saved after every point, so that a run failing late loses nothing before it.
            report = validate_keeping_runs(args, out.path(RUNS_FILE))
        print(report_text(report))
        out.write_csv(CSV_FILE, report_tables(report))
        save_trace(report.trace, out.path(TRACE_FILE), overwrite=out.force)
        if report.alone_trace is not None:
            save_trace(report.alone_trace, out.path(ALONE_TRACE_FILE), overwrite=out.force)
        if report.network is not None:
            save_network_profile(report.network, out.path(NETWORK_FILE), overwrite=out.force)
        plot(report, out)
        plot_timelines(report, out)
        commands = simulate_commands(report, args, out)
        if commands:
            print("\n" + commands)
        print("\n" + finding(report))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
