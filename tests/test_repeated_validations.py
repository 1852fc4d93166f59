"""Configurations validated twice: how far their measurements and the simulator's error moved,
and what the part that moves costs a model with no error of its own
(profilers.distributed.campaign.repeated_points, noise_floor.error_noise_sd,
scenarios/research/repeated_validations.py)."""

from __future__ import annotations

import dataclasses
import math
import shutil
import statistics
from importlib import resources
from pathlib import Path

import pytest
from test_validation_measurements import measurements

from profilers.distributed.campaign import (
    RepeatedPoint,
    architecture_label,
    assess_campaign,
    campaign_text,
    repeat_floor,
    repeated_configurations,
)
from profilers.distributed.measurements import PointSelection, load_measurements, save_measurements
from profilers.distributed.noise_floor import error_noise_sd, noise_floor, repeating_error_rms
from profilers.distributed.validation import ValidationPoint
from simcore.cli.main import main
from simcore.parallel import jobs

from output_support import output
from scenario_support import assert_one_sentence_finding, assert_png, load_scenario, read_csv

KEPT = resources.files("simcore.data.validation")
# resnet8 at batch 16 and 200 Mbit/s, PS Async- and Sync-SGD, W = 1..4: validated in check-200
# (with rings too) and again, a day later, in check-rounds
FIRST = str(KEPT / "check-200" / "resnet8-b16-200-layerwise.json.gz")
SECOND = str(KEPT / "check-rounds" / "resnet8-b16-200-layerwise.json.gz")


def _pair(
    errors: tuple[float, float], measured: tuple[float, float] = (100.0, 110.0)
) -> RepeatedPoint:
    label = "m-b8 1 Gbit/s PS async, layerwise W=2"
    return RepeatedPoint(label, "PS async, layerwise", ("a", "b"), measured, errors)


def test_a_pairs_moves_by_hand() -> None:
    pair = _pair((0.05, -0.03))
    assert pair.measured_gap == pytest.approx(0.1)
    assert pair.error_shift == pytest.approx(-0.08)


def test_the_noise_sd_is_half_the_mean_squared_shift_under_a_root() -> None:
    # shifts of +-0.1: mean square 0.01, half of it 0.005, sd 0.0707; NaN left out
    assert error_noise_sd([0.1, -0.1, math.nan]) == pytest.approx(math.sqrt(0.005))
    assert error_noise_sd([0.06, 0.0]) == pytest.approx(math.sqrt(0.0018 / 2))
    assert math.isnan(error_noise_sd([]))
    assert math.isnan(error_noise_sd([math.nan]))


def test_the_floor_is_the_noise_floor_of_that_sd_over_the_points() -> None:
    pairs = [_pair((0.0, 0.1)), _pair((0.02, -0.08))]  # shifts +0.1 and -0.1
    floor = repeat_floor(pairs, 48)
    assert floor is not None
    sd = math.sqrt(0.005)
    expected = noise_floor([sd] * 48)
    assert expected is not None
    assert floor.points == 48
    assert floor.max_abs_error == pytest.approx(expected.max_abs_error)
    assert floor.mean_abs_error == pytest.approx(sd * math.sqrt(2 / math.pi))
    # the largest of 48: its median is where erf(x / (sd sqrt 2))^48 = 1/2
    assert math.erf(floor.max_abs_error / (sd * math.sqrt(2))) ** 48 == pytest.approx(0.5)
    assert repeat_floor([], 48) is None
    assert repeat_floor(pairs, 0) is None


def test_configurations_are_matched_across_files_whatever_the_runs_length() -> None:
    """check-200's and check-rounds' resnet8 share their eight parameter-server points; the
    rings of check-rings (100 steps a run) share mlp's and resnet8's with both campaigns (24)."""
    first, second = load_measurements(FIRST), load_measurements(SECOND)
    other = load_measurements(str(KEPT / "check-200" / "cnn-b16-200-layerwise.json.gz"))
    assert repeated_configurations([first, second, other]) == [{1}, {0}, set()]
    rings = load_measurements(str(KEPT / "check-rings" / "mlp-b32-500-layerwise.json.gz"))
    campaign = load_measurements(str(KEPT / "campaign" / "mlp-500-layerwise.json.gz"))
    assert rings.base.steps != campaign.base.steps
    assert repeated_configurations([rings, campaign]) == [{1}, {0}]


@pytest.mark.slow
def test_the_pairs_are_the_two_validations_points(tmp_path: Path) -> None:
    """Each pair holds the two files' measured means and errors of one configuration; a copy of
    a file (the same runs) is not a repeat; the campaign's text says so in one paragraph."""
    copy = tmp_path / "copy.json.gz"
    shutil.copy(SECOND, copy)
    sync = PointSelection(architectures=("ps-sync",))  # W = 1..4 in each: the quicker half
    with jobs(None):  # the three files on every usable core, as the CLI assesses them
        report = assess_campaign([FIRST, SECOND, str(copy)], selection=sync)
    pairs = report.repeated_points()
    # FIRST with SECOND and with its copy; SECOND with its copy is no repeat
    assert len(pairs) == 8
    first, second = report.reports[0], report.reports[1]
    between = [p for p in pairs if p.sources == (FIRST, SECOND)]
    assert len(between) == 4
    for pair in between:
        (a,) = [p for p in first.points if pair.label.endswith(_label(p))]
        (b,) = [p for p in second.points if pair.label.endswith(_label(p))]
        assert pair.architecture == "PS sync, layerwise"
        assert pair.measured == (a.measured_mean, b.measured_mean)
        assert pair.errors == (a.error(a.simulated), b.error(b.simulated))
    text = campaign_text(report)
    shifts = [abs(p.error_shift) for p in pairs]
    assert "8 pairs from 3 files" in text
    assert f"moved by {100 * statistics.fmean(shifts):.1f} / {100 * max(shifts):.1f} points" in text
    alone = assess_campaign([SECOND], selection=sync)
    assert "configurations validated twice" not in campaign_text(alone)


def _label(point: ValidationPoint) -> str:
    """`` PS async, layerwise W=2``: how a pair's label ends for ``point`` of a layerwise file."""
    return f" {architecture_label(point.architecture, 'layerwise')} W={point.workers}"


@pytest.mark.slow
def test_the_scenario_on_one_configuration_validated_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The two resnet8 files given with a file that repeats nothing (left out before any
    prediction): eight pairs, the summary and the finding from them, the figure."""
    scenario = load_scenario("repeated_validations")
    alone = str(KEPT / "check-200" / "cnn-b16-200-layerwise.json.gz")
    argv = [a for f in (FIRST, SECOND, alone) for a in ("--from-runs", f)]
    assert scenario.repeated_files([FIRST, SECOND, alone]) == [FIRST, SECOND]
    assert scenario.main([*argv, "--out", str(tmp_path), "--quiet", "--points", "20"]) == 0
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "repeated_validations.csv")
    assert len(rows) == 8
    assert {r["first"] for r in rows} == {"check-200/resnet8-b16-200-layerwise"}
    shifts, errors = [], []
    for r in rows:
        first, then = float(r["error_first_pct"]), float(r["error_second_pct"])
        assert float(r["error_shift_pct"]) == pytest.approx(then - first, abs=1e-9)
        gap = float(r["measured_second"]) / float(r["measured_first"]) - 1
        assert float(r["measured_gap_pct"]) == pytest.approx(100 * gap, rel=1e-6)
        shifts.append(float(r["error_shift_pct"]) / 100)
        errors.append((first / 100, then / 100))
    summary = {
        r["architecture"]: r for r in read_csv(tmp_path / "repeated_validations-summary.csv")
    }
    assert set(summary) == {"PS async, layerwise", "PS sync, layerwise", "all"}
    assert int(summary["all"]["pairs"]) == 8
    sd = error_noise_sd(shifts)
    assert float(summary["all"]["noise_sd_pct"]) == pytest.approx(100 * sd, rel=1e-6)
    own = repeating_error_rms(errors)
    assert float(summary["all"]["own_rms_pct"]) == pytest.approx(100 * own, rel=1e-6)
    floor = noise_floor([sd] * 20)
    assert floor is not None
    finding = assert_one_sentence_finding(out)
    assert "8 configurations validated twice" in finding
    assert f"the model's own, is {100 * own:.1f}% rms" in finding
    assert f"{100 * floor.mean_abs_error:.1f}% off on average" in finding
    assert "at most over 20 points" in finding
    assert_png(tmp_path / "repeated_validations.png", min_bytes=10_000)


def test_runs_that_repeat_nothing_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One file, or a path that is not there: one line, nothing written."""
    scenario = load_scenario("repeated_validations")
    out = tmp_path / "out"
    assert scenario.main(["--from-runs", FIRST, "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("repeated_validations: error: ") and "Traceback" not in err
    assert "no two files" in err
    assert scenario.main(["--from-runs", "/nonexistent", "--out", str(out), "--quiet"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_the_part_that_repeats_is_the_root_of_the_mean_product() -> None:
    # (0.1, 0.1) and (0.1, -0.1): mean product 0, nothing repeats; (0.1, 0.2), (-0.1, -0.1):
    # products 0.02 and 0.01, rms sqrt(0.015); a negative mean product is read as none
    assert repeating_error_rms([(0.1, 0.1), (0.1, -0.1)]) == 0.0
    assert repeating_error_rms([(0.1, 0.2), (-0.1, -0.1)]) == pytest.approx(math.sqrt(0.015))
    assert repeating_error_rms([(0.1, -0.2)]) == 0.0
    assert math.isnan(repeating_error_rms([]))


def test_a_campaigns_json_lists_its_repeated_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two files of one configuration whose W = 2 Sync-SGD point kept two runs in one and one
    of them in the other (both alike): that point is the one repeat (the others hold the same
    runs), measured alike and predicted alike from the same profile."""
    first = measurements()
    points = tuple(
        dataclasses.replace(p, runs=p.runs[:1]) if p.workers == 2 else p for p in first.points
    )
    save_measurements(first, tmp_path / "a.json.gz")
    save_measurements(dataclasses.replace(first, points=points), tmp_path / "b.json.gz")
    assert main(["validate", "--from-runs", str(tmp_path), "--json", "--quiet"]) == 0
    (repeated,) = output(capsys.readouterr().out)["context"]["repeated_points"]
    assert repeated["label"] == "mlp-b8 100 Mbit/s PS sync, layerwise W=2"
    assert repeated["architecture"] == "PS sync, layerwise"
    assert repeated["sources"] == [str(tmp_path / "a.json.gz"), str(tmp_path / "b.json.gz")]
    assert repeated["measured"][0] == pytest.approx(repeated["measured"][1])
    assert repeated["errors"][0] == pytest.approx(repeated["errors"][1])
