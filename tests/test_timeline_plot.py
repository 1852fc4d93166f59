"""Timeline figures: rows, windows, busy-worker counts, barriers, profiled vs simulated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simcore.errors import ConfigError
from simcore.export.chrome import TimelineSpan, simulated_spans
from simcore.plots.common import new_figure, pyplot
from simcore.plots.timeline import (
    Row,
    busy_counts,
    draw_timeline,
    plot_measured_vs_simulated,
    plot_profiled_vs_simulated,
    plot_timeline,
    select,
)
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.io import load_trace
from simcore.trace.model import OpKind

from figure_capture import FigureRecord

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(name: str = "cnn-b32", **kwargs: Any) -> SimulationResult:
    config = dict(bandwidth_bps=1e9, steps=6, warmup_steps=1, batches=2, seed=1, timeline=True)
    return simulate(load_trace(name), SimulationConfig(**{**config, **kwargs}))


def span(worker: int, resource: str, start: float, end: float) -> TimelineSpan:
    return TimelineSpan(f"worker {worker}", resource, "op", "pull", start, end - start, {})


def test_busy_counts_counts_workers_not_ops() -> None:
    spans = [
        span(0, "downlink", 0.0, 1.0),
        span(0, "downlink", 1.0, 2.0),  # back to back: worker 0 stays one busy worker
        span(0, "downlink", 1.5, 1.8),  # overlapping its own op: still one
        span(1, "downlink", 0.5, 3.0),
        span(1, "worker", 0.0, 5.0),  # another resource
    ]
    times, counts = busy_counts(spans, "pull")
    assert times.tolist() == [0.0, 0.5, 2.0, 3.0]
    assert counts.tolist() == [1, 2, 1, 0]


def test_rows_per_worker_and_server_in_reading_order() -> None:
    result = run(workers=2, servers=2, latency_s=1e-4)
    assert result.timeline is not None
    fig, ax = new_figure()
    view = draw_timeline(ax, result.timeline, steps=(2, 3))
    pyplot().close(fig)
    kinds = [(r.kind, r.server) for r in view.rows if r.worker == 0]
    assert kinds == [
        ("pull", 0), ("pull", 1), ("compute", 0), ("push", 0), ("push", 1),
        ("update", 0), ("update", 1),
    ]  # fmt: skip
    assert [r.worker for r in view.rows] == [0] * 7 + [1] * 7
    assert "latency" in view.kinds and view.barriers_s == ()


def test_sync_barriers_are_the_common_step_ends() -> None:
    result = run(workers=3, mode="sync")
    timeline = result.timeline
    assert timeline is not None
    fig, ax = new_figure()
    view = draw_timeline(ax, timeline, steps=(2, 3))
    pyplot().close(fig)
    ends = {s.step: s.end_s for s in timeline.steps if s.worker == 0}
    assert view.barriers_s == (ends[2], ends[3])
    assert all(s.end_s == ends[s.step] for s in timeline.steps)


def test_a_step_window_covers_the_chosen_steps_of_every_worker_shown() -> None:
    result = run(workers=4)
    timeline = result.timeline
    assert timeline is not None
    spans, _, (t0, t1) = select(timeline, workers=[1, 3], steps=(2, 3))
    chosen = [s for s in timeline.steps if s.worker in (1, 3) and s.step in (2, 3)]
    assert t0 == min(s.start_s for s in chosen) and t1 == max(s.end_s for s in chosen)
    assert {s.args["worker"] for s in spans} == {1, 3}
    assert all(s.end_s > t0 and s.start_s < t1 for s in spans)
    with pytest.raises(
        ConfigError, match=r"steps: 7\.\.9 is not in the timeline, which has steps 0\.\.5"
    ):
        select(timeline, steps=(7, 9))
    with pytest.raises(ConfigError, match="workers: \\[4\\] not in the timeline"):
        select(timeline, workers=[4])


@pytest.mark.slow
def test_timeline_figure_has_title_unit_and_legend(
    tmp_path: Path, saved_figures: list[FigureRecord]
) -> None:
    result = run(workers=2)
    assert result.timeline is not None
    out = plot_timeline(result.timeline, tmp_path / "t.png", title="cnn, W=2", steps=(2, 4))
    assert out.read_bytes().startswith(PNG_MAGIC)
    (fig,) = saved_figures
    (ax,) = fig.axes
    assert ax.title == "cnn, W=2" and ax.has_legend
    assert ax.xlabel.startswith("time (ms)")
    with pytest.raises(ConfigError, match="already exists"):
        plot_timeline(result.timeline, out, title="again", steps=(2, 4))


def test_aggregate_view_integrates_to_the_busy_time(
    tmp_path: Path, saved_figures: list[FigureRecord]
) -> None:
    # The area under "workers pulling" is the total time workers spend pulling in the window.
    result = run(workers=4)
    timeline = result.timeline
    assert timeline is not None
    plot_timeline(timeline, tmp_path / "a.png", title="aggregate", steps=(2, 3), aggregate=True)
    (fig,) = saved_figures
    assert fig.axes[0].title == "aggregate"
    assert all(a.has_legend and a.ylabel == "workers" for a in fig.axes)
    x, y = fig.axes[0].lines["workers pulling"]
    area_ms = float(np.sum(np.diff(x) * y[:-1]))
    _, _, (t0, t1) = select(timeline, steps=(2, 3))
    busy_s = 0.0
    for w in range(4):
        pulls = [
            (max(s.start_s, t0), min(s.end_s, t1))
            for s in simulated_spans(timeline, workers=[w], time_s=(t0, t1))
            if s.category == "pull"
        ]
        busy_s += sum(b - a for a, b in pulls)  # one worker's pulls never overlap (one slot)
    assert area_ms == pytest.approx(busy_s * 1e3, rel=1e-9)
    assert y.max() <= 4


def test_profiled_and_simulated_steps_share_the_time_scale(
    tmp_path: Path, saved_figures: list[FigureRecord]
) -> None:
    trace = load_trace("cnn-b32")
    result = run(workers=1, steps=20)
    timeline = result.timeline
    assert timeline is not None
    plot_profiled_vs_simulated(trace, result, tmp_path / "p.png", step=4)
    (fig,) = saved_figures
    top, bottom = fig.axes
    assert "profiled step 4" in top.title and "profiled step 4" in bottom.title
    assert fig.suptitle and bottom.has_legend and "(ms)" in bottom.xlabel
    # The simulated step that sampled profiled step 4 runs its measured computation times.
    chosen = next(s for s in timeline.steps if s.profile_step == 4)
    simulated = simulated_spans(timeline, steps=(chosen.step, chosen.step))
    forward = [s.duration_s for s in simulated if s.category == "forward"]
    assert sum(forward) == pytest.approx(trace.phase_time_s(4, OpKind.FORWARD))


def test_measured_and_simulated_runs_are_drawn_one_above_the_other(
    tmp_path: Path, saved_figures: list[FigureRecord]
) -> None:
    # A run's own spans stand in for the measured ones: both panels then show the same steps.
    trace = load_trace("cnn-b32")
    result = run(workers=2, steps=8)
    assert result.timeline is not None
    measured = simulated_spans(result.timeline, trace=trace)
    path = plot_measured_vs_simulated(
        measured,
        result,
        tmp_path / "m.png",
        measured_steps=(3, 4),
        simulated_steps=(3, 4),
        trace=trace,
        title="cnn, W = 2",
    )
    assert path.read_bytes().startswith(PNG_MAGIC)
    (fig,) = saved_figures
    top, bottom = fig.axes
    assert fig.suptitle == "cnn, W = 2"
    assert top.title == "measured, steps 3-4" and bottom.title == "simulated, steps 3-4"
    assert top.texts == bottom.texts  # the same step labels in the same places
    assert bottom.has_legend and "(ms)" in top.xlabel and "(ms)" in bottom.xlabel
    without = run(workers=2, steps=8, timeline=False)
    for data, steps, message in (
        (result, (40, 41), r"steps: 40\.\.41 is not in the timeline"),
        (without, (3, 4), "has no timeline"),
    ):
        with pytest.raises(ConfigError, match=message):
            plot_measured_vs_simulated(
                measured,
                data,
                tmp_path / "n.png",
                measured_steps=steps,
                simulated_steps=(3, 4),
                title="",
            )


def test_row_order_is_pull_compute_push_update() -> None:
    rows = [Row(1, "update"), Row(0, "push"), Row(0, "pull", 1), Row(0, "compute"), Row(0, "pull")]
    ordered = sorted(rows, key=Row.order)
    assert [(r.worker, r.kind, r.server) for r in ordered] == [
        (0, "pull", 0), (0, "pull", 1), (0, "compute", 0), (0, "push", 0), (1, "update", 0),
    ]  # fmt: skip
