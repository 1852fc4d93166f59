"""In which order should a worker receive its layers' parameters, and does HTTP/2 multiplexing hurt?

Question
    gRPC sends every tensor as its own HTTP/2 stream and multiplexes the streams of one
    connection: a stream picked for the first time sends at most one flow-control window WIN,
    then yields to the others (ICPE'20 3.2.2, Fig. 11-12). So a layer's parameters can be queued
    behind slices of every other layer while the forward pass waits for them (Fig. 8c). With
    flow control off, whole streams go in a fixed order (ICPE'20 3.3, Fig. 17-19): trace order,
    TicTac's critical-path order, its reverse, or a random order. How much throughput does each
    choice give, and where do the stalls come from?

Setup
    - trace: the shipped ``resnet18-b32`` sample (41 layers with parameters, from 37 KiB to
      9 MiB, 44.6 MiB in all; about 1 s of forward and 1.6 s of backward per step on the
      profiling CPU), one parameter server behind a 1 Gbit/s link shared by processor sharing,
      Async-SGD. One worker's pulls take 0.37 s at 1 Gbit/s, a good part of its forward pass,
      so the order decides whether the forward pass runs alongside the pulls or waits for them;
    - orderings (``SimulationConfig.scheduler`` and ``window_bytes``, SEMANTICS.md "Streams on
      a connection"): ``http2`` with WIN = 16 KiB .. 4 MiB; flow control off with ``trace``,
      ``critical-path``, ``reverse`` and ``random`` order; and ``fifo`` (order of readiness, the
      simulator's default) as the reference;
    - every ordering at every W in ``--workers``; each point runs until the 95% confidence
      interval of its examples/s is within ``--precision`` (1%; at most ``--max-steps`` 1000
      steps per worker; ``--steps`` fixes the length), a tenth of each run left out as warm-up;
      all points run at once on the cores ``--jobs`` allows; the same seed for all;
    - one worker's step under six orderings, each the first measured step that sampled the same
      profiled step (so the computation is identical and only the waiting differs), from
      separate one-worker runs of fixed length (that of the rule's first run, 100 steps, or
      ``--steps``): a picture of given steps, not an estimate.

Output
    A table (examples/s per ordering and W; for one worker, the step time and the time per step
    its compute sits idle waiting for parameters or for the end of the pushes), a finding, and
    in ``--out`` (default ``results/http2_windows/``): ``http2_windows.csv`` (the table),
    ``http2_windows.png`` (throughput against W per ordering) and
    ``http2_windows_timeline.png`` (the one-worker Gantt charts on one time axis).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simcore.cli.progress import Progress
from simcore.plots import new_figure, save_figure
from simcore.plots.timeline import draw_timeline
from simcore.report import (
    Column,
    ScenarioOutput,
    Table,
    base_config,
    estimate_cells,
    estimate_columns,
    finding_line,
    run_scenario,
    scenario_parser,
)
from simcore.report.scenario import grouped_precision_notes, length_setup, simulate_points
from simcore.sim import SimulationConfig, SimulationResult, simulate_many
from simcore.sim.results import Timeline
from simcore.trace.io import load_trace
from simcore.trace.model import Resource

NAME = "http2_windows"
TRACE = "resnet18-b32"
BANDWIDTH = "1Gbps"
WORKERS = (1, 2, 4, 6, 8)
SEED = 1
KIB = 1024
CSV_FILE = f"{NAME}.csv"
POINTS_FILE = f"{NAME}_points.csv"
FIGURE_FILE = f"{NAME}.png"
TIMELINE_FILE = f"{NAME}_timeline.png"
SAME_SHARE = 0.005  # throughputs within 0.5% count as a tie in the finding
NEAR_BOUND = 0.8  # share of the link bound from which the finding calls a run saturated
POINT_COLUMNS = (
    Column("ordering", "ordering"),
    Column("workers", "W"),
    *estimate_columns(),
    Column("downlink_utilization", "downlink util."),
    Column("steps", "steps", "{}"),
)


@dataclass(frozen=True)
class Ordering:
    """How a connection orders its streams: a scheduler and, for ``http2``, the window WIN."""

    label: str
    short: str
    scheduler: str
    window_bytes: int = 64 * KIB
    on_timeline: bool = False


ORDERINGS = (
    Ordering("fifo (readiness, reference)", "fifo", "fifo"),
    Ordering("HTTP/2, WIN = 16 KiB", "HTTP/2 16 KiB", "http2", 16 * KIB),
    Ordering("HTTP/2, WIN = 64 KiB", "HTTP/2 64 KiB", "http2", 64 * KIB, on_timeline=True),
    Ordering("HTTP/2, WIN = 256 KiB", "HTTP/2 256 KiB", "http2", 256 * KIB),
    Ordering("HTTP/2, WIN = 1 MiB", "HTTP/2 1 MiB", "http2", 1024 * KIB),
    Ordering("HTTP/2, WIN = 4 MiB", "HTTP/2 4 MiB", "http2", 4096 * KIB, on_timeline=True),
    Ordering("no flow control, trace order", "trace", "trace", on_timeline=True),
    Ordering("no flow control, critical path", "critical path", "critical-path", on_timeline=True),
    Ordering("no flow control, reverse order", "reverse", "reverse", on_timeline=True),
    Ordering("no flow control, random order", "random", "random", on_timeline=True),
)


@dataclass(frozen=True)
class Row:
    """One ordering: its results at every W and, for one worker, the step it drew."""

    ordering: Ordering
    points: tuple[SimulationResult, ...]
    solo: SimulationResult | None  # the one-worker point, with a timeline
    picture: SimulationResult | None  # one worker, fixed length, with a timeline (Gantt chart)
    param_nbytes: int
    batch_size: int

    @property
    def workers(self) -> list[int]:
        return [p.config.workers for p in self.points]

    @property
    def examples_per_s(self) -> list[float]:
        return [p.examples_per_s.value for p in self.points]


def idle_per_step_s(timeline: Timeline, worker: int, first_step: int) -> tuple[float, float]:
    """(mean step time, mean time the worker's compute is idle per step) in seconds, over its
    steps from ``first_step`` on."""
    steps = [s for s in timeline.steps if s.worker == worker and s.step >= first_step]
    compute = [i for i, name in enumerate(timeline.slot_names) if name == Resource.WORKER.value]
    mine = (timeline.worker == worker) & np.isin(timeline.slot, compute)
    mine &= timeline.step >= first_step
    busy = float(np.sum(timeline.end_s[mine] - timeline.start_s[mine]))
    span = sum(s.end_s - s.start_s for s in steps)
    return span / len(steps), (span - busy) / len(steps)


def run(args: argparse.Namespace) -> tuple[list[Row], str, str]:
    """Simulate every ordering at every W (the one-worker points keep their timeline), and the
    one-worker runs of the Gantt charts."""
    trace = load_trace(args.trace)
    base, link = base_config(args)  # fixed: --steps, or the rule's pilot length
    setup = (
        f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker, "
        f"{sum(1 for layer in trace.layers if layer.param_nbytes)} layers with parameters, "
        f"{trace.param_nbytes / 2**20:.1f} MiB; one PS, link {link}, processor sharing; "
        f"Async-SGD, {length_setup(args)}"
    )

    def config(ordering: Ordering, workers: int) -> SimulationConfig:
        return replace(
            base,
            workers=workers,
            scheduler=ordering.scheduler,
            window_bytes=ordering.window_bytes,
            timeline=workers == 1,
        )

    configs = [config(o, w) for o in ORDERINGS for w in args.workers]
    progress = Progress("simulating", "worker-steps", enabled=not args.quiet)
    results = iter(simulate_points(trace, configs, args, progress))  # all at once: --jobs
    # The Gantt charts draw given steps of one worker, not an estimate: their runs keep base's
    # fixed length (--steps, or the rule's pilot) whatever length the rule gives the points.
    drawn = [o for o in ORDERINGS if o.on_timeline] if 1 in args.workers else []
    progress = Progress("timelines", "worker-steps", enabled=not args.quiet)
    drawings = simulate_many(trace, [config(o, 1) for o in drawn], None, progress=progress)
    pictures = dict(zip(drawn, drawings, strict=True))
    rows = []
    for ordering in ORDERINGS:
        points = tuple(next(results) for _ in args.workers)
        solo = next((p for p in points if p.config.workers == 1), None)
        rows.append(
            Row(
                ordering,
                points,
                solo,
                pictures.get(ordering),
                trace.param_nbytes,
                trace.metadata.batch_size,
            )
        )
    title = (
        f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}/worker, link {link}, "
        "Async-SGD: stream order on the PS connections"
    )
    return rows, setup, title


def table(rows: Sequence[Row]) -> Table:
    workers = rows[0].workers
    columns = [Column("ordering", "ordering"), Column("scheduler", "scheduler")]
    columns.append(Column("window_bytes", "WIN (B)"))
    columns += [Column(f"examples_per_s_w{w}", f"W={w}") for w in workers]
    if 1 in workers:
        columns.append(Column("step_ms_w1", "step (ms), W=1"))
        columns.append(Column("idle_ms_w1", "compute idle (ms), W=1"))
    out = Table("examples/s by stream ordering and number of workers W", columns)
    for row in rows:
        o = row.ordering
        values: dict[str, Any] = {
            "ordering": o.label,
            "scheduler": o.scheduler,
            "window_bytes": o.window_bytes if o.scheduler == "http2" else None,
        }
        for w, x in zip(row.workers, row.examples_per_s, strict=True):
            values[f"examples_per_s_w{w}"] = x
        if row.solo is not None and row.solo.timeline is not None:
            step_s, idle_s = idle_per_step_s(row.solo.timeline, 0, row.solo.config.warmup_steps)
            values["step_ms_w1"] = step_s * 1e3
            values["idle_ms_w1"] = idle_s * 1e3
        out.add(**values)
    return out


def points_table(rows: Sequence[Row]) -> Table:
    """Every simulated point with its 95% confidence interval (the CSV behind the figure)."""
    out = Table("every point", POINT_COLUMNS)
    for row in rows:
        for p in row.points:
            est = p.examples_per_s
            out.add(
                ordering=row.ordering.label,
                workers=p.config.workers,
                **estimate_cells(est),
                downlink_utilization=p.links[0].utilization,
                steps=p.config.steps,
            )
    return out


def link_bound_examples_per_s(rows: Sequence[Row]) -> float:
    """Async-SGD's ceiling: each direction of the link carries every step's whole model, so at
    most ``B / (8 * model bytes)`` steps per second, times the batch size."""
    config = rows[0].points[0].config
    return config.bandwidth_bps / (8 * rows[0].param_nbytes) * rows[0].batch_size


def finding(rows: Sequence[Row], bound: float) -> str:
    """Which orders are best with the fewest and with the most workers, and why."""
    workers = rows[0].workers
    lines = []
    for w in sorted({workers[0], workers[-1]}):
        j = workers.index(w)
        values = sorted(((r.examples_per_s[j], r) for r in rows), key=lambda v: -v[0])
        best = values[0][0]
        top = [r.ordering.short for x, r in values if x >= best * (1 - SAME_SHARE)]
        rest = [
            f"{r.ordering.short} {100 * (x / best - 1):+.1f}%"
            for x, r in values
            if x < best * (1 - SAME_SHARE)
        ]
        text = f"W = {w}: best {', '.join(top)} ({best:.2f} examples/s)"
        if w == workers[0] and rest:
            text += "; then " + ", ".join(rest)
        elif rest:
            worst_x, worst = values[-1]
            text += f", the others down to {worst.ordering.short} "
            text += f"({100 * (worst_x / best - 1):+.1f}%). "
            if best >= NEAR_BOUND * bound:
                text += (
                    f"That is near the link bound of {bound:.1f} examples/s (each step moves "
                    "the whole model each way): there the orders mostly change how the "
                    f"workers' transfers interleave, and the 95% CIs are wide ({POINTS_FILE})"
                )
            else:
                text += (
                    f"(Link bound {bound:.1f} examples/s.) With several workers the order also "
                    "changes how their transfers interleave on the shared link"
                )
        lines.append(text)
    best_at = [max(r.examples_per_s[j] for r in rows) for j in range(len(workers))]

    def share(row: Row) -> float:  # its worst throughput relative to the best at the same W
        return min(x / b for x, b in zip(row.examples_per_s, best_at, strict=True))

    top_share = max(share(r) for r in rows)
    overall = [r for r in rows if share(r) >= top_share - SAME_SHARE]
    lines.append(
        f"Overall: {', '.join(r.ordering.short for r in overall)}: within "
        f"{100 * (1 - min(share(r) for r in overall)):.1f}% of the best at every W "
        f"({', '.join(str(w) for w in workers)})."
    )
    worst = min(rows, key=lambda r: r.examples_per_s[0])
    if workers[0] == 1 and worst.solo is not None and worst.solo.timeline is not None:
        _, idle_s = idle_per_step_s(worst.solo.timeline, 0, worst.solo.config.warmup_steps)
        lines.append(
            f"With one worker, {worst.ordering.short} order leaves the compute idle "
            f"{idle_s * 1e3:.0f} ms per step: layer 1's parameters come last, so the forward "
            "pass waits for every pull."
        )
    by_scheduler = {r.ordering.scheduler: r for r in rows}
    trace_x = by_scheduler["trace"].examples_per_s[0]
    path_x = by_scheduler["critical-path"].examples_per_s[0]
    if path_x >= trace_x * (1 - SAME_SHARE):
        path_text = (
            "the critical path puts them first too (the first layers have the longest path to "
            "the end of the step)"
        )
    else:
        path_text = (
            f"the critical path ({100 * (path_x / trace_x - 1):+.1f}% against trace order at "
            f"W = {workers[0]}) ranks a layer by its path to the end of the step including its "
            "own pull and push, so a large late layer goes first and the first layers wait"
        )
    lines.append(
        "Why: trace order sends the first layers' parameters first, so the forward pass runs "
        f"alongside the later pulls; {path_text}. HTTP/2 costs little here: a stream is "
        "interrupted at most once, so a layer waits for one window of each later layer, and "
        "the large layers that get interrupted come late in the forward pass."
    )
    first = workers[0]
    worst_first = min(rows, key=lambda r: r.examples_per_s[0])
    loss = 100 * (1 - worst_first.examples_per_s[0] / best_at[0])
    within = 100 * (1 - min(share(r) for r in overall))
    names = ", ".join(r.ordering.short for r in overall)
    headline = (
        f"{names} stay{'s' if len(overall) == 1 else ''} within {within:.1f}% of the best "
        f"throughput at every W, while {worst_first.ordering.short} order costs {loss:.1f}% "
        f"at W = {first}."
    )
    return finding_line(headline) + "\n  " + "\n  ".join(lines)


def plot(rows: Sequence[Row], out: ScenarioOutput, title: str, bound: float) -> None:
    """Throughput against W, one line per ordering, with 95% CIs and the link bound."""
    import matplotlib

    fig, ax = new_figure(size=(9.0, 5.2))
    blues = matplotlib.colormaps["Blues"]
    http2 = [r for r in rows if r.ordering.scheduler == "http2"]
    others = iter(("C3", "C2", "C1", "C4", "C5"))
    for row in rows:
        o = row.ordering
        if o.scheduler == "fifo":
            style: dict[str, Any] = {"color": "black", "ls": "--", "marker": ".", "zorder": 4}
        elif o.scheduler == "http2":
            shade = 0.35 + 0.6 * http2.index(row) / max(1, len(http2) - 1)
            style = {"color": blues(shade), "ls": "-", "marker": "o", "ms": 3}
        else:
            style = {"color": next(others), "ls": "-", "marker": "s", "ms": 4}
        ax.plot(row.workers, row.examples_per_s, label=o.label, lw=1.2, **style)
        low = [p.examples_per_s.ci_low for p in row.points]
        high = [p.examples_per_s.ci_high for p in row.points]
        if all(v is not None for v in low + high):
            ax.fill_between(row.workers, low, high, color=style["color"], alpha=0.12, lw=0)
    ax.axhline(bound, color="0.5", ls=":", lw=1.0, label="link bound (whole model each way)")
    ax.set_xlabel("workers W")
    ax.set_ylabel("training throughput (examples/s)")
    ax.set_title(title, fontsize=9)
    ax.set_xlim(left=0)
    ax.set_ylim(0, bound * 1.08)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    save_figure(fig, out.path(FIGURE_FILE), overwrite=out.force)


def plot_timelines(rows: Sequence[Row], out: ScenarioOutput, title: str) -> None:
    """One worker's step under each ordering on the timeline, on one time axis.

    Each panel shows the first measured step that sampled the same profiled step as the
    reference ordering's first measured step, so every panel computes the same. The runs are
    the fixed-length ``Row.picture`` ones (the same length and warm-up for every ordering).
    """
    shown = [r for r in rows if r.ordering.on_timeline and r.picture is not None]
    timelines = [r.picture.timeline for r in shown if r.picture is not None]
    if not shown or any(t is None for t in timelines):
        return
    warmup = shown[0].picture.config.warmup_steps  # type: ignore[union-attr]
    first = next(s for s in timelines[0].steps if s.step >= warmup)  # type: ignore[union-attr]
    picks = []
    for tl in timelines:
        assert tl is not None
        same = [s for s in tl.steps if s.step >= warmup and s.profile_step == first.profile_step]
        picks.append(same[0] if same else next(s for s in tl.steps if s.step >= warmup))
    width_s = max(p.end_s - p.start_s for p in picks)
    fig, axes = new_figure(len(shown), 1, size=(11.0, 1.1 + 1.45 * len(shown)), sharex=True)
    unit = "ms"
    for i, (ax, row, tl, pick) in enumerate(zip(axes, shown, timelines, picks, strict=True)):
        assert tl is not None
        unit = draw_timeline(
            ax,
            tl,
            steps=(pick.step, pick.step),
            origin_s=pick.start_s,
            xlim_s=width_s,
            legend=i == 0,
            step_labels=False,
        ).unit
        ax.set_title(
            f"{row.ordering.label}: step {pick.step} takes "
            f"{(pick.end_s - pick.start_s) * 1e3:.0f} ms",
            fontsize=9,
            loc="left",
        )
        ax.set_xlabel("")
    axes[-1].set_xlabel(
        f"time since the step began ({unit}); one worker, the same profiled step "
        f"({first.profile_step}) in every panel"
    )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(h_pad=0.4)
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
        files = [CSV_FILE, POINTS_FILE, FIGURE_FILE, TIMELINE_FILE]
        out = ScenarioOutput(args.out, files, force=args.force)
        rows, setup, title = run(args)
        result_table = table(rows)
        print(setup)
        print()
        print(result_table.text())
        print()
        bound = link_bound_examples_per_s(rows)
        print(finding(rows, bound))
        notes = grouped_precision_notes((r.points, r.ordering.short) for r in rows)
        if notes:
            print("\n" + notes)
        out.write_csv(CSV_FILE, result_table)
        out.write_csv(POINTS_FILE, points_table(rows))
        plot(rows, out, title, bound)
        plot_timelines(rows, out, title)
        print("\n" + out.summary())

    return run_scenario(NAME, body, args)


if __name__ == "__main__":
    sys.exit(main())
