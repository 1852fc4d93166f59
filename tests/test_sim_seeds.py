"""Async-SGD results carry their spread over seeds, and say how the workers lined up (phases)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simcore.analytic.advisor import Candidate, advise
from simcore.cli.main import main
from simcore.cli.seeds import lockstep_note
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.config import ASYNC_REPLICATIONS, default_replications
from simcore.sim.phases import (
    DRIFTING,
    LOCK_STEP,
    ONE_WORKER,
    PIPELINED,
    offsets,
    offsets_within,
    pair_phase,
)
from simcore.sim.results import result_to_dict
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

from output_support import point

B = 1e9  # bit/s
SIZE = 1_000_000  # bytes: 8 ms each way at 1 Gbit/s
T = 8.0 * SIZE / B


def link_bound() -> Trace:
    """One layer, no computation: a step is a pull and a push of SIZE bytes."""
    return synthetic_trace([0.0], [0.0], [SIZE])


def run(trace: Trace, **kw: object) -> SimulationResult:
    base: dict[str, object] = {"bandwidth_bps": B, "steps": 60, "warmup_steps": 10}
    base.update(kw)
    return simulate(trace, SimulationConfig(**base))  # type: ignore[arg-type]


def test_two_fcfs_workers_alternate_on_the_shared_link() -> None:
    # FCFS: worker 1's pull waits for worker 0's, so each then pushes while the other pulls.
    # The downlink is never idle: X = 1 / T steps/s, and worker 1 starts half a step later.
    result = run(link_bound(), workers=2, sharing="fcfs", replications=3)
    assert result.steps_per_s.value == pytest.approx(1.0 / T, rel=1e-9)
    for rep in result.phases:
        (pair,) = rep.pairs
        assert rep.label == PIPELINED and pair.label == PIPELINED
        assert pair.mean_offset == pytest.approx(0.5, abs=1e-9)
        assert pair.concentration == pytest.approx(1.0) and pair.lockstep_share == 0.0
        assert sum(pair.histogram) == pair.offsets == 50
        assert pair.median_distance == pytest.approx(0.5) == rep.median_distance


def test_two_ps_workers_stay_in_lock_step() -> None:
    # Processor sharing splits the link between the two identical pulls, then the two pushes:
    # a step takes 2T per worker, X = 2 / (4T), and the workers start every step together.
    result = run(link_bound(), workers=2, sharing="ps", replications=2)
    assert result.steps_per_s.value == pytest.approx(1.0 / (2 * T), rel=1e-9)
    assert [rep.label for rep in result.phases] == [LOCK_STEP, LOCK_STEP]
    assert result.phases[0].pairs[0].histogram[0] == 50
    assert result.phases[0].median_distance == 0.0


def test_a_lock_step_that_slows_the_link_is_named() -> None:
    # The two lock-step workers above get 1 / (2T) where pulling while the other pushes would
    # give 1 / T: every seed in lock-step and bytes on the link -> the note, naming the cure
    # the run lacks (no flow weight cv).
    note = lockstep_note(run(link_bound(), workers=2, sharing="ps", replications=2))
    assert note.startswith("every seed ran in lock-step") and "--flow-weight-cv" in note
    assert "(--phases;" in note
    one_seed = lockstep_note(run(link_bound(), workers=2, sharing="ps", replications=1))
    assert one_seed.startswith("the run ran in lock-step")
    weighted = run(link_bound(), workers=2, replications=2, flow_weight_cv=1e-6)
    assert [rep.label for rep in weighted.phases] == [LOCK_STEP, LOCK_STEP]
    assert "lock-step" in lockstep_note(weighted) and "--flow-weight-cv" not in lockstep_note(
        weighted
    )


def test_timeline_and_advise_name_a_lock_step_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The note simulate prints, from the two commands without --phases, which send the
    user to simulate's: timeline's seeds, and each confirmed Async-SGD row of advise whose
    every seed ran in lock-step (PS and hybrid sharing of cnn at 200 Mbit/s), not its FCFS
    row (pipelined) nor its rings; 11 confirmed, as DDP's five rows rank among them."""
    figure = tmp_path / "t.png"
    args = ["cnn-b32", "--bandwidth", "200Mbps", "--steps", "40"]
    assert main(["timeline", *args, "--workers", "2", "-o", str(figure)]) == 0
    err = capsys.readouterr().err
    assert "note: every seed ran in lock-step" in err and "(sgdsim simulate --phases;" in err
    assert main(["advise", *args, "--machines", "3", "--confirm", "11", "--json"]) == 0
    captured = capsys.readouterr()
    ranked = {(p["label"], p["source"]) for p in json.loads(captured.out)["points"]}
    notes = [line for line in captured.err.splitlines() if "ran in lock-step" in line]
    assert sorted(line.split(": ")[1] for line in notes) == [
        "PS Async, hybrid links, 1 server, W=2",
        "PS Async, ps links, 1 server, W=2",
    ]
    for label in ("PS Async, hybrid links, 1 server, W=2", "PS Async, fcfs links, 1 server, W=2"):
        assert (label, "simulated") in ranked
    assert all("(sgdsim simulate --phases;" in line for line in notes)
    assert (
        main(["advise", *args, "--machines", "3", "--confirm", "6", "--flow-weight-cv", "0.3"]) == 0
    )
    assert "ran in lock-step" not in capsys.readouterr().err


def test_no_lock_step_note_where_lock_step_costs_nothing_or_did_not_happen() -> None:
    nothing_sent = run(synthetic_trace([0.002], [0.003], [0]), workers=3, replications=2)
    assert all(rep.label == LOCK_STEP for rep in nothing_sent.phases)
    fcfs = run(link_bound(), workers=2, sharing="fcfs", replications=2)  # pipelined
    sync = run(link_bound(), workers=2, mode="sync")
    alone = run(link_bound(), replications=2)
    for result in (nothing_sent, fcfs, sync, alone):
        assert lockstep_note(result) == ""


def test_cli_names_a_lock_step_point(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "cnn-b32", "--bandwidth", "200Mbps", "--steps", "40", "--warmup", "5"]
    assert main([*args, "--workers", "1,2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "note: W = 2: every seed ran in lock-step" in out
    assert "note: W = 1" not in out
    assert main([*args, "--workers", "2", "--json"]) == 0
    captured = capsys.readouterr()  # --json: stdout holds the document alone
    assert "note: W = 2: every seed ran in lock-step" in captured.err
    assert point(captured.out)["phases"][0]["label"] == LOCK_STEP


def test_without_a_shared_resource_identical_workers_start_together() -> None:
    # Parameter-free: nothing is sent, every worker computes alone, and identical deterministic
    # workers started at t = 0 keep starting together (lock-step, though nothing couples them).
    result = run(synthetic_trace([0.002], [0.003], [0]), workers=3, replications=2)
    assert result.steps_per_s.value == pytest.approx(3 / 0.005, rel=1e-9)
    assert all(rep.label == LOCK_STEP for rep in result.phases)
    assert len(result.phases[0].pairs) == 2


def test_independent_random_workers_drift() -> None:
    # Nothing shared and step times drawn from two profiled steps (2 and 7 ms): each worker
    # walks its own way, so no offset between them is more frequent than another.
    trace = synthetic_trace([[0.001], [0.003]], [[0.001], [0.004]], [0])
    result = run(trace, workers=2, steps=600, warmup_steps=50, replications=2)
    assert all(rep.label == DRIFTING for rep in result.phases)


def test_one_worker_has_no_pairs() -> None:
    assert run(link_bound(), replications=2).phases[0].label == ONE_WORKER


def test_spread_covers_the_mean_and_the_interval_comes_from_the_replications() -> None:
    trace = synthetic_trace(
        [[0.004, 0.002], [0.006, 0.001]], [[0.005, 0.004], [0.007, 0.003]], [SIZE] * 2
    )
    result = run(trace, workers=4, replications=5)
    low, high = result.examples_spread
    assert len(result.replication_examples_per_s) == 5
    assert low <= result.examples_per_s.value <= high
    assert result.examples_per_s.method == "replications" and result.examples_per_s.samples == 5
    assert result.steps_spread == (
        min(result.replication_steps_per_s),
        max(result.replication_steps_per_s),
    )
    assert result.examples_per_s.value == pytest.approx(np.mean(result.replication_examples_per_s))
    doc = result_to_dict(result)
    assert doc["spread"] == {
        "steps_per_s": list(result.steps_spread),
        "examples_per_s": [low, high],
    }
    assert len(doc["phases"]) == 5 and doc["phases"][0]["pairs"][0]["label"] in (  # type: ignore[index]
        LOCK_STEP,
        PIPELINED,
        DRIFTING,
    )


def test_same_seed_same_result() -> None:
    trace = synthetic_trace([[0.004], [0.006]], [[0.005], [0.007]], [SIZE])
    a, b = (run(trace, workers=3, replications=3, seed=7) for _ in range(2))
    assert a.replication_examples_per_s == b.replication_examples_per_s
    assert a.phases == b.phases and a.workers == b.workers


def test_step_time_quantiles_bracket_the_mean() -> None:
    trace = synthetic_trace([[0.001], [0.003]], [[0.001], [0.004]], [0])
    for w in run(trace, workers=2, replications=2).workers:
        assert w.min_step_s <= w.p05_step_s <= w.median_step_s <= w.p95_step_s <= w.max_step_s
        assert w.p05_step_s >= 0.002 - 1e-12 and w.p95_step_s <= 0.007 + 1e-12


def test_offsets_by_hand() -> None:
    # Worker a: steps of 10 s; worker b starts at 2.5, 12.5, 22.5 s: a quarter into a's steps.
    ends_a = np.array([10.0, 20.0, 30.0])
    ends_b = np.array([2.5, 12.5, 22.5, 32.5])
    assert offsets(ends_a, ends_b, warmup=1).tolist() == [0.25, 0.25, 0.25]
    near_one = pair_phase(0, 1, np.array([0.98, 0.01, 0.99, 0.02]))
    assert near_one.label == LOCK_STEP and near_one.lockstep_share == 1.0
    # distances to starting together: 0.02, 0.01, 0.01, 0.02 -> median 0.015
    assert near_one.median_distance == pytest.approx(0.015)
    # drifting: offsets 0.1, 0.3, 0.6, 0.9 -> distances 0.1, 0.3, 0.4, 0.1 -> median 0.2
    spread = pair_phase(0, 1, np.array([0.1, 0.3, 0.6, 0.9]))
    assert spread.median_distance == pytest.approx(0.2)
    assert pair_phase(0, 1, np.array([])).median_distance == 0.0


def test_offsets_within_steps_with_gaps_by_hand() -> None:
    # a's steps [0, 1) and [2, 3): 0.5 is half-way into the first, 2.25 a quarter into the
    # second; 1.5 falls in the gap and 3.5 after the last, and are left out.
    starts, ends = np.array([0.0, 2.0]), np.array([1.0, 3.0])
    times = np.array([0.5, 1.5, 2.25, 3.5])
    assert offsets_within(starts, ends, times).tolist() == [0.5, 0.25]


def test_default_replications_depend_on_the_mode() -> None:
    assert default_replications("async") == ASYNC_REPLICATIONS == 5
    assert default_replications("sync") == 1
    config = SimulationConfig(replications=None, workers=2)
    assert config.replication_count == 5
    assert SimulationConfig(replications=None, mode="sync").replication_count == 1
    # One asynchronous worker has no phases: one run, as one synchronous worker.
    assert SimulationConfig(replications=None, workers=1).replication_count == 1


def test_cli_runs_several_seeds_and_prints_spread_and_phases(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["simulate", "cnn-b32", "--workers", "2", "--steps", "40", "--warmup", "5", "--quiet"]
    assert main([*args, "--phases"]) == 0
    out = capsys.readouterr().out
    assert "5 replications" in out and "over 5 seeds (min .. max)" in out
    assert out.count("  seed ") == 5 and "worker 1   step ms: p5" in out
    assert out.count(", median distance ") == 5
    assert main([*args, "--replications", "3", "--json"]) == 0
    doc = point(capsys.readouterr().out)
    assert doc["config"]["replications"] == 3 and len(doc["replication_examples_per_s"]) == 3
    low, high = doc["spread"]["examples_per_s"]
    assert low <= doc["examples_per_s"]["value"] <= high
    assert main([*args, "--mode", "sync"]) == 0
    out = capsys.readouterr().out
    assert "batch means" in out and "spread" not in out
    assert main([*args, "--replications", "0"]) == 1
    assert "--replications: must be an integer >= 1" in capsys.readouterr().err


def test_advise_simulates_async_rows_over_several_seeds() -> None:
    trace = synthetic_trace([[0.004], [0.006]], [[0.005], [0.007]], [SIZE])
    candidates = [Candidate("ps", "async", "ps", 2), Candidate("ps", "sync", "ps", 2)]
    advice = advise(trace, 3, B, candidates=candidates, confirm_top=2, sim_steps=40)
    rows = {r.candidate.mode: r for r in advice.ranked}
    spread, sim = rows["async"].simulated_spread, rows["async"].simulated
    assert spread is not None and sim is not None and sim.samples == ASYNC_REPLICATIONS
    assert spread[0] <= sim.value <= spread[1]
    assert rows["sync"].simulated_spread is None  # one run, batch means


def test_timeline_names_the_seed_it_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["timeline", "cnn-b32", "--workers", "2", "--steps", "20", "--window", "10:11"]
    assert main([*args, "-o", str(tmp_path / "t.png")]) == 0
    err = capsys.readouterr().err
    assert "(mean of 5 seeds, spread " in err and "the timeline shows seed 0: " in err
    assert main([*args, "--replications", "1", "-o", str(tmp_path / "u.png")]) == 0
    assert "seeds" not in capsys.readouterr().err
