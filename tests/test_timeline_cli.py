"""``sgdsim timeline``: figures and Chrome traces of a simulated run, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simcore.cli.main import main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FAST = ["cnn-b32", "--bandwidth", "1Gbps", "--steps", "8"]


def test_figure_and_chrome_trace_are_written_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png, chrome = tmp_path / "t.png", tmp_path / "t.json"
    args = ["timeline", *FAST, "--workers", "3", "--window", "4:5", "-o", str(png)]
    args += ["--chrome", str(chrome), "--latency", "50us"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"wrote {png} (steps 4..5" in out and f"wrote {chrome}" in out
    assert png.read_bytes().startswith(PNG_MAGIC)
    doc = json.loads(chrome.read_text())
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["worker"] for e in complete} == {0, 1, 2}
    assert doc["otherData"]["workers"] == 3
    before = (png.read_bytes(), chrome.read_bytes())
    assert main(args) == 1  # never overwritten silently, and nothing half written
    err = capsys.readouterr().err
    assert "already exists; pass --force" in err and err.count("\n") == 1
    assert (png.read_bytes(), chrome.read_bytes()) == before
    assert main([*args, "--force"]) == 0


def test_chosen_workers_aggregate_and_sync(tmp_path: Path) -> None:
    png, chrome = tmp_path / "a.png", tmp_path / "a.json"
    args = ["timeline", *FAST, "--workers", "4", "--mode", "sync", "--sharing", "fcfs"]
    args += ["--show-workers", "0,2", "--aggregate", "-o", str(png), "--chrome", str(chrome)]
    assert main(args) == 0
    assert png.read_bytes().startswith(PNG_MAGIC)
    events = json.loads(chrome.read_text())["traceEvents"]
    assert {e["args"]["worker"] for e in events if e["ph"] == "X"} == {0, 2}


def test_profiled_against_one_simulated_worker(tmp_path: Path) -> None:
    png, chrome = tmp_path / "p.png", tmp_path / "p.json"
    args = ["timeline", *FAST, "--profiled", "--step", "2", "-o", str(png), "--chrome", str(chrome)]
    assert main(args) == 0
    assert png.read_bytes().startswith(PNG_MAGIC)
    events = json.loads(chrome.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {
        "profiled worker 0", "profiled server 0", "simulated worker 0", "simulated server 0",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "-o/--out: give an output PNG"),
        (["--workers", "1-4", "-o", "x.png"], "--workers: '1-4' is not a single worker count"),
        (["--workers", "0", "-o", "x.png"], "--workers: must be >= 1"),
        (["--window", "3", "-o", "x.png"], "--window: '3' is not FIRST:LAST"),
        (["--window", "5:9", "-o", "x.png"], "must be FIRST:LAST with 0 <= FIRST <= LAST"),
        (["--window", "1:2", "--time", "0s:1s", "-o", "x.png"], "--time: give --window"),
        (["--time", "2s:1s", "-o", "x.png"], "--time: '2s:1s' is empty"),
        (["--time", "50s:60s", "-o", "x.png"], "time window: 50..60 s holds no ops"),
        (["--show-workers", "0,7", "-o", "x.png"], "--show-workers: '0,7' must name workers"),
        (["--show-workers", "a", "-o", "x.png"], "--show-workers: 'a' is not a comma-separated"),
        (["--profiled", "--workers", "2", "-o", "x.png"], "--profiled: compares the profile"),
        (["--profiled", "--step", "99", "-o", "x.png"], "step 99 does not exist"),
        (["--profiled", "--window", "1:2", "-o", "x.png"], "--window: not with --profiled"),
        (["--profiled", "--aggregate", "-o", "x.png"], "--aggregate: not with --profiled"),
        (["--profiled", "--show-workers", "0", "-o", "x.png"], "--show-workers: not with"),
        (["--step", "1", "-o", "x.png"], "--step: only with --profiled"),
        (["--aggregate", "--chrome", "x.json"], "--aggregate: only with -o/--out"),
        (["--title", "T", "--chrome", "x.json"], "--title: only with -o/--out"),
        (["--bandwidth", "fast", "-o", "x.png"], "--bandwidth: 'fast' is not a bandwidth"),
        (["-o", "x.png", "--chrome", "x.png"], "--chrome: x.png: unknown extension '.png'"),
        (["--mode", "bulk", "-o", "x.png"], "argument --mode: invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    extra: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["timeline", "cnn-b32", "--steps", "4", *extra]
    if "invalid choice" in message:  # argparse's own errors exit from the parser
        with pytest.raises(SystemExit) as exited:
            main(args)
        code = exited.value.code
        assert code == 2  # usage
    else:
        code = main(args)
        assert code == 1  # bad input
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.png").exists()


def test_hosts_of_several_devices_draw_their_intra_host_row(tmp_path: Path) -> None:
    chrome = tmp_path / "hosts.json"
    argv = [
        "timeline",
        "cnn-b32",
        "--topology",
        "aws-p3.16xlarge",
        "--hosts",
        "2",
        "--mode",
        "sync",
        "--steps",
        "6",
        "--chrome",
        str(chrome),
    ]
    assert main(argv) == 0
    events = json.loads(chrome.read_text())["traceEvents"]
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert "intra" in threads
    assert {e["cat"] for e in events if e.get("ph") == "X"} >= {"intra-host", "forward", "push"}
    assert (
        main(
            ["timeline", "cnn-b32", "--hosts", "2", "--workers", "2", "-o", str(tmp_path / "x.png")]
        )
        == 1
    )
