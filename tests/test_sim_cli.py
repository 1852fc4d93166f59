"""``sgdsim simulate``: single runs, sweeps, JSON, timelines and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simcore.cli.main import main
from simcore.cli.simulate_cmd import parse_workers
from simcore.errors import ConfigError
from simcore.trace.build import synthetic_trace
from simcore.trace.io import save_trace

from output_support import output, point
from trace_support import tiny_trace

FAST = ["--steps", "30", "--warmup", "5", "--bandwidth", "1Gbps"]


@pytest.fixture()
def trace_file(tmp_path: Path) -> Path:
    return save_trace(tiny_trace(), tmp_path / "tiny.json")


def test_single_run_prints_a_summary(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(trace_file), "--workers", "4", *FAST]) == 0
    out = capsys.readouterr().out
    assert "4 workers, ps/async, sharing ps, 1.00 Gbit/s" in out
    # Async-SGD: several seeds by default (their spread is checked in test_sim_seeds.py).
    assert "examples/s  (95% CI" in out and "5 replications" in out
    assert "downlink" in out and "utilization" in out
    assert main(["simulate", str(trace_file), "--workers", "4", "--replications", "1", *FAST]) == 0
    assert "batch means, 10 batches" in capsys.readouterr().out


def test_json_is_one_object(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", str(trace_file), "--workers", "2", "--mode", "sync", "--json", *FAST]
    assert main([*args, "--sharing", "fcfs", "--replications", "3"]) == 0
    doc = point(capsys.readouterr().out)
    assert doc["config"]["workers"] == 2 and doc["config"]["sharing"] == "fcfs"
    assert doc["steps_per_s"]["method"] == "replications"
    assert doc["examples_per_s"]["value"] == pytest.approx(16 * doc["steps_per_s"]["value"])
    assert len(doc["workers"]) == 2 and {link["name"] for link in doc["links"]} == {
        "downlink",
        "uplink",
    }


def test_sweep_prints_a_table(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(trace_file), "--workers", "1-3,8", *FAST]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "95% CI" in lines[1]
    assert [line.split()[0] for line in lines[2:-1]] == ["1", "2", "3", "8"]
    assert lines[-1].startswith(
        "link: 1.00 Gbit/s (--bandwidth) + 0 s (default), flow weight cv off"
    )


def test_sweep_json(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(trace_file), "--workers", "1,2", "--json", *FAST]) == 0
    doc = output(capsys.readouterr().out)
    assert [p["config"]["workers"] for p in doc["points"]] == [1, 2]


@pytest.mark.parametrize("fmt", ["chrome", "records"])
def test_timeline_is_written_and_never_overwritten_silently(
    trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    out = tmp_path / "timeline.json"
    args = ["simulate", str(trace_file), "--workers", "2", "--steps", "3", "--warmup", "1"]
    args += ["--timeline", str(out), "--timeline-format", fmt, "--scheduler", "http2"]
    assert main(args) == 0
    doc = json.loads(out.read_text())
    if fmt == "chrome":
        events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
        assert {e["cat"] for e in events} >= {"pull", "forward", "push"}
    else:
        assert doc["columns"][:3] == ["worker", "step", "resource"]
        assert len(doc["steps"]) == 6
    before = out.read_text()
    assert main(args) == 1
    assert "already exists; pass --force" in capsys.readouterr().err
    assert out.read_text() == before
    assert main([*args, "--force"]) == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--workers", "0"], "workers: must be an integer >= 1"),
        (["--workers", "two"], "--workers: 'two' is not a count"),
        (["--bandwidth", "10"], "--bandwidth: '10' is not a bandwidth"),
        (["--bandwidth", "0Gbps"], "--bandwidth: '0Gbps' must be > 0"),
        (["--steps", "10", "--warmup", "10"], "--warmup 10 --steps 10: the warm-up must be"),
        (["--workers", "1-3", "--timeline", "x.json"], "--timeline: needs a single worker"),
        (["--arch", "allreduce", "--mode", "async"], "--arch allreduce --mode async: ring"),
        (["--speed", "1,2", "--workers", "3"], "--speed: needs one value per worker"),
        (["--placement", "nowhere"], "--placement: 'nowhere' is not greedy"),
        (["--comm-cpu", "40"], "--comm-cpu: the transfers' CPU cost needs --host-cores"),
        (["--comm-cpu", "-1", "--host-cores", "1"], "--comm-cpu: must be >= 0 ns per byte"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    trace_file: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["simulate", str(trace_file), *extra]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--steps", "abc"], "argument --steps: invalid int value: 'abc'"),
        (["--sharing", "nope"], "argument --sharing: invalid choice: 'nope'"),
        (["--workers"], "argument --workers: expected one argument"),
    ],
)
def test_usage_mistakes_are_one_line_too(
    trace_file: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", str(trace_file), *extra])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("sgdsim: error: ") and message in err
    assert err.count("\n") == 1 and "usage:" not in err


def test_missing_trace_argument_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["simulate"])
    err = capsys.readouterr().err
    assert "required: TRACE" in err and err.count("\n") == 1


@pytest.mark.parametrize("where", ["directory", "under-a-file"])
def test_unwritable_timeline_fails_before_simulating(
    trace_file: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    where: str,
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("must not simulate")

    monkeypatch.setattr("simcore.sim.precision.simulate_sized", boom)
    target = tmp_path if where == "directory" else trace_file / "timeline.json"
    args = ["simulate", str(trace_file), "--timeline", str(target), "--force", *FAST]
    assert main(args) == 1
    err = capsys.readouterr().err
    expected = "is a directory" if where == "directory" else f"{trace_file} is not a folder"
    assert "--timeline: " in err and expected in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.json"]  # nothing left behind


def test_trace_whose_steps_take_no_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = save_trace(synthetic_trace([0.0], [0.0], [0]), tmp_path / "empty.json")
    assert main(["simulate", str(path), "--workers", "1-4"]) == 1
    err = capsys.readouterr().err
    assert "profiled step 0" in err and "throughput is unbounded" in err
    assert err.count("\n") == 1


def test_placement_file_naming_a_missing_layer(
    trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = tmp_path / "placement.json"
    mapping.write_text(json.dumps({"l0": 0, "l1": 1, "fc9": 1}))
    args = ["simulate", str(trace_file), "--servers", "2", "--placement", str(mapping)]
    assert main(args) == 1
    assert "placement: layer 'fc9' is not in trace" in capsys.readouterr().err


def test_missing_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "no-such-trace.json"]) == 1
    assert "no such file" in capsys.readouterr().err


def test_parse_workers() -> None:
    assert parse_workers("8") == [8]
    assert parse_workers("1,2,4") == [1, 2, 4]
    assert parse_workers("1-4,16") == [1, 2, 3, 4, 16]
    with pytest.raises(ConfigError):
        parse_workers("4-1")


def test_console_entry_point(trace_file: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "simcore.cli.main", "simulate", str(trace_file), "--json", *FAST],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert point(proc.stdout)["steps_per_s"]["value"] > 0


def test_hybrid_summary_names_its_components(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(trace_file), "--workers", "3", "--sharing", "hybrid", *FAST]) == 0
    out = capsys.readouterr().out
    assert "sharing hybrid" in out and "mean of fcfs " in out and ", ps " in out


@pytest.mark.parametrize(
    ("extra", "bandwidth_bps", "latency_s"),
    [
        ([], 10e9, 0.0),  # the defaults
        (["--network", "veth-1gbit"], "profile", "profile"),
        (["--network", "veth-1gbit", "--bandwidth", "5Gbps"], 5e9, "profile"),
        (["--network", "veth-1gbit", "--latency", "1ms"], "profile", 1e-3),
    ],
)
def test_network_profile_sets_the_link_unless_options_do(
    trace_file: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    bandwidth_bps: float | str,
    latency_s: float | str,
) -> None:
    from simcore.network_io import load_network_profile

    profile = load_network_profile("veth-1gbit")
    args = ["simulate", str(trace_file), "--steps", "30", "--warmup", "5", "--json", *extra]
    assert main(args) == 0
    config = point(capsys.readouterr().out)["config"]
    expected_bw = profile.bandwidth_bps if bandwidth_bps == "profile" else bandwidth_bps
    expected_lat = profile.latency_s if latency_s == "profile" else latency_s
    assert config["bandwidth_bps"] == pytest.approx(expected_bw)
    assert config["latency_s"] == pytest.approx(expected_lat)


def test_unknown_network_profile_is_one_line(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(trace_file), "--network", "nope", *FAST]) == 1
    err = capsys.readouterr().err
    samples = ", ".join(
        ["loopback", *(f"netns-{r}mbit-4ranks" for r in (200, 300, 500)), "veth-1gbit"]
    )
    assert f"nope: no such file, and not a shipped sample; samples: {samples}" in err
    assert err.count("\n") == 1


def test_transfers_cpu_cost_slows_colocated_workers(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["simulate", str(trace_file), "--workers", "2", "--colocated", "2", "--json"]
    common += ["--mode", "sync"]  # (async workers may fall into a faster interleaving)
    common += ["--host-cores", "1", "--steps", "30", "--warmup", "5", "--bandwidth", "100Mbps"]
    assert main(common) == 0
    plain = point(capsys.readouterr().out)
    assert main([*common, "--comm-cpu", "60"]) == 0
    costly = point(capsys.readouterr().out)
    assert costly["config"]["comm_cpu_s_per_byte"] == pytest.approx(60e-9)
    assert costly["examples_per_s"]["value"] < plain["examples_per_s"]["value"]


def _simulated(
    capsys: pytest.CaptureFixture[str], trace: Path, *extra: str
) -> tuple[dict[str, object], str]:
    assert main(["simulate", str(trace), *FAST, "--workers", "2", "--json", *extra]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    doc.pop("argv")  # the command line as typed differs; what it ran must not
    for entry in doc["points"]:
        entry.pop("wall_time_s", None)
        entry.pop("ops_per_wall_s", None)
    return doc, captured.err


@pytest.mark.parametrize(
    ("given", "same_as", "note"),
    [
        # The per-byte cost takes units; a bare number is still seconds per byte, with a note.
        (
            ["--parse-alpha", "1e-9"],
            ["--parse-alpha", "1ns/B"],
            "--parse-alpha 1e-9 read as seconds per byte",
        ),
        (["--parse-alpha", "1.024us/KiB"], ["--parse-alpha", "1ns/B"], None),
        # simulate's old name of the HTTP/2 window still works this release, with a note.
        (
            ["--scheduler", "http2", "--window", "16KiB"],
            ["--scheduler", "http2", "--http2-window", "16KiB"],
            "--window is deprecated, use --http2-window",
        ),
    ],
)
def test_units_and_deprecated_names_give_the_same_run(
    trace_file: Path,
    capsys: pytest.CaptureFixture[str],
    given: list[str],
    same_as: list[str],
    note: str | None,
) -> None:
    doc, err = _simulated(capsys, trace_file, *given)
    reference, reference_err = _simulated(capsys, trace_file, *same_as)
    assert doc == reference and reference_err == ""
    if note is None:
        assert err == ""
    else:
        [line] = err.splitlines()
        assert line.startswith("sgdsim simulate: note: ") and note in line


def test_batches_are_refused_or_noted_where_replications_give_the_interval(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Async-SGD with W >= 2 runs several seeds and takes its interval from them: --batches
    would do nothing there (it was silently ignored)."""
    args = ["simulate", str(trace_file), *FAST, "--batches", "4"]
    assert main([*args, "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert "--batches: not used for W=2: 5 replications give the interval" in err
    assert main([*args, "--workers", "2", "--replications", "1"]) == 0
    assert "batch means, 4 batches" in capsys.readouterr().out
    assert main([*args, "--workers", "1,2", "--json"]) == 0
    err = capsys.readouterr().err
    assert "note: --batches: not used for W=2" in err and "W=1" not in err
