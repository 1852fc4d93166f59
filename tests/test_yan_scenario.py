"""The Yan et al. Table 1 scenario runs, at small settings, the way a user runs it."""

from __future__ import annotations

import pytest

from scenario_support import load_scenario


def test_prints_both_rankings_beside_the_papers(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = load_scenario("yan_table1")
    assert scenario.main(["--threads", "1,16"]) == 0
    out = capsys.readouterr().out
    for name in ("mnist:", "imagenet22k:", "Discussion"):
        assert name in out
    for wrp in scenario.CONFIGURATIONS:
        assert out.count(scenario.label(wrp)) >= 2  # one row per network
    assert out.count("[holds]") + out.count("[FAILS]") == 4


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
