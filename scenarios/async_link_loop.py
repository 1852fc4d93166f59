"""Do Async-SGD's transfers share the real link the way the simulator shares it?

Question
    Async-SGD workers that only pull, wait a moment and push, with no model in between: do they
    settle into pulling while others push on the real link as they do in the simulator, and does
    the simulator's cycle (each worker's step time) match? Without the computation's noise and
    the host's CPU in the way, any gap is the simulator's model of the link's sharing over time:
    the place to find out why the training runs at two workers pipeline better than predicted
    (README, "Checking predictions against real runs").

Setup
    The Async-SGD probe of ``profilers.distributed.async_probe`` with a one-layer step: each
    worker pulls ``--nbytes`` (default 2.48 MB, the cnn's parameters), spends ``--busy`` of
    CPU, and pushes ``--nbytes`` back, while the server sends a worker's next pull as soon as
    its push has arrived; on the emulated cluster (the server's link shaped to ``--rate`` as
    the validations' testbed shapes it, server and workers pinned apart), for 1 to
    ``--workers`` workers. The link is first
    measured as a validation measures it (``profilers.link_sharing``: one flow's goodput and
    how unequally each direction's flows share it, unless ``--flow-weight-cv`` sets that); the
    simulator replays the loop as a one-layer Async-SGD trace on that link, the workers sharing
    their core, with and without the testbed's interference between the two directions
    (``profilers.distributed.link_interference.TESTBED_INTERFERENCE``; with it is how the
    validations predict), ``--seeds`` seeds each. Needs root; about 1.5 minutes with the
    defaults.

Output
    Per worker count: the measured and simulated cycle (with the 95% interval over seeds), the
    two bounds (every worker in lock-step, and perfectly pipelined), and how the link was
    occupied. Per state of the link (pulls and pushes in flight): the share of one flow's
    goodput a transfer got, fitted to every loop's transfers, against the interference model's
    and equal shares. In ``--out`` (default ``results/async_link_loop/``):
    ``async_link_loop.csv``, ``async_link_loop_states.csv`` and ``async_link_loop.png``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from profilers.distributed.async_probe import (
    AsyncProbe,
    ProbeStep,
    measure_async_probe,
    probe_trace,
)
from profilers.distributed.config import Architecture
from profilers.distributed.link_interference import TESTBED_INTERFERENCE
from profilers.distributed.testbed import Testbed, available_cores
from profilers.link_sharing import measure_link_sharing
from profilers.netns import check_permitted
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
from simcore.sim import SimulationConfig, simulate
from simcore.sim.occupancy import (
    PULL,
    PUSH,
    LinkOccupancy,
    TransferInterval,
    timeline_intervals,
    timeline_occupancy,
)
from simcore.sim.rate_link import interfered_capacity
from simcore.sim.results import Estimate
from simcore.sim.state_shares import StateShares, state_shares
from simcore.units import (
    format_bandwidth,
    format_bytes,
    parse_bandwidth,
    parse_duration,
    parse_size,
)

NAME = "async_link_loop"
CSV_FILE = f"{NAME}.csv"
STATES_CSV_FILE = f"{NAME}_states.csv"
FIGURE_FILE = f"{NAME}.png"
SHARES, INTERFERENCE = "flow shares", "flow shares and interference"
SHARINGS = (SHARES, INTERFERENCE)
CLOSE = 0.10  # a simulated cycle this close to the measured one matches it
SIM_STEPS, SIM_WARMUP = 200, 40  # per simulated worker: the loop is cheap to simulate
# States with less of the loops' transfer time than this pin their share down too loosely.
SHOWN_STATE_SHARE = 0.03


class Simulated(NamedTuple):
    cycle_s: Estimate
    occupancy: LinkOccupancy
    intervals: tuple[TransferInterval, ...]  # the first seed's, after the warm-up


class LoopPoint(NamedTuple):
    """One worker count: the measured loop and the simulated ones."""

    workers: int
    probe: AsyncProbe
    cycle_s: float
    occupancy: LinkOccupancy
    simulated: dict[str, Simulated]


class Link(NamedTuple):
    """The server's link as the simulator gets it: one flow's goodput and the spread of the
    flows' shares (``flow_weight_cv``) of each direction."""

    goodput_bps: float
    pull_cv: float
    push_cv: float
    source: str


def simulate_loop(
    workers: int,
    step: ProbeStep,
    link: Link,
    worker_cores: float,
    sharing: str,
    seeds: int,
) -> Simulated:
    """The probe's bare ``step`` in the simulator (``probe_trace``, strict phases), the
    workers sharing ``worker_cores``, the server's link as ``link`` says, with the testbed's
    interference between its directions if ``sharing`` says so."""
    trace = probe_trace(step, layerwise=False)
    config = SimulationConfig(
        workers=workers,
        bandwidth_bps=link.goodput_bps,
        flow_weight_cv=link.pull_cv,
        flow_weight_cv_push=link.push_cv,
        arch="ps",
        mode="async",
        steps=SIM_STEPS,
        warmup_steps=SIM_WARMUP,
        replications=seeds,
        timeline=True,
        colocated_workers=workers,
        host_cpu_cores=worker_cores,
        worker_cpu_cores=1.0,
        shared_nic=False,
        duplex_interference=TESTBED_INTERFERENCE.parameters if sharing == INTERFERENCE else None,
    )
    result = simulate(trace, config)
    rate = result.steps_per_s  # over all workers: a worker's cycle is W / rate

    def cycle(steps_per_s: float | None) -> float | None:
        return None if steps_per_s is None else workers / steps_per_s

    estimate = Estimate(
        workers / rate.value, cycle(rate.ci_high), cycle(rate.ci_low), rate.method, rate.samples
    )
    timeline = result.timeline
    occupancy = None if timeline is None else timeline_occupancy(timeline, workers, SIM_WARMUP)
    if occupancy is None:  # every simulated step moves bytes: a bug if none reached the link
        raise ConfigError(f"simulated loop of {workers} workers: no transfer on the link")
    assert timeline is not None  # the occupancy came from it
    return Simulated(estimate, occupancy, tuple(timeline_intervals(timeline, SIM_WARMUP)))


def measured_link(args: argparse.Namespace, say: Callable[[str], None] | None) -> Link:
    """As a validation measures the link (``profilers.link_sharing``), unless
    ``--flow-weight-cv`` sets both directions' spread."""
    sharing = measure_link_sharing(args.rate_bps, burst_s=BURST_S)
    if args.flow_weight_cv is not None:
        cv = args.flow_weight_cv
        link = Link(sharing.goodput_bps(), cv, cv, "--flow-weight-cv")
    else:
        pull, push = sharing.weight_cv("out of"), sharing.weight_cv("into")
        link = Link(sharing.goodput_bps(), pull, push, "measured")
    if say is not None:
        say(
            f"link: one flow {format_bandwidth(link.goodput_bps)}, flow weight cv pull "
            f"{link.pull_cv:.2f} / push {link.push_cv:.2f} ({link.source})"
        )
    return link


def measure(
    args: argparse.Namespace, say: Callable[[str], None] | None = None
) -> tuple[Link, list[LoopPoint]]:
    """The link, and for every worker count the measured loop and the simulated ones."""
    link = measured_link(args, say)
    worker_cores = Testbed(cores=available_cores()).worker_cores(Architecture.PS_ASYNC)
    points = []
    half = args.busy_s / 2  # the busy time as a one-layer step's forward and backward pass
    for workers in range(1, args.workers + 1):
        probe = measure_async_probe(
            [args.nbytes],
            [half],
            [half],
            layerwise=False,
            workers=workers,
            burn=True,
            link_rate_bps=args.rate_bps,
            steps=args.steps - args.warmup,
            warmup=args.warmup,
        )
        simulated = {
            sharing: simulate_loop(workers, probe.step, link, worker_cores, sharing, args.seeds)
            for sharing in SHARINGS
        }
        cycle = workers / probe.steps_per_s()
        point = LoopPoint(workers, probe, cycle, probe.occupancy(), simulated)
        points.append(point)
        if say is not None:
            say(
                f"{workers} workers: cycle {1e3 * point.cycle_s:.0f} ms measured, "
                f"{1e3 * simulated[INTERFERENCE].cycle_s.value:.0f} simulated"
            )
    return link, points


def lock_step_s(workers: int, alone_s: float, busy_s: float) -> float:
    """Every worker pulls at once, spins, pushes at once: each direction shared by all."""
    return 2 * workers * alone_s + busy_s


def pipelined_s(workers: int, alone_s: float, busy_s: float) -> float:
    """Each direction carries one transfer at a time, never idle while one is due."""
    return max(2 * alone_s + busy_s, workers * alone_s)


def table(
    points: Sequence[LoopPoint], link: Link, alone_s: float, args: argparse.Namespace
) -> Table:
    out = Table(
        f"Async-SGD's transfers alone: {format_bytes(args.nbytes)} each way, "
        f"{1e3 * args.busy_s:g} ms busy between, server's link shaped to "
        f"{format_bandwidth(args.rate_bps)} (one transfer alone {1e3 * alone_s:.1f} ms; "
        f"simulated: one flow {format_bandwidth(link.goodput_bps)}, flow weight cv pull "
        f"{link.pull_cv:.2f} / push {link.push_cv:.2f}, {link.source})",
        [
            Column("workers", "W"),
            Column("measured_ms", "measured cycle ms", "{:.0f}"),
            Column("lock_step_ms", "lock-step ms", "{:.0f}"),
            Column("pipelined_ms", "pipelined ms", "{:.0f}"),
            Column("shares_ms", "sim, shares ms", "{:.0f}"),
            Column("shares_err", "err%", "{:+.1f}"),
            Column("interference_ms", "sim, + interference ms", "{:.0f}"),
            Column("interference_err", "err%", "{:+.1f}"),
            Column("interference_ci_ms", "95% CI ms"),
            Column("measured_both", "both directions", "{:.2f}"),
            Column("sim_both", "sim", "{:.2f}"),
            Column("measured_all_pulling", "all pulling", "{:.2f}"),
            Column("sim_all_pulling", "sim", "{:.2f}"),
            Column("measured_all_pushing", "all pushing", "{:.2f}"),
            Column("sim_all_pushing", "sim", "{:.2f}"),
        ],
    )
    for p in points:
        shares, inter = p.simulated[SHARES], p.simulated[INTERFERENCE]
        occ = inter.occupancy
        low, high = inter.cycle_s.ci_low, inter.cycle_s.ci_high
        out.add(
            workers=p.workers,
            measured_ms=1e3 * p.cycle_s,
            lock_step_ms=1e3 * lock_step_s(p.workers, alone_s, args.busy_s),
            pipelined_ms=1e3 * pipelined_s(p.workers, alone_s, args.busy_s),
            shares_ms=1e3 * shares.cycle_s.value,
            shares_err=_error(shares, p),
            interference_ms=1e3 * inter.cycle_s.value,
            interference_err=_error(inter, p),
            interference_ci_ms="-"
            if low is None or high is None
            else f"{1e3 * low:.0f}-{1e3 * high:.0f}",
            measured_both=p.occupancy.both_directions,
            sim_both=occ.both_directions,
            measured_all_pulling=p.occupancy.all_pulling,
            sim_all_pulling=occ.all_pulling,
            measured_all_pushing=p.occupancy.all_pushing,
            sim_all_pushing=occ.all_pushing,
        )
    return out


def states_table(fit: StateShares) -> Table:
    """Every state with at least SHOWN_STATE_SHARE of the loops' transfer time: the fitted
    share of one flow's goodput a transfer got, against the testbed's interference model and
    equal shares."""
    out = Table(
        "The share of one flow's goodput a transfer got, by the link's state (pulls and pushes "
        f"in flight, itself included; fitted to every loop's transfers, which strayed "
        f"{fit.residual_cv:.0%} (cv) from the fit)",
        [
            Column("direction", "direction"),
            Column("pulls", "pulls"),
            Column("pushes", "pushes"),
            Column("seconds", "seconds", "{:.1f}"),
            Column("measured", "measured share", "{:.2f}"),
            Column("interference", "interference model", "{:.2f}"),
            Column("equal", "equal shares", "{:.2f}"),
        ],
    )
    model = TESTBED_INTERFERENCE
    total = sum(fit.seconds.values())
    for (direction, pulls, pushes), share in fit.shares.items():
        if fit.seconds[(direction, pulls, pushes)] < SHOWN_STATE_SHARE * total:
            continue
        mine, other = (pulls, pushes) if direction == PULL else (pushes, pulls)
        exponent = model.pull_exponent if direction == PULL else model.push_exponent
        out.add(
            direction=direction,
            pulls=pulls,
            pushes=pushes,
            seconds=fit.seconds[(direction, pulls, pushes)],
            measured=share,
            interference=interfered_capacity(1.0, mine, other, model.efficiency, exponent) / mine,
            equal=1.0 / mine,
        )
    return out


def _error(simulated: Simulated, point: LoopPoint) -> float:
    return 100 * (simulated.cycle_s.value / point.cycle_s - 1)


def plot(
    points: Sequence[LoopPoint],
    alone_s: float,
    busy_s: float,
    title: str,
    out: ScenarioOutput,
) -> None:
    """Top left: the cycle against W, measured, simulated and the two bounds; top right: the
    share of time both directions of the link were busy; below: two workers' transfers over
    six measured cycles after the warm-up, measured and simulated."""
    fig, ((cycle_ax, occ_ax), (real_ax, sim_ax)) = new_figure(2, 2, size=(9.0, 7.0))
    ws = [p.workers for p in points]
    cycle_ax.plot(
        ws,
        [1e3 * lock_step_s(w, alone_s, busy_s) for w in ws],
        ":",
        color="gray",
        label="lock-step",
    )
    cycle_ax.plot(
        ws,
        [1e3 * pipelined_s(w, alone_s, busy_s) for w in ws],
        "--",
        color="gray",
        label="pipelined",
    )
    for sharing, marker in ((SHARES, "s"), (INTERFERENCE, "^")):
        cycles = [p.simulated[sharing].cycle_s for p in points]
        cycle_ax.errorbar(
            ws,
            [1e3 * c.value for c in cycles],
            yerr=[[1e3 * _below(c) for c in cycles], [1e3 * _above(c) for c in cycles]],
            marker=marker,
            capsize=3,
            label=f"simulated, {sharing}",
        )
    cycle_ax.plot(ws, [1e3 * p.cycle_s for p in points], "o-", color="black", label="measured")
    cycle_ax.set_xlabel("workers")
    cycle_ax.set_ylabel("cycle (each worker's step), ms")
    cycle_ax.set_xticks(ws)
    cycle_ax.legend(fontsize=7)
    width = 0.38
    occ_ax.bar(
        [w - width / 2 for w in ws],
        [p.occupancy.both_directions for p in points],
        width,
        color="black",
        label="measured",
    )
    occ_ax.bar(
        [w + width / 2 for w in ws],
        [p.simulated[INTERFERENCE].occupancy.both_directions for p in points],
        width,
        color="tab:orange",
        label=f"simulated, {INTERFERENCE}",
    )
    occ_ax.set_xlabel("workers")
    occ_ax.set_ylabel("share of time both directions were busy")
    occ_ax.set_ylim(0, 1.15)
    occ_ax.set_xticks(ws)
    occ_ax.legend(fontsize=7, loc="upper center", ncol=2)
    for ax in (cycle_ax, occ_ax):
        ax.grid(axis="y", alpha=0.3)
    pair = points[1]  # W = 2: where the simulator misses most
    span = 6 * pair.cycle_s
    start, _ = pair.probe.window()
    _draw_transfers(real_ax, pair.probe.transfers, start, span, "measured, 2 workers")
    simulated = pair.simulated[INTERFERENCE].intervals
    sim_start = min(i.start_s for i in simulated)
    _draw_transfers(sim_ax, simulated, sim_start, span, "simulated, 2 workers")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def _draw_transfers(
    ax: Any, intervals: Sequence[TransferInterval], start_s: float, span_s: float, label: str
) -> None:
    """One row per worker: its pulls and pushes from ``start_s`` for ``span_s``, in ms."""
    workers = 1 + max(i.worker for i in intervals)
    for direction, color in ((PULL, "tab:blue"), (PUSH, "tab:red")):
        for worker in range(workers):
            bars = [
                (1e3 * (i.start_s - start_s), 1e3 * (i.end_s - i.start_s))
                for i in intervals
                if i.worker == worker
                and i.direction == direction
                and i.end_s > start_s
                and i.start_s < start_s + span_s
            ]
            ax.broken_barh(bars, (worker - 0.35, 0.7), color=color, alpha=0.8)
    ax.set_xlim(0, 1e3 * span_s)
    ax.set_yticks(range(workers), [f"worker {w + 1}" for w in range(workers)], fontsize=8)
    ax.set_xlabel("ms")
    ax.set_title(f"{label}: pulls (blue), pushes (red)", fontsize=8)


def _below(estimate: Estimate) -> float:
    return 0.0 if estimate.ci_low is None else max(0.0, estimate.value - estimate.ci_low)


def _above(estimate: Estimate) -> float:
    return 0.0 if estimate.ci_high is None else max(0.0, estimate.ci_high - estimate.value)


def finding(points: Sequence[LoopPoint]) -> str:
    """Where the simulator (with the testbed's interference, as the validations predict)
    matches the measured cycle and where it does not."""
    parts = []
    for p in points:
        inter = p.simulated[INTERFERENCE]
        both = p.occupancy.both_directions
        sim_both = inter.occupancy.both_directions
        parts.append(
            f"W = {p.workers}: {1e3 * p.cycle_s:.0f} ms measured, {1e3 * inter.cycle_s.value:.0f} "
            f"simulated ({_error(inter, p):+.0f}%; both directions busy {both:.0%} against "
            f"{sim_both:.0%})"
        )
    missed = [p.workers for p in points if abs(_error(p.simulated[INTERFERENCE], p)) > 100 * CLOSE]
    verdict = (
        f"within {CLOSE:.0%} at every W"
        if not missed
        else f"off by more than {CLOSE:.0%} at W = {', '.join(map(str, missed))}"
    )
    return finding_line(
        "as the validations predict (the measured flow shares and the testbed's "
        f"interference), the simulator is {verdict}: " + "; ".join(parts) + "."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = bare_scenario_parser(NAME, __doc__)
    parser.add_argument(
        "--workers", type=positive_int, default=4, help="up to this many workers (default 4)"
    )
    parser.add_argument(
        "--rate", default="200Mbit/s", help="the server's link rate (default 200Mbit/s)"
    )
    parser.add_argument(
        "--nbytes", default="2.48MB", help="bytes each way per step (default 2.48MB, cnn's)"
    )
    parser.add_argument(
        "--busy", default="5ms", help="spinning between a pull and a push (default 5ms)"
    )
    parser.add_argument(
        "--steps", type=positive_int, default=30, help="steps per worker (default 30)"
    )
    parser.add_argument(
        "--warmup", type=positive_int, default=8, help="steps left out at the start (default 8)"
    )
    parser.add_argument(
        "--seeds", type=positive_int, default=5, help="simulated seeds per point (default 5)"
    )
    parser.add_argument(
        "--flow-weight-cv",
        type=float,
        metavar="CV",
        help="the simulated flows' weight spread, both directions (default: as measured)",
    )
    add_output_options(parser, NAME)
    args = parser.parse_args(argv)
    if args.flow_weight_cv is not None and not args.flow_weight_cv >= 0:
        parser.error(f"--flow-weight-cv: must be >= 0, got {args.flow_weight_cv}")
    if args.workers < 2:
        parser.error(f"--workers: the loop compares 2 or more workers, got {args.workers}")
    if args.warmup + 3 > args.steps:
        parser.error(f"--warmup: must leave 3 steps of --steps ({args.steps}), got {args.warmup}")
    try:
        args.rate_bps = parse_bandwidth(args.rate, name="--rate")
        args.nbytes = parse_size(args.nbytes, name="--nbytes")
        args.busy_s = parse_duration(args.busy, name="--busy", positive=False)
    except ConfigError as err:
        parser.error(str(err))
    if args.nbytes < 4:
        parser.error(f"--nbytes: at least 4 bytes, got {args.nbytes}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def body() -> None:
        check_permitted(NAME)
        out = ScenarioOutput(args.out, [CSV_FILE, STATES_CSV_FILE, FIGURE_FILE], force=args.force)
        link, points = measure(args, progress_printer(args))
        alone_s = points[0].probe.transfer_s()  # one worker: its transfers alone
        result = table(points, link, alone_s, args)
        print(result.text())
        out.write_csv(CSV_FILE, result)
        runs = [(p.probe.transfers, *p.probe.window()) for p in points]
        shares = states_table(state_shares(runs, alone_s))
        print("\n" + shares.text())
        out.write_csv(STATES_CSV_FILE, shares)
        title = (
            f"{format_bytes(args.nbytes)} each way, {1e3 * args.busy_s:g} ms busy, "
            f"link shaped to {format_bandwidth(args.rate_bps)}"
        )
        plot(points, alone_s, args.busy_s, title, out)
        print("\n" + finding(points))
        print(out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
