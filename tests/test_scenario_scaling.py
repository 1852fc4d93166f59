"""The scaling scenario (the README's main job) runs at small settings the way a user runs it,
and its curves respect the bounds the links impose."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simcore.trace.io import load_trace

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

SMALL = ["--trace", "cnn-b32", "--workers", "1-3", "--steps", "30", "--warmup", "5", "--quiet"]


def test_prints_tables_and_saves_the_data_and_the_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], saved_figures: list[FigureRecord]
) -> None:
    scenario = load_scenario("scaling")
    assert scenario.main([*SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    finding = assert_finding_and_files(out, tmp_path, [scenario.CSV_FILE, scenario.FIGURE_FILE])
    assert_png(tmp_path / scenario.FIGURE_FILE, min_bytes=10_000)

    rows = read_csv(tmp_path / scenario.CSV_FILE)
    assert len(rows) == 3 * len(scenario.ARCHITECTURES)
    best = max(rows, key=lambda r: float(r["examples_per_s"]))  # the finding names the fastest
    assert (
        finding.startswith(f"{best['table']} is the fastest, ")
        and f"W = {best['workers']}," in finding
    )
    [record] = saved_figures
    [axes] = record.axes
    assert axes.title and "(examples/s)" in axes.ylabel and axes.xlabel and axes.has_legend
    keys = [c.key for c in scenario.COLUMNS]
    for arch in scenario.ARCHITECTURES:
        mine = [r for r in rows if r["table"] == arch.label]
        assert [int(r["workers"]) for r in mine] == [1, 2, 3]
        # The printed table shows the CSV's numbers, rounded as printed.
        assert_printed_equals_csv(out, arch.label, mine, keys=keys)
        # The figure plots exactly the CSV's values.
        simulated = axes.lines[f"{arch.label} (simulated)"][1]
        coarse = axes.lines[f"{arch.label} (coarse model)"][1]
        np.testing.assert_allclose(simulated, column(mine, "examples_per_s"))
        np.testing.assert_allclose(coarse, column(mine, "coarse_examples_per_s"))

    # A second run must not replace the results silently, and says so in one line.
    assert_second_run_refused(scenario, [*SMALL, "--out", str(tmp_path)], tmp_path, capsys)


def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scenario = load_scenario("scaling")
    assert scenario.main([*SMALL, "--trace", "no-such-trace", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-trace" in err[0]
    with pytest.raises(SystemExit) as exit_info:
        scenario.main(["--workers", "0-3"])
    assert exit_info.value.code == 2
    assert "--workers" in capsys.readouterr().err


def test_one_worker_is_the_same_with_or_without_a_barrier(tmp_path: Path) -> None:
    # One worker shares nothing and waits for nobody: PS Sync-SGD = PS Async-SGD exactly.
    scenario = load_scenario("scaling")
    curves, _, _ = scenario.run(scenario.parse_args([*SMALL, "--out", str(tmp_path)]))
    by_label = {c.label: c for c in curves}
    assert (
        by_label["PS Async-SGD"].points[0].examples_per_s.value
        == by_label["PS Sync-SGD"].points[0].examples_per_s.value
    )


def test_saturated_curves_sit_at_the_link_bounds(tmp_path: Path) -> None:
    """On a slow link every worker-step moves the whole model down and its gradients up.

    Each direction of the server's link carries at most B / (8 * model bytes) worker-steps per
    second, so no PS policy exceeds that; Sync-SGD with processor sharing cannot overlap pulls with
    pushes across the barrier, and once saturated sits at half of it. In a ring each worker sends
    2(W-1)/W of the model per step over its own link, so a step lasts at least that long and at most
    that plus the computation.
    """
    bandwidth_bps = 100e6
    trace = load_trace("cnn-b32")
    model_bits = 8 * trace.param_nbytes
    scenario = load_scenario("scaling")
    args = [*SMALL, "--workers", "1,8", "--steps", "60", "--bandwidth", "100Mbps"]
    curves, _, _ = scenario.run(scenario.parse_args([*args, "--out", str(tmp_path)]))
    by_label = {c.label: c.points[-1] for c in curves}
    link_bound = bandwidth_bps / model_bits  # worker-steps/s
    async_ps = by_label["PS Async-SGD"].steps_per_s.value
    sync_ps = by_label["PS Sync-SGD"].steps_per_s.value
    assert sync_ps <= async_ps <= 1.01 * link_bound
    assert 0.90 * link_bound / 2 <= sync_ps <= 1.01 * link_bound / 2

    w = 8
    ring_comm_s = 2 * (w - 1) / w * model_bits / bandwidth_bps
    compute_s = float(
        np.mean(
            [trace.steps[i].forward_s + trace.steps[i].backward_s for i in range(trace.n_steps)]
        )
    )
    ring_step_s = w / by_label["ring AllReduce"].steps_per_s.value  # each worker's step time
    assert ring_comm_s <= ring_step_s <= 1.05 * (ring_comm_s + compute_s)
