"""Other work on the machine during a measurement: the kernel's counters, the process tree's
share of them, and the notes a validation prints for runs that did not have the machine alone."""

from __future__ import annotations

import dataclasses
import os
import resource
import subprocess
import sys
import time

import pytest

from profilers import host_load
from profilers.distributed import validation
from profilers.distributed.measurements import (
    Measurements,
    measurements_from_dict,
    measurements_to_dict,
)
from profilers.distributed.validation import host_load_text
from profilers.host_load import (
    NOTE_CORES,
    HostLoad,
    machine_busy_s,
    process_times,
    tree_ticks,
)

TINY = "test_distributed_runner:TinyNet"
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_the_machine_line_counts_user_nice_and_system_time() -> None:
    text = "cpu  100 20 30 5000 7 3 11 0 0 0\ncpu0 50 10 15 2500 3 1 5 0 0 0\nintr 1 2\n"
    # irq (3) and softirq (11), which a measurement's own traffic causes, are left out
    assert machine_busy_s(text, 100.0) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="no cpu line"):
        machine_busy_s("intr 1 2\n", 100.0)


def test_a_process_line_whose_name_holds_spaces_and_parentheses() -> None:
    line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 1 2 3 4 120 30 7 2 20 0 1 0 100 0 0"
    assert process_times(line) == (4242, 17, 120.0 + 30 + 7 + 2)


def test_the_tree_holds_the_root_and_every_descendant_only() -> None:
    procs = [(1, 0, 1000.0), (10, 1, 5.0), (11, 10, 7.0), (12, 11, 11.0), (20, 1, 13.0)]
    assert tree_ticks(procs, 10) == 5.0 + 7 + 11  # not its sibling 20 nor the parent
    assert tree_ticks(procs, 12) == 11.0
    assert tree_ticks(procs, 99) == 0.0  # gone
    assert tree_ticks(iter(procs), 10) == 5.0 + 7 + 11  # read once: a generator will do


def test_a_finished_child_counts_as_the_trees_own_work() -> None:
    """A child that burnt CPU and was reaped counts through its parent: not other work."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = host_load.sample()
    subprocess.run([sys.executable, "-c", BURN.format(s=0.3)], check=True)
    end = host_load.sample()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    ticks = 1.0 / os.sysconf("SC_CLK_TCK")
    assert child_s >= 0.3
    assert end.own_s - start.own_s >= child_s - 2 * ticks


def test_a_busy_process_outside_the_tree_is_other_work() -> None:
    """A burner that is not the root's descendant: the load says so, with a note."""
    root = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    burner = subprocess.Popen([sys.executable, "-c", BURN.format(s=1.0)])
    try:
        start = host_load.sample(root.pid)
        burner.wait(timeout=60)
        load = host_load.load_since(start)
    finally:
        root.kill()
        root.wait()
    assert load is not None
    # the burner's second of CPU over the wall time it took (at least one core-second over a
    # few seconds on a busy machine, where other work adds to it)
    assert load.others_cores >= NOTE_CORES
    assert "during the burn" in load.note("the burn")


def test_the_note_names_the_cores_and_stays_quiet_on_an_idle_machine() -> None:
    assert HostLoad(3.0, NOTE_CORES / 2, 2).note("x") == ""
    note = HostLoad(3.0, 0.85, 2).note("ps-async W=2 run 1")
    assert note.startswith("note: other processes used 0.85 of the machine's 2 cores")
    assert "during ps-async W=2 run 1" in note


def _tiny_validation(workers_max: int, architecture: str) -> tuple[list[str], Measurements]:
    """The progress lines of a validation's real part at the smallest settings (one run each),
    and what it measured."""
    lines: list[str] = []
    measured = validation.measure(
        TINY,
        batch_size=8,
        steps=6,
        warmup=2,
        workers_max=workers_max,
        architectures=(architecture,),
        repetitions=1,
        profile_runs=1,
        progress=lines.append,
    )
    return lines, measured


def test_a_validation_names_its_runs_that_shared_the_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every run is watched; those with other work get a note after their line, and the end
    of the measurement counts them."""
    watched: list[float] = []

    def busy_every_other(start: host_load.HostSample) -> HostLoad:
        watched.append(start.wall_s)
        return HostLoad(1.0, 0.9 if len(watched) % 2 == 0 else 0.0, 2)

    monkeypatch.setattr(host_load, "load_since", busy_every_other)
    lines, measured = _tiny_validation(workers_max=2, architecture="ps-sync")
    # the solo profile, the computation alone, ps-sync W=1 and W=2: the 2nd and 4th were busy
    assert len(watched) == 4
    notes = [line for line in lines if line.startswith("note: other processes")]
    assert [n.split("during ")[1].split(":")[0] for n in notes] == [
        "computation-alone run 1",
        "ps-sync W=2 run 1",
    ]
    assert lines[lines.index(notes[1]) - 1].startswith("ps-sync W=2:")  # after the run's line
    assert lines[-1].startswith(
        "note: 2 of the 4 runs shared the machine with other work (up to 0.90 cores; "
        "computation alone, ps-sync W=2)"
    )
    # kept with the runs: a report from the saved runs says it too
    assert [r.other_cores for r in (measured.solo, measured.alone)] == [0.0, 0.9]
    again = measurements_from_dict(measurements_to_dict(measured))
    assert host_load_text(again) == lines[-1]
    assert host_load_text(dataclasses.replace(again, points=())).startswith(
        "note: 1 of the 2 runs shared the machine with other work (up to 0.90 cores; "
        "computation alone)"
    )


def test_an_idle_validation_prints_no_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_load, "load_since", lambda _start: HostLoad(1.0, 0.0, 2))
    lines, measured = _tiny_validation(workers_max=1, architecture="ps-async")
    assert lines and not any(line.startswith("note:") for line in lines)
    assert host_load_text(measured) == ""
    # runs saved before they were watched: nothing to say either
    unwatched = dataclasses.replace(measured.solo, other_cores=None)
    assert host_load_text(dataclasses.replace(measured, solo=unwatched, points=())) == ""


def test_unreadable_counters_give_no_load() -> None:
    start = host_load.HostSample(time.monotonic(), None, 0.0, os.getpid())
    assert host_load.load_since(start) is None


def test_a_saved_runs_host_load_round_trips_and_a_bad_one_is_named() -> None:
    from profilers.distributed.records import run_from_dict, run_to_dict
    from simcore.errors import ConfigError

    _lines, measured = _tiny_validation(workers_max=1, architecture="ps-async")
    doc = run_to_dict(measured.solo)
    assert doc["other_cores"] == measured.solo.other_cores
    assert run_from_dict(doc).other_cores == measured.solo.other_cores
    for bad in (-0.5, float("nan"), "lots"):
        doc["other_cores"] = bad
        with pytest.raises(ConfigError, match=r"x\.json: other_cores: "):
            run_from_dict(doc, "x.json")
