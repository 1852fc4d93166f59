"""``sgdsim trace``: summaries, Chrome export, and one-line errors with a non-zero exit."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from simcore.cli.main import main
from simcore.trace.build import synthetic_trace
from simcore.trace.io import save_trace
from simcore.trace.model import Trace


def with_start_times(trace: Trace) -> Trace:
    """Lay the computation ops of each step end to end, as a profiler would have measured them."""
    steps = []
    for step in trace.steps:
        clock, starts = 0.0, []
        for duration in step.duration_s:
            starts.append(None if duration is None else clock)
            clock += duration or 0.0
        steps.append(dataclasses.replace(step, start_s=tuple(starts)))
    return dataclasses.replace(trace, steps=tuple(steps))


@pytest.fixture()
def trace_file(tmp_path: Path) -> Path:
    trace = synthetic_trace([0.001, 0.003], [0.002, 0.006], [4096, 1024], update_s=0.0002)
    return save_trace(with_start_times(trace), tmp_path / "tiny.json")


def test_show_summarizes(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "show", str(trace_file)]) == 0
    out = capsys.readouterr().out
    assert "layers     2 (2 with parameters), 1,280 parameters" in out
    assert "pull 2, forward 2, backward 2, push 2, update 2 (total 10)" in out
    assert "4.000 ms" in out  # forward sum per step (4 significant digits)
    assert out.index("l1 ") < out.index("l0 ")  # slowest layer first


def test_export_chrome_events_follow_the_format(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "chrome.json"
    assert main(["trace", "export-chrome", str(trace_file), "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"worker", "ps"}  # comm ops are not measured in a solo profile
    assert len(complete) == 6
    for event in complete:
        assert set(event) >= {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
        assert event["dur"] >= 0 and event["ts"] >= 0
    fwd1 = next(e for e in complete if e["name"] == "forward:l1")
    assert fwd1["ts"] == pytest.approx(1000.0) and fwd1["dur"] == pytest.approx(3000.0)
    assert fwd1["cat"] == "forward"
    # refuses to overwrite what exists
    assert main(["trace", "export-chrome", str(trace_file), "-o", str(out)]) == 1


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simcore.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("trace", "show", "no-such-trace"),
            "no-such-trace: no such file, and not a shipped sample",
        ),
        (("trace", "export-chrome", "TRACE", "-o", "OUT", "--step", "9"), "step 9 does not exist"),
    ],
)
def test_errors_are_one_line(
    args: tuple[str, ...], expected: str, trace_file: Path, tmp_path: Path
) -> None:
    argv = [
        a.replace("TRACE", str(trace_file)).replace("OUT", str(tmp_path / "o.json")) for a in args
    ]
    result = run_cli(*argv)
    assert result.returncode == 1
    assert result.stderr.startswith("sgdsim: error: ")
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_broken_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "layers": []}')
    result = run_cli("trace", "show", str(bad))
    assert result.returncode == 1
    assert "bad.json: top level: missing required field 'ops'" in result.stderr
    assert "Traceback" not in result.stderr


def test_show_prints_the_trace_as_typed_not_the_install_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "show", "cnn-b32"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "trace      cnn-b32 (schema v1)"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    save_trace(synthetic_trace([0.001], [0.002], [4096]), "sub/mine.json")
    assert main(["trace", "show", "sub/../sub/mine.json"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("trace      sub/../sub/mine.json (schema v")
