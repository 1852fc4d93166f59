"""Why do Async-SGD workers on the emulated testbed move as a convoy at high link rates?

Question
    On the testbed (``profilers.netns_cluster``: the server's link shaped by ``tc tbf`` with a
    1 ms bucket, the server pinned to one core and every worker to the other) Async-SGD workers
    of a network-heavy model at 500 Mbit/s pull together and push together: each direction of
    the server's link busy in turn, the other idle. The simulator, with the link and the sharing
    measured on the same testbed, has them pull while others push, and predicts mlp with three
    workers 14-19% too fast (the kept validations at 450-500 Mbit/s). Is the convoy the link's
    doing, or the workers' core's?

Setup
    One real Async-SGD run (``profilers.distributed``, per-layer overlap) of ``--model`` with
    ``--workers`` workers, the server's link shaped to ``--rate``, under three hostings:

    - ``testbed``: as the validations run (1 ms bucket, server and workers pinned apart);
    - ``whole packets``: a bucket of two GSO packets, which tbf passes whole as a real NIC's
      segmentation offload would (``profilers.netns.tbf_segments_gso``): the transfers cost the
      ranks' cores an order of magnitude less (``scenarios/research/testbed_segmentation.py``);
    - ``unpinned``: the testbed's bucket, every rank free to run on any core.

    Needs root (network namespaces); about 40 s per hosting with the defaults.

Output
    Per hosting: examples/s, the link's occupancy (every worker pulling, every worker pushing,
    both directions busy at once; ``simcore.sim.occupancy``) and the workers' CPU per step; in
    ``--out`` (default ``results/async_convoy/``): ``async_convoy.csv`` and ``async_convoy.png``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple

from profilers.distributed.config import Architecture, RunConfig
from profilers.distributed.records import RunResult
from profilers.distributed.testbed import Testbed
from profilers.netns import check_permitted, tbf_segments_gso, tbf_whole_packets_burst_s
from profilers.netns_cluster import BURST_S
from simcore.errors import ConfigError
from simcore.plots import new_figure, save_figure
from simcore.report import ScenarioOutput, finding_line, run_scenario
from simcore.report.scenario import (
    add_output_options,
    bare_scenario_parser,
    positive_int,
    progress_printer,
)
from simcore.report.table import Column, Table
from simcore.sim.occupancy import LinkOccupancy
from simcore.units import format_bandwidth, parse_bandwidth

NAME = "async_convoy"
CSV_FILE = f"{NAME}.csv"
FIGURE_FILE = f"{NAME}.png"
TESTBED, WHOLE_PACKETS, UNPINNED = "testbed", "whole packets", "unpinned"
HOSTINGS = (TESTBED, WHOLE_PACKETS, UNPINNED)
CLEAR_GAIN = 0.10  # a hosting this much faster than the testbed's changed what limits the run


class HostingRun(NamedTuple):
    """One real run under one hosting."""

    hosting: str
    burst_s: float
    pinned: bool
    run: RunResult
    occupancy: LinkOccupancy


def run_hosting(hosting: str, config: RunConfig, rate_bps: float) -> HostingRun:
    """Run ``config`` on the emulated cluster with the link at ``rate_bps``, hosted as named."""
    burst = tbf_whole_packets_burst_s(rate_bps) if hosting == WHOLE_PACKETS else BURST_S
    testbed = Testbed(rate_bps, burst_s=burst, pinned=hosting != UNPINNED)
    run = testbed.run(config)
    occupancy = run.link_occupancy()
    if occupancy is None:  # the runner keeps its spans; a run without them is a bug here
        raise ConfigError(f"{hosting}: the run kept no transfer spans to read the link from")
    return HostingRun(hosting, burst, testbed.server_core(config.architecture), run, occupancy)


def measure(
    config: RunConfig, rate_bps: float, say: Callable[[str], None] | None = None
) -> list[HostingRun]:
    rows = []
    for hosting in HOSTINGS:
        row = run_hosting(hosting, config, rate_bps)
        rows.append(row)
        if say is not None:
            say(f"{hosting}: {row.run.examples_per_s:.1f} examples/s, {_pattern(row)}")
    return rows


def _pattern(row: HostingRun) -> str:
    occ = row.occupancy
    return (
        f"all pulling {occ.all_pulling:.0%}, all pushing {occ.all_pushing:.0%}, "
        f"both directions {occ.both_directions:.0%}"
    )


def table(rows: Sequence[HostingRun], config: RunConfig, rate_bps: float) -> Table:
    out = Table(
        f"{config.model}, batch {config.batch_size}, Async-SGD with {config.workers} workers, "
        f"server's link shaped to {format_bandwidth(rate_bps)}",
        [
            Column("hosting", "hosting"),
            Column("bucket_ms", "bucket ms", "{:.2f}"),
            Column("splits_gso", "splits GSO"),
            Column("pinned", "server, workers pinned apart"),
            Column("examples_per_s", "examples/s", "{:.1f}"),
            Column("all_pulling", "all pulling", "{:.2f}"),
            Column("all_pushing", "all pushing", "{:.2f}"),
            Column("both_directions", "both directions", "{:.2f}"),
            Column("cpu_ms_per_step", "worker CPU ms/step", "{:.1f}"),
        ],
    )
    for row in rows:
        cpu = row.run.cpu_s_per_step()
        out.add(
            hosting=row.hosting,
            bucket_ms=row.burst_s * 1e3,
            splits_gso="yes" if tbf_segments_gso(rate_bps, row.burst_s) else "no",
            pinned="yes" if row.pinned else "no",
            examples_per_s=row.run.examples_per_s,
            all_pulling=row.occupancy.all_pulling,
            all_pushing=row.occupancy.all_pushing,
            both_directions=row.occupancy.both_directions,
            cpu_ms_per_step=float("nan") if cpu is None else cpu * 1e3,
        )
    return out


def plot(rows: Sequence[HostingRun], title: str, out: ScenarioOutput) -> None:
    """Left: how the link was occupied per hosting (stacked shares); right: examples/s."""
    fig, (occ_ax, rate_ax) = new_figure(1, 2, size=(9.0, 3.8))
    names = [r.hosting for r in rows]
    xs = range(len(rows))
    bottom = [0.0] * len(rows)
    parts = (
        ("every worker pulling", lambda o: o.all_pulling),
        ("every worker pushing", lambda o: o.all_pushing),
        ("both directions at once", lambda o: o.both_directions),
        ("the rest", lambda o: 1.0 - o.all_pulling - o.all_pushing - o.both_directions),
    )
    for label, share in parts:
        heights = [max(0.0, share(r.occupancy)) for r in rows]
        occ_ax.bar(xs, heights, 0.6, bottom=bottom, label=label)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    occ_ax.set_ylabel("share of the run's time")
    occ_ax.set_ylim(0, 1.3)  # room for the legend above the bars
    occ_ax.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    occ_ax.legend(fontsize=7, loc="upper center", ncol=2)
    rate_ax.bar(xs, [r.run.examples_per_s for r in rows], 0.6, color="tab:gray")
    rate_ax.set_ylabel("examples/s over all workers")
    for ax in (occ_ax, rate_ax):
        ax.set_xticks(list(xs), names, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def finding(rows: Sequence[HostingRun]) -> str:
    """The testbed's pattern against the other hostings' and what each gained."""
    by = {r.hosting: r for r in rows}
    base = by[TESTBED]
    others = "; ".join(
        f"{name}: both directions {by[name].occupancy.both_directions:.0%}, "
        f"{by[name].run.examples_per_s / base.run.examples_per_s - 1:+.0%} examples/s"
        for name in (WHOLE_PACKETS, UNPINNED)
    )
    freed = [by[name] for name in (WHOLE_PACKETS, UNPINNED)]
    if all(
        r.run.examples_per_s > (1 + CLEAR_GAIN) * base.run.examples_per_s
        and r.occupancy.both_directions > base.occupancy.both_directions
        for r in freed
    ):
        verdict = (
            "both others overlap the directions more and run faster, so the convoy is the "
            "workers' shared core doing the transfers' per-packet work, not the link"
        )
    else:
        verdict = (
            f"not both others overlap the directions more and run over {CLEAR_GAIN:.0%} "
            "faster, so here the hosting does not decide the pattern"
        )
    return finding_line(
        f"as the testbed hosts them the workers were in both directions at once "
        f"{base.occupancy.both_directions:.0%} of the time ({_pattern(base)}) against {others} "
        f"({verdict})."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    parser.add_argument("--model", default="mlp", help="built-in model (default mlp)")
    parser.add_argument(
        "--batch-size", type=positive_int, default=32, help="examples per worker-step (default 32)"
    )
    parser.add_argument(
        "--workers", type=positive_int, default=3, help="Async-SGD workers (default 3)"
    )
    parser.add_argument(
        "--rate", default="500Mbit/s", help="the server's link rate (default 500Mbit/s)"
    )
    parser.add_argument(
        "--steps", type=positive_int, default=50, help="steps per worker (default 50)"
    )
    parser.add_argument(
        "--warmup", type=positive_int, default=5, help="steps left out at the start (default 5)"
    )
    add_output_options(parser, NAME)
    args = parser.parse_args(argv)
    if args.workers < 2:
        parser.error(f"--workers: a convoy needs at least 2 workers, got {args.workers}")
    if args.warmup >= args.steps:
        parser.error(f"--warmup: must be below --steps ({args.steps}), got {args.warmup}")
    try:
        args.rate_bps = parse_bandwidth(args.rate, name="--rate")
    except ConfigError as err:
        parser.error(str(err))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        check_permitted(NAME)
        out = ScenarioOutput(args.out, [CSV_FILE, FIGURE_FILE], force=args.force)
        config = RunConfig(
            model=args.model,
            architecture=Architecture.PS_ASYNC,
            workers=args.workers,
            batch_size=args.batch_size,
            steps=args.steps,
            warmup=args.warmup,
            timeout_s=120.0,
        )
        rows = measure(config, args.rate_bps, progress_printer(args))
        result = table(rows, config, args.rate_bps)
        print(result.text())
        out.write_csv(CSV_FILE, result)
        plot(rows, result.title, out)
        print("\n" + finding(rows))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
