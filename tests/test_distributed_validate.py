"""The validation scenario and ``sgdsim validate`` run end to end at tiny settings.

The numbers measured here (a busy 2-core machine, seconds of training) say nothing about accuracy;
the tests check that the pieces fit: a solo profile, predictions for each W, real runs, a report.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from profilers.distributed import RunConfig
from profilers.distributed.measurements import load_measurements
from profilers.distributed.validation import colocation_slowdown, effective_bandwidth_bps
from simcore.cli import validate_cmd
from simcore.cli.main import OneLineErrorParser
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace

from scenario_support import assert_finding_and_files

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
TINY = "test_distributed_runner:TinyNet"
SMALL = ["--model", TINY, "--batch-size", "8", "--steps", "8", "--warmup", "2", "--quiet"]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCENARIOS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def test_scenario_prints_and_saves_measured_vs_predicted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load("validate")
    argv = [*SMALL, "--workers-max", "2", "--repetitions", "1", "--arch", "ps-sync"]
    assert scenario.main([*argv, "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "ps-sync" in text and "absolute error over all points" in text
    finding = assert_finding_and_files(text, tmp_path, ["validate.csv", "validate.png"])
    mean, worst = text.split("absolute error over all points: mean / max\n  simulator: ")[
        1
    ].split()[:3:2]
    assert (
        finding.startswith("against the real runs of ")
        and f"the simulator {mean} on average ({worst} at most)" in finding
    )
    with open(tmp_path / "validate.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["workers"]) for r in rows] == [1, 2]
    for row in rows:
        assert float(row["measured"]) > 0 and float(row["simulated"]) > 0
        assert float(row["slowdown"]) > 0
    assert (tmp_path / "validate.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "validate-timeline-ps-sync.png").read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / "validate-timeline-ps-async.png").exists()  # not run
    # The saved runs give the same report again without training: same measurements, and the
    # seeded simulator predicts them identically.
    again = tmp_path / "again"
    runs = tmp_path / "validate-runs.json.gz"
    assert scenario.main(["--from-runs", str(runs), "--quiet", "--out", str(again)]) == 0
    # (the simulate lines name each run's own folder)
    repeated = capsys.readouterr().out.split("wrote")[0]
    assert repeated.replace(str(again), str(tmp_path)) == text.split("wrote")[0]
    assert "the same predictions from the files written, with `sgdsim simulate`:" in text
    assert (again / "validate.csv").read_text() == (tmp_path / "validate.csv").read_text()
    assert not (again / "validate-runs.json.gz").exists()  # the input is not copied


def validate_args(*argv: str) -> argparse.Namespace:
    """``sgdsim validate ARGV`` parsed by the command's own parser (not the whole CLI's)."""
    parser = OneLineErrorParser(prog="sgdsim")
    validate_cmd.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["validate", *argv])


def test_cli_command_prints_json_and_saves_the_solo_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where the runs are kept by default
    out = tmp_path / "solo.json"
    options = ["--workers-max", "1", "--repetitions", "1", "--arch", "allreduce", "--json"]
    args = validate_args(*SMALL, *options, "-o", str(out))
    assert args.handler(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["architecture"] for p in doc["points"]] == ["allreduce"]
    assert doc["points"][0]["measured_examples_per_s"][0] > 0
    assert load_trace(out).metadata.profiler["name"] == "sgdsim.profilers.distributed"
    # Measured runs are kept unless told not to: a new file named after what was measured.
    (kept,) = (tmp_path / validate_cmd.DEFAULT_RUNS_DIR).iterdir()
    assert kept.name.startswith("runs-test_distributed_runner-TinyNet-b8-loopback-")
    assert doc["context"]["runs_file"] == str(Path(validate_cmd.DEFAULT_RUNS_DIR) / kept.name)
    measured = load_measurements(kept)
    assert [(p.architecture.value, p.workers) for p in measured.points] == [("allreduce", 1)]
    assert measured.points[0].runs[0].examples_per_s == pytest.approx(
        doc["points"][0]["measured_examples_per_s"][0]
    )


def test_cli_keeps_nothing_with_no_save_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    options = ["--workers-max", "1", "--repetitions", "1", "--arch", "allreduce"]
    args = validate_args(*SMALL[:-1], *options, "--no-save-runs")  # (not --quiet)
    assert args.handler(args) == 0
    assert list(tmp_path.iterdir()) == [] and "runs kept" not in capsys.readouterr().err


def test_the_default_runs_file_is_new_and_named_after_the_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    now = datetime(2026, 11, 29, 13, 5, 1, tzinfo=UTC)
    args = validate_args("--model", "pkg.mod:factory", "--testbed", "350Mbit/s")
    validate_cmd.settle_run_options(args)
    first = validate_cmd.default_runs_path(args, now)
    name = "runs-pkg.mod-factory-b32-350Mbit-20261129T130501Z"
    assert first == Path("results/validate") / f"{name}.json.gz"
    assert not (tmp_path / "results").exists()  # nothing made before a point is measured
    first.parent.mkdir(parents=True)
    first.write_text("")
    assert validate_cmd.default_runs_path(args, now).name == f"{name}-2.json.gz"
    loopback = validate_args("--batch-size", "8")
    validate_cmd.settle_run_options(loopback)
    assert validate_cmd.default_runs_path(loopback, now).name.startswith("runs-cnn-b8-loopback-")


def test_cli_saves_the_runs_and_assesses_them_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs.json"
    options = ["--workers-max", "2", "--repetitions", "1", "--arch", "allreduce", "--json"]
    args = validate_args(*SMALL, *options, "--save-runs", str(runs))
    assert args.handler(args) == 0
    first = json.loads(capsys.readouterr().out)
    args = validate_args("--from-runs", str(runs), "--json", "--quiet")
    assert args.handler(args) == 0
    again = json.loads(capsys.readouterr().out)
    assert (first["context"].pop("runs_file"), again["context"].pop("runs_file")) == (
        str(runs),
        None,
    )
    assert (again["points"], again["context"]) == (first["points"], first["context"])
    assert [i["role"] for i in again["inputs"]] == ["runs"] and not first["inputs"]
    # Another bandwidth for the predictions: the measurements stay, the predictions move.
    args = validate_args("--from-runs", str(runs), "--json", "--quiet", "--bandwidth", "1Mbps")
    assert args.handler(args) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["context"]["bandwidth_bps"] == 1e6
    for a, b in zip(slow["points"], first["points"], strict=True):
        assert a["measured_examples_per_s"] == b["measured_examples_per_s"]
    assert (
        slow["points"][1]["simulated_examples_per_s"]
        < first["points"][1]["simulated_examples_per_s"]
    )
    # The runs file is not overwritten silently.
    args = validate_args(*SMALL, *options, "--save-runs", str(runs))
    with pytest.raises(ValueError, match="already exists"):
        args.handler(args)


def test_effective_bandwidth_needs_measured_transfers() -> None:
    trace = synthetic_trace([0.01], [0.01], [1000])
    with pytest.raises(ValueError, match="no measured transfer"):
        effective_bandwidth_bps(trace)


def test_colocation_slowdown_reports_a_ratio_per_worker_count() -> None:
    config = RunConfig(
        TINY, architecture="allreduce", servers=0, batch_size=8, steps=8, warmup=2, threads=1
    )
    solo, reports = colocation_slowdown(config, workers=(2,))
    assert solo.config.workers == 1
    report = reports[2]
    assert report.workers == 2 and report.ratio > 0
    assert set(report.per_layer) >= {"fc1", "fc2", "fc3"}


@pytest.mark.slow
def test_scenario_on_the_emulated_cluster_measures_the_link_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from profilers.netns import check_permitted
    from simcore.errors import ConfigError

    try:
        check_permitted()
    except ConfigError as err:
        pytest.skip(f"emulated cluster not possible here: {err}")
    scenario = load("validate")
    argv = [*SMALL, "--workers-max", "2", "--repetitions", "1", "--arch", "ps-async"]
    assert scenario.main([*argv, "--testbed", "200Mbit/s", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "emulated cluster, links shaped to 200 Mbit/s" in text
    assert "FCFS index" in text and "one flow alone gets" in text
    # the server's two directions: measured pattern by pattern, and the predictions use that
    assert "interference (link shaped to 200 Mbit/s, 2.48 MB a transfer): " in text
    assert "measured on the testbed's link shaped to 200 Mbit/s (link_interference)" in text
    with open(tmp_path / "validate.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["workers"]) for r in rows] == [1, 2]
    assert all(float(r["simulated"]) > 0 and float(r["simulated_ideal"]) > 0 for r in rows)


def test_a_bad_runs_file_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from simcore.cli.main import main

    missing = tmp_path / "missing.json.gz"
    assert main(["validate", "--from-runs", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sgdsim: error: ") and "missing.json.gz: no such file" in err
    assert err.count("\n") == 1
    scenario = load("validate")
    other = tmp_path / "trace.json"
    other.write_text('{"schema": "sgdsim.trace"}', encoding="utf-8")
    out = tmp_path / "out"
    assert scenario.main(["--from-runs", str(other), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "trace.json: not validation measurements" in err and err.count("\n") == 1
    assert not out.exists() or not any(out.iterdir())  # nothing half-written


def test_a_run_failing_late_keeps_what_was_measured_before_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from profilers.distributed.config import DistributedRunError
    from profilers.distributed.measurements import load_measurements
    from profilers.distributed.testbed import Testbed

    real_run = Testbed.run

    def fail_at_two_workers(self: Testbed, config: RunConfig, *args: object) -> object:
        if config.workers == 2:
            raise DistributedRunError("worker 1 (rank 2) died (signal 9) before finishing")
        return real_run(self, config, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Testbed, "run", fail_at_two_workers)
    scenario = load("validate")
    argv = [*SMALL, "--workers-max", "2", "--repetitions", "1", "--arch", "ps-sync"]
    assert scenario.main([*argv, "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    runs = tmp_path / "validate-runs.json.gz"
    assert "worker 1 (rank 2) died" in err and f"is in {runs}" in err and err.count("\n") == 1
    kept = load_measurements(runs)
    assert [(p.architecture.value, p.workers) for p in kept.points] == [("ps-sync", 1)]
    assert not (tmp_path / "validate.csv").exists()
    # What was kept can be assessed: one point.
    assert scenario.main(["--from-runs", str(runs), "--quiet", "--out", str(tmp_path / "a")]) == 0
    assert "ps-sync" in capsys.readouterr().out
    with open(tmp_path / "a" / "validate.csv", encoding="utf-8") as f:
        assert [int(r["workers"]) for r in csv.DictReader(f)] == [1]


@pytest.mark.slow
def test_the_printed_simulate_commands_give_the_validations_predictions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The scenario ends with the `sgdsim simulate` lines that predict each architecture's
    largest W from the files it wrote; run as printed, each gives the validation's number
    (Async-SGD: another set of seeds, so within the seeds' spread)."""
    import shlex

    from profilers.distributed.campaign import campaign_files, shipped_campaigns
    from simcore.cli.main import main

    if "campaign-2" not in shipped_campaigns():
        pytest.skip("campaign-2 not shipped")
    [runs] = [
        p for g, p in campaign_files(["campaign-2"]) if g.endswith("resnet8-300-layerwise.json.gz")
    ]
    scenario = load("validate")
    assert scenario.main(["--from-runs", str(runs), "--quiet", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    lines = text.split("the same predictions from the files written, with `sgdsim simulate`:\n")[1]
    commands = [shlex.split(line) for line in lines.splitlines() if line.startswith("  sgdsim")]
    assert [c[c.index("--arch") + 1] + "-" + c[c.index("--mode") + 1] for c in commands] == [
        "ps-async",
        "ps-sync",
        "allreduce-sync",
    ]
    with open(tmp_path / "validate.csv", encoding="utf-8") as f:
        predicted = {
            r["table"]: float(r["simulated"]) for r in csv.DictReader(f) if r["workers"] == "4"
        }
    for argv, table in zip(commands, ("ps-async", "ps-sync", "allreduce"), strict=True):
        assert main([*argv[1:], "--json", "--quiet"]) == 0
        simulated = json.loads(capsys.readouterr().out)["points"][0]["examples_per_s"]["value"]
        assert simulated == pytest.approx(
            predicted[table], rel=0.02 if table == "ps-async" else 0.005
        )


def test_the_scenario_predicts_the_selected_points_of_a_compacted_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A compacted file keeps the timeline of each architecture's most workers only: with
    fewer selected, the scenario draws no timeline for it rather than failing on it."""
    from test_validation_measurements import measurements

    from profilers.distributed.measurements import compacted, save_measurements

    runs = save_measurements(compacted(measurements()), tmp_path / "runs.json.gz")
    scenario = load("validate")
    argv = ["--from-runs", str(runs), "--quiet", "--arch", "ps-sync", "--workers-max", "1"]
    assert scenario.main([*argv, "--out", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    with open(tmp_path / "one" / "validate.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["table"], int(r["workers"])) for r in rows] == [("ps-sync", 1)]
    assert not list((tmp_path / "one").glob("validate-timeline-*.png"))
    # Every point: the largest W's timelines are drawn as before.
    assert scenario.main(["--from-runs", str(runs), "--quiet", "--out", str(tmp_path / "all")]) == 0
    capsys.readouterr()
    drawn = sorted(p.name for p in (tmp_path / "all").glob("validate-timeline-*.png"))
    assert drawn == ["validate-timeline-allreduce.png", "validate-timeline-ps-sync.png"]
