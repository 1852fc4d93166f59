"""The multi-GPU hosts scenario (TPDS'22 Fig. 22-23) at small settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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

SMALL = ["--trace", "resnet18-b32", "--workers", "1,2,3", "--steps", "14", "--warmup", "3"]


def test_tables_csv_and_figure_agree_and_the_cap_behaves_as_the_closed_form_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], saved_figures: list[FigureRecord]
) -> None:
    scenario = load_scenario("multi_gpu")
    assert scenario.main([*SMALL, "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert_finding_and_files(out, tmp_path, [scenario.CSV_FILE, scenario.FIGURE_FILE])
    assert "finding: one host's flow gets 10 of 25 Gbit/s" in out
    rows = read_csv(tmp_path / scenario.CSV_FILE)
    assert_png(tmp_path / scenario.FIGURE_FILE, min_bytes=10_000)

    [figure] = saved_figures
    assert len(figure.axes) == len(scenario.ARCHITECTURES)
    keys = [c.key for c in scenario.COLUMNS]
    for axes, arch in zip(figure.axes, scenario.ARCHITECTURES, strict=True):
        assert axes.title == arch.label and "examples/s" in axes.ylabel and axes.has_legend
        assert "8 per host" in axes.xlabel
        mine = [r for r in rows if r["table"] == arch.label]
        assert [int(r["hosts"]) for r in mine] == [1, 2, 3]
        assert [int(r["gpus"]) for r in mine] == [8, 16, 24]
        plotted = axes.lines["simulated, 10 Gbit/s per flow"][1]
        np.testing.assert_allclose(plotted, column(mine, "capped"))
        np.testing.assert_allclose(axes.lines["coarse model (no cap)"][1], column(mine, "coarse"))
        # Printed rows: the same numbers, rounded.
        assert_printed_equals_csv(out, arch.label, mine, keys=keys)
        for row in mine:  # a cap never helps
            half = float(row["capped_ci_half"] or 0) + float(row["uncapped_ci_half"] or 0)
            assert float(row["capped"]) <= float(row["uncapped"]) + half + 1e-9

    by = {(r["table"], int(r["hosts"])): r for r in rows}
    # One flow gets min(25/H, 10) Gbit/s on the server's link: 10, 10, 8.33.
    flows = [float(by["PS Sync-SGD", h]["flow_gbps"]) for h in (1, 2, 3)]
    assert flows == pytest.approx([10.0, 10.0, 25 / 3])
    # One host in a ring sends nothing over the network: the cap cannot matter.
    assert by["ring AllReduce", 1]["capped"] == by["ring AllReduce", 1]["uncapped"]
    # With three hosts each share (8.3 Gbit/s) is below the cap: Sync-SGD hardly notices it,
    # while with one host the capped flow needs 2.5x the transfer time.
    sync3 = by["PS Sync-SGD", 3]
    assert float(sync3["capped"]) == pytest.approx(float(sync3["uncapped"]), rel=0.05)
    sync1 = by["PS Sync-SGD", 1]
    assert float(sync1["capped"]) < 0.9 * float(sync1["uncapped"])
    # The coarse model has no cap: it overestimates the capped one-host case.
    assert float(sync1["coarse_error_pct"]) > 20

    argv = [*SMALL, "--quiet", "--out", str(tmp_path)]
    assert_second_run_refused(scenario, argv, tmp_path, capsys)


def test_faster_computation_scales_every_computation_op() -> None:
    from simcore.errors import ConfigError
    from simcore.trace.io import load_trace
    from simcore.trace.model import OpKind
    from simcore.trace.transform import with_faster_computation

    trace = load_trace("cnn-b32")
    fast = with_faster_computation(trace, 4.0)
    for kind in (OpKind.FORWARD, OpKind.BACKWARD, OpKind.UPDATE):
        assert fast.phase_time_s(0, kind) == pytest.approx(trace.phase_time_s(0, kind) / 4)
    assert fast.param_nbytes == trace.param_nbytes and fast.steps[0].start_s is None
    with pytest.raises(ConfigError, match="speed: must be a finite number > 0"):
        with_faster_computation(trace, 0.0)
