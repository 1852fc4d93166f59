"""``sgdsim analyze``: tables, JSON, sample traces by name and one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simcore.analytic import Cluster, predict_async, predict_sync, worker_type_from_trace
from simcore.cli.main import main
from simcore.network_io import load_network_profile
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace, save_trace

from output_support import output


@pytest.fixture()
def trace_file(tmp_path: Path) -> Path:
    trace = synthetic_trace([0.002, 0.004], [0.004, 0.006], [400_000, 200_000], batch_size=16)
    return save_trace(trace, tmp_path / "tiny.json")


def test_async_table_of_a_sample_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "cnn-b32", "--workers", "1-4,16", "--bandwidth", "1Gbps"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cnn, batch 32/worker: T_F ") and "B 1.00 Gbit/s" in out[0]
    assert "hybrid Eq. 5 with rho_T 0.6, overlap Eq. 6 (reselect)" in out[1]
    assert out[2].split() == ["ps", "fcfs", "hybrid", "overlap"]
    assert out[3].split()[:3] == ["W", "examples/s", "steps/s"] and out[3].endswith("solver")
    rows = out[4:-1]
    assert [r.split()[0] for r in rows] == ["1", "2", "3", "4", "16"]
    assert all("grouped; hybrid = " in r for r in rows)
    assert out[-1] == "link: B 1.00 Gbit/s (--bandwidth)"


def test_sync_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", "resnet50-b32", "--workers", "2,8", "--mode", "sync"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].split() == ["ps", "fcfs", "hybrid", "overlap", "allreduce", "ddp"]
    assert all(r.endswith("closed form") for r in out[4:6]) and len(out) == 7
    assert out[6] == "link: B 10.0 Gbit/s (default)"


def test_json_matches_the_library(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["analyze", str(trace_file), "--workers", "1-3", "--bandwidth", "100Mbps"]
    assert main([*args, "--json", "--rho-t", "0.3", "--overlap-rule", "keep"]) == 0
    full = output(capsys.readouterr().out)
    doc = {**full["context"], "rows": full["points"]}
    assert (doc["mode"], doc["rho_t"], doc["overlap_rule"]) == ("async", 0.3, "keep")
    assert doc["bandwidth_bps"] == 1e8 and doc["params"]["batch_size"] == 16
    worker = worker_type_from_trace(load_trace(trace_file))
    for row in doc["rows"]:
        p = predict_async(
            Cluster.homogeneous(worker, row["workers"], 1e8), rho_t=0.3, overlap_rule="keep"
        )
        for name in ("ps", "fcfs", "hybrid", "overlap"):
            assert row[name]["examples_per_s"] == pytest.approx(getattr(p, name).examples_per_s)
            assert row[name]["steps_per_s"] == pytest.approx(getattr(p, name).steps_per_s)
        assert row["hybrid"]["links"] == p.hybrid.links and row["solver"] == "grouped"


def test_sync_json_and_network_profile(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["analyze", "cnn-b32", "--workers", "4", "--mode", "sync", "--network", "veth-1gbit"]
    assert main([*args, "--json"]) == 0
    full = output(capsys.readouterr().out)
    doc = {**full["context"], "rows": full["points"]}
    profile = load_network_profile("veth-1gbit")
    b = profile.bandwidth_bps
    assert doc["bandwidth_bps"] == b
    worker = worker_type_from_trace(load_trace("cnn-b32"))
    p = predict_sync(Cluster.homogeneous(worker, 4, b))
    # Eq. 11 at the ring's own goodput, measured with W = 4 on the testbed.
    assert profile.ring_goodput is not None
    ring = predict_sync(Cluster.homogeneous(worker, 4, dict(profile.ring_goodput.points)[4]))
    (row,) = doc["rows"]
    assert row["allreduce"]["step_s"] == pytest.approx(ring.allreduce.step_s)
    assert row["hybrid"]["examples_per_s"] == pytest.approx(p.hybrid.examples_per_s)


def test_csv_keeps_stdout_for_the_table_and_says_what_was_ignored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["analyze", "mlp-b64", "--workers", "1,2", "--latency", "1ms", "--csv"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("workers,") and len(out.splitlines()) == 3
    assert "not modelled:" in err and "latency 1.00 ms (--latency)" in err


def test_solver_option_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["analyze", "cnn-b32", "--workers", "6", "--solver", "bard-schweitzer", "--json"]
    assert main(args) == 0
    assert output(capsys.readouterr().out)["points"][0]["solver"] == "bard-schweitzer"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers: counts must be >= 1"),
        (["--workers", "a-b"], "--workers: 'a-b' is not a count"),
        (["--bandwidth", "fast"], "--bandwidth"),
        (["--rho-t", "1.5"], "--rho-t: must be in [0, 1]"),
        (["--network", "no-such-profile"], "no-such-profile"),
    ],
)
def test_bad_options_are_one_line_errors(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", "cnn-b32", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sgdsim: error: ") and message in err and err.count("\n") == 1


def test_unknown_trace_exits_2_from_the_console() -> None:
    cmd = [sys.executable, "-m", "simcore.cli.main", "analyze", "no-such-trace"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "no-such-trace" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
