"""How much of a validation's error repeats when the same configuration is validated again?

Question
    A validation compares each prediction with real runs. When the same configuration (model,
    batch, link, architecture, W, hosting) is validated a second time, hours or days later, with
    a new one-worker profile and a new measurement of the link, the real runs come out
    elsewhere and so does the simulator's error. The part of the error that repeats is the
    model's own; the part that moves belongs to the experiment (the runs' spread, the profile's,
    the machine's speed between them), and no model, however right, can predict it. How large
    is it, and what does it alone cost a prediction over a set of points?

Setup
    - the runs: ``sgdsim validate``'s saved runs, by default every shipped campaign, or any
      folders or files given with ``--from-runs``; only the files that share a configuration
      with another file are predicted (``profilers.distributed.campaign.configuration_key``:
      the runs' length does not count);
    - each file is predicted as ``sgdsim validate --from-runs`` predicts it, from its own
      profile and link measurement;
    - the noise: each error is taken as the model's own (alike both times) plus a draw, normal
      with mean 0 and standard deviation ``sd``, made anew in each validation; the difference of
      one configuration's two errors then has variance ``2 sd^2``, which gives ``sd``
      (``profilers.distributed.noise_floor.error_noise_sd``); what that noise alone costs a
      model with no error of its own over ``--points`` points (default 48, a held-out half of a
      campaign) is its mean absolute value and the median of its largest.

Output
    Every pair (both measurements, both errors, how far each moved); per architecture and over
    all, the mean and largest of those moves, the noise's ``sd`` and the root mean square of
    the part that repeats, the model's own error (the mean product of a configuration's two
    errors estimates its square); the floor; in ``--out``
    (default ``results/repeated_validations/``): ``repeated_validations.csv`` (the pairs),
    ``repeated_validations-summary.csv`` (per architecture) and ``repeated_validations.png``
    (each configuration's error in its second validation against its first, a colour per
    architecture: an error that repeats lies on the diagonal).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from profilers.distributed.campaign import (
    RepeatedPoint,
    assess_campaign,
    campaign_files,
    repeat_floor,
    repeat_moves,
    repeated_configurations,
    shipped_campaigns,
)
from profilers.distributed.measurements import load_measurements
from profilers.distributed.noise_floor import error_noise_sd
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import (
    add_from_runs_option,
    add_output_options,
    bare_scenario_parser,
    positive_int,
    progress_printer,
)
from simcore.report.table import Column, Table

NAME = "repeated_validations"
CSV_FILE = f"{NAME}.csv"
SUMMARY_FILE = f"{NAME}-summary.csv"
FIGURE_FILE = f"{NAME}.png"
POINTS = 48  # the floor's default set: a held-out half of a shipped campaign
PCT = "{:+.1f}"


def repeated_files(paths: Sequence[str]) -> list[str]:
    """The saved-runs files under ``paths`` (:func:`campaign_files`) that share a configuration
    with another of them, as given (their runs are read, nothing is predicted).

    Raises
    ------
    ConfigError : a path is missing or not saved runs, or no two files share a configuration.
    """
    files = campaign_files(paths)
    measured = [load_measurements(path) for _, path in files]
    others = repeated_configurations(measured)
    kept = [str(path) for (_, path), found in zip(files, others, strict=True) if found]
    if not kept:
        raise ConfigError(
            f"--from-runs: no two files of {', '.join(paths)} validated the same configuration "
            "(model, batch, link, architecture, W, hosting)"
        )
    return kept


def pair_table(pairs: Sequence[RepeatedPoint]) -> Table:
    table = Table(
        "every configuration validated twice: the measured examples/s and the simulator's "
        "error in each validation, and how far each moved from the first to the second",
        [
            Column("configuration", "configuration"),
            Column("first", "first file"),
            Column("second", "second file"),
            Column("measured_first", "measured"),
            Column("measured_second", "then"),
            Column("measured_gap_pct", "moved%", PCT),
            Column("error_first_pct", "err%", PCT),
            Column("error_second_pct", "then", PCT),
            Column("error_shift_pct", "moved", PCT),
        ],
    )
    for p in pairs:
        table.add(
            configuration=p.label,
            first=_file_text(p.sources[0]),
            second=_file_text(p.sources[1]),
            measured_first=p.measured[0],
            measured_second=p.measured[1],
            measured_gap_pct=100 * p.measured_gap,
            error_first_pct=100 * p.errors[0],
            error_second_pct=100 * p.errors[1],
            error_shift_pct=100 * p.error_shift,
        )
    return table


def summary_table(pairs: Sequence[RepeatedPoint]) -> Table:
    table = Table(
        "per architecture and over all: how far the measurements and the simulator's error "
        "moved between two validations of one configuration (mean / largest of the absolute "
        "moves), the standard deviation of the part of one validation's error that does not "
        "repeat (noise) and the root mean square of the part that does (the model's own)",
        [
            Column("architecture", "architecture"),
            Column("pairs", "pairs", "{:d}"),
            Column("measured_mean_pct", "measured moved mean%", "{:.1f}"),
            Column("measured_max_pct", "max%", "{:.1f}"),
            Column("error_mean_pct", "error moved mean", "{:.1f}"),
            Column("error_max_pct", "max", "{:.1f}"),
            Column("noise_sd_pct", "noise sd%", "{:.1f}"),
            Column("own_rms_pct", "own rms%", "{:.1f}"),
        ],
    )
    labels = sorted({p.architecture for p in pairs})
    for label in [*labels, None]:
        moves = repeat_moves([p for p in pairs if label is None or p.architecture == label])
        table.add(
            architecture=label or "all",
            pairs=moves.pairs,
            measured_mean_pct=100 * moves.measured_mean,
            measured_max_pct=100 * moves.measured_max,
            error_mean_pct=100 * moves.error_mean,
            error_max_pct=100 * moves.error_max,
            noise_sd_pct=100 * moves.noise_sd,
            own_rms_pct=100 * moves.own_rms,
        )
    return table


def _file_text(source: str) -> str:
    """``check-200/resnet8-b16-200-layerwise``: a file's folder and name, without suffixes."""
    path = Path(source)
    name = path.name.removesuffix(".gz").removesuffix(".json")
    return f"{path.parent.name}/{name}" if path.parent.name else name


def plot(pairs: Sequence[RepeatedPoint], out: ScenarioOutput) -> None:
    """Each configuration's error in its second validation against its first, a colour per
    architecture; the diagonal (an error that repeats) and the band of two noise sds of a
    move (``2 sqrt(2) sd``) around it."""
    labels = sorted({p.architecture for p in pairs})
    sd = error_noise_sd([p.error_shift for p in pairs])
    fig, ax = new_figure(size=(5.6, 6.4))
    every = [100 * e for p in pairs for e in p.errors]
    low, high = min(every) - 3.0, max(every) + 3.0
    band = 100 * 2.0 * 2.0**0.5 * sd
    ax.fill_between(
        [low, high],
        [low - band, high - band],
        [low + band, high + band],
        color="0.9",
        label=f"the noise's 2 sd of a move (+-{band:.0f} points)",
    )
    ax.plot([low, high], [low, high], color="k", lw=0.8, label="the error repeats")
    for i, label in enumerate(labels):
        mine = [p for p in pairs if p.architecture == label]
        ax.scatter(
            [100 * p.errors[0] for p in mine],
            [100 * p.errors[1] for p in mine],
            s=16,
            color=f"C{i}",
            label=label,
        )
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_aspect("equal")
    ax.set_xlabel("simulator error in the first validation, %")
    ax.set_ylabel("in the second validation of the same configuration, %")
    ax.set_title("How much of a validation's error repeats", fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def finding(pairs: Sequence[RepeatedPoint], points: int) -> str:
    """How far the repeats moved, and what the part that moved costs over ``points`` points."""
    floor = repeat_floor(pairs, points)
    assert floor is not None  # pairs exist
    moves = repeat_moves(pairs)
    return finding_line(
        f"{moves.pairs} configurations validated twice were measured "
        f"{100 * moves.measured_mean:.1f}% apart on average, and the simulator's error moved "
        f"by {100 * moves.error_mean:.1f} points on average ({100 * moves.error_max:.1f} at "
        f"most): the part of its error that repeats, the model's own, is "
        f"{100 * moves.own_rms:.1f}% rms, and the part that does not (sd "
        f"{100 * moves.noise_sd:.1f}%) alone puts a model with no error of its own "
        f"{100 * floor.mean_abs_error:.1f}% off on average and {100 * floor.max_abs_error:.1f}% "
        f"at most over {points} points."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    add_from_runs_option(parser, None)
    parser.add_argument(
        "--points",
        type=positive_int,
        default=POINTS,
        help=f"the floor's set of points (default {POINTS}: a held-out half of a campaign)",
    )
    add_output_options(parser, NAME)
    args = parser.parse_args(argv)
    if args.from_runs is None:
        args.from_runs = shipped_campaigns()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        out = ScenarioOutput(args.out, [CSV_FILE, SUMMARY_FILE, FIGURE_FILE], force=args.force)
        files = repeated_files(args.from_runs)
        report = assess_campaign(files, progress=progress_printer(args))
        pairs = report.repeated_points()
        if not pairs:  # configurations shared, but only by copies of the same runs
            raise ConfigError(
                f"--from-runs: the files that share a configuration in {', '.join(args.from_runs)}"
                " hold the same runs"
            )
        tables = pair_table(pairs), summary_table(pairs)
        print("\n\n".join(t.text() for t in tables))
        out.write_csv(CSV_FILE, tables[0])
        out.write_csv(SUMMARY_FILE, tables[1])
        plot(pairs, out)
        print("\n" + finding(pairs, args.points))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
