"""scenarios/ddp_buckets.py: DDP bucket caps x workers x link rate x collective, small grids."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from simcore.trace.io import load_trace, save_trace
from simcore.trace.model import OpKind

from figure_capture import FigureRecord
from scenario_support import (
    assert_finding_and_files,
    assert_png,
    assert_printed_equals_csv,
    assert_second_run_refused,
    column,
    load_scenario,
    read_csv,
    saved_as,
)

SPEED = 80.0
SMALL = [
    "--workers", "1,2,4", "--rates", "10Gbps,100Gbps", "--caps", "1,25,100",
    "--steps", "8", "--warmup", "2", "--quiet",
]  # fmt: skip


def one_step_trace(tmp_path: Path) -> Path:
    """resnet50-b32 with its first profiled step only: every simulated step is that step, so
    the closed form (mean durations) and W = 1's computation are exact."""
    trace = load_trace("resnet50-b32")
    meta = dataclasses.replace(trace.metadata, profiled_steps=1)
    return save_trace(
        dataclasses.replace(trace, steps=trace.steps[:1], metadata=meta), tmp_path / "one.json"
    )


def test_tables_csv_figures_and_finding_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], saved_figures: list[FigureRecord]
) -> None:
    scenario = load_scenario("ddp_buckets")
    argv = [*SMALL, "--out", str(tmp_path)]
    assert scenario.main(argv) == 0
    out = capsys.readouterr().out
    files = [scenario.CSV_FILE, scenario.FIGURE_FILE, scenario.TIMELINE_FILE]
    finding = assert_finding_and_files(out, tmp_path, files)
    assert "20 us per AllReduce hop" in out  # the latency is stated
    rows = read_csv(tmp_path / scenario.CSV_FILE)
    # 2 rates x (W = 1 ring; W = 2, 4 ring and tree) x 3 caps
    assert len(rows) == 2 * 5 * 3
    first = {r["cap_mib"]: r["first_bucket_mib"] for r in rows}
    assert first == {
        "1.0": "1.0",
        "25.0": "1.0",
        "100.0": "100.0",
    }  # as ddp_fields: the default cap
    assert {r["buckets"] for r in rows if r["cap_mib"] == "100.0"} == {"1"}  # > 97.5 MiB: one
    assert not [r for r in rows if r["workers"] == "1" and r["collective"] == "tree"]

    key = ("workers", "collective", "cap_mib")
    by = {(r["rate_gbps"], *(r[k] for k in key)): float(r["examples_per_s"]) for r in rows}
    for rate in ("10.0", "100.0"):
        mine = [r for r in rows if r["rate_gbps"] == rate]
        printed = []  # the pivot table: a row per (W, collective), a column per cap
        for w, coll in dict.fromkeys((r["workers"], r["collective"]) for r in mine):
            line = [r for r in mine if (r["workers"], r["collective"]) == (w, coll)]
            values = column(line, "examples_per_s")
            best_cap = "" if values.max() == values.min() else line[int(values.argmax())]["cap_mib"]
            cells = [r["examples_per_s"] for r in line]
            printed.append({str(i): v for i, v in enumerate([w, coll, *cells, best_cap])})
        title = f"{float(rate):g} Gbit/s: examples/s by bucket cap"
        assert_printed_equals_csv(out, title, printed)
    # A slower link never helps: the same steps are sampled at both rates.
    for (rate, *rest), value in by.items():
        if rate == "10.0":
            assert value <= by[("100.0", *rest)] * (1 + 1e-12)
    # W = 1 exchanges nothing: the same throughput whatever the cap and the rate.
    solo = {v for (_, w, _, _), v in by.items() if w == "1"}
    assert len(solo) == 1

    # The finding: the best setting at W = 4 for each rate, with its examples/s as in the table.
    for rate in ("10.0", "100.0"):
        at = [r for r in rows if (r["rate_gbps"], r["workers"]) == (rate, "4")]
        best = max(at, key=lambda r: float(r["examples_per_s"]))
        text = (
            f"{float(best['cap_mib']):g} MiB {best['collective']} at {float(rate):g} Gbit/s "
            f"({float(best['examples_per_s']):.0f} examples/s, "
            f"{float(best['efficiency_pct']):.0f}% of linear)"
        )
        assert text in finding, (text, finding)
    trees = [r for r in rows if r["collective"] == "tree"]
    wins = sum(
        by[(r["rate_gbps"], r["workers"], "ring", r["cap_mib"])] < float(r["examples_per_s"])
        for r in trees
    )
    assert f"the tree beats the ring in {wins} of {len(trees)} multi-worker points" in finding

    figures = saved_as(saved_figures, [scenario.FIGURE_FILE, scenario.TIMELINE_FILE])
    sweep = figures[scenario.FIGURE_FILE]
    assert len(sweep.axes) == 4 and sweep.titled()
    for ax, rate in zip(sweep.axes[:2], ("10.0", "100.0"), strict=True):  # top row: vs the cap
        line = [
            r
            for r in rows
            if (r["rate_gbps"], r["workers"], r["collective"]) == (rate, "4", "tree")
        ]
        x, y = ax.lines["W = 4, tree"]
        np.testing.assert_allclose(x, column(line, "cap_mib"))
        np.testing.assert_allclose(y, column(line, "examples_per_s"))
        assert "cap" in ax.xlabel and "examples/s" in ax.ylabel
    for ax, rate in zip(sweep.axes[2:], ("10.0", "100.0"), strict=True):  # bottom row: vs W
        line = [
            r
            for r in rows
            if (r["rate_gbps"], r["cap_mib"], r["collective"]) == (rate, "25.0", "ring")
        ]
        x, y = ax.lines["25 MiB, ring"]
        np.testing.assert_allclose(x, column(line, "workers"))
        np.testing.assert_allclose(y, column(line, "examples_per_s"))
    timeline = figures[scenario.TIMELINE_FILE]
    assert [a.title.split(" (")[0] for a in timeline.axes[:2]] == ["cap 25 MiB", "cap 1 MiB"]
    assert_png(tmp_path / scenario.TIMELINE_FILE, min_bytes=10_000)

    assert_second_run_refused(scenario, argv, tmp_path, capsys)


def test_without_latency_and_overlap_the_closed_form_is_exact(tmp_path: Path) -> None:
    # One bucket larger than the model waits for the whole backward pass: nothing overlaps, and
    # with one profiled step the simulated step is the closed form's exactly; one worker is the
    # computation alone.
    scenario = load_scenario("ddp_buckets")
    trace_path = one_step_trace(tmp_path)
    args = scenario.parse_args(
        [
            *SMALL,
            "--trace",
            str(trace_path),
            "--caps",
            "100",
            "--latency",
            "0",
            "--workers",
            "1,2,3,8",
        ]
    )
    points, _, base = scenario.run(args)
    assert base.latency_s == 0
    assert len(points) == 2 * (1 + 3 * 2)
    for p in points:
        assert p.buckets == 1
        assert p.value == pytest.approx(p.closed_form, rel=1e-9), p.key
    raw = load_trace(trace_path)
    compute_s = sum(
        raw.phase_time_s(0, k) for k in (OpKind.FORWARD, OpKind.BACKWARD, OpKind.UPDATE)
    )
    for p in points:
        if p.config.workers == 1:
            assert p.value == pytest.approx(raw.metadata.batch_size * SPEED / compute_s, rel=1e-9)
            assert p.efficiency_pct == pytest.approx(100.0)


def test_without_latency_the_ring_never_loses_to_the_tree(tmp_path: Path) -> None:
    # Latency aside, the tree moves about 2 S per rank, the ring 2 (W-1)/W S: the tree can only
    # win by its fewer hops.
    scenario = load_scenario("ddp_buckets")
    args = scenario.parse_args(
        [*SMALL, "--latency", "0", "--workers", "1,4,8", "--rates", "25Gbps"]
    )
    points, _, _ = scenario.run(args)
    ring = {p.key: p.value for p in points if p.config.collective == "ring"}
    trees = [p for p in points if p.config.collective == "tree"]
    assert trees and all(p.value <= ring[p.key] * (1 + 1e-12) for p in trees)
    assert "the tree beats the ring in 0 of" in scenario.finding(points)


def test_bad_caps_are_refused_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario("ddp_buckets")
    with pytest.raises(SystemExit) as exit_info:
        scenario.parse_args(["--caps", "1,lots"])
    assert exit_info.value.code == 2
    assert "--caps" in capsys.readouterr().err
