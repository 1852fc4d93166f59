"""Large valid inputs: a 100,000-op trace loads, validates, summarizes and simulates; a run too
big for the machine is refused before it starts; the progress line says what it counts.

No timing assertions: speed is measured by ``tests/bench_trace_load.py``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from simcore.cli import simulate_cmd
from simcore.cli.main import main
from simcore.cli.progress import Progress, duration_text, progress_line
from simcore.errors import ConfigError, TraceError
from simcore.sim import SimulationConfig, simulate
from simcore.sim.preflight import (
    RECORD_BYTES,
    WORKER_BYTES,
    WORKER_OP_BYTES,
    check_memory,
    footprint,
)
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace, save_trace
from simcore.trace.model import Trace
from simcore.trace.parse import trace_from_dict, trace_to_dict
from simcore.trace.summary import summarize

LAYERS = 20_000  # 5 ops each (pull, forward, backward, push, update): 100,000 ops
NBYTES = 1250  # 10,000 bits: 1 us at 10 Gbit/s
BANDWIDTH_BPS = 10e9
FORWARD_S, BACKWARD_S, UPDATE_S = 4e-6, 8e-6, 5e-7


@pytest.fixture(scope="module")
def chain() -> Trace:
    """A chain of 20,000 layers built and validated by the library (synthetic_trace)."""
    return synthetic_trace(
        [FORWARD_S] * LAYERS, [BACKWARD_S] * LAYERS, [NBYTES] * LAYERS, update_s=UPDATE_S
    )


def test_a_100000_op_trace_round_trips_through_a_file(chain: Trace, tmp_path: Path) -> None:
    path = save_trace(chain, tmp_path / "chain.json")
    loaded = load_trace(path)
    assert len(loaded.ops) == 5 * LAYERS == 100_000
    assert loaded.ops == chain.ops and loaded.steps == chain.steps


def test_the_summary_of_a_100000_op_trace_adds_up(chain: Trace) -> None:
    summary = summarize(chain)
    assert summary.op_counts == {
        k: LAYERS for k in ("pull", "forward", "backward", "push", "update")
    }
    assert summary.pull_nbytes == summary.push_nbytes == LAYERS * NBYTES
    assert summary.phase_s["forward"].mean == pytest.approx(LAYERS * FORWARD_S, rel=1e-9)
    assert summary.phase_s["backward"].mean == pytest.approx(LAYERS * BACKWARD_S, rel=1e-9)
    assert summary.phase_s["update"].mean == pytest.approx(LAYERS * UPDATE_S, rel=1e-9)


def test_trace_show_prints_a_100000_op_trace(
    chain: Trace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = save_trace(chain, tmp_path / "chain.json")
    assert main(["trace", "show", str(path), "--layers", "3"]) == 0
    out = capsys.readouterr().out
    assert f"layers     {LAYERS} ({LAYERS} with parameters)" in out
    assert "(total 100000)" in out


def test_one_worker_steps_through_the_chain_in_closed_form(chain: Trace) -> None:
    """One worker, transfers T = 1 us shorter than any computation: nothing ever queues behind
    another transfer or update, so a step is the first pull, every forward and backward in turn,
    the last push and the last update: 2T + n (f + b) + u."""
    transfer_s = 8 * NBYTES / BANDWIDTH_BPS
    expected = 2 * transfer_s + LAYERS * (FORWARD_S + BACKWARD_S) + UPDATE_S
    config = SimulationConfig(
        workers=1, bandwidth_bps=BANDWIDTH_BPS, steps=2, warmup_steps=0, batches=2
    )
    result = simulate(chain, config)
    assert result.simulated_ops == 2 * 100_000
    assert result.mean_step_s == pytest.approx(expected, rel=1e-9)


def test_two_workers_step_through_the_chain(chain: Trace) -> None:
    """Two workers share the links: every op runs, and contention only makes steps longer."""
    transfer_s = 8 * NBYTES / BANDWIDTH_BPS
    alone = 2 * transfer_s + LAYERS * (FORWARD_S + BACKWARD_S) + UPDATE_S
    config = SimulationConfig(
        workers=2, bandwidth_bps=BANDWIDTH_BPS, steps=2, warmup_steps=0, batches=2
    )
    result = simulate(chain, config)
    assert result.simulated_ops == 2 * 2 * 100_000
    assert result.mean_step_s >= alone * (1 - 1e-9)


def test_a_cycle_in_a_100000_op_trace_is_named(chain: Trace) -> None:
    doc: dict[str, Any] = trace_to_dict(chain)
    first = next(op for op in doc["ops"] if op["id"] == "forward:l0")
    first["deps"].append("forward:l3")
    with pytest.raises(TraceError) as caught:
        trace_from_dict(doc, source="big.json")
    assert str(caught.value) == (
        "big.json: field 'ops': the dependencies form a cycle: "
        "forward:l0 -> forward:l1 -> forward:l2 -> forward:l3 -> forward:l0"
    )


# ----------------------------------------------------------------- pre-flight memory check
CNN_OPS = 43  # the cnn-b8 sample's ops per step


def test_footprint_is_the_documented_sum() -> None:
    trace = load_trace("cnn-b8")
    assert len(trace.ops) == CNN_OPS
    config = SimulationConfig(workers=1000, steps=10, warmup_steps=0, batches=2, timeline=True)
    cost = footprint([trace], config)
    assert cost.worker_bytes == WORKER_BYTES + CNN_OPS * WORKER_OP_BYTES + 8 * (2 + 6)
    assert cost.step_record_bytes == RECORD_BYTES * CNN_OPS
    per_worker = cost.worker_bytes + 10 * cost.step_record_bytes
    assert cost.memory_bytes == cost.fixed_bytes + 1000 * per_worker
    assert cost.ops == 1000 * 10 * CNN_OPS


def test_the_largest_w_named_in_the_refusal_fits_and_one_more_does_not() -> None:
    trace = load_trace("cnn-b8")
    available = 2.0**30
    config = SimulationConfig(workers=10_000_000)
    with pytest.raises(ConfigError) as caught:
        check_memory([trace], config, available)
    message = str(caught.value)
    assert message.startswith("workers: 10,000,000 workers need about ")
    fits = int(message.split("at most ")[1].split(" workers fit")[0].replace(",", ""))
    assert fits == footprint([trace], config).max_workers(available / 2)
    check_memory([trace], SimulationConfig(workers=fits), available)
    with pytest.raises(ConfigError):
        check_memory([trace], SimulationConfig(workers=fits + 1), available)


def test_steps_whose_timeline_does_not_fit_are_named() -> None:
    trace = load_trace("cnn-b8")
    config = SimulationConfig(workers=2, steps=100_000_000, warmup_steps=0, timeline=True)
    with pytest.raises(ConfigError, match=r"^steps: 100,000,000 steps with a timeline") as caught:
        check_memory([trace], config, 2.0**30)
    fits = int(str(caught.value).split("at most ")[1].split(" steps fit")[0].replace(",", ""))
    check_memory([trace], SimulationConfig(workers=2, steps=fits, timeline=True), 2.0**30)


def test_the_cli_refuses_ten_million_workers_before_it_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simulate_cmd, "available_memory_bytes", lambda: 16.0 * 2**30)
    # Few steps, so that the run is within the simulated-ops limit and memory decides alone.
    argv = ["simulate", "cnn-b8", "--workers", "10000000", "--steps", "2", "--warmup", "1"]
    assert main([*argv, "--replications", "1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "--workers: 10,000,000 workers need about " in err
    assert "of the 16.0 GiB available" in err and "workers fit" in err
    assert "Traceback" not in err


# ----------------------------------------------------------------- progress line
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_says_what_it_counts_the_rate_and_the_time_left() -> None:
    assert progress_line("simulate", "worker-steps", 250, 1000, 5.0) == (
        "simulate: 250/1,000 worker-steps (25%), 50 worker-steps/s, 15 s left"
    )
    assert progress_line("simulate", "worker-steps", 1000, 1000, 20.0) == (
        "simulate: 1,000/1,000 worker-steps in 20 s, 50 worker-steps/s"
    )
    assert [duration_text(s) for s in (0.25, 42, 185, 7980, 3 * 86400 + 4 * 3600)] == [
        "0.2 s",
        "42 s",
        "3 min 05 s",
        "2 h 13 min",
        "3 d 04 h",
    ]


def test_progress_draws_on_a_terminal_at_most_every_redraw_interval() -> None:
    stream, clock = _Terminal(), _Clock()
    progress = Progress("simulate", "worker-steps", stream=stream, clock=clock)
    clock.now = 1.0
    progress(10, 100)
    clock.now = 1.05
    progress(11, 100)  # too soon after the last line: skipped
    clock.now = 2.0
    progress(100, 100)
    lines = stream.getvalue().split("\r")[1:]
    assert len(lines) == 2 and lines[0].startswith("simulate: 10/100 worker-steps (10%)")
    assert lines[1].startswith("simulate: 100/100 worker-steps in 2.0 s") and lines[1][-1] == "\n"


@pytest.mark.parametrize("terminal", [False, True])
def test_progress_writes_nothing_off_a_terminal_or_when_disabled(terminal: bool) -> None:
    stream = _Terminal() if terminal else io.StringIO()
    progress = Progress("simulate", "worker-steps", stream=stream, enabled=not terminal)
    progress(5, 10)
    progress(10, 10)
    assert stream.getvalue() == ""
