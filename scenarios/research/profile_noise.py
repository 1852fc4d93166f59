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
from typing import NamedTuple

from profilers.distributed.campaign import point_label
from profilers.distributed.noise_floor import NOISE_Z, beyond_noise, noise_floor
from profilers.distributed.profile_noise import ProfileNoise, assess_profile_noise
from profilers.distributed.validation import ValidationPoint
from simcore.plots import new_figure, save_figure
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import (
    add_from_runs_option,
    add_output_options,
    bare_scenario_parser,
    progress_printer,
)
from simcore.report.table import Column, Table
from simcore.units import format_bandwidth

NAME = "profile_noise"
CSV_FILE = f"{NAME}.csv"
SUMMARY_FILE = f"{NAME}-summary.csv"
FIGURE_FILE = f"{NAME}.png"
SHIPPED = "campaign-2"
PCT = "{:.1f}"


class PointNoise(NamedTuple):
    """One point of one file: its error and the standard errors of its two noises."""

    file: str
    point: ValidationPoint
    single: tuple[float, ...]  # its predictions from each single profile run

    rate: float | None  # the file's link rate; None: loopback
    label: str  # architecture and overlap (campaign.point_label)
    error: float  # the simulator's relative error
    runs_se: float  # the measured mean's relative standard error
    profile_se: float  # the prediction's, from the profile's noise
    both_se: float  # the two together


def points_of(results: Sequence[tuple[str, ProfileNoise]]) -> list[PointNoise]:
    """Every point of every file, in the files' order."""
    rows = []
    for name, noise in results:
        report = noise.report
        ses = zip(noise.profile_standard_errors(), noise.combined_standard_errors(), strict=True)
        for p, single, (profile_se, both_se) in zip(report.points, noise.single, ses, strict=True):
            point = PointNoise(
                name,
                p,
                single,
                report.link_rate_bps,
                point_label(report, p),
                p.error(p.simulated),
                p.standard_error,
                profile_se,
                both_se,
            )
            rows.append(point)
    return rows


def by_rate(points: Sequence[PointNoise]) -> dict[float | None, list[PointNoise]]:
    """The points grouped by link rate, slowest first."""
    grouped: dict[float | None, list[PointNoise]] = {}
    for point in points:
        grouped.setdefault(point.rate, []).append(point)
    return dict(sorted(grouped.items(), key=lambda item: item[0] or 0.0))


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
    for row in points_of(results):
        table.add(
            file=row.file,
            link_mbps=_mbps(row.rate),
            architecture=row.label,
            workers=row.point.workers,
            measured_examples_per_s=statistics.fmean(row.point.measured),
            simulated_examples_per_s=row.point.simulated,
            error_pct=100 * row.error,
            runs_se_pct=100 * row.runs_se,
            profile_se_pct=100 * row.profile_se,
            single_profile_predictions=" ".join(f"{x:.4g}" for x in row.single),
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
    for rate, points in by_rate(points_of(results)).items():
        errors = [abs(p.error) for p in points]
        runs = noise_floor([p.runs_se for p in points])
        both = noise_floor([p.both_se for p in points])
        table.add(
            link_mbps=_mbps(rate),
            points=len(points),
            mean_abs_error_pct=100 * statistics.fmean(errors),
            max_abs_error_pct=100 * max(errors),
            runs_se_pct=100 * _mean_known([p.runs_se for p in points]),
            profile_se_pct=100 * _mean_known([p.profile_se for p in points]),
            runs_floor_mean_pct=None if runs is None else 100 * runs.mean_abs_error,
            runs_floor_max_pct=None if runs is None else 100 * runs.max_abs_error,
            both_floor_mean_pct=None if both is None else 100 * both.mean_abs_error,
            both_floor_max_pct=None if both is None else 100 * both.max_abs_error,
            both_floor_max_p90_pct=None if both is None else 100 * both.max_abs_error_p90,
            beyond_runs=sum(beyond_noise(p.error, p.runs_se) for p in points),
            beyond_both=sum(beyond_noise(p.error, p.both_se) for p in points),
        )
    return table


def _mbps(rate: float | None) -> float | None:
    """A link rate in Mbit/s; None on loopback."""
    return None if rate is None else rate / 1e6


def _mean_known(values: Sequence[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return statistics.fmean(known) if known else math.nan


def plot(results: Sequence[tuple[str, ProfileNoise]], out: ScenarioOutput) -> None:
    """Each point's |error| against NOISE_Z standard errors of both noises, one panel per link
    rate, one marker per architecture; above the diagonal: beyond the noise."""
    known = [p for p in points_of(results) if not math.isnan(p.both_se)]
    grouped = by_rate(known)
    labels = sorted({p.label for p in known})
    top = 1.05 * 100 * max(max(NOISE_Z * p.both_se, abs(p.error)) for p in known)
    fig, axes = new_figure(1, len(grouped), size=(4.2 * len(grouped), 4.0))
    axes = list(axes) if len(grouped) > 1 else [axes]
    for ax, (rate, points) in zip(axes, grouped.items(), strict=True):
        ax.plot([0, top], [0, top], color="k", lw=0.8)
        for i, label in enumerate(labels):
            mine = [p for p in points if p.label == label]
            if mine:
                ax.scatter(
                    [100 * NOISE_Z * p.both_se for p in mine],
                    [100 * abs(p.error) for p in mine],
                    s=14,
                    color=f"C{i}",
                    label=label,
                )
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
        say = progress_printer(args)
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
