"""``sgdsim run``: an experiment file's grid run in parallel, results as JSON lines as they
finish, the same numbers for any --jobs, resuming what an interrupted run left, and the file
``sgdsim simulate --save-experiment`` writes meaning its command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simcore.cli.main import main
from simcore.trace.io import save_trace

from trace_support import tiny_trace


@pytest.fixture()
def experiment(tmp_path: Path) -> Path:
    save_trace(tiny_trace(), tmp_path / "tiny.json")
    path = tmp_path / "exp.toml"
    path.write_text(
        '[workload]\ntrace = "tiny.json"\n\n'
        "[cluster]\nworkers = [1, 2, 3]\n\n"
        '[network]\nbandwidth = ["200Mbps", "1Gbps"]\n\n'
        '[algorithm]\nmode = "sync"\n\n'
        "[run]\nsteps = 30\nwarmup = 5\n",
        encoding="utf-8",
    )
    return path


def records(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header, *rest = (json.loads(line) for line in path.read_text().splitlines())
    return header, rest


def rates(path: Path) -> dict[tuple[int, int], float]:
    return {(r["point"], r["simulation"]): r["examples_per_s"]["value"] for r in records(path)[1]}


def run_in(folder: Path, *argv: str) -> int:
    # the experiment's trace is named relative to where sgdsim runs, as on a command line
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        return main(["run", *argv, "--quiet"])
    finally:
        os.chdir(here)


def test_a_grid_runs_every_point_and_any_jobs_give_the_same_numbers(
    experiment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = experiment.parent
    assert run_in(folder, "exp.toml", "--jobs", "1", "--out", "one.jsonl") == 0
    out = capsys.readouterr().out
    assert "workers=3 bandwidth=1Gbps" in out and "wrote one.jsonl (6 simulations" in out
    header, rows = records(folder / "one.jsonl")
    assert header["schema"] == "sgdsim.run-results" and len(rows) == 6
    assert {r["name"] for r in rows} >= {"workers=1 bandwidth=200Mbps", "workers=2 bandwidth=1Gbps"}
    assert all(r["config"]["mode"] == "sync" and r["config"]["steps"] == 30 for r in rows)
    assert run_in(folder, "exp.toml", "--jobs", "2", "--out", "two.jsonl") == 0
    assert rates(folder / "one.jsonl") == rates(folder / "two.jsonl")  # bit for bit
    # Sync-SGD on a slower link is no faster, and more workers at 1 Gbit/s are faster
    one = rates(folder / "one.jsonl")
    assert one[(0, 0)] <= one[(1, 0)] and one[(1, 0)] < one[(3, 0)] < one[(5, 0)]


def test_resume_runs_only_what_the_file_lacks(
    experiment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = experiment.parent
    assert run_in(folder, "exp.toml", "--jobs", "1") == 0
    full = folder / "exp.results.jsonl"
    expected = rates(full)
    lines = full.read_text().splitlines(keepends=True)
    # two results kept, and half of a third: a run killed while writing
    full.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    capsys.readouterr()
    assert run_in(folder, "exp.toml") == 1  # an existing file is not appended to unasked
    assert "exists; --resume continues it" in capsys.readouterr().err
    assert run_in(folder, "exp.toml", "--resume") == 0
    assert "2 of 6 simulations there, 4 to run" in capsys.readouterr().err
    assert rates(full) == expected
    assert len(records(full)[1]) == 6
    assert run_in(folder, "exp.toml", "--resume") == 0
    assert "nothing to run" in capsys.readouterr().out
    # another experiment's results are not continued
    assert run_in(folder, "exp.toml", "--resume", "--steps", "40") == 1
    assert "holds the results of another experiment" in capsys.readouterr().err


def test_options_after_the_file_override_it(
    experiment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = experiment.parent
    assert run_in(folder, "exp.toml", "--out", "o.jsonl", "--workers", "2", "--steps=40") == 0
    rows = records(folder / "o.jsonl")[1]
    assert len(rows) == 2 and {r["config"]["workers"] for r in rows} == {2}
    assert {r["config"]["steps"] for r in rows} == {40}
    capsys.readouterr()
    assert run_in(folder, "exp.toml", "--out", "p.jsonl", "--stepz", "3") == 1
    assert "--stepz: not an option an experiment can override" in capsys.readouterr().err
    assert not (folder / "p.jsonl").exists()


def test_a_bad_file_or_point_is_one_line_naming_it(
    experiment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = experiment.parent
    (folder / "bad.toml").write_text("[network\nbandwidth = 1\n")
    assert run_in(folder, "bad.toml") == 1
    err = capsys.readouterr().err
    assert err.startswith("sgdsim: error: bad.toml: not valid TOML") and err.count("\n") == 1
    (folder / "odd.toml").write_text(
        '[workload]\ntrace = "tiny.json"\n[network]\nbandwidth = ["1Gbps", "fast"]\n'
    )
    assert run_in(folder, "odd.toml") == 1
    err = capsys.readouterr().err
    assert "odd.toml: point 2 (bandwidth=fast): --bandwidth" in err and err.count("\n") == 1
    assert not (folder / "odd.results.jsonl").exists()  # nothing ran, nothing written


def test_save_experiment_writes_what_the_command_line_means(
    experiment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = experiment.parent
    trace = str(folder / "tiny.json")
    command = [trace, "--workers", "2", "--bandwidth", "1Gbps", "--steps", "30", "--mode", "sync"]
    saved = folder / "saved.toml"
    assert main(["simulate", *command, "--save-experiment", str(saved)]) == 0
    text = saved.read_text()
    assert '[cluster]\nworkers = "2"' in text and "[run]\nsteps = 30" in text
    assert "wrote" in capsys.readouterr().out
    assert main(["simulate", *command, "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)["points"][0]["examples_per_s"]["value"]
    assert main(["run", str(saved), "--out", str(folder / "s.jsonl"), "--quiet"]) == 0
    assert rates(folder / "s.jsonl") == {(0, 0): simulated}
    # an existing file is kept unless --force
    assert main(["simulate", *command, "--save-experiment", str(saved)]) == 1
    assert "exists" in capsys.readouterr().err


def test_the_shipped_experiment_expands_to_its_sixteen_points(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shipped = Path(__file__).parent.parent / "scenarios" / "experiments" / "ps-vs-ring.toml"
    assert main(["run", str(shipped), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16
    assert lines[-1].endswith(
        "sgdsim simulate cnn-b32 --workers 8 --bandwidth 10Gbps --arch allreduce --mode sync "
        "--seed 1 --precision 2%"
    )
