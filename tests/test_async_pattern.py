"""Which pattern identical Async-SGD workers settle in on a shaped link, without training
(scenarios/research/async_pattern.py; its probes on the emulated cluster: root only)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from profilers.distributed.async_probe import AsyncProbe, ProbeStep, probe_from_dict
from simcore.errors import ConfigError

from scenario_support import assert_png, load_scenario, read_csv

STEP = ProbeStep((1_000_000,), (0.01,), (0.01,))


def steady(workers: int, steps_per_s: float, rate: float = 2e8) -> AsyncProbe:
    """A probe whose workers' steps add up to ``steps_per_s`` (evenly spaced, in step)."""
    step_s = workers / steps_per_s
    times = tuple(tuple((n * step_s, (n + 1) * step_s) for n in range(10)) for _ in range(workers))
    return AsyncProbe(
        workers, STEP.layer_nbytes, STEP.forward_s, STEP.backward_s, False, rate, times
    )


def test_the_simulated_link_runs_one_worker_as_fast_as_its_probes() -> None:
    # 1 MB each way and 20 ms asleep, strict phases: one worker's step is 0.02 + 2 * 8e6 / B,
    # so 4 steps/s (0.25 s) needs B = 8e6 * 2 / 0.23.
    scenario = load_scenario("async_pattern")
    bandwidth = scenario.one_worker_bandwidth(STEP, False, 4.0)
    assert bandwidth == pytest.approx(16e6 / 0.23, rel=1e-6)
    with pytest.raises(ConfigError, match="faster than the bare step's computation alone"):
        scenario.one_worker_bandwidth(STEP, False, 60.0)  # 1 / 0.02 s = 50 steps/s at most


def test_burning_workers_share_their_cores_in_the_simulator() -> None:
    # A step of 20 ms computation and 4 kB at 1 Gbit/s (32 us each way): two workers alone
    # run about 2 / 0.02 steps/s, two sharing one core about 1 / 0.02.
    scenario = load_scenario("async_pattern")
    step = ProbeStep((4000,), (0.01,), (0.01,))
    alone = scenario.simulated(step, True, 1e9, 2)
    shared = scenario.simulated(step, True, 1e9, 2, worker_cores=1.0)
    assert alone.steps_per_s == pytest.approx(2 / 0.02, rel=0.01)
    assert shared.steps_per_s == pytest.approx(1 / 0.02, rel=0.01)


def test_the_summary_and_the_finding_compare_repeats_and_the_simulator() -> None:
    scenario = load_scenario("async_pattern")
    rows = [
        scenario.ProbeRow(2e8, 0, steady(1, 4.0)),
        scenario.ProbeRow(2e8, 0, steady(2, 7.0)),
        scenario.ProbeRow(2e8, 1, steady(1, 4.0)),
        scenario.ProbeRow(2e8, 1, steady(2, 8.0)),
    ]
    sim = scenario.simulate_rates(STEP, False, rows)
    assert sim[(2e8, 1)].steps_per_s == pytest.approx(4.0, rel=1e-3)  # set to match
    two = sim[(2e8, 2)]
    assert two.low <= two.steps_per_s <= two.high and len(two.patterns) == scenario.SIM_SEEDS
    table = scenario.summary_table(rows, sim)
    second = table.rows[1]
    assert (second["workers"], second["median"]) == (2, 7.5)
    assert second["spread_pct"] == pytest.approx(100 / 7.5)
    assert second["simulated_error_pct"] == pytest.approx(100 * (two.steps_per_s / 7.5 - 1))
    text = scenario.finding(rows, sim)
    assert text.startswith("finding: repeated probes of two workers or more differed by up to 13%")
    assert "(one worker: 0%)" in text and "at W=2 and 200 Mbit/s" in text


def test_the_scenario_refuses_bad_input_before_probing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = load_scenario("async_pattern")
    for argv, named in (
        (["--rates", "fast"], "--rates"),
        (["--seconds", "0"], "--seconds"),
        (["--repeats", "0"], "--repeats"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            scenario.main(argv)
        assert exit_info.value.code == 2
        assert named in capsys.readouterr().err
    missing = tmp_path / "nothing.json"
    assert scenario.main(["--trace", str(missing), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("async_pattern: error:") and "nothing.json" in err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.slow
def test_probes_on_a_shaped_link_are_kept_plotted_and_compared(
    root_only: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario("async_pattern")
    argv = ["--rates", "200Mbit/s", "--workers", "1,2", "--repeats", "2", "--seconds", "1"]
    assert scenario.main([*argv, "--out", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "async_pattern.csv")
    assert [(float(r["link_mbps"]), int(r["workers"])) for r in rows] == [(200, 1), (200, 2)]
    one = rows[0]
    # The simulated link is set so that one worker runs as its probes' median did.
    assert float(one["simulated"]) == pytest.approx(float(one["median"]), rel=1e-3)
    assert float(rows[1]["median"]) > 0 and float(rows[1]["simulated"]) > 0
    doc = json.loads((tmp_path / "async_pattern.json").read_text(encoding="utf-8"))
    assert doc["trace"] == "cnn-b32" and len(doc["probes"]) == 4
    probes = [probe_from_dict(p["probe"]) for p in doc["probes"]]
    assert [p.workers for p in probes] == [1, 2, 1, 2]
    medians = [statistics.median(p.steps_per_s() for p in probes if p.workers == w) for w in (1, 2)]
    assert [float(r["median"]) for r in rows] == pytest.approx(medians, rel=1e-3)
    assert_png(tmp_path / "async_pattern.png", min_bytes=10_000)
    assert "finding: repeated probes of two workers or more differed by up to" in out
