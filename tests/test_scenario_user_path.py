"""The user-path validation scenario predicts a kept campaign's points with the user's own
commands: its measured column is the campaign's, its predicted column what `sgdsim simulate`
prints for the stated hosting, and its error the ratio of the two."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
from pathlib import Path

import pytest

from profilers.distributed.campaign import campaign_files
from profilers.distributed.measurements import load_measurements

from scenario_support import assert_png, load_scenario, read_csv


def test_a_model_of_the_campaign_predicted_the_users_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario("user_path_validation")
    argv = ["--models", "mlp", "--workers-max", "2", "--out", str(tmp_path)]
    assert scenario.main(argv) == 0
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "user_path.csv")
    assert [(r["arch"], int(r["workers"])) for r in rows] == [
        (arch, w) for arch in ("ps-async", "ps-sync", "allreduce") for w in (1, 2)
    ]
    assert_png(tmp_path / "user_path.png", min_bytes=10_000)
    # measured: the campaign's own runs, their mean
    (path,) = [p for _, p in campaign_files(["check-200"]) if p.name.startswith("mlp-")]
    points = {(p.architecture.value, p.workers): p for p in load_measurements(path).points}
    for row in rows:
        runs = points[row["arch"], int(row["workers"])].runs
        assert float(row["measured"]) == pytest.approx(
            statistics.fmean(r.examples_per_s for r in runs)
        )
        assert float(row["error"]) == pytest.approx(
            float(row["predicted"]) / float(row["measured"]) - 1
        )
    # predicted: sgdsim simulate with the testbed's hosting (the server pinned to one of the two
    # cores, so a parameter server's workers share the other), the same seed, the same number
    sync2 = next(r for r in rows if r["arch"] == "ps-sync" and r["workers"] == "2")
    cmd = ["sgdsim", "simulate", str(tmp_path / "profile-mlp-b16-t1.json"), "--network"]
    cmd += ["netns-200mbit-4ranks", "--arch", "ps", "--mode", "sync", "--workers", "2"]
    cmd += ["--colocated", "2", "--host-cores", "1", "--worker-cores", "1", "--own-nics", "--json"]
    again = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert float(sync2["predicted"]) == pytest.approx(again["points"][0]["examples_per_s"]["value"])
    assert all(math.isfinite(float(r["error"])) for r in rows)
    assert "all          6 points: mean |error|" in out
    # a second run keeps the results it would replace
    assert scenario.main(argv) == 1


def test_one_network_profile_per_link_rate(tmp_path: Path) -> None:
    scenario = load_scenario("user_path_validation")
    both = scenario._networks(["300=netns-300mbit-4ranks", "500=b.json"])
    assert both == {300e6: "netns-300mbit-4ranks", 500e6: "b.json"}
    assert scenario._network_for(both, 300e6) == "netns-300mbit-4ranks"
    assert scenario._network_for(both, 499e6) == "b.json"  # within 1% of the rate
    assert scenario._network_for(both, 200e6) is None
    assert scenario._network_for(both, None) is None  # a loopback campaign
    one = scenario._networks(["netns-200mbit-4ranks"])
    assert scenario._network_for(one, 123e6) == scenario._network_for(one, None) == one[None]
    for bad in (["300=a", "b.json"], ["x=a"], ["0=a"], ["300="]):
        with pytest.raises(ValueError, match="MBIT=PROFILE"):
            scenario._networks(bad)
    with pytest.raises(ValueError, match="'300=b': 300 Mbit/s has a profile already"):
        scenario._networks(["300=a", "300=b"])


def test_a_file_without_a_network_for_its_rate_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario("user_path_validation")
    argv = ["--network", "300=netns-300mbit-4ranks", "--out", str(tmp_path)]
    assert scenario.main(argv) == 1  # check-200 ran at 200 Mbit/s
    err = capsys.readouterr().err
    assert (
        err.startswith("user_path: error: ")
        and "no --network for its link rate (200 Mbit/s)" in err
    )
    assert err.count("\n") == 1
    assert scenario.main(["--network", "300=a", "b.json", "--out", str(tmp_path)]) == 1
    assert "--network: 'b.json': give MBIT=PROFILE" in capsys.readouterr().err
    assert scenario.main(["--network", "200=nope.json", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err  # checked before anything is profiled or simulated
    assert err.startswith("user_path: error: --network: nope.json: no such file")
    assert err.count("\n") == 1
    assert not (tmp_path / "user_path.csv").exists()
