"""scenarios/heterogeneous.py: fast and slow workers, and per-flow bandwidth caps."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from simcore.trace.io import load_trace
from simcore.trace.model import OpKind

from figure_capture import FigureRecord
from scenario_support import (
    Rows,
    assert_finding_and_files,
    assert_lines_plot,
    assert_png,
    assert_printed_equals_csv,
    assert_second_run_refused,
    load_scenario,
    read_csv,
    saved_as,
)

TRACE = "cnn-b32"
SMALL = ["--trace", TRACE, "--workers", "1,4", "--mix-workers", "2", "--steps", "30"]
SMALL += ["--warmup", "5", "--quiet"]
FAST_BPS, CAP_BPS, SPEEDUP, SLOW_SPEED = 25e9, 10e9, 50.0, 0.5  # the scenario's defaults


@pytest.fixture(scope="module")
def scenario() -> ModuleType:
    return load_scenario("heterogeneous")


@pytest.fixture(scope="module")
def small_run(scenario: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Rows, Rows]:
    """One small run shared by the science tests: (mix rows, caps rows)."""
    folder = tmp_path_factory.mktemp("heterogeneous")
    assert scenario.main([*SMALL, "--out", str(folder)]) == 0
    return read_csv(folder / scenario.MIX_CSV), read_csv(folder / scenario.CAPS_CSV)


def test_files_tables_and_figures_agree(
    scenario: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    saved_figures: list[FigureRecord],
) -> None:
    assert scenario.main([*SMALL, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = [scenario.MIX_CSV, scenario.MIX_PNG, scenario.CAPS_CSV, scenario.CAPS_PNG]
    finding = assert_finding_and_files(out, tmp_path, names)
    assert "costs Sync-SGD" in finding and "per-flow cap" in finding
    for name in scenario.FILES:
        assert (tmp_path / name).stat().st_size > 0
    for name in (scenario.MIX_PNG, scenario.CAPS_PNG):
        assert_png(tmp_path / name)
    mix, caps = read_csv(tmp_path / scenario.MIX_CSV), read_csv(tmp_path / scenario.CAPS_CSV)
    assert [r["slow_workers"] for r in mix] == ["0", "1", "2"]
    assert [r["workers"] for r in caps] == ["1", "4"]
    assert_printed_equals_csv(out, "(a) 2 workers", mix, prefix=True)
    assert_printed_equals_csv(out, "(b) examples/s", caps, prefix=True)
    assert "finding (a): " in out and "finding (b): " in out
    assert "emulated GPU" in out  # the compute speed-up is said, not hidden

    figures = saved_as(saved_figures, (scenario.MIX_PNG, scenario.CAPS_PNG))
    for fig in figures.values():
        assert fig.titled()
        for ax in fig.axes:
            assert ax.xlabel and "(examples/s)" in ax.ylabel and ax.has_legend
    (ax,) = figures[scenario.MIX_PNG].axes
    assert_lines_plot(
        ax,
        mix,
        "slow_workers",
        {
            "Async-SGD, simulator": "async_sim",
            "Sync-SGD, simulator": "sync_sim",
            "Async-SGD, coarse (Eq. 5)": "async_coarse_hybrid",
            "Sync-SGD, coarse overlap (Eq. 10)": "sync_coarse_overlap",
        },
    )
    for ax, mode in zip(figures[scenario.CAPS_PNG].axes, ("async", "sync"), strict=True):
        assert_lines_plot(
            ax,
            caps,
            "workers",
            {
                "simulator, no cap": f"{mode}_no_cap",
                "simulator, 10.0 Gbit/s cap": f"{mode}_cap",
                "coarse, no cap": f"{mode}_coarse",
                "link bound with the cap": "link_bound_cap",
            },
        )


def test_sync_waits_for_the_slowest_worker_and_async_does_not(
    small_run: tuple[Rows, Rows],
) -> None:
    mix, _ = small_run
    trace = load_trace(TRACE)
    compute = [
        trace.phase_time_s(s, OpKind.FORWARD) + trace.phase_time_s(s, OpKind.BACKWARD)
        for s in range(trace.n_steps)
    ]
    slow_min_s = min(compute) / SLOW_SPEED  # no slow step is shorter than this
    for row in mix[1:]:  # at least one slow worker
        assert float(row["sync_step_s"]) >= slow_min_s
        assert float(row["sync_sim"]) < float(row["async_sim"])
    for row in mix[:-1]:  # at least one fast worker: it never waits for the slow ones
        assert float(row["async_fast_step_s"]) < slow_min_s
    # All fast and all slow: the same job at half the compute speed, so no more than that.
    assert float(mix[-1]["async_sim"]) < float(mix[0]["async_sim"])


def test_per_flow_cap_closed_forms(
    small_run: tuple[Rows, Rows],
) -> None:
    """One worker, communication-dominated (cnn-b32 50x faster: 0.5 ms of compute, 2 ms per
    direction at 10 Gbit/s): its flows go at the cap, so a step moves the model down and up at
    10 Gbit/s, 2 x 8 M / cap, plus at most the (max profiled) update and compute time."""
    _, caps = small_run
    trace = load_trace(TRACE)
    steps = range(trace.n_steps)
    model_bits = 8 * trace.param_nbytes
    batch = trace.metadata.batch_size
    extra_s = max(trace.phase_time_s(s, OpKind.UPDATE) for s in steps) + max(
        (trace.phase_time_s(s, OpKind.FORWARD) + trace.phase_time_s(s, OpKind.BACKWARD)) / SPEEDUP
        for s in steps
    )
    one = caps[0]
    for mode in ("async", "sync"):
        capped_s = batch / float(one[f"{mode}_cap"])
        assert 2 * model_bits / CAP_BPS <= capped_s <= 2 * model_bits / CAP_BPS + extra_s
        uncapped_s = batch / float(one[f"{mode}_no_cap"])
        assert 2 * model_bits / FAST_BPS <= uncapped_s <= 2 * model_bits / FAST_BPS + extra_s
    # A lone capped flow uses at most cap / B of the link; W flows at most W cap / B.
    for row in caps:
        limit = min(1.0, int(row["workers"]) * CAP_BPS / FAST_BPS)
        for mode in ("async", "sync"):
            assert float(row[f"{mode}_rho_cap"]) <= limit + 1e-9
            assert float(row[f"{mode}_cap"]) <= float(row["link_bound_cap"]) * (1 + 1e-9)
    # Sync-SGD, 4 workers: the pulls start together at the barrier, 4 flows of 25/4 < 10 Gbit/s
    # each: the cap does not bind, and capped and uncapped agree within their CIs.
    four = caps[1]
    gap = abs(float(four["sync_cap"]) - float(four["sync_no_cap"]))
    assert gap <= float(four["sync_cap_ci95"]) + float(four["sync_no_cap_ci95"])


def test_second_run_refuses_to_overwrite(
    scenario: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [*SMALL, "--workers", "1", "--mix-workers", "1", "--out", str(tmp_path)]
    assert scenario.main(args) == 0
    assert_second_run_refused(scenario, args, tmp_path, capsys)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--flow-cap", "fast"), ("--slow-speed", "0"), ("--gpu-speedup", "-1")],
)
def test_bad_option_is_one_line(
    scenario: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
) -> None:
    assert scenario.main([*SMALL, option, value, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"heterogeneous: error: {option}") and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())
