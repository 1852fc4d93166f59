"""The stopping rule (simcore.sim.precision) and the options that drive it in the CLI: the rule
stops within its target, at its cap with a note, or when longer runs do not help; same seed,
same result; ``--steps`` turns it off; options imply what they must and contradictions name both
options as typed."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from simcore.cli.main import main
from simcore.cli.precision_options import implied_mode, parse_precision
from simcore.errors import ConfigError
from simcore.report.scenario import precision_notes
from simcore.sim import PrecisionRule, SimulationConfig, simulate, simulate_to_precision
from simcore.sim.precision import (
    MARGIN,
    MAX_SUGGESTED_REPLICATIONS,
    SEEDS_DISAGREE,
    _did_not_help,
    _next,
    default_warmup_steps,
    relative_precision,
    seed_disagreement,
    stopping_note,
    stopping_text,
)
from simcore.sim.results import Stopping
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace, save_trace
from simcore.trace.model import Trace

from output_support import output
from scenario_support import load_scenario, read_csv


@pytest.fixture(scope="module")
def noisy() -> Trace:
    """Two layers whose profiled steps differ by a factor of up to 2: throughput has noise."""
    return synthetic_trace(
        [[0.002, 0.004], [0.004, 0.002], [0.003, 0.003]],
        [[0.004, 0.006], [0.008, 0.004], [0.005, 0.005]],
        [200_000, 100_000],
        update_s=0.0005,
        batch_size=16,
    )


def one_worker(seed: int = 1) -> SimulationConfig:
    return SimulationConfig(workers=1, bandwidth_bps=1e9, seed=seed)


def test_the_rule_stops_once_the_ci_is_within_the_target(noisy: Trace) -> None:
    rule = PrecisionRule(target=0.01, pilot_steps=20)
    result = simulate_to_precision(noisy, one_worker(), rule)
    s = result.stopping
    assert s is not None and s.reached and not s.capped
    assert s.precision <= 0.01
    assert s.precision == relative_precision(result)  # the returned run's own CI
    assert result.config.steps == s.steps and s.steps <= rule.max_steps
    assert result.config.warmup_steps == default_warmup_steps(s.steps)
    assert stopping_note(result) == ""
    # it needed more than the pilot: every run but the last missed the target
    assert s.rounds >= 2 and all(p > 0.01 for p in s.precisions[:-1])
    assert s.worker_steps >= s.steps  # the pilot's steps are counted too


def test_a_tiny_cap_stops_the_rule_with_a_note(noisy: Trace) -> None:
    rule = PrecisionRule(target=0.001, pilot_steps=30, max_steps=30)
    result = simulate_to_precision(noisy, one_worker(), rule)
    s = result.stopping
    assert s is not None and s.capped and s.reason == "cap"
    assert result.config.steps == 30 and s.precision > 0.001
    note = stopping_note(result)
    assert note.startswith(f"precision +-{100 * s.precision:.2g}% (target 0.1%) after 30 steps")
    assert "the cap" in note and "--max-steps" in note and "--precision" in note


def test_same_seed_same_result(noisy: Trace) -> None:
    rule = PrecisionRule(target=0.02, pilot_steps=20)
    a = simulate_to_precision(noisy, one_worker(7), rule)
    b = simulate_to_precision(noisy, one_worker(7), rule)
    assert a.examples_per_s == b.examples_per_s and a.stopping == b.stopping


def test_the_last_run_is_the_fixed_length_run_of_its_steps(noisy: Trace) -> None:
    """A round re-runs the same seed: its result is simulate() at that length."""
    rule = PrecisionRule(target=0.02, pilot_steps=20)
    ruled = simulate_to_precision(noisy, one_worker(), rule)
    fixed = simulate(noisy, ruled.config)
    assert fixed.examples_per_s == ruled.examples_per_s


def test_next_run_from_one_over_sqrt_n_within_growth_limits() -> None:
    rule = PrecisionRule(target=0.01, max_steps=1000)
    # 90 measured steps at 2%: 90 * 2^2 * MARGIN measured steps, and a tenth more as warm-up ...
    wanted = math.ceil(90 * 1.5**2 * MARGIN)
    reason, steps = _next(rule, 100, [(90, 0.015)])
    assert reason == "" and steps == rule.steps_measuring(wanted)
    assert steps - default_warmup_steps(steps) >= wanted
    # ... but at most 4 times the last run, and never past the cap
    assert _next(rule, 100, [(90, 0.05)]) == ("", 400)
    assert _next(rule, 400, [(90, 0.2), (360, 0.1)]) == ("", 1000)
    assert _next(rule, 1000, [(90, 0.2), (360, 0.1), (900, 0.05)])[0] == "cap"
    assert _next(rule, 100, [(90, 0.009)])[0] == "reached"
    # no interval yet: twice as long
    assert _next(rule, 100, [(90, math.inf)]) == ("", rule.steps_measuring(180))


def test_a_longer_run_that_does_not_narrow_the_ci_stops_the_rule() -> None:
    """Seeds that settle in different phases: 4x the steps, the CI shrank 5% (1/sqrt(n): 50%)."""
    rule = PrecisionRule(target=0.01)
    assert _did_not_help((90, 0.05), (360, 0.0475))
    assert _next(rule, 400, [(90, 0.05), (360, 0.0475)])[0] == "stalled"
    # shrinking as 1/sqrt(n) or nearly (more than half of it on a log scale) is not a stall
    assert not _did_not_help((90, 0.05), (360, 0.025))
    assert not _did_not_help((90, 0.05), (360, 0.034))


def test_seeds_in_different_phases_stop_the_rule_after_one_run() -> None:
    """cnn's two Async-SGD workers at 1 Gbit/s settle in lock-step or pipelined depending on the
    seed (about 850 and 1000 examples/s): no length narrows the CI, more seeds would."""
    config = SimulationConfig(workers=2, bandwidth_bps=1e9, replications=5)
    result = simulate_to_precision(load_trace("cnn-b32"), config, PrecisionRule())
    s = result.stopping
    assert s is not None and s.reason == "seeds" and s.rounds == 1 and s.seeds == 5
    assert {p.label for p in result.phases} >= {"lock-step", "pipelined"}
    assert seed_disagreement(result) > SEEDS_DISAGREE
    note = stopping_note(result)  # +-11%: about 800 seeds for 1%, more than worth suggesting
    assert "5 seeds" in note and "more than is worth simulating" in note and "--phases" in note


def test_a_seed_count_worth_running_is_suggested_and_a_larger_one_is_not() -> None:
    """5 seeds at +-2.2% need 5 * (2.2 / 1)^2 * MARGIN of them for 1%: 32, suggested; at +-28%
    about 5100, which no one would simulate: the note points at each seed's pattern instead."""

    def note(precision: float) -> str:
        stopping = Stopping("seeds", 0.01, precision, 400, 1000, 1, 2000, (precision,), seeds=5)
        return stopping_text(stopping, (899.1, 1443.0))

    wanted = math.ceil(5 * 2.2**2 * MARGIN)
    assert wanted <= MAX_SUGGESTED_REPLICATIONS
    assert f"about {wanted} would narrow it (--replications {wanted})" in note(0.022)
    many = math.ceil(5 * (0.28 / 0.01) ** 2 * MARGIN)
    text = note(0.28)
    assert (
        f"the CI comes from 5 seeds (899.1 .. 1443 examples/s), and about {many:,} would " in text
    )
    assert "--replications" not in text and "workers lined up says more than their mean" in text
    assert "(they settle in different phases: --phases)" in text


def test_seeds_that_agree_do_not_count_as_disagreeing(noisy: Trace) -> None:
    config = SimulationConfig(workers=1, bandwidth_bps=1e9, replications=3, steps=60)
    result = simulate(noisy, config)
    assert len(result.replication_standard_errors) == 3
    same = dataclasses.replace(result, replication_examples_per_s=(5.0, 5.0, 5.0))
    assert seed_disagreement(same) == 0.0
    assert seed_disagreement(dataclasses.replace(result, replication_examples_per_s=(5.0,))) == 0


@pytest.mark.parametrize(
    ("steps", "warmup"), [(1000, 100), (100, 10), (50, 10), (20, 10), (12, 6), (3, 1), (1, 0)]
)
def test_default_warmup_is_a_tenth_with_a_floor(steps: int, warmup: int) -> None:
    assert default_warmup_steps(steps) == warmup
    assert default_warmup_steps(steps, 1, "async") == warmup  # one worker has nothing to spread


@pytest.mark.parametrize(
    ("steps", "workers", "mode", "warmup"),
    [(100, 16, "async", 40), (100, 16, "sync", 10), (100, 2, "async", 10), (60, 16, "async", 30)],
)
def test_async_warmup_grows_with_the_workers(
    steps: int, workers: int, mode: str, warmup: int
) -> None:
    """2.5 steps per asynchronous worker, at most half of the run."""
    assert default_warmup_steps(steps, workers, mode) == warmup


@pytest.mark.parametrize(("text", "value"), [("1%", 0.01), ("0.5%", 0.005), ("0.02", 0.02)])
def test_precision_option_values(text: str, value: float) -> None:
    assert parse_precision(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["2", "0", "100%", "-1%", "one", "nan"])
def test_bad_precision_names_the_option(text: str) -> None:
    with pytest.raises(ConfigError, match=f"^--precision: '{text}' is not a precision"):
        parse_precision(text)


def test_allreduce_implies_sync_and_contradictions_name_both() -> None:
    assert implied_mode("allreduce", None) == "sync"
    assert implied_mode("ps", None) == "async"
    with pytest.raises(ConfigError, match=r"^--arch allreduce --mode async: "):
        implied_mode("allreduce", "async")


# --- through the command line -------------------------------------------------------------


@pytest.fixture()
def trace_file(tmp_path: Path, noisy: Trace) -> Path:
    return save_trace(noisy, tmp_path / "noisy.json")


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The command's --json document, checked against the output schema."""
    assert main(args) == 0
    return output(capsys.readouterr().out)


def test_simulate_runs_to_precision_by_default(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = run_json(
        ["simulate", str(trace_file), "--bandwidth", "1Gbps", "--precision", "2%", "--json"],
        capsys,
    )["points"][0]
    stopping = doc["stopping"]
    assert isinstance(stopping, dict) and stopping["reason"] == "reached"
    assert stopping["precision"] <= 0.02 and stopping["target"] == 0.02
    est = doc["examples_per_s"]
    assert isinstance(est, dict)
    assert (est["ci_high"] - est["value"]) / est["value"] == pytest.approx(stopping["precision"])


def test_explicit_steps_turn_the_rule_off(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = run_json(["simulate", str(trace_file), "--steps", "50", "--json"], capsys)["points"][0]
    config = doc["config"]
    assert isinstance(config, dict)
    assert doc["stopping"] is None
    assert config["steps"] == 50 and config["warmup_steps"] == 10  # a tenth, at least 10


def test_steps_with_precision_is_an_error_naming_both(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(trace_file), "--steps", "50", "--precision", "2%"]) == 1
    err = capsys.readouterr().err
    assert "--precision 2% --steps 50: --steps fixes the length" in err
    assert err.count("\n") == 1


def test_the_cap_prints_a_note(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", str(trace_file), "--precision", "0.01%", "--max-steps", "40"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "note: W = 1: precision +-" in out and "(target 0.01%) after 40 steps" in out


@pytest.mark.parametrize("command", ["simulate", "timeline"])
def test_arch_allreduce_implies_sync(
    command: str, trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["-o", str(tmp_path / "t.png"), "--force"] if command == "timeline" else ["--json"]
    args = [command, str(trace_file), "--workers", "2", "--arch", "allreduce", "--steps", "12"]
    assert main([*args, *extra]) == 0
    if command == "simulate":
        doc = json.loads(capsys.readouterr().out)["points"][0]
        assert doc["config"]["mode"] == "sync" and doc["config"]["arch"] == "allreduce"
    assert main([*args, "--mode", "async", *extra]) == 1
    err = capsys.readouterr().err
    assert "--arch allreduce --mode async: ring AllReduce is synchronous" in err


def test_advise_sizes_its_simulations_by_the_rule(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["advise", str(trace_file), "--machines", "3", "--bandwidth", "1Gbps", "--quiet"]
    doc = run_json([*args, "--confirm", "2", "--precision", "5%", "--json"], capsys)
    ranked = doc["points"]
    assert isinstance(ranked, list)
    simulated = [r["simulated_examples_per_s"] for r in ranked if r["source"] == "simulated"]
    assert len(simulated) == 2
    for sim in simulated:
        stopping = sim["stopping"]
        assert stopping["target"] == 0.05 and stopping["steps"] <= stopping["max_steps"]
        assert stopping["reason"] != "reached" or stopping["precision"] <= 0.05
    doc = run_json([*args, "--confirm", "1", "--steps", "40", "--json"], capsys)
    assert isinstance(doc["points"], list)
    fixed = [r["simulated_examples_per_s"] for r in doc["points"] if r["source"] == "simulated"]
    assert [sim["stopping"] for sim in fixed] == [None]


def test_a_timeline_window_past_the_pilot_lengthens_the_first_run(
    trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.png"
    args = ["timeline", str(trace_file), "--workers", "1", "--window", "150:151", "-o", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "simulated 1 workers x " in err
    steps = int(err.split("simulated 1 workers x ")[1].split()[0])
    assert steps >= 152 and out.exists()


@pytest.mark.parametrize("command", ["simulate", "timeline", "advise"])
def test_help_shows_the_precision_options(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--precision" in out and "95% CI of examples/s" in out and "(default 1%)" in out
    assert "--max-steps" in out


def test_the_scaling_scenario_runs_to_precision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario("scaling")
    args = ["--trace", "cnn-b32", "--workers", "1,2", "--precision", "5%", "--max-steps", "60"]
    assert scenario.main([*args, "--quiet", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "steps until the 95% CI is within 5% (cap 60 steps)" in out
    rows = read_csv(tmp_path / "scaling.csv")
    assert rows and all(2 <= int(r["steps"]) <= 60 for r in rows)
    with pytest.raises(SystemExit) as exit_info:
        scenario.main(["--help"])
    assert exit_info.value.code == 0 and "--precision" in capsys.readouterr().out


def test_a_scenario_sums_up_many_notes_in_one_line(noisy: Trace) -> None:
    """Three points short of an unreachable target: one line naming them and the widest."""
    rule = PrecisionRule(target=0.0001, pilot_steps=20, max_steps=30)
    results = [
        simulate_to_precision(noisy, SimulationConfig(workers=w, bandwidth_bps=1e9), rule)
        for w in (1, 2, 3)
    ]
    text = precision_notes(results, "PS Async-SGD")
    assert text.count("\n") == 0
    assert text.startswith("note: PS Async-SGD: W = 1, 2, 3 stopped short of the 0.01% target")
    widest = max(results, key=lambda r: r.stopping.precision if r.stopping else 0.0)
    assert text.endswith(stopping_note(widest))
    assert precision_notes(results[:2], "x").count("\n") == 1  # two: each on its line
