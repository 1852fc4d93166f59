"""Machine-readable output and Unix manners: every command's ``--json`` follows the shipped schema,
names its inputs with the sha256 of the files read, ``--csv`` holds the text table's rows, exit
codes, Ctrl-C keeps the finished points, ``--version`` and shell completion."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import simcore.cli.analyze_cmd as analyze_module
import simcore.sim.precision as precision_module
from simcore import __version__
from simcore.cli.main import main
from simcore.network import SUPPORTED_SCHEMA_VERSIONS as NETWORK_VERSIONS
from simcore.report.output import SUPPORTED_SCHEMA_VERSIONS as OUTPUT_VERSIONS
from simcore.trace.io import SAMPLE_NETWORK_PACKAGE, load_trace, resolve_path
from simcore.trace.model import SUPPORTED_SCHEMA_VERSIONS as TRACE_VERSIONS

from output_support import output

FAST = ["--steps", "30", "--warmup", "5"]
ADVISE = ["advise", "cnn-b32", "--machines", "3", "--steps", "30", "--confirm", "1", "--top", "4"]
ADVISE = [*ADVISE, "--json"]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def runs_file(tmp_path: Path) -> Path:
    from test_validation_measurements import measurements

    from profilers.distributed.measurements import save_measurements

    return save_measurements(measurements(), tmp_path / "runs.json.gz")


def commands(tmp_path: Path, runs: Path) -> dict[str, tuple[list[str], int]]:
    """Per case: the command line with --json and how many points it prints."""
    chrome = str(tmp_path / "t.json")
    return {
        "simulate one point": (["simulate", "cnn-b32", *FAST, "--json"], 1),
        "simulate sweep": (["simulate", "cnn-b32", "--workers", "1-3", *FAST, "--json"], 3),
        "timeline": (["timeline", "cnn-b32", "--steps", "6", "--chrome", chrome, "--json"], 1),
        "analyze one point": (["analyze", "cnn-b32", "--workers", "4", "--json"], 1),
        "analyze sweep": (
            ["analyze", "cnn-b32", "--workers", "1-5", "--mode", "sync", "--json"],
            5,
        ),
        "advise": (ADVISE, 4),
        "trace show": (["trace", "show", "cnn-b32", "--json"], len(load_trace("cnn-b32").layers)),
        "network show": (["network", "show", "veth-1gbit", "--json"], 1),
        "validate": (["validate", "--from-runs", str(runs), "--quiet", "--json"], 3),
    }


CASES = [
    "simulate one point",
    "simulate sweep",
    "timeline",
    "analyze one point",
    "analyze sweep",
    "advise",
    "trace show",
    "network show",
    "validate",
]


@pytest.mark.parametrize("case", CASES)
def test_every_command_json_follows_the_schema(
    case: str, tmp_path: Path, runs_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, n_points = commands(tmp_path, runs_file)[case]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    doc = output(out)  # validated against simcore/report/schema/sgdsim-output.schema.json
    assert doc["schema"] == {"name": "sgdsim-output", "version": 1}
    assert doc["sgdsim_version"] == __version__ and doc["argv"] == ["sgdsim", *argv]
    two_words = argv[0] in ("trace", "network")
    assert doc["command"] == (" ".join(argv[:2]) if two_words else argv[0])
    assert doc["interrupted"] is False and len(doc["points"]) == n_points


def test_inputs_are_named_as_given_with_the_sha256_of_the_files_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = shutil.copy(resolve_path("cnn-b32"), tmp_path / "mine.json")
    argv = ["simulate", str(trace), "--network", "veth-1gbit", "--topology", "aws-p3.16xlarge"]
    code, out, err = run([*argv, "--hosts", "1", *FAST, "--json"], capsys)
    assert code == 0, err
    inputs = output(out)["inputs"]
    network = resolve_path("veth-1gbit", SAMPLE_NETWORK_PACKAGE)
    topology = resolve_path("aws-p3.16xlarge", "simcore.data.topologies")
    assert inputs == [
        {"role": "trace", "given": str(trace), "sample": False, "sha256": sha256(Path(trace))},
        {"role": "network", "given": "veth-1gbit", "sample": True, "sha256": sha256(network)},
        {
            "role": "topology",
            "given": "aws-p3.16xlarge",
            "sample": True,
            "sha256": sha256(topology),
        },
    ]
    # Another file, another hash: one changed byte is seen.
    Path(trace).write_bytes(Path(trace).read_bytes().replace(b'"cnn"', b'"cnN"', 1))
    code, out, err = run(["analyze", str(trace), "--json"], capsys)
    assert code == 0, err
    (ref,) = output(out)["inputs"]
    assert ref["sha256"] == sha256(Path(trace)) != inputs[0]["sha256"]


def csv_rows(text: str) -> tuple[list[str], list[list[str]]]:
    header, *rows = list(csv.reader(io.StringIO(text)))
    return header, rows


def table_rows(text: str, first: str) -> list[list[str]]:
    """The rows of a printed table: the lines after the header line starting with ``first``,
    up to the first line whose first cell is not a number."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [first]) + 1
    rows = []
    for line in lines[start:]:
        cells = line.split()
        if not cells or not cells[0].replace(",", "").isdigit():
            break
        rows.append(cells)
    return rows


def close(text: str, value: str) -> bool:
    """A printed number (4 significant digits or so) agrees with the CSV's full precision."""
    return float(text.replace(",", "").rstrip("%")) == pytest.approx(float(value), rel=5e-3)


def test_simulate_csv_has_the_rows_of_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "cnn-b32", "--workers", "1,2,4", "--bandwidth", "1Gbps", *FAST]
    code, text, _ = run(argv, capsys)
    assert code == 0
    code, out, _ = run([*argv, "--csv"], capsys)
    assert code == 0
    header, rows = csv_rows(out)
    assert header[:2] == ["workers", "examples_per_s"] and "step_ms" in header
    table = table_rows(text, "W")
    assert [r[0] for r in rows] == [t[0] for t in table] == ["1", "2", "4"]
    for row, cells in zip(rows, table, strict=True):
        assert close(cells[1], row[1])  # examples/s
        ci_low, ci_high = float(row[2]), float(row[3])
        assert ci_low <= float(row[1]) <= ci_high


def test_analyze_csv_has_the_rows_of_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["analyze", "cnn-b32", "--workers", "1-6", "--bandwidth", "1Gbps"]
    code, text, _ = run(argv, capsys)
    code, out, _ = run([*argv, "--csv"], capsys)
    assert code == 0
    header, rows = csv_rows(out)
    assert header[:3] == ["workers", "ps_examples_per_s", "ps_steps_per_s"]
    assert header[-2:] == ["solver", "hybrid_links"]
    table = table_rows(text, "W")
    assert [r[0] for r in rows] == [t[0] for t in table] == [str(w) for w in range(1, 7)]
    for row, cells in zip(rows, table, strict=True):
        assert all(close(c, v) for c, v in zip(cells[1:9], row[1:9], strict=True))


def test_advise_csv_has_the_rows_of_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["advise", "cnn-b32", "--machines", "3", "--steps", "30", "--confirm", "2"]
    argv += ["--top", "5", "--price", "2", "--quiet"]
    code, text, _ = run(argv, capsys)
    code, out, _ = run([*argv, "--csv"], capsys)
    assert code == 0
    header, rows = csv_rows(out)
    assert header[-1] == "cost_per_million_examples" and len(rows) == 5
    table = [
        x.split() for x in text.splitlines() if x.split()[:1] in ([str(i)] for i in range(1, 6))
    ]
    for rank, (row, cells) in enumerate(zip(rows, table, strict=True), 1):
        # rank, architecture (one or two words), servers, sharing, W, machines, examples/s, by
        words = 2 if row[1] == "ring AllReduce" or row[1].startswith("PS ") else 1
        assert row[0] == cells[0] == str(rank) and " ".join(cells[1 : 1 + words]) == row[1]
        rest = cells[1 + words :]
        assert [row[2] or "-", row[3] or "-", row[5], row[6]] == rest[:4]
        assert close(rest[4], row[7]) and rest[5] == row[8]
    assert [r[8] for r in rows] == ["simulated"] * 2 + ["analytic"] * 3


def test_trace_show_csv_has_the_layer_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = run(["trace", "show", "resnet18-b32", "--layers", "4"], capsys)
    code, out, _ = run(["trace", "show", "resnet18-b32", "--layers", "4", "--csv"], capsys)
    assert code == 0
    header, rows = csv_rows(out)
    assert header == ["layer", "type", "forward_ms", "backward_ms", "param_bytes"]
    lines = text.splitlines()
    table = lines[lines.index(next(x for x in lines if x.startswith("slowest"))) + 2 :]
    assert [r[0] for r in rows] == [t.split()[0] for t in table]
    for row, line in zip(rows, table, strict=True):
        assert close(line.split()[2], row[2]) and close(line.split()[4], row[3])


def sgdsim(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simcore.cli.main", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["trace", "show", "cnn-b32"], 0),
        (["trace", "show", "no-such-trace"], 1),  # bad input: an SgdsimError
        (["simulate", "cnn-b32", "--workers", "0"], 1),
        (["simulate", "cnn-b32", "--no-such-option"], 2),  # usage: argparse
        (["simulate"], 2),
    ],
)
def test_exit_codes(argv: list[str], code: int) -> None:
    done = sgdsim(*argv)
    assert done.returncode == code, done.stderr
    if code:
        assert done.stderr.startswith("sgdsim: error: ") and done.stderr.count("\n") == 1


def raise_on_call(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, n: int) -> None:
    """Make ``module.name`` raise KeyboardInterrupt (Ctrl-C) on its ``n``-th call."""
    real: Callable[..., Any] = getattr(module, name)
    calls = []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, interrupted)


@pytest.mark.parametrize("fmt", ["--json", "--csv", None])
def test_ctrl_c_in_a_sweep_keeps_the_finished_points(
    fmt: str | None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raise_on_call(monkeypatch, precision_module, "simulate_sized", 3)
    argv = ["simulate", "cnn-b32", "--workers", "1-4", *FAST, *([fmt] if fmt else [])]
    code, out, err = run(argv, capsys)
    assert code == 130
    assert "interrupted; simulate printed the 2 of 4 points that finished" in err
    if fmt == "--json":
        doc = output(out)
        assert doc["interrupted"] is True
        assert [p["config"]["workers"] for p in doc["points"]] == [1, 2]
    elif fmt == "--csv":
        assert [r[0] for r in csv_rows(out)[1]] == ["1", "2"]
    else:
        assert [r[0] for r in table_rows(out, "W")] == ["1", "2"]


def test_ctrl_c_before_any_point_finished_is_a_plain_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raise_on_call(monkeypatch, precision_module, "simulate_sized", 1)
    code, out, err = run(["simulate", "cnn-b32", "--workers", "1-4", *FAST, "--json"], capsys)
    assert (code, out, err) == (130, "", "sgdsim: interrupted\n")


def test_ctrl_c_in_analyze_and_advise_keeps_what_finished(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raise_on_call(monkeypatch, analyze_module, "analyze_row", 3)
    code, out, err = run(["analyze", "cnn-b32", "--workers", "1-5", "--json"], capsys)
    doc = output(out)
    assert code == 130 and doc["interrupted"] is True
    assert [p["workers"] for p in doc["points"]] == [1, 2]
    raise_on_call(monkeypatch, precision_module, "simulate_sized", 2)
    argv = ["advise", "cnn-b32", "--machines", "3", "--steps", "30", "--confirm", "3", "--json"]
    code, out, err = run(argv, capsys)
    doc = output(out)
    assert code == 130 and doc["interrupted"] is True
    assert "advise printed the 1 of 3 confirming simulations that finished" in err
    simulated = [p for p in doc["points"] if p["simulated_examples_per_s"] is not None]
    assert len(simulated) == 1 and doc["context"]["simulated"] == [simulated[0]["label"]]


def test_version_lists_the_formats_read(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"sgdsim {__version__}"
    for what, versions in (
        ("trace format", TRACE_VERSIONS),
        ("network profile", NETWORK_VERSIONS),
        ("--json output", OUTPUT_VERSIONS),
    ):
        (line,) = [x for x in lines if x.startswith(what)]
        assert line.endswith(", ".join(f"v{v}" for v in versions))


def completions(tmp_path: Path, line: str) -> list[str]:
    """What bash would offer for ``line`` (argcomplete's protocol, as its shell hook runs it)."""
    out = tmp_path / "completions.txt"
    done = sgdsim(
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_SHELL="bash",
        _ARGCOMPLETE_IFS="\n",
        _ARGCOMPLETE_STDOUT_FILENAME=str(out),
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        COMP_TYPE="9",  # TAB
    )
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in out.read_text().split("\n") if word.strip()]


def test_shell_completion_lists_commands_and_options(tmp_path: Path) -> None:
    commands = completions(tmp_path, "sgdsim ")
    assert {"simulate", "timeline", "analyze", "advise", "trace", "network", "validate"} <= set(
        commands
    )
    options = completions(tmp_path, "sgdsim simulate cnn-b32 --js")
    assert options == ["--json"]
    assert "--csv" in completions(tmp_path, "sgdsim analyze cnn-b32 --")
