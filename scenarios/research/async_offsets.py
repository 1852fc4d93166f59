"""Do the simulator's Async-SGD errors come from where its workers sit in each other's steps?

Question
    Real Async-SGD workers on a shared parameter-server link do not start their steps together:
    they drift, and two of them may settle pulling while the other pushes. The simulated ones
    line up too, and not always as the real ones did. Does the simulator's error on the kept
    runs follow the difference, and how does it change with the link's rate?

Setup
    - the runs: ``sgdsim validate``'s saved runs, by default every shipped campaign, or any
      folders or files given with ``--from-runs``; their PS Async-SGD points with two workers
      or more, predicted as ``sgdsim validate --from-runs`` predicts them (8 seeds a point);
    - how far apart: for each real run and each simulated seed, the median over steps of the
      distance from a worker's step start to its neighbour's, in steps (0 together, 0.5
      alternating; ``simcore.sim.phases``), then the median over the runs and over the seeds.

Output
    Every point's two distances, their difference (seeds less runs) and the simulator's error;
    per model the correlation of the error with the difference and its slope; per link rate and
    W the median distances; in ``--out`` (default ``results/async_offsets/``):
    ``async_offsets.csv``, ``async_offsets-models.csv``, ``async_offsets-rates.csv`` and
    ``async_offsets.png`` (the error against the difference, one colour per model; the runs'
    and the seeds' distance against the link rate for two workers).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from profilers.distributed.campaign import CampaignReport, assess_campaign, shipped_campaigns
from profilers.distributed.config import Architecture
from profilers.distributed.measurements import PointSelection
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import (
    add_from_runs_option,
    add_output_options,
    bare_scenario_parser,
    progress_printer,
)
from simcore.report.table import Column, Table

NAME = "async_offsets"
CSV_FILE = f"{NAME}.csv"
MODELS_FILE = f"{NAME}-models.csv"
RATES_FILE = f"{NAME}-rates.csv"
FIGURE_FILE = f"{NAME}.png"
LARGE_ERROR = 0.08  # errors beyond this are counted for the sign check
PCT = "{:+.1f}"
DIST = "{:.2f}"


class OffsetPoint(NamedTuple):
    """One Async-SGD point: where its runs' and seeds' workers started, and its error."""

    source: str  # the file's name
    model: str  # the model's name (its batch size apart)
    batch_size: int
    rate_bps: float | None  # the shaped link's rate; None: loopback
    workers: int
    runs: float  # the runs' median distance between step starts (steps)
    seeds: float  # the seeds'
    error: float  # the simulator's relative error

    @property
    def difference(self) -> float:
        """How much farther apart the simulated workers started than the real ones."""
        return self.seeds - self.runs


def offset_points(report: CampaignReport) -> list[OffsetPoint]:
    """The Async-SGD points with two workers or more whose runs and seeds both say how far
    apart their workers started."""
    rows = []
    for source, r in zip(report.sources, report.reports, strict=True):
        for p in r.points:
            if p.architecture != Architecture.PS_ASYNC.value or p.workers < 2:
                continue
            if math.isnan(p.measured_offset) or math.isnan(p.simulated_offset):
                continue
            rows.append(
                OffsetPoint(
                    Path(source).name.removesuffix(".gz").removesuffix(".json"),
                    r.model_name,
                    r.batch_size,
                    r.link_rate_bps,
                    p.workers,
                    p.measured_offset,
                    p.simulated_offset,
                    p.error(p.simulated),
                )
            )
    return rows


class Relation(NamedTuple):
    """How a group's errors follow its differences."""

    points: int
    correlation: float  # Pearson's r; NaN with fewer than 3 points or no variation
    slope: float  # error per step of difference (least squares); NaN likewise
    large: int  # errors beyond LARGE_ERROR
    large_agreeing: int  # ... whose sign is the difference's


def relation(points: Sequence[OffsetPoint]) -> Relation:
    """:class:`Relation` of ``points``."""
    x = np.array([p.difference for p in points])
    y = np.array([p.error for p in points])
    correlation = slope = math.nan
    if len(points) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
        correlation = float(np.corrcoef(x, y)[0, 1])
        slope = float(np.polyfit(x, y, 1)[0])
    large = [p for p in points if abs(p.error) > LARGE_ERROR]
    agreeing = sum((p.difference > 0) == (p.error > 0) for p in large)
    return Relation(len(points), correlation, slope, len(large), agreeing)


def point_table(points: Sequence[OffsetPoint]) -> Table:
    table = Table(
        "every Async-SGD point with two workers or more: how far apart consecutive workers "
        "started their steps (median, in steps: 0 together, 0.5 alternating), in the runs and "
        "in the simulated seeds, and the simulator's error",
        [
            Column("source", "file"),
            Column("model", "model"),
            Column("link_mbps", "link Mbit/s", "{:g}"),
            Column("workers", "W", "{:d}"),
            Column("runs", "runs", DIST),
            Column("seeds", "seeds", DIST),
            Column("difference", "seeds - runs", "{:+.2f}"),
            Column("error_pct", "err%", PCT),
        ],
    )
    for p in points:
        table.add(
            source=p.source,
            model=f"{p.model}-b{p.batch_size}",
            link_mbps=_mbps(p.rate_bps),
            workers=p.workers,
            runs=p.runs,
            seeds=p.seeds,
            difference=p.difference,
            error_pct=100 * p.error,
        )
    return table


def model_table(points: Sequence[OffsetPoint]) -> Table:
    table = Table(
        "per model and over all: the error against the difference (r: correlation; slope: "
        "error per 0.1 of a step farther apart; errors beyond "
        f"{100 * LARGE_ERROR:g}%: how many, and how many have the difference's sign)",
        [
            Column("model", "model"),
            Column("points", "points", "{:d}"),
            Column("correlation", "r", "{:+.2f}"),
            Column("slope_pct", "slope %/0.1", PCT),
            Column("large", f"|err| > {100 * LARGE_ERROR:g}%", "{:d}"),
            Column("large_agreeing", "same sign", "{:d}"),
        ],
    )
    models = sorted({p.model for p in points})
    for model in [*models, None]:
        mine = [p for p in points if model is None or p.model == model]
        rel = relation(mine)
        table.add(
            model=model or "all",
            points=rel.points,
            correlation=rel.correlation,
            slope_pct=10 * rel.slope,  # 100 (percent) x 0.1 (of a step)
            large=rel.large,
            large_agreeing=rel.large_agreeing,
        )
    return table


def rate_table(points: Sequence[OffsetPoint]) -> Table:
    table = Table(
        "per link rate and W: the median over points of the runs' and the seeds' distance",
        [
            Column("link_mbps", "link Mbit/s", "{:g}"),
            Column("workers", "W", "{:d}"),
            Column("points", "points", "{:d}"),
            Column("runs", "runs", DIST),
            Column("seeds", "seeds", DIST),
            Column("mean_abs_error_pct", "mean |err|%", "{:.1f}"),
        ],
    )
    keys = sorted({(p.rate_bps or 0.0, p.workers) for p in points})
    for rate, workers in keys:
        mine = [p for p in points if (p.rate_bps or 0.0) == rate and p.workers == workers]
        table.add(
            link_mbps=_mbps(rate or None),
            workers=workers,
            points=len(mine),
            runs=statistics.median(p.runs for p in mine),
            seeds=statistics.median(p.seeds for p in mine),
            mean_abs_error_pct=100 * statistics.fmean(abs(p.error) for p in mine),
        )
    return table


def _mbps(rate: float | None) -> float:
    """A link rate in Mbit/s; 0 on loopback."""
    return 0.0 if rate is None else rate / 1e6


def plot(points: Sequence[OffsetPoint], out: ScenarioOutput) -> None:
    """Left: each point's error against its difference, a colour per model. Right: for two
    workers, the runs' (filled) and the seeds' (open) distance against the link rate (one
    marker per file: a rate may have several)."""
    models = sorted({p.model for p in points})
    fig, (left, right) = new_figure(1, 2, size=(10.0, 4.2))
    for i, model in enumerate(models):
        mine = [p for p in points if p.model == model]
        left.scatter(
            [p.difference for p in mine],
            [100 * p.error for p in mine],
            s=16,
            color=f"C{i}",
            label=model,
        )
        pairs = [p for p in mine if p.workers == 2]
        rates = [_mbps(p.rate_bps) for p in pairs]
        right.scatter(rates, [p.runs for p in pairs], s=22, color=f"C{i}", label=f"{model} runs")
        right.scatter(rates, [p.seeds for p in pairs], s=22, facecolors="none", edgecolors=f"C{i}")
    left.axhline(0, color="k", lw=0.8)
    left.axvline(0, color="k", lw=0.8)
    left.set_xlabel("seeds' distance less the runs' (steps)")
    left.set_ylabel("simulator error, % of measured")
    left.set_title("farther apart than the real workers: too fast", fontsize=10)
    left.legend(fontsize=7, loc="best")
    left.grid(alpha=0.3)
    right.set_xlabel("link rate, Mbit/s")
    right.set_ylabel("median distance between step starts (steps)")
    right.set_ylim(0, 0.5)
    right.set_title("two workers: runs (filled), seeds (open)", fontsize=10)
    right.legend(fontsize=7, loc="best")
    right.grid(alpha=0.3)
    fig.suptitle(
        "Async-SGD: where the workers start their steps against the simulator's error",
        fontsize=10,
    )
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def finding(points: Sequence[OffsetPoint]) -> str:
    """The correlation over all points, and the two-worker distances at the slowest and the
    fastest link."""
    rel = relation(points)
    text = (
        f"over {rel.points} Async-SGD points the simulator's error follows how much farther "
        f"apart its workers start their steps than the real ones: r = {rel.correlation:+.2f}, "
        f"{10 * rel.slope:+.1f}% per 0.1 of a step; {rel.large_agreeing} of the "
        f"{rel.large} errors beyond {100 * LARGE_ERROR:g}% have its sign"
    )
    pairs = [p for p in points if p.workers == 2]
    rates = sorted({_mbps(p.rate_bps) for p in pairs})
    if len(rates) >= 2:
        slow = [p for p in pairs if _mbps(p.rate_bps) == rates[0]]
        fast = [p for p in pairs if _mbps(p.rate_bps) == rates[-1]]
        text += (
            f"; two real workers start {statistics.median(p.runs for p in slow):.2f} of a step "
            f"apart at {rates[0]:g} Mbit/s and {statistics.median(p.runs for p in fast):.2f} at "
            f"{rates[-1]:g}, the simulated {statistics.median(p.seeds for p in slow):.2f} and "
            f"{statistics.median(p.seeds for p in fast):.2f}"
        )
    return finding_line(text + ".")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    add_from_runs_option(parser, None)
    add_output_options(parser, NAME)
    args = parser.parse_args(argv)
    if args.from_runs is None:
        args.from_runs = shipped_campaigns()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        files = [CSV_FILE, MODELS_FILE, RATES_FILE, FIGURE_FILE]
        out = ScenarioOutput(args.out, files, force=args.force)
        selection = PointSelection(architectures=(Architecture.PS_ASYNC.value,))
        report = assess_campaign(
            args.from_runs, selection=selection, progress=progress_printer(args)
        )
        points = offset_points(report)
        if not points:
            raise ConfigError(
                "--from-runs: no Async-SGD point with two workers or more whose runs and "
                f"seeds say how far apart they started, in {', '.join(args.from_runs)}"
            )
        tables = point_table(points), model_table(points), rate_table(points)
        print("\n\n".join(t.text() for t in tables))
        for name, table in zip(files, tables, strict=False):
            out.write_csv(name, table)
        plot(points, out)
        print("\n" + finding(points))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
