"""scenarios/async_link_loop.py: the transfers-only loop on the emulated cluster (root only)
against the simulator's, the bounds it is drawn between, and what it refuses before any run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from profilers.distributed.async_probe import ProbeStep

from scenario_support import (
    assert_finding_and_files,
    assert_second_run_refused,
    load_scenario,
    read_csv,
)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--workers", "1"], "--workers"),
        (["--rate", "fast"], "--rate"),
        (["--nbytes", "2"], "--nbytes"),
        (["--nbytes", "lots"], "--nbytes"),
        (["--busy", "soon"], "--busy"),
        (["--steps", "5", "--warmup", "3"], "--warmup"),
        (["--flow-weight-cv", "-0.1"], "--flow-weight-cv"),
        (["--seeds", "0"], "--seeds"),
    ],
)
def test_the_scenario_refuses_bad_options_before_any_run(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        load_scenario("async_link_loop").main(argv)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def test_the_bounds_are_lock_step_and_a_full_pipeline() -> None:
    scenario = load_scenario("async_link_loop")
    # Transfers of 100 ms, 5 ms busy. Lock-step: W pulls share the downlink (W x 100 ms), the
    # same for the pushes. Pipelined: a worker's own pull, busy and push, or each direction
    # carrying W transfers one after another, whichever is longer.
    assert scenario.lock_step_s(3, 0.1, 0.005) == pytest.approx(0.605)
    assert scenario.pipelined_s(2, 0.1, 0.005) == pytest.approx(0.205)
    assert scenario.pipelined_s(3, 0.1, 0.005) == pytest.approx(0.3)


def test_the_simulated_loop_without_spread_is_lock_step() -> None:
    scenario = load_scenario("async_link_loop")
    # 1 MB at 80 Mbit/s: 100 ms a transfer alone. Identical workers with equal shares never
    # part: the pulls share the downlink, the pushes the uplink, and two workers spinning 5 ms
    # each on one core take 10 ms.
    link = scenario.Link(80e6, 0.0, 0.0, "test")
    step = ProbeStep((1_000_000,), (0.0025,), (0.0025,))
    one = scenario.simulate_loop(1, step, link, 1.0, scenario.SHARES, 2)
    two = scenario.simulate_loop(2, step, link, 1.0, scenario.SHARES, 2)
    assert one.cycle_s.value == pytest.approx(0.205, rel=1e-6)
    assert two.cycle_s.value == pytest.approx(0.410, rel=1e-6)
    assert two.occupancy.both_directions == pytest.approx(0.0, abs=1e-9)
    assert two.occupancy.all_pulling == pytest.approx(two.occupancy.all_pushing, rel=1e-6)


def test_the_finding_names_the_worker_counts_the_simulator_misses() -> None:
    scenario = load_scenario("async_link_loop")

    def point(workers: int, measured: float, simulated: float) -> Any:
        occupancy = SimpleNamespace(both_directions=0.5)
        sim = SimpleNamespace(cycle_s=SimpleNamespace(value=simulated), occupancy=occupancy)
        return SimpleNamespace(
            workers=workers,
            cycle_s=measured,
            occupancy=occupancy,
            simulated={scenario.SHARES: sim, scenario.INTERFERENCE: sim},
        )

    missed = scenario.finding([point(1, 0.2, 0.2), point(2, 0.2, 0.3), point(3, 0.4, 0.42)])
    assert "off by more than 10% at W = 2:" in missed and "(+50%;" in missed
    close = scenario.finding([point(1, 0.2, 0.2), point(2, 0.2, 0.21)])
    assert "within 10% at every W" in close


def test_the_loop_runs_on_the_testbed_and_is_set_beside_the_simulators(
    root_only: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario("async_link_loop")
    argv = [
        *("--workers", "2", "--nbytes", "500kB", "--steps", "6", "--warmup", "2"),
        *("--seeds", "2", "--out", str(tmp_path)),
    ]
    assert scenario.main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    names = ["async_link_loop.csv", "async_link_loop_states.csv", "async_link_loop.png"]
    assert_finding_and_files(out, tmp_path, names)
    rows = read_csv(tmp_path / "async_link_loop.csv")
    assert [int(r["workers"]) for r in rows] == [1, 2]
    alone = float(rows[0]["measured_ms"])  # one worker: its own pull, busy and push
    for row in rows:
        measured = float(row["measured_ms"])
        # no schedule beats the pipeline; lock-step is what equal sharing could at worst do
        assert measured >= 0.95 * float(row["pipelined_ms"])
        assert float(row["lock_step_ms"]) >= float(row["pipelined_ms"])
        assert float(row["interference_ms"]) > 0 and float(row["shares_ms"]) > 0
        shares = [float(row[k]) for k in ("measured_both", "measured_all_pulling")]
        assert all(0.0 <= s <= 1.0 for s in shares)
    assert float(rows[1]["measured_ms"]) > 0.9 * alone
    states = read_csv(tmp_path / "async_link_loop_states.csv")
    assert states, "one worker alone spends its whole loop in two states"
    for state in states:
        assert state["direction"] in ("pull", "push") and float(state["seconds"]) > 0
        assert float(state["equal"]) == pytest.approx(
            1 / int(state["pulls" if state["direction"] == "pull" else "pushes"]), rel=1e-3
        )
    assert_second_run_refused(scenario, [*argv, "--quiet"], tmp_path, capsys)
