"""scenarios/sharing_policies.py: FCFS vs processor sharing, simulator beside the coarse models."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from simcore.trace.io import load_trace

from figure_capture import FigureRecord
from scenario_support import (
    Rows,
    assert_finding_and_files,
    assert_lines_plot,
    assert_png,
    assert_printed_equals_csv,
    assert_second_run_refused,
    column,
    load_scenario,
    read_csv,
    saved_as,
)

BANDWIDTH_BPS = 1e9
# cnn-b32 at 1 Gbit/s: one worker keeps the link about 30-50% busy, four saturate it.
SMALL = ["--trace", "cnn-b32", "--workers", "1,2,4", "--steps", "30", "--warmup", "5", "--quiet"]


@pytest.fixture(scope="module")
def scenario() -> ModuleType:
    return load_scenario("sharing_policies")


def run(
    scenario: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[str, Rows, Rows]:
    assert scenario.main([*SMALL, *extra, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = [scenario.THROUGHPUT_CSV, scenario.DIFFERENCE_CSV]
    assert_finding_and_files(
        out, tmp_path, [*names, scenario.THROUGHPUT_PNG, scenario.DIFFERENCE_PNG]
    )
    return (
        out,
        read_csv(tmp_path / scenario.THROUGHPUT_CSV),
        read_csv(tmp_path / scenario.DIFFERENCE_CSV),
    )


def test_files_tables_and_figures_agree(
    scenario: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    saved_figures: list[FigureRecord],
) -> None:
    out, throughput, difference = run(scenario, tmp_path, capsys)
    for name in scenario.FILES:
        assert (tmp_path / name).stat().st_size > 0
    for name in (scenario.THROUGHPUT_PNG, scenario.DIFFERENCE_PNG):
        assert_png(tmp_path / name)
    assert [r["workers"] for r in throughput] == ["1", "2", "4"]
    assert_printed_equals_csv(out, "Throughput (examples/s)", throughput, prefix=True)
    assert_printed_equals_csv(out, "Link utilization rho", difference, prefix=True)
    assert "simulator: FCFS and PS" in out and "coarse models: FCFS and PS" in out
    assert "finding: " in out

    figures = saved_as(saved_figures, (scenario.THROUGHPUT_PNG, scenario.DIFFERENCE_PNG))
    for fig in figures.values():
        assert fig.titled()
        for ax in fig.axes:
            assert ax.xlabel and ax.ylabel and ax.has_legend
    (ax,) = figures[scenario.THROUGHPUT_PNG].axes
    assert_lines_plot(
        ax,
        throughput,
        "workers",
        {
            "sim FCFS": "sim_fcfs",
            "sim PS": "sim_ps",
            "sim hybrid": "sim_hybrid",
            "coarse FCFS": "coarse_fcfs",
            "coarse PS": "coarse_ps",
            "coarse hybrid": "coarse_hybrid",
            "coarse hybrid + overlap": "coarse_overlap",
        },
    )
    assert "(examples/s)" in ax.ylabel
    by_rho, by_w = figures[scenario.DIFFERENCE_PNG].axes
    assert_lines_plot(by_rho, difference, "sim_rho_fcfs", {"simulator": "sim_diff_pct"})
    assert_lines_plot(by_rho, difference, "coarse_rho_fcfs", {"coarse models": "coarse_diff_pct"})
    assert_lines_plot(by_w, difference, "workers", {"simulator": "sim_diff_pct"})


def test_async_predictions_obey_the_link_and_the_models_rules(
    scenario: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, throughput, difference = run(scenario, tmp_path, capsys)
    trace = load_trace("cnn-b32")
    one = throughput[0]
    # One worker shares its link with nobody: FCFS and PS are the same run, and the same MVA.
    assert one["sim_fcfs"] == one["sim_ps"] == one["sim_hybrid"]
    assert one["coarse_fcfs"] == one["coarse_ps"]
    # Each worker-step moves the model's bytes over each link: no policy beats B / (8 M).
    bound = trace.metadata.batch_size * BANDWIDTH_BPS / (8 * trace.param_nbytes)
    for key in ("sim_fcfs", "sim_ps", "coarse_fcfs", "coarse_ps", "coarse_overlap"):
        assert max(column(throughput, key)) <= 1.01 * bound, key
    # FCFS keeps the link busy: four workers saturate it (utilization 1, throughput at the bound).
    assert float(difference[-1]["sim_rho_fcfs"]) >= 0.98
    assert float(throughput[-1]["sim_fcfs"]) >= 0.97 * bound
    # The simulator's hybrid is the mean of its FCFS and PS throughputs (SEMANTICS.md).
    mean = (column(throughput, "sim_fcfs") + column(throughput, "sim_ps")) / 2
    np.testing.assert_allclose(column(throughput, "sim_hybrid"), mean, rtol=1e-12)
    # Eq. 5: the coarse hybrid is the FCFS solution while rho^FCFS <= rho_T, else the PS one.
    for row, diff in zip(throughput, difference, strict=True):
        pick = "fcfs" if float(diff["coarse_rho_fcfs"]) <= scenario.DEFAULT_RHO_T else "ps"
        assert row["coarse_pick"] == pick
        assert row["coarse_hybrid"] == row[f"coarse_{pick}"]
    # The coarse FCFS station waits for half a residual transfer, PS for a whole one: FCFS >= PS.
    assert all(column(difference, "coarse_diff_pct") >= 0)


def test_sync_closed_forms(
    scenario: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Eq. 7 minus Eq. 8 is (W - 1) M / B of extra upload; Eq. 9 is their mean step time."""
    out, throughput, _ = run(scenario, tmp_path, capsys, "--mode", "sync")
    assert "Eq. 9: mean step time" in out
    trace = load_trace("cnn-b32")
    transfer_s = 8 * trace.param_nbytes / BANDWIDTH_BPS
    batch = trace.metadata.batch_size
    for row in throughput:
        w = int(row["workers"])

        def step_s(key: str, w: int = w, row: dict[str, str] = row) -> float:
            return w * batch / float(row[key])

        assert step_s("coarse_ps") - step_s("coarse_fcfs") == pytest.approx((w - 1) * transfer_s)
        mean = (step_s("coarse_ps") + step_s("coarse_fcfs")) / 2
        assert step_s("coarse_hybrid") == pytest.approx(mean)
        assert row["coarse_pick"] == "mean"


def test_second_run_refuses_to_overwrite(
    scenario: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(scenario, tmp_path, capsys)
    assert_second_run_refused(scenario, [*SMALL, "--out", str(tmp_path)], tmp_path, capsys)


def test_bad_rho_t_is_one_line(
    scenario: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert scenario.main([*SMALL, "--rho-t", "1.5", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sharing_policies: error: --rho-t") and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("diffs", "expected"),
    [([0.0, 0.01, 0.06, 0.02], 2), ([0.0, -0.051], 1), ([0.0, 0.05, -0.05], None)],
)
def test_first_divergence(scenario: ModuleType, diffs: list[float], expected: int | None) -> None:
    assert scenario.first_divergence(diffs) == expected
