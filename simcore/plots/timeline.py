"""Gantt-style timelines of a simulated (or profiled) run: the pictures of TPDS'22 Fig. 4a and 7.

One row per worker and resource: ``pull`` (the worker's downlink connection), ``compute`` (its
forward and backward passes, and parsing), ``push`` (its uplink) and ``update`` (its core at the
parameter server); with several servers one ``pull``/``push``/``update`` row per server. Bars
are colored by op kind; the latency after a transfer, which occupies no resource, is a thin strip
under the link's row. Steps are shaded alternately per worker and start at a thin vertical line;
in Sync-SGD dashed lines mark the barriers.

For many workers, pick some (``workers=[0, 1, 2]``) or draw the aggregate view
(:func:`draw_activity`): per resource, how many workers are busy on it over time.

Everything takes either a :class:`~simcore.sim.results.Timeline` or a list of
:class:`~simcore.export.chrome.TimelineSpan` (the same spans the Chrome export writes).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simcore.errors import ConfigError
from simcore.export.chrome import (
    LATENCY,
    READY,
    WAIT,
    TimelineSpan,
    profiled_step_spans,
    resource_base,
    server_of,
    simulated_spans,
)
from simcore.plots.common import new_figure, save_figure
from simcore.sim.results import SimulationResult, Timeline
from simcore.trace.model import Trace
from simcore.units import format_bandwidth

#: Colors per op kind, after TPDS'22 Fig. 4a: downlink yellow, forward red, backward cyan,
#: uplink green.
KIND_COLORS: dict[str, str] = {
    "pull": "#e3b505",
    "forward": "#d62728",
    "backward": "#17becf",
    "push": "#2ca02c",
    "allreduce": "#2ca02c",
    "update": "#9467bd",
    "parse": "#8c564b",
    "latency": "#9e9e9e",
    "intra-host": "#ff7f0e",
    "overhead": "#e377c2",
    "copy": "#bcbd22",
    "queued": "#1f77b4",  # DDP: a ready bucket waiting for the ones before it (a strip)
    "wait": "#c7c7c7",  # DDP: a rank waiting for the other ranks to start or finish a bucket
    "ready": "#000000",  # DDP: the instant a bucket's gradients are all in it (a marker)
    "other": "#7f7f7f",
}
ROW_KINDS = ("pull", "compute", "push", "allreduce", "update")  # row order within a worker
ROW_TITLES = {
    "pull": "workers pulling",
    "compute": "workers computing",
    "push": "workers pushing",
    "allreduce": "workers all-reducing",
    "update": "workers' updates at a server",
}
MS_BELOW_S = 2.0  # windows shorter than this are drawn in milliseconds
BAR = (0.1, 0.72)  # bar bottom offset and height within a row of height 1
STRIP = (0.84, 0.12)  # latency strip
PIXELS = 900  # about the width of the plotting area, for the minimum bar width
EDGE_PIXELS = 3  # bars narrower than this get no edge
SHADE = "#000000"
SHADE_ALPHA = 0.05


@dataclass(frozen=True)
class Row:
    """One row of the Gantt chart: a worker's resource (``server`` for links and updates)."""

    worker: int
    kind: str  # pull, compute, push, update or another resource name
    server: int = 0

    def order(self) -> tuple[int, int, int, str]:
        rank = ROW_KINDS.index(self.kind) if self.kind in ROW_KINDS else len(ROW_KINDS)
        return (self.worker, rank, self.server, self.kind)


@dataclass(frozen=True)
class Step:
    """One step of one worker (seconds)."""

    worker: int
    step: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class TimelineView:
    """What :func:`draw_timeline` drew: rows top to bottom, the window and the time unit."""

    rows: tuple[Row, ...]
    start_s: float
    end_s: float
    origin_s: float
    unit: str  # "ms" or "s"
    kinds: tuple[str, ...]
    barriers_s: tuple[float, ...]


def span_row(span: TimelineSpan) -> tuple[Row, bool]:
    """The row a span is drawn on, and whether it is a latency strip rather than a bar."""
    worker = int(span.args.get("worker", _number(span.process)))
    if span.process.startswith("server"):
        return Row(worker, "update", _number(span.process)), False
    if span.category == LATENCY:
        link = str(span.args.get("link", "")) or "downlink"
        kind = {"uplink": "push", "allreduce": "allreduce"}.get(resource_base(link), "pull")
        return Row(worker, kind, server_of(link)), True
    base = resource_base(span.resource)
    kind = {"downlink": "pull", "worker": "compute", "uplink": "push", "ps": "update"}.get(
        base, base
    )
    return Row(worker, kind, server_of(span.resource)), False


def select(
    data: Timeline | Sequence[TimelineSpan],
    *,
    workers: Sequence[int] | None = None,
    steps: tuple[int, int] | None = None,
    time_s: tuple[float, float] | None = None,
    trace: Trace | Sequence[Trace] | None = None,
    arch: str = "ps",
) -> tuple[list[TimelineSpan], list[Step], tuple[float, float]]:
    """The spans and steps to draw, and the time window (s) they fill.

    ``steps=(first, last)`` (inclusive) selects a window in time: from the earliest start of step
    ``first`` to the latest end of step ``last`` among the chosen workers; every op in that window
    is drawn (in Async-SGD, workers' steps are not aligned). ``time_s`` gives the window directly.
    Raises ConfigError when the window holds nothing, naming what the data has.
    """
    all_steps = _steps(data)
    shown = sorted({s.worker for s in all_steps}) if workers is None else sorted(set(workers))
    known = {s.worker for s in all_steps}
    missing = [w for w in shown if w not in known]
    if missing:
        raise ConfigError(
            f"workers: {missing} not in the timeline, which has workers "
            f"{_range_text(sorted(known))}"
        )
    mine = [s for s in all_steps if s.worker in set(shown)]
    if steps is not None:
        first, last = steps
        chosen = [s for s in mine if first <= s.step <= last]
        if last < first or not chosen:
            numbers = sorted({s.step for s in mine})
            raise ConfigError(
                f"steps: {first}..{last} is not in the timeline, which has steps "
                f"{_range_text(numbers)}"
            )
        window = (min(s.start_s for s in chosen), max(s.end_s for s in chosen))
    elif time_s is not None:
        window = (float(time_s[0]), float(time_s[1]))
        if not window[0] < window[1]:
            raise ConfigError(f"time window: {time_s} is empty; expected t0 < t1")
    else:
        window = (min(s.start_s for s in mine), max(s.end_s for s in mine))
    if isinstance(data, Timeline):
        spans = simulated_spans(data, workers=shown, time_s=window, trace=trace, arch=arch)
    else:
        spans = [
            s
            for s in data
            if int(s.args.get("worker", 0)) in set(shown)
            and s.end_s > window[0]
            and s.start_s < window[1]
        ]
    if not spans:
        raise ConfigError(
            f"time window: {window[0]:.6g}..{window[1]:.6g} s holds no ops; the timeline runs "
            f"from {min(s.start_s for s in mine):.6g} to {max(s.end_s for s in mine):.6g} s"
        )
    in_window = [s for s in mine if s.end_s > window[0] and s.start_s < window[1]]
    return spans, in_window, window


def draw_timeline(
    ax: Any,
    data: Timeline | Sequence[TimelineSpan],
    *,
    workers: Sequence[int] | None = None,
    steps: tuple[int, int] | None = None,
    time_s: tuple[float, float] | None = None,
    trace: Trace | Sequence[Trace] | None = None,
    arch: str = "ps",
    unit: str | None = None,
    origin_s: float | None = None,
    xlim_s: float | None = None,
    barriers: bool = True,
    legend: bool = True,
    step_labels: bool = True,
) -> TimelineView:
    """Draw a Gantt chart of ``data`` on ``ax``: one row per worker and resource.

    Parameters
    ----------
    ax : a matplotlib axes.
    data : a simulated :class:`Timeline` or timeline spans (e.g. :func:`profiled_step_spans`).
    workers : the workers to draw (default all).
    steps : ``(first, last)``, the steps to show (inclusive); or ``time_s=(t0, t1)`` in seconds.
    trace, arch : passed to :func:`simcore.export.chrome.simulated_spans` for a Timeline.
    unit : ``"ms"`` or ``"s"``; default ms for windows under 2 s.
    origin_s : the time drawn as 0 (default the window's start); the axis says where it is.
    xlim_s : the width of the x axis in seconds (to draw several panels on one time scale).
    barriers : mark the Sync-SGD barriers: the step ends that every shown worker shares (none
        in Async-SGD or with one worker); False to leave them out.
    legend : draw the legend of op kinds (right of the axes).
    step_labels : write the step numbers of the top worker above the axes.

    Returns
    -------
    TimelineView: the rows, the window and the unit.
    """
    spans, shown_steps, window = select(
        data, workers=workers, steps=steps, time_s=time_s, trace=trace, arch=arch
    )
    origin = window[0] if origin_s is None else origin_s
    width_s = xlim_s if xlim_s is not None else window[1] - window[0]
    unit = unit or ("ms" if width_s < MS_BELOW_S else "s")
    if unit not in ("ms", "s"):
        raise ConfigError(f"unit: {unit!r} is not ms or s")
    scale = 1e3 if unit == "ms" else 1.0
    placed = [(span, *span_row(span)) for span in spans]
    rows = sorted({row for _, row, _ in placed}, key=Row.order)
    y_of = {row: i for i, row in enumerate(rows)}

    def x(t: float) -> float:
        return (t - origin) * scale

    groups = _worker_extents(rows)
    _shade_steps(ax, shown_steps, groups, x)
    bars: dict[tuple[str, float, float], list[tuple[float, float]]] = {}
    for span, row, strip in placed:
        if span.category == READY:
            continue  # an instant: drawn as a marker below
        offset, height = STRIP if strip else BAR
        key = (span.category, y_of[row] + offset, height)
        bars.setdefault(key, []).append((x(span.start_s), span.duration_s * scale))
    ready = _bucket_readiness(placed, y_of, bars, x, scale)
    _draw_bars(ax, bars, (xlim_s if xlim_s is not None else window[1] - window[0]) * scale)
    if ready:
        xs, ys = zip(*ready, strict=True)
        ax.scatter(xs, ys, marker="v", s=12, color=KIND_COLORS[READY], zorder=4, lw=0)
    sync = _barriers(shown_steps) if barriers else ()
    for i, t in enumerate(sync):
        ax.axvline(x(t), color="black", lw=0.9, ls="--", label="barrier" if i == 0 else None)
    if step_labels:
        _label_steps(ax, shown_steps, rows, x, window)
    _axes_style(ax, rows, groups, len({r.worker for r in rows}) > 1)
    left = x(window[0])
    ax.set_xlim(left, left + width_s * scale)
    ax.set_xlabel(f"time ({unit})" + (f" since t = {origin:.4g} s" if origin > 0 else ""))
    drawn = {s.category for s in spans} | {key[0] for key in bars}
    kinds = tuple(k for k in KIND_COLORS if k in drawn)
    if legend:
        _legend(ax, kinds, bool(sync), len({s.step for s in shown_steps}) > 1)
    return TimelineView(tuple(rows), window[0], window[1], origin, unit, kinds, tuple(sync))


def busy_counts(
    spans: Sequence[TimelineSpan], kind: str, server: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """How many workers are busy on rows of ``kind`` over time: (times s, counts) of a step
    function, count ``counts[i]`` from ``times[i]`` on. Back-to-back or overlapping ops of one
    worker count once; latency strips are not work on a resource and are left out."""
    per_worker: dict[int, list[tuple[float, float]]] = {}
    for span in spans:
        row, strip = span_row(span)
        if strip or row.kind != kind or (server is not None and row.server != server):
            continue
        per_worker.setdefault(row.worker, []).append((span.start_s, span.end_s))
    events: list[tuple[float, int]] = []
    for intervals in per_worker.values():
        for start, end in _merge(intervals):
            events += [(start, 1), (end, -1)]
    if not events:
        return np.zeros(0), np.zeros(0)
    events.sort()
    times = np.array([t for t, _ in events])
    counts = np.cumsum([d for _, d in events])
    last = np.r_[times[1:] != times[:-1], True]  # one value per distinct time
    return times[last], counts[last]


def draw_activity(
    axes: Sequence[Any],
    data: Timeline | Sequence[TimelineSpan],
    *,
    workers: Sequence[int] | None = None,
    steps: tuple[int, int] | None = None,
    time_s: tuple[float, float] | None = None,
    arch: str = "ps",
    unit: str | None = None,
) -> list[str]:
    """The aggregate view: on each of ``axes`` (one per resource, top to bottom: pull, compute,
    push, update) the number of workers busy on that resource over time, as a step plot.

    Returns the resource kinds drawn (as many as ``axes`` can hold, in that order).
    """
    spans, _, window = select(data, workers=workers, steps=steps, time_s=time_s, arch=arch)
    shown = {int(s.args.get("worker", 0)) for s in spans}
    n_workers = len(shown) if workers is None else len(set(workers))
    unit = unit or ("ms" if window[1] - window[0] < MS_BELOW_S else "s")
    scale = 1e3 if unit == "ms" else 1.0
    present = [k for k in ROW_KINDS if any(span_row(s)[0].kind == k for s in spans)]
    for ax, kind in zip(axes, present, strict=False):
        times, counts = busy_counts(spans, kind)
        before = times < window[0]
        start = int(counts[before][-1]) if before.any() else 0
        keep = ~before & (times <= window[1])
        xs = np.r_[0.0, (times[keep] - window[0]) * scale, (window[1] - window[0]) * scale]
        ys = np.r_[start, counts[keep], counts[keep][-1] if keep.any() else start]
        color = KIND_COLORS["forward" if kind == "compute" else kind]
        ax.step(xs, ys, where="post", color=color, lw=1.0, label=ROW_TITLES[kind])
        ax.fill_between(xs, ys, step="post", color=color, alpha=0.3)
        ax.set_ylim(0, n_workers + 0.5)
        ax.set_xlim(0, (window[1] - window[0]) * scale)
        ax.set_ylabel("workers")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
        ax.grid(alpha=0.3)
    axes[min(len(present), len(axes)) - 1].set_xlabel(
        f"time ({unit})" + (f" since t = {window[0]:.4g} s" if window[0] > 0 else "")
    )
    return present[: len(axes)]


def plot_timeline(
    data: Timeline | Sequence[TimelineSpan],
    path: str | os.PathLike[str],
    *,
    title: str,
    workers: Sequence[int] | None = None,
    steps: tuple[int, int] | None = None,
    time_s: tuple[float, float] | None = None,
    aggregate: bool = False,
    trace: Trace | Sequence[Trace] | None = None,
    arch: str = "ps",
    unit: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Draw the timeline (or, with ``aggregate``, the busy-worker counts) and save it as PNG.

    The file is written atomically; an existing file is replaced only with ``overwrite``.
    """
    if aggregate:
        spans, _, _ = select(data, workers=workers, steps=steps, time_s=time_s, arch=arch)
        n = len({span_row(s)[0].kind for s in spans} & set(ROW_KINDS)) or 1
        fig, axes = new_figure(n, 1, size=(10.0, 1.2 + 1.35 * n), sharex=True, squeeze=False)
        draw_activity(
            list(axes[:, 0]),
            data,
            workers=workers,
            steps=steps,
            time_s=time_s,
            arch=arch,
            unit=unit,
        )
        axes[0, 0].set_title(title, fontsize=10)
    else:
        spans, _, _ = select(data, workers=workers, steps=steps, time_s=time_s, arch=arch)
        n_rows = len({span_row(s)[0] for s in spans})
        fig, ax = new_figure(size=(11.0, 1.5 + 0.2 * n_rows + (0.3 if n_rows < 6 else 0.0)))
        draw_timeline(
            ax, data, workers=workers, steps=steps, time_s=time_s, trace=trace, arch=arch, unit=unit
        )
        ax.set_title(title, fontsize=10, pad=14)
    fig.tight_layout()
    return save_figure(fig, path, overwrite=overwrite)


def plot_profiled_vs_simulated(
    trace: Trace,
    result: SimulationResult,
    path: str | os.PathLike[str],
    *,
    step: int = 0,
    title: str | None = None,
    overwrite: bool = False,
) -> Path:
    """The profiled step ``step`` above a simulated one-worker step, on one time scale.

    The simulated step shown is the first one that sampled profiled step ``step`` (so both have
    the same computation times), else the run's first step. ``result`` needs a timeline.
    """
    timeline = result.timeline
    if timeline is None:
        raise ConfigError("result: has no timeline; simulate with SimulationConfig(timeline=True)")
    profiled = profiled_step_spans(trace, step)
    records = [s for s in timeline.steps if s.worker == 0]
    same = [s for s in records if s.profile_step == step]
    chosen = same[0] if same else records[0]
    prof_end = max(s.end_s for s in profiled)
    width = max(prof_end, chosen.end_s - chosen.start_s)
    fig, (top, bottom) = new_figure(2, 1, size=(11.0, 4.6), sharex=True)
    draw_timeline(
        top,
        profiled,
        origin_s=0.0,
        xlim_s=width,
        time_s=(0.0, prof_end),
        legend=False,
        step_labels=False,
    )
    unit = "ms" if width < MS_BELOW_S else "s"
    top.set_xlim(0, width * (1e3 if unit == "ms" else 1.0))
    top.set_title(f"profiled step {step} (measured; transfers not measured)", fontsize=9)
    view = draw_timeline(
        bottom,
        timeline,
        workers=[0],
        steps=(chosen.step, chosen.step),
        trace=trace,
        arch=result.config.arch,
        origin_s=chosen.start_s,
        xlim_s=width,
        step_labels=False,
    )
    top.set_xlabel("")
    bottom.set_xlabel(f"time since the step began ({view.unit})")
    bottom.set_title(
        f"simulated step {chosen.step} of one worker (profiled step {chosen.profile_step}), "
        f"link {format_bandwidth(result.config.bandwidth_bps)}",
        fontsize=9,
    )
    fig.suptitle(
        title
        or f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}: "
        "profiled vs simulated step",
        fontsize=10,
    )
    fig.tight_layout()
    return save_figure(fig, path, overwrite=overwrite)


def plot_measured_vs_simulated(
    measured: Sequence[TimelineSpan],
    result: SimulationResult,
    path: str | os.PathLike[str],
    *,
    measured_steps: tuple[int, int],
    simulated_steps: tuple[int, int],
    trace: Trace | None = None,
    title: str,
    overwrite: bool = False,
) -> Path:
    """A measured multi-worker run above the simulated one, on one time scale: where the model
    departs from the real run shows as bars that do not line up.

    ``measured`` are a real run's timeline spans (``profilers.distributed.export``), drawn from
    the start of step ``measured_steps[0]`` to the end of ``measured_steps[1]``; the simulated
    run (it needs a timeline) likewise for ``simulated_steps``, with ``trace`` the trace it
    replayed (for the op kinds of its timeline).
    """
    timeline = result.timeline
    if timeline is None:
        raise ConfigError("result: has no timeline; simulate with SimulationConfig(timeline=True)")
    _, _, real_window = select(measured, steps=measured_steps)
    _, _, sim_window = select(timeline, steps=simulated_steps, trace=trace, arch=result.config.arch)
    width = max(real_window[1] - real_window[0], sim_window[1] - sim_window[0])
    workers = len({s.worker for s in _steps(measured)})
    fig, (top, bottom) = new_figure(2, 1, size=(11.0, 2.2 + 1.1 * workers * 2), sharex=False)
    real = draw_timeline(
        top, measured, steps=measured_steps, origin_s=real_window[0], xlim_s=width, legend=False
    )
    top.set_title(f"measured, steps {_steps_text(measured_steps)}", fontsize=9, pad=12)
    top.set_xlabel(f"time since the first step shown began ({real.unit})")
    sim = draw_timeline(
        bottom,
        timeline,
        steps=simulated_steps,
        trace=trace,
        arch=result.config.arch,
        origin_s=sim_window[0],
        xlim_s=width,
    )
    bottom.set_title(f"simulated, steps {_steps_text(simulated_steps)}", fontsize=9, pad=12)
    bottom.set_xlabel(f"time since the first step shown began ({sim.unit})")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path, overwrite=overwrite)


def _steps_text(steps: tuple[int, int]) -> str:
    return f"{steps[0]}" if steps[0] == steps[1] else f"{steps[0]}-{steps[1]}"


def _number(process: str) -> int:
    tail = process.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _range_text(values: Sequence[int]) -> str:
    if not values:
        return "none"
    return f"{values[0]}..{values[-1]}" if len(values) > 1 else str(values[0])


def _steps(data: Timeline | Sequence[TimelineSpan]) -> list[Step]:
    if isinstance(data, Timeline):
        return [Step(s.worker, s.step, s.start_s, s.end_s) for s in data.steps]
    extents: dict[tuple[int, int], tuple[float, float]] = {}
    for span in data:
        key = (int(span.args.get("worker", 0)), int(span.args.get("step", 0)))
        low, high = extents.get(key, (span.start_s, span.end_s))
        extents[key] = (min(low, span.start_s), max(high, span.end_s))
    return [Step(w, n, a, b) for (w, n), (a, b) in sorted(extents.items())]


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _worker_extents(rows: Sequence[Row]) -> dict[int, tuple[int, int]]:
    """Per worker, its first and one-past-last row index."""
    out: dict[int, tuple[int, int]] = {}
    for i, row in enumerate(rows):
        first, _ = out.get(row.worker, (i, i))
        out[row.worker] = (first, i + 1)
    return out


def _barriers(steps: Sequence[Step]) -> tuple[float, ...]:
    """The Sync-SGD barriers: step ends, when every worker's step n ends at the same time for
    every step n in the window that all workers ran; otherwise none."""
    workers = {s.worker for s in steps}
    ends: dict[int, set[float]] = {}
    counts: dict[int, int] = {}
    for s in steps:
        ends.setdefault(s.step, set()).add(s.end_s)
        counts[s.step] = counts.get(s.step, 0) + 1
    full = [n for n in sorted(ends) if counts[n] == len(workers)]
    if len(workers) < 2 or not full or any(len(ends[n]) > 1 for n in full):
        return ()
    return tuple(next(iter(ends[n])) for n in full)


def _bucket_readiness(
    placed: Sequence[tuple[TimelineSpan, Row, bool]],
    y_of: dict[Row, int],
    bars: dict[tuple[str, float, float], list[tuple[float, float]]],
    x: Any,
    scale: float,
) -> list[tuple[float, float]]:
    """DDP: where each bucket became ready (markers, returned as (x, y)) and, as a strip in
    ``bars``, how long it then waited for the buckets before it: from its ``ready:`` instant to
    the start of its ``gate:`` (its wait for the other ranks, drawn as a bar of its own)."""
    gates = {
        (s.args.get("worker"), s.args.get("step"), s.name.split(":", 1)[1]): s.start_s
        for s, _, _ in placed
        if s.category == WAIT and s.name.startswith("gate:")
    }
    marks: list[tuple[float, float]] = []
    for span, row, _ in placed:
        if span.category != READY:
            continue
        y = y_of[row]
        marks.append((x(span.start_s), y + BAR[0] + BAR[1]))
        bucket = span.name.split(":", 1)[1]
        start = gates.get((span.args.get("worker"), span.args.get("step"), bucket))
        if start is not None and start > span.start_s:
            key = ("queued", y + STRIP[0], STRIP[1])
            bars.setdefault(key, []).append((x(span.start_s), (start - span.start_s) * scale))
    return marks


def _draw_bars(
    ax: Any, bars: dict[tuple[str, float, float], list[tuple[float, float]]], width: float
) -> None:
    """Bars by kind; bars thinner than about a pixel are widened to one so that short ops
    (updates, small layers) stay visible, and only wide bars get the white edge that separates
    neighbours."""
    pixel = width / PIXELS
    for (kind, y, height), xs in bars.items():
        color = KIND_COLORS.get(kind, KIND_COLORS["other"])
        wide = [(x0, w) for x0, w in xs if w >= EDGE_PIXELS * pixel]
        thin = [(x0, max(w, pixel)) for x0, w in xs if w < EDGE_PIXELS * pixel]
        if wide:
            ax.broken_barh(wide, (y, height), facecolors=color, edgecolors="white", linewidth=0.3)
        if thin:
            ax.broken_barh(thin, (y, height), facecolors=color, edgecolors="none")


def _shade_steps(
    ax: Any, steps: Sequence[Step], groups: dict[int, tuple[int, int]], x: Any
) -> None:
    """Every other step shaded, and a thin line where each step starts, per worker."""
    for s in steps:
        if s.worker not in groups:
            continue
        first, last = groups[s.worker]
        if s.step % 2:
            ax.broken_barh(
                [(x(s.start_s), x(s.end_s) - x(s.start_s))],
                (first, last - first),
                facecolors=SHADE,
                alpha=SHADE_ALPHA,
                zorder=0,
            )
        ax.vlines(x(s.start_s), first, last, colors="0.35", lw=0.6, zorder=3)


def _label_steps(
    ax: Any,
    steps: Sequence[Step],
    rows: Sequence[Row],
    x: Any,
    window: tuple[float, float],
) -> None:
    """Step numbers of the top worker, above the axes."""
    if not rows:
        return
    top = rows[0].worker
    for s in steps:
        if s.worker != top:
            continue
        low, high = max(s.start_s, window[0]), min(s.end_s, window[1])
        if high <= low:
            continue
        ax.annotate(
            f"step {s.step}",
            ((x(low) + x(high)) / 2, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(0, 1),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7,
            color="0.3",
            annotation_clip=True,
        )


def _axes_style(
    ax: Any, rows: Sequence[Row], groups: dict[int, tuple[int, int]], many: bool
) -> None:
    servers = len({r.server for r in rows if r.kind in ("pull", "push", "update")}) > 1

    def label(row: Row) -> str:
        text = row.kind + (f" ps{row.server}" if servers and row.kind != "compute" else "")
        if row.worker < 0:  # a measured sync server's work for all workers at once
            return f"all {text}"
        return f"w{row.worker} {text}" if many else text

    ax.set_yticks([i + 0.5 for i in range(len(rows))])
    ax.set_yticklabels([label(r) for r in rows], fontsize=7 if len(rows) > 24 else 8)
    ax.tick_params(axis="y", length=0)
    ax.set_ylim(len(rows), 0)
    for first, _ in groups.values():
        if first:
            ax.axhline(first, color="0.6", lw=0.6)
    ax.grid(axis="x", alpha=0.25)


def _legend(ax: Any, kinds: Sequence[str], barrier: bool, steps: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [
        Line2D([], [], color=KIND_COLORS[k], marker="v", ls="", markersize=4, label="bucket ready")
        if k == READY
        else Patch(facecolor=KIND_COLORS[k], label=k)
        for k in kinds
    ]
    if steps:
        handles.append(Patch(facecolor=SHADE, alpha=3 * SHADE_ALPHA, label="odd steps"))
        handles.append(Line2D([], [], color="0.35", lw=0.6, label="step start"))
    if barrier:
        handles.append(Line2D([], [], color="black", lw=0.9, ls="--", label="barrier"))
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        fontsize=8,
        frameon=False,
        title="op kind",
        title_fontsize=8,
    )
