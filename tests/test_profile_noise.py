"""The profile's own noise (profilers.distributed.profile_noise) and its scenario
(scenarios/research/profile_noise.py): each point predicted from each single profile run, the
spread as the pooled prediction's standard error, and the noise floor of both noises together."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from profilers.distributed.campaign import campaign_files, shipped_campaigns
from profilers.distributed.measurements import load_measurements
from profilers.distributed.noise_floor import noise_floor
from profilers.distributed.profile_noise import (
    assess_profile_noise,
    combined_standard_error,
    profile_noise,
    profile_standard_error,
)
from simcore.errors import ConfigError

from scenario_support import assert_png, column, load_scenario, read_csv


def test_a_predictions_standard_error_is_the_single_runs_spread_over_root_n() -> None:
    # Predictions 10, 12, 14 from three single runs: sd 2, over sqrt(3), over the pooled 12.
    assert profile_standard_error(12.0, [10.0, 12.0, 14.0]) == pytest.approx(2 / math.sqrt(3) / 12)
    assert profile_standard_error(12.0, [12.0, 12.0]) == 0.0
    assert math.isnan(profile_standard_error(12.0, [10.0]))  # one run: no spread to see
    assert math.isnan(profile_standard_error(0.0, [1.0, 2.0]))


def test_the_two_noises_add_in_quadrature() -> None:
    assert combined_standard_error(0.03, 0.04) == pytest.approx(0.05)
    assert math.isnan(combined_standard_error(math.nan, 0.04))
    # A floor of both is never below the runs' alone.
    runs, profile = [0.01, 0.02, 0.03], [0.02, 0.0, 0.05]
    both = [combined_standard_error(r, p) for r, p in zip(runs, profile, strict=True)]
    alone, together = noise_floor(runs), noise_floor(both)
    assert alone is not None and together is not None
    assert together.mean_abs_error > alone.mean_abs_error
    assert together.max_abs_error > alone.max_abs_error


@pytest.mark.skipif("campaign" not in shipped_campaigns(), reason="no campaign shipped")
def test_one_profile_run_of_each_kind_has_no_noise_to_show() -> None:
    # The first campaign predates pooled profiles: one run of each kind per file.
    [(_, path), *_] = campaign_files(["campaign"])
    with pytest.raises(ConfigError, match=r"two or more one-worker runs of each kind; .* 1 "):
        profile_noise(load_measurements(path))
    with pytest.raises(ConfigError, match=r"no file has two or more .*campaign/cnn-300-layerwise"):
        assess_profile_noise(["campaign"])


@pytest.mark.slow
def test_each_point_is_predicted_from_each_profile_run() -> None:
    [(name, noise)], left_out = assess_profile_noise(
        [
            str(p)
            for g, p in campaign_files(["check-rings"])
            if g.endswith("mlp-b32-500-layerwise.json.gz")
        ]
    )
    assert name == "check-rings/mlp-b32-500-layerwise.json.gz" and left_out == []
    assert noise.profile_runs == 3
    assert [(p.architecture, p.workers) for p in noise.report.points] == [
        ("allreduce", w) for w in (1, 2, 3, 4)
    ]
    ses = noise.profile_standard_errors()
    assert all(se >= 0 for se in ses)
    # W = 1 replays the computation alone, whose three runs differ: the prediction moves with
    # them; with 2-4 ranks the ring's bytes decide and the profile hardly matters.
    assert ses[0] > 0.01 and max(ses[1:]) < 0.01
    for p, single in zip(noise.report.points, noise.single, strict=True):
        assert min(single) <= 1.05 * p.simulated and max(single) >= 0.95 * p.simulated


@pytest.mark.slow
@pytest.mark.skipif("campaign-2" not in shipped_campaigns(), reason="no campaign-2 shipped")
def test_the_scenario_and_the_readme_say_what_campaign_2_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The README's figures are the held-out half's: its six files alone (the whole campaign
    # took 2-4 minutes of CI; each file's points are assessed on their own either way).
    scenario = load_scenario("profile_noise")
    held_out = [str(path) for name, path in campaign_files(["campaign-2"]) if "-500-" in name]
    assert len(held_out) == 6
    argv = [arg for path in held_out for arg in ("--from-runs", path)]
    argv += ["--out", str(tmp_path), "--quiet"]
    assert scenario.main(argv) == 0
    out = capsys.readouterr().out
    summary = read_csv(tmp_path / "profile_noise-summary.csv")
    assert_png(tmp_path / "profile_noise.png", min_bytes=10_000)
    points = read_csv(tmp_path / "profile_noise.csv")
    assert [r["link_mbps"] for r in summary] == ["500.0"]
    assert len(points) == 48 and column(summary, "points").sum() == 48
    for row in summary:
        assert float(row["both_floor_mean_pct"]) >= float(row["runs_floor_mean_pct"])
        assert float(row["both_floor_max_pct"]) >= float(row["runs_floor_max_pct"])
        assert int(row["beyond_both"]) <= int(row["beyond_runs"])
    held = summary[-1]
    finding = next(line for line in out.splitlines() if line.startswith("finding: "))
    assert f"{float(held['both_floor_mean_pct']):.1f}% off on average" in finding
    # The README's paragraph on the held-out half, as the runs give it.
    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text("utf-8").split())
    phrase = (
        f"{float(held['both_floor_mean_pct']):.1f}% on average and "
        f"{float(held['both_floor_max_pct']):.1f}% at most (one time in ten more than "
        f"{float(held['both_floor_max_p90_pct']):.1f}%), and {held['beyond_both']} of its "
        f"{held['points']} errors are beyond two standard errors of both"
    )
    assert phrase in readme, f"README should say: {phrase}"
