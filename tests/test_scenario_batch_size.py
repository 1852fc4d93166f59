"""The batch-size scenario (ICPE'20 Fig. 2) runs at small settings the way a user runs it, and its
numbers obey the closed forms of one worker and the link's ceiling."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from simcore.trace.io import load_trace
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
)

SMALL = ["--traces", "cnn-b8,cnn-b128", "--workers", "1,2", "--steps", "20", "--warmup", "4"]
B = 1e9  # the scenario's default link, bit/s


@pytest.fixture(scope="module")
def scenario() -> ModuleType:
    return load_scenario("batch_size")


def test_prints_tables_and_saves_data_and_figure(
    scenario: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    saved_figures: list[FigureRecord],
) -> None:
    assert scenario.main([*SMALL, "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "per batch size" in out
    names = [scenario.CSV_FILE, scenario.SUMMARY_CSV_FILE, scenario.FIGURE_FILE]
    finding = assert_finding_and_files(out, tmp_path, names)
    assert finding.startswith("batch 128 reaches ")
    assert_png(tmp_path / scenario.FIGURE_FILE, min_bytes=10_000)
    rows = read_csv(tmp_path / scenario.CSV_FILE)
    summary = read_csv(tmp_path / scenario.SUMMARY_CSV_FILE)
    assert [r["batch"] for r in summary] == ["8", "128"]

    [figure] = saved_figures
    assert figure.titled()
    left, right = figure.axes
    for axes in (left, right):
        assert axes.title and axes.has_legend and "W" in axes.xlabel
    assert "(examples/s)" in left.ylabel and "(steps/s)" in right.ylabel
    keys = [c.key for c in scenario.COLUMNS]
    for label in ("batch 8 (cnn-b8)", "batch 128 (cnn-b128)"):
        mine = [r for r in rows if r["table"] == label]
        assert [int(r["workers"]) for r in mine] == [1, 2]
        assert_printed_equals_csv(out, label, mine, keys=keys)
        np.testing.assert_allclose(left.lines[label][1], column(mine, "examples_per_s"))
        np.testing.assert_allclose(right.lines[label][1], column(mine, "steps_per_s"))

    argv = [*SMALL, "--quiet", "--out", str(tmp_path)]
    assert_second_run_refused(scenario, argv, tmp_path, capsys)


def test_one_worker_with_strict_phases_follows_the_closed_form(
    scenario: ModuleType, tmp_path: Path
) -> None:
    """One worker alone, strict phases: a step is the pulls (the model's bytes at B), the
    forward and backward pass of the sampled profiled step with its fixed costs, the pushes (the
    same bytes), and at most that step's server updates after the last push. So its examples/s
    lies between ``batch / (2T + max(compute + update))`` and ``batch / (2T + min(compute))``
    over the profiled steps, ``T = 8 * bytes / B``, compute the forward, backward and fixed
    costs."""
    names = ",".join(scenario.TRACES)
    args = ["--traces", names, "--workers", "1", "--steps", "25", "--warmup", "5", "--quiet"]
    argv = [*args, "--overlap", "none", "--out", str(tmp_path)]
    curves, _, _ = scenario.run(scenario.parse_args(argv))
    for curve in curves:
        trace = load_trace(curve.name)
        transfer_s = 8 * trace.param_nbytes / B
        compute = [
            # OTHER: the step's fixed costs, between the phases
            sum(trace.phase_time_s(i, k) for k in (OpKind.FORWARD, OpKind.BACKWARD, OpKind.OTHER))
            for i in range(trace.n_steps)
        ]
        with_update = [c + trace.phase_time_s(i, OpKind.UPDATE) for i, c in enumerate(compute)]
        value = curve.points[0].examples_per_s.value
        batch = trace.metadata.batch_size
        assert batch / (2 * transfer_s + max(with_update)) <= value
        assert value <= batch / (2 * transfer_s + min(compute))


def test_saturated_throughput_grows_with_the_batch_under_the_link_ceiling(
    scenario: ModuleType, tmp_path: Path
) -> None:
    """Every step moves the same 2.37 MiB each way whatever the batch, so the link allows at most
    ``B / (8 * bytes)`` steps/s (the ceiling) and ``batch`` times that in examples/s; at W = 8
    every batch is near its ceiling (the largest within 10%, once its workers, which start
    together, have spread over the link: 50 steps), so the best examples/s grows with the batch
    (ICPE'20 Fig. 2)."""
    names = ",".join(scenario.TRACES)
    args = ["--traces", names, "--workers", "1,8", "--steps", "150", "--warmup", "50", "--quiet"]
    curves, _, _ = scenario.run(scenario.parse_args([*args, "--out", str(tmp_path)]))
    best = [max(c.examples_per_s) for c in curves]
    assert [c.batch for c in curves] == [8, 32, 64, 128]
    assert best == sorted(best) and len(set(best)) == len(best)
    for curve in curves:
        assert max(curve.examples_per_s) <= 1.01 * curve.link_bound
        for p in curve.points:
            assert p.steps_per_s.value <= 1.01 / curve.transfer_s
    assert best[-1] >= 0.9 * curves[-1].link_bound
