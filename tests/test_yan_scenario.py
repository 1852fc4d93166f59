"""The Yan et al. Table 1 scenario runs, at small settings, the way a user runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from figure_capture import FigureRecord
from scenario_support import (
    assert_png,
    assert_second_run_refused,
    column,
    load_scenario,
    read_csv,
)


def test_prints_both_rankings_beside_the_papers_and_saves_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], saved_figures: list[FigureRecord]
) -> None:
    scenario = load_scenario("yan_table1")
    argv = ["--threads", "1,16", "--out", str(tmp_path)]
    assert scenario.main(argv) == 0
    out = capsys.readouterr().out
    for name in ("mnist:", "imagenet22k:", "Discussion"):
        assert name in out
    for wrp in scenario.CONFIGURATIONS:
        assert out.count(scenario.label(wrp)) >= 2  # one row per network
    holds, fails = out.count("[holds]"), out.count("[FAILS]")
    assert holds + fails == 4

    # The finding: one sentence, whose count of statements that hold is the printed one.
    [finding] = [line for line in out.splitlines() if line.startswith("finding: ")]
    assert finding.endswith(f"{holds} of 4 of the paper's statements hold.")
    assert finding.count(". ") == 0 and "our #1 of 8 for imagenet22k" in finding
    assert f"wrote {tmp_path / scenario.CSV_FILE}" in out
    assert f"wrote {tmp_path / scenario.FIGURE_FILE}" in out

    epochs_of: dict[str, object] = {}
    # The CSV holds both rankings, sorted by epoch time, each configuration once per network.
    rows = read_csv(tmp_path / scenario.CSV_FILE)
    for name in ("mnist", "imagenet22k"):
        mine = [r for r in rows if r["table"] == name]
        assert [int(r["rank"]) for r in mine] == list(range(1, 9))
        epochs = column(mine, "epoch_min")
        epochs_of[name] = epochs
        assert list(epochs) == sorted(epochs)
        wrp = {(int(r["workers_per_replica"]), int(r["replicas"]), int(r["servers"])) for r in mine}
        assert wrp == set(scenario.CONFIGURATIONS)
        assert all(w * r + ps == scenario.MACHINES for w, r, ps in wrp)
        [best] = [r for r in mine if r["paper_rank"] == "1"]
        assert best["configuration"] == scenario.label(scenario.PAPER_BEST[name])

    # The figure draws the CSV's epoch times, one panel per network.
    assert_png(tmp_path / scenario.FIGURE_FILE, min_bytes=10_000)
    [figure] = saved_figures
    assert len(figure.axes) == 2 and figure.titled()
    for axes, name in zip(figure.axes, ("mnist", "imagenet22k"), strict=True):
        assert name in axes.title and "(min)" in axes.xlabel and axes.has_legend
        drawn = [w for w in axes.bar_widths if w > 0]  # the legend's entry is an empty bar
        assert drawn == pytest.approx(list(epochs_of[name]))
    assert_second_run_refused(scenario, argv, tmp_path, capsys)


def test_ranks_are_a_permutation_sorted_by_epoch_time() -> None:
    scenario = load_scenario("yan_table1")
    ranked = scenario.rank(scenario.mnist(), scenario.paper_hardware(), (1, 16))
    assert [r.rank for r in ranked] == list(range(1, 9))
    epochs = [r.result.epoch_s for r in ranked]
    assert epochs == sorted(epochs)
    assert {r.wrp for r in ranked} == set(scenario.CONFIGURATIONS)


def test_imagenet_best_is_the_papers_with_default_constants() -> None:
    # A pinned result of the default setup (see the scenario's discussion).
    scenario = load_scenario("yan_table1")
    ranked = scenario.rank(scenario.imagenet22k(), scenario.paper_hardware(), (1, 16))
    assert ranked[0].wrp == (4, 4, 4)


@pytest.mark.parametrize("bad", [["--threads", "0"], ["--read-bound", "2"]])
def test_bad_options_exit_with_a_usage_error(bad: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        load_scenario("yan_table1").main(bad)
    assert exit_info.value.code == 2
