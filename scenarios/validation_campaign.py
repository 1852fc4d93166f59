"""How accurate are sgdsim's predictions on the real runs the project keeps?

Question
    Over a campaign of real training runs (several models, architectures, worker counts and link
    rates), how far is the simulator's prediction, made the way a user makes it, from the
    measured throughput: on average, at worst, and for which architecture?

Setup
    - the runs: ``sgdsim validate``'s saved runs (``validate-runs.json.gz``), one file per model,
      link rate and overlap mode; by default the campaign shipped with sgdsim (``campaign``:
      ``bash scenarios/validation_campaign.sh`` made it on the emulated cluster, see
      ``simcore/data/validation/campaign/README.md``), or any folders or files given with
      ``--from-runs``;
    - each file is predicted from its own one-worker profile and its own measurement of the
      link (one flow's goodput, the flow shares, a ring's goodput) and the hosting (cores),
      exactly as ``sgdsim validate`` predicts a fresh validation: nothing is fitted to the runs
      with W workers;
    - ``--fit-rate`` declares the half any tuning of the model may look at (default 300 Mbit/s);
      the other rate is the held-out half.

Output
    Every point (measured, predicted, error, the measured compute slowdown of co-located
    workers); for Async-SGD, how the workers lined up in each real run and each simulated seed
    (lock-step, pipelined, drifting: ``simcore.sim.phases``), their step times and how their
    transfers lined up on the server's link (``simcore.sim.occupancy``); for Sync-SGD, where
    the runs kept their spans, when each of a step's pulls arrived after the server's release
    (``simcore.sim.arrivals``); the mean and
    maximum absolute error by half and architecture, with how many errors are beyond the
    runs' own noise and what that noise alone would cost a perfect prediction
    (``profilers.distributed.noise_floor``); and in ``--out`` (default
    ``results/validation_campaign/``): ``validation_campaign.csv`` (every point),
    ``validation_campaign-summary.csv`` (the errors), ``validation_campaign-async.csv`` (the
    Async-SGD patterns), ``validation_campaign-sync.csv`` (the Sync-SGD pull arrivals) and
    ``validation_campaign.png`` (the simulator's error against W, one panel per architecture,
    one line per model and link rate).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from profilers.distributed.campaign import (
    CampaignReport,
    campaign_async_table,
    campaign_point_table,
    campaign_summary_table,
    campaign_sync_table,
    campaign_text,
)
from profilers.distributed.noise_floor import NOISE_Z
from profilers.distributed.validation import ValidationPoint
from simcore.cli.validate_cmd import add_prediction_link_options, assess_campaign_with
from simcore.plots import new_figure, save_figure
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import (
    add_from_runs_option,
    add_output_options,
    bare_scenario_parser,
)
from simcore.units import format_bandwidth

NAME = "validation_campaign"
CSV_FILE = f"{NAME}.csv"  # every point
SUMMARY_FILE = f"{NAME}-summary.csv"  # mean / max error by half and architecture
ASYNC_FILE = f"{NAME}-async.csv"  # Async-SGD phase patterns and step times
SYNC_FILE = f"{NAME}-sync.csv"  # Sync-SGD pull arrivals after each release
FIGURE_FILE = f"{NAME}.png"
SHIPPED = "campaign"
FIT_RATE = "300Mbit/s"  # the declared fit half of the shipped campaign


def plot(report: CampaignReport, out: ScenarioOutput) -> None:
    """The simulator's error against W, one panel per architecture and one line per model and
    link rate (solid: fit half, dashed: held out); grey bands: within 5% and 10%."""
    rows = report.rows()
    labels = sorted({label for _, _, label in rows})
    models = sorted({r.model_name for r, _, _ in rows})
    markers = dict(zip(models, "osD^v<>", strict=False))
    rates = report.halves()
    fig, axes = new_figure(1, len(labels), size=(3.6 * len(labels), 3.8))
    axes = list(axes) if len(labels) > 1 else [axes]
    top = max(10.0, *(100 * abs(p.error(p.simulated)) for _, p, _ in rows))
    for ax, label in zip(axes, labels, strict=True):
        ax.axhspan(-10, 10, color="0.93")
        ax.axhspan(-5, 5, color="0.85")
        ax.axhline(0, color="k", lw=0.8)
        for m, model in enumerate(models):
            for rate in rates:
                points = sorted(
                    (p.workers, 100 * p.error(p.simulated), _noise_bar(p))
                    for r, p, lab in rows
                    if lab == label and r.model_name == model and r.link_rate_bps == rate
                )
                if not points:
                    continue
                held_out = report.fit_rate_bps is not None and rate != report.fit_rate_bps
                ax.errorbar(
                    [w for w, _, _ in points],
                    [e for _, e, _ in points],
                    yerr=[b for _, _, b in points],
                    elinewidth=0.7,
                    capsize=1.5,
                    marker=markers[model],
                    ls="--" if held_out else "-",
                    color=f"C{m}",
                    mfc="none" if held_out else f"C{m}",
                    ms=5,
                    label=f"{model}, {_rate(rate)}" if ax is axes[0] else None,
                )
        ax.set_ylim(-1.1 * top, 1.1 * top)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("workers W")
        ax.set_xticks(sorted({p.workers for _, p, _ in rows}))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("simulator error, % of measured")
    axes[0].legend(fontsize=7, loc="best")  # where it hides the fewest points
    halves = "; dashed: held-out half" if report.fit_rate_bps is not None else ""
    fig.suptitle(
        "Validation campaign: predicted vs measured examples/s (bands: within 5% and 10%"
        f"{halves}; bars: {NOISE_Z:g} standard errors of the measured mean)",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def _noise_bar(p: ValidationPoint) -> float:
    """Half the error bar of a point's error, in percent: NOISE_Z standard errors of its
    measured mean (the error (sim - m) / m moves by (1 + error) x the mean's relative change);
    0 with one run."""
    se = p.standard_error
    return 0.0 if math.isnan(se) else 100 * NOISE_Z * se * (1 + p.error(p.simulated))


def _rate(rate: float | None) -> str:
    return "loopback" if rate is None else format_bandwidth(rate)


def finding(report: CampaignReport) -> str:
    """The held-out half's mean and worst error, and the architecture that is furthest off."""
    halves = report.halves()
    held = [r for r in halves if r != report.fit_rate_bps] or halves
    errors = [e for rate in held for e in report.abs_errors(rate)]
    # The architecture furthest off on the same points the sentence is about.
    labels = {lab for _, _, lab in report.rows()}
    by_label = {
        label: [e for rate in held for e in report.abs_errors(rate, label)] for label in labels
    }
    by_label = {label: errors for label, errors in by_label.items() if errors}
    worst = max(by_label, key=lambda lab: sum(by_label[lab]) / len(by_label[lab]))
    which = "held-out half" if report.fit_rate_bps is not None else "campaign"
    return finding_line(
        f"on the {which} ({len(errors)} points) the simulator is off by "
        f"{100 * sum(errors) / len(errors):.1f}% on average and {100 * max(errors):.1f}% at "
        f"most, and furthest off for {worst} "
        f"({100 * sum(by_label[worst]) / len(by_label[worst]):.1f}% on average)."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    add_from_runs_option(parser, SHIPPED)
    parser.add_argument(
        "--fit-rate",
        default=None,
        metavar="RATE",
        help=f"the link rate of the half declared for fitting (default {FIT_RATE} for the "
        "shipped campaign, else none)",
    )
    add_prediction_link_options(parser)
    add_output_options(parser, NAME)
    args = parser.parse_args(argv)
    if args.from_runs is None:
        args.from_runs = [SHIPPED]
        if args.fit_rate is None:
            args.fit_rate = FIT_RATE
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        files = [CSV_FILE, SUMMARY_FILE, ASYNC_FILE, SYNC_FILE, FIGURE_FILE]
        out = ScenarioOutput(args.out, files, force=args.force)
        report = assess_campaign_with(args)
        print(campaign_text(report))
        out.write_csv(CSV_FILE, campaign_point_table(report))
        out.write_csv(SUMMARY_FILE, campaign_summary_table(report))
        out.write_csv(ASYNC_FILE, campaign_async_table(report))
        out.write_csv(SYNC_FILE, campaign_sync_table(report))
        plot(report, out)
        print("\n" + finding(report))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
