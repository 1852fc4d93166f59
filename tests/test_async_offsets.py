"""How far apart Async-SGD workers start their steps, real and simulated, against the
simulator's error (scenarios/research/async_offsets.py)."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pytest

from scenario_support import assert_one_sentence_finding, assert_png, load_scenario, read_csv

CHECK_200 = resources.files("simcore.data.validation") / "check-200"


def _point(difference: float, error: float, workers: int = 2, rate: float = 2e8) -> object:
    scenario = load_scenario("async_offsets")
    return scenario.OffsetPoint("f", "m", 16, rate, workers, 0.3, 0.3 + difference, error)


def test_the_relation_by_hand() -> None:
    """Errors of 2x the difference: r = 1, slope 2 (20% per 0.1 of a step); the errors beyond
    8% whose sign is the difference's; fewer than 3 points or no variation: no correlation."""
    scenario = load_scenario("async_offsets")
    points = [_point(d, 2 * d) for d in (-0.2, -0.05, 0.0, 0.1)]
    rel = scenario.relation(points)
    assert rel.correlation == pytest.approx(1.0) and rel.slope == pytest.approx(2.0)
    assert (rel.points, rel.large, rel.large_agreeing) == (4, 3, 3)
    against = scenario.relation([*points, _point(0.1, -0.3)])
    assert (against.large, against.large_agreeing) == (4, 3)
    assert math.isnan(scenario.relation(points[:2]).correlation)
    assert math.isnan(scenario.relation([_point(0.1, e) for e in (0.1, 0.2, 0.3)]).slope)


@pytest.mark.slow
def test_the_scenario_on_two_kept_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """check-200's cnn and mlp: a row per Async-SGD point with W = 2..4, the two distances
    within 0 .. 0.5 of a step, the difference and the error as `sgdsim validate` gives them;
    the per-model table's correlation from those rows; the finding and the figure."""
    scenario = load_scenario("async_offsets")
    files = [str(CHECK_200 / f"{m}-b16-200-layerwise.json.gz") for m in ("cnn", "mlp")]
    argv = [a for f in files for a in ("--from-runs", f)]
    assert scenario.main([*argv, "--out", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "async_offsets.csv")
    assert sorted((r["model"], int(r["workers"])) for r in rows) == [
        (m, w) for m in ("cnn-b16", "mlp-b16") for w in (2, 3, 4)
    ]
    for r in rows:
        runs, seeds = float(r["runs"]), float(r["seeds"])
        assert 0.0 <= runs <= 0.5 and 0.0 <= seeds <= 0.5
        assert float(r["difference"]) == pytest.approx(seeds - runs, abs=1e-9)
    # cnn at W = 2: the real pair 0.40-0.47 of a step apart, the seeds closer, 25% too slow
    (cnn2,) = [r for r in rows if r["model"] == "cnn-b16" and r["workers"] == "2"]
    assert float(cnn2["runs"]) > 0.4 > 0.3 > float(cnn2["seeds"])
    assert float(cnn2["error_pct"]) == pytest.approx(-25.4, abs=0.05)
    models = {r["model"]: r for r in read_csv(tmp_path / "async_offsets-models.csv")}
    cnn = [r for r in rows if r["model"] == "cnn-b16"]
    rel = scenario.relation(
        [_point(float(r["difference"]), float(r["error_pct"]) / 100) for r in cnn]
    )
    assert float(models["cnn"]["correlation"]) == pytest.approx(rel.correlation, abs=0.01)
    assert int(models["all"]["points"]) == 6
    rates = read_csv(tmp_path / "async_offsets-rates.csv")
    assert [(r["link_mbps"], r["workers"]) for r in rates] == [("200.0", w) for w in "234"]
    finding = assert_one_sentence_finding(out)
    assert "over 6 Async-SGD points" in finding
    assert_png(tmp_path / "async_offsets.png", min_bytes=10_000)


def test_runs_without_async_points_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rings only: one line naming what is missing, nothing written."""
    scenario = load_scenario("async_offsets")
    rings = str(resources.files("simcore.data.validation") / "check-rings")
    out = tmp_path / "out"
    assert scenario.main(["--from-runs", rings, "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("async_offsets: error: ") and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())
