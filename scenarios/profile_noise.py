"""How far off would a perfect model be on the validation runs, counting the profile's noise?

Question
    A prediction is made from a few one-worker runs and compared with the mean of a few runs
    with W workers; both are samples on a VM whose speed moves from run to run. Counting both,
    how far off would a model be that knew every configuration's true throughput, and how many
    of the simulator's errors are beyond that?

Setup
    - the runs: ``sgdsim validate``'s saved runs, by default the shipped ``campaign-2`` (three
      profile runs of each kind per file; files with one, as the first campaign's, are left
      out and named), or any folders or files given with ``--from-runs``;
    - every point is predicted from the pooled profile (as ``sgdsim validate`` predicts it) and
      again from each single profile run (``profilers.distributed.profile_noise``): the
      spread of the single runs' predictions over sqrt(runs) is the prediction's standard error
      from the profile's noise; the measured mean's is its runs' spread over sqrt(runs);
    - the noise floor (``profilers.distributed.noise_floor``): the mean and the largest (median
      and 90% quantile) absolute error a perfect prediction would show, from the runs' noise
      alone and from both.

Output
    By link rate: the simulator's mean and maximum absolute error, the two standard errors, the
    two noise floors and how many errors are beyond 2 standard errors of each; in ``--out``
    (default ``results/profile_noise/``): ``profile_noise.csv`` (every point, with the single
    runs' predictions), ``profile_noise-summary.csv`` and ``profile_noise.png`` (each point's
    |error| against two standard errors of the runs' and the profile's noise together: the
    points above the diagonal are beyond what the noise explains).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence

from profilers.distributed.campaign import architecture_label
from profilers.distributed.noise_floor import NOISE_Z, beyond_noise, noise_floor
from profilers.distributed.profile_noise import ProfileNoise, assess_profile_noise
from simcore.plots import new_figure, save_figure
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import (
    add_from_runs_option,
    add_output_options,
    bare_scenario_parser,
)
from simcore.report.table import Column, Table
from simcore.units import format_bandwidth

NAME = "profile_noise"
CSV_FILE = f"{NAME}.csv"
SUMMARY_FILE = f"{NAME}-summary.csv"
FIGURE_FILE = f"{NAME}.png"
SHIPPED = "campaign-2"
PCT = "{:.1f}"


def point_table(results: Sequence[tuple[str, ProfileNoise]]) -> Table:
    """Every point: the prediction, its error and the two standard errors (percent)."""
    table = Table(
        "every point (se: standard error of the measured mean and of the prediction)",
        [
            Column("file", "file"),
            Column("link_mbps", "link Mbit/s"),
            Column("architecture", "architecture"),
            Column("workers", "W"),
            Column("measured_examples_per_s", "measured"),
            Column("simulated_examples_per_s", "simulated"),
            Column("error_pct", "err%", "{:+.1f}"),
            Column("runs_se_pct", "runs se%", PCT),
            Column("profile_se_pct", "profile se%", PCT),
            Column("single_profile_predictions", "each profile run's prediction"),
        ],
    )
    for name, noise in results:
        report = noise.report
        overlap = report.measurements.base.overlap.value if report.measurements else "layerwise"
        profile_se = noise.profile_standard_errors()
        for p, single, se in zip(report.points, noise.single, profile_se, strict=True):
            table.add(
                file=name,
                link_mbps=_mbps(report.link_rate_bps),
                architecture=architecture_label(p.architecture, overlap),
                workers=p.workers,
                measured_examples_per_s=statistics.fmean(p.measured),
                simulated_examples_per_s=p.simulated,
                error_pct=100 * p.error(p.simulated),
                runs_se_pct=100 * p.standard_error,
                profile_se_pct=100 * se,
                single_profile_predictions=" ".join(f"{x:.4g}" for x in single),
            )
    return table


def summary_table(results: Sequence[tuple[str, ProfileNoise]]) -> Table:
    """By link rate: the simulator's error against the noise floors (percent)."""
    table = Table(
        "the simulator's error against what the noise alone would cost a perfect prediction",
        [
            Column("link_mbps", "link Mbit/s"),
            Column("points", "points"),
            Column("mean_abs_error_pct", "mean |err|%", PCT),
            Column("max_abs_error_pct", "max |err|%", PCT),
            Column("runs_se_pct", "runs se%", PCT),
            Column("profile_se_pct", "profile se%", PCT),
            Column("runs_floor_mean_pct", "runs: noise mean%", PCT),
            Column("runs_floor_max_pct", "max%", PCT),
            Column("both_floor_mean_pct", "both: noise mean%", PCT),
            Column("both_floor_max_pct", "max%", PCT),
            Column("both_floor_max_p90_pct", "max% (90%)", PCT),
            Column("beyond_runs", f"beyond {NOISE_Z:g} se: runs"),
            Column("beyond_both", "both"),
        ],
    )
    for rate, rows in _by_rate(results).items():
        errors = [e for e, _, _ in rows]
        runs_se = [r for _, r, _ in rows]
        both_se = [math.hypot(r, p) for _, r, p in rows]
        runs, both = noise_floor(runs_se), noise_floor(both_se)
        table.add(
            link_mbps=_mbps(rate),
            points=len(rows),
            mean_abs_error_pct=100 * statistics.fmean(abs(e) for e in errors),
            max_abs_error_pct=100 * max(abs(e) for e in errors),
            runs_se_pct=100 * _mean_known(runs_se),
            profile_se_pct=100 * _mean_known([p for _, _, p in rows]),
            runs_floor_mean_pct=None if runs is None else 100 * runs.mean_abs_error,
            runs_floor_max_pct=None if runs is None else 100 * runs.max_abs_error,
            both_floor_mean_pct=None if both is None else 100 * both.mean_abs_error,
            both_floor_max_pct=None if both is None else 100 * both.max_abs_error,
            both_floor_max_p90_pct=None if both is None else 100 * both.max_abs_error_p90,
            beyond_runs=sum(beyond_noise(e, s) for e, s in zip(errors, runs_se, strict=True)),
            beyond_both=sum(beyond_noise(e, s) for e, s in zip(errors, both_se, strict=True)),
        )
    return table


def _by_rate(
    results: Sequence[tuple[str, ProfileNoise]],
) -> dict[float | None, list[tuple[float, float, float]]]:
    """(error, runs' se, profile's se) of every point, by the link rate of its file."""
    by_rate: dict[float | None, list[tuple[float, float, float]]] = {}
    for _, noise in results:
        points = noise.report.points
        for p, se in zip(points, noise.profile_standard_errors(), strict=True):
            row = (p.error(p.simulated), p.standard_error, se)
            by_rate.setdefault(noise.report.link_rate_bps, []).append(row)
    return dict(sorted(by_rate.items(), key=lambda item: item[0] or 0.0))


def _mbps(rate: float | None) -> float | None:
    """A link rate in Mbit/s; None on loopback."""
    return None if rate is None else rate / 1e6


def _mean_known(values: Sequence[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return statistics.fmean(known) if known else math.nan


def plot(results: Sequence[tuple[str, ProfileNoise]], out: ScenarioOutput) -> None:
    """Each point's |error| against NOISE_Z standard errors of both noises, one panel per link
    rate, one marker per architecture; above the diagonal: beyond the noise."""
    by_rate: dict[float | None, list[tuple[str, float, float]]] = {}
    for _, noise in results:
        report = noise.report
        overlap = report.measurements.base.overlap.value if report.measurements else "layerwise"
        for p, se in zip(report.points, noise.combined_standard_errors(), strict=True):
            if math.isnan(se):
                continue
            label = architecture_label(p.architecture, overlap)
            row = (label, 100 * NOISE_Z * se, 100 * abs(p.error(p.simulated)))
            by_rate.setdefault(report.link_rate_bps, []).append(row)
    rates = sorted(by_rate, key=lambda r: r or 0.0)
    labels = sorted({label for rows in by_rate.values() for label, _, _ in rows})
    top = 1.05 * max(max(x, y) for rows in by_rate.values() for _, x, y in rows)
    fig, axes = new_figure(1, len(rates), size=(4.2 * len(rates), 4.0))
    axes = list(axes) if len(rates) > 1 else [axes]
    for ax, rate in zip(axes, rates, strict=True):
        ax.plot([0, top], [0, top], color="k", lw=0.8)
        for i, label in enumerate(labels):
            rows = [(x, y) for lab, x, y in by_rate[rate] if lab == label]
            if rows:
                ax.scatter(*zip(*rows, strict=True), s=14, color=f"C{i}", label=label)
        where = "loopback" if rate is None else format_bandwidth(rate)
        ax.set_title(where, fontsize=10)
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_xlabel(f"{NOISE_Z:g} standard errors of both noises, %")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("simulator |error|, % of measured")
    axes[0].legend(fontsize=7, loc="best")  # where it hides the fewest points
    fig.suptitle(
        "Each point's error against the noise of its runs and its profile "
        "(above the diagonal: beyond it)",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def finding(summary: Table) -> str:
    """The largest link rate's floors against the simulator's error."""
    row = summary.rows[-1]
    rate = row["link_mbps"]
    where = "loopback" if rate is None else format_bandwidth(1e6 * float(rate))
    return finding_line(
        f"at {where} the runs' and the profile's noise would put a perfect prediction "
        f"{row['both_floor_mean_pct']:.1f}% off on average and {row['both_floor_max_pct']:.1f}% "
        f"at most (the runs' alone: {row['runs_floor_mean_pct']:.1f}% and "
        f"{row['runs_floor_max_pct']:.1f}%), where the simulator is off by "
        f"{row['mean_abs_error_pct']:.1f}% and {row['max_abs_error_pct']:.1f}%."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    add_from_runs_option(parser, SHIPPED)
    add_output_options(parser, NAME)
    args = parser.parse_args(argv)
    if args.from_runs is None:
        args.from_runs = [SHIPPED]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, SUMMARY_FILE, FIGURE_FILE], force=args.force)
        say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
        results, left_out = assess_profile_noise(args.from_runs, progress=say)
        if left_out:
            print(f"left out (one profile run of each kind): {', '.join(left_out)}\n")
        points, summary = point_table(results), summary_table(results)
        print(points.text() + "\n\n" + summary.text())
        out.write_csv(CSV_FILE, points)
        out.write_csv(SUMMARY_FILE, summary)
        plot(results, out)
        print("\n" + finding(summary))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
