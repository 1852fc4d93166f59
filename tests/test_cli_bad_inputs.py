"""Bad and extreme input to every sgdsim command: one line naming the culprit, or a right result.

Each bad case runs the CLI in-process and asserts: a non-zero exit, stderr is exactly one line
starting ``sgdsim: error:`` that names the file or option at fault, no traceback, and no file
left behind in the working folder (which holds files a careless writer would replace). Valid
extreme inputs must give finite, positive throughputs. Commands that would start real work
(profile, network measure, validate) get a second fault that is only detected after their
output check, so a missing check fails the test quickly instead of profiling or training.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import simcore.files
from simcore.cli.main import main
from simcore.trace.io import SAMPLE_NETWORK_PACKAGE, load_trace, resolve_path

from output_support import output, point

FAST = ["--steps", "20", "--warmup", "2"]

# Input files that are not what they should be, by kind: name -> bytes (None: a folder; absent
# from disk: "missing").
BAD_CONTENT: dict[str, bytes | None] = {
    "binary": random.Random(0).randbytes(4096).replace(b"\x1f\x8b", b"xx"),
    "empty": b"",
    "text": b"this is not JSON\n",
    "nul": b"\0" * 64,
    "list": b"[1, 2, 3]\n",
    "object": b'{"schema": "something else", "x": 1}\n',
    "deep": b"[" * 100_000,
    "bigint": b'{"a": ' + b"9" * 5000 + b"}",
    "broken-gzip": gzip.compress(b'{"schema": "sgdsim.trace", "x": 1}', mtime=0)[:-6],
    "gzip-binary": gzip.compress(random.Random(1).randbytes(512), mtime=0),
    "folder": None,
}
BAD_KINDS = [*BAD_CONTENT, "missing"]

# Every place a command reads a file; {f} is the file.
INPUT_SLOTS: dict[str, list[str]] = {
    "trace-show": ["trace", "show", "{f}"],
    "trace-export": ["trace", "export-chrome", "{f}", "-o", "x.json"],
    "trace-import-kineto": ["trace", "import-kineto", "{f}", "-o", "x.json"],
    "simulate": ["simulate", "{f}", *FAST],
    "simulate-2nd-trace": ["simulate", "cnn-b32", "{f}", "--workers", "2", *FAST],
    "simulate-network": ["simulate", "cnn-b32", "--network", "{f}", *FAST],
    "simulate-topology": ["simulate", "cnn-b32", "--topology", "{f}", *FAST],
    "simulate-placement": ["simulate", "cnn-b32", "--servers", "2", "--placement", "{f}"],
    "timeline": ["timeline", "{f}", "-o", "x.png"],
    "timeline-network": ["timeline", "cnn-b32", "--network", "{f}", "-o", "x.png"],
    "analyze": ["analyze", "{f}"],
    "analyze-network": ["analyze", "cnn-b32", "--network", "{f}"],
    "analyze-topology": ["analyze", "cnn-b32", "--topology", "{f}"],
    "advise": ["advise", "{f}", "--machines", "2"],
    "advise-network": ["advise", "cnn-b32", "--network", "{f}", "--machines", "2"],
    "network-show": ["network", "show", "{f}"],
    "validate-from-runs": ["validate", "--from-runs", "{f}", "--quiet"],
}
# The option a slot's message may name instead of the file (a placement that is valid JSON of
# the wrong shape is a wrong --placement, whatever file it came from).
SLOT_OPTION = {"simulate-placement": "placement"}

# Bad numbers and words in options: (arguments, what the message must name).
OPTION_CASES: list[tuple[list[str], str]] = [
    *[
        (["simulate", "cnn-b32", "--bandwidth", bad, *FAST], "--bandwidth")
        for bad in (
            "1e-300bps",
            "0bps",
            "-1Gbps",
            "nanGbps",
            "infGbps",
            "1e999Gbps",
            "1e300Gbps",
            "10",
            "10Gbpx",
            "",
        )
    ],
    *[
        (["simulate", "cnn-b32", *args, *FAST], args[0])
        for args in (
            ["--latency", "-1us"],
            ["--latency", "1e300s"],
            ["--workers", "0"],
            ["--workers", "-1"],
            ["--workers", "x"],
            ["--workers", "1.5"],
            ["--batches", "1"],
            ["--batches", "1000"],
            ["--replications", "0"],
            ["--parse-alpha", "nan"],
            ["--parse-alpha", "inf"],
            ["--parse-alpha", "-1"],
            ["--parse-alpha", "1e300"],
            ["--parse-beta", "-1s"],
            ["--jitter-cv", "nan"],
            ["--jitter-cv", "1e300"],
            ["--speed", "nan"],
            ["--speed", "0"],
            ["--speed", "1e300"],
            ["--http2-window", "0B", "--scheduler", "http2"],
            ["--http2-window", "1e30EB", "--scheduler", "http2"],
            ["--http2-window", "1MiB"],  # no window without the http2 scheduler
            ["--cap-mode", "maxmin"],  # no caps to share out
            ["--intra-bandwidth", "100GB/s"],  # one device per host
            ["--timeline-format", "records"],  # no timeline to write
            ["--placement", "round-robin", "--arch", "allreduce"],  # no servers
            ["--flow-cap", "0bps"],
            ["--servers", "0"],
            ["--seed", "-1"],
            ["--host-cores", "0"],
            ["--host-cores", "nan"],
            ["--worker-cores", "inf", "--host-cores", "2"],
            ["--comm-cpu", "inf", "--host-cores", "2"],
            ["--worker-bandwidth", "0.5bps"],
        )
    ],
    (["simulate", "cnn-b32", "--steps", "0"], "--steps"),
    (["simulate", "cnn-b32", "--steps", "10000000000", "--warmup", "1"], "--steps"),
    (["simulate", "cnn-b32", "--replications", "1000000000", *FAST], "--replications"),
    (["simulate", "cnn-b32", "--servers", "1000000000", *FAST], "--servers"),
    (["simulate", "cnn-b32", "--bandwidth", "1Gbps", "--latency", "2e9s", *FAST], "--latency"),
    (["timeline", "cnn-b32", "-o", "x.png", "--steps", "10000000000"], "--steps"),
    (["simulate", "cnn-b32", "--workers", "100000000"], "--workers"),
    (["timeline", "cnn-b32", "-o", "x.png", "--workers", "100000000"], "--workers"),
    (["trace", "show", "no\nsuch\nfile"], "no\\nsuch"),
    (["simulate", "cnn-b32", "--steps", "-5"], "--steps"),
    (["simulate", "cnn-b32", "--steps", "20", "--warmup", "-1"], "--warmup"),
    *[
        (["timeline", "cnn-b32", "-o", "x.png", *args], args[0])
        for args in (
            ["--steps", "0"],
            ["--window", "5:2"],
            ["--window", "a:b"],
            ["--time", "2s:1s"],
            ["--time", "1e300s:2e300s"],
            ["--workers", "0"],
            ["--show-workers", "9"],
            ["--bandwidth", "nanGbps"],
        )
    ],
    *[
        (["analyze", "cnn-b32", *args], args[-2])  # the option before the last value
        for args in (
            ["--workers", "0"],
            ["--bandwidth", "0bps"],
            ["--bandwidth", "1e300Gbps"],
            ["--rho-t", "nan"],
            ["--rho-t", "2"],
            ["--devices-per-host", "0"],
            ["--mode", "sync", "--rho-t", "0.5"],
            ["--mode", "sync", "--solver", "grouped"],
            ["--mode", "sync", "--overlap-rule", "keep"],
            ["--intra-bandwidth", "100GB/s"],  # one device per host
        )
    ],
    *[
        (["advise", "cnn-b32", "--machines", "2", *args], args[0])
        for args in (
            ["--price", "nan"],
            ["--price", "-1"],
            ["--price", "inf"],
            ["--top", "0"],
            ["--confirm", "-1"],
            ["--seed", "5", "--confirm", "0"],  # nothing simulated
            ["--steps", "30", "--confirm", "0"],
            ["--intra-bandwidth", "100GB/s"],  # one device per host
            ["--bandwidth", "1e-300bps"],
            ["--steps", "0"],
        )
    ],
    (["advise", "cnn-b32", "--machines", "0"], "--machines"),
    (["advise", "cnn-b32", "--machines", "2", "--devices-per-host", "1000000000"], "--devices"),
    (["advise", "cnn-b32", "--machines", "-1"], "--machines"),
    (["trace", "show", "cnn-b32", "--layers", "-3"], "--layers"),
    (["trace", "show", "cnn-b32", "--layers", "2", "--json"], "--layers: not with --json"),
    (["trace", "list", "extra"], "unrecognized arguments: extra"),
    (["trace", "export-chrome", "cnn-b32", "-o", "x.json", "--step", "-1"], "step -1"),
    (["trace", "export-chrome", "cnn-b32", "-o", "x.json", "--step", "99"], "step 99"),
    (["profile", "--model", "cnn", "--steps", "1000000000", "-o", "p.json"], "--steps"),
    (["profile", "--model", "cnn", "--warmup", "1000000", "-o", "p.json"], "--warmup"),
    (["profile", "--model", "mlp", "--num-classes", "0", "-o", "p.json"], "--num-classes: must"),
    (["validate", "--workers-max", "0"], "--workers-max"),
    (["validate", "--from-runs", "r.json.gz", "--save-runs", "s.json.gz"], "--save-runs"),
    (["validate", "--from-runs", "r.json.gz", "--no-save-runs"], "--no-save-runs: not with"),
    (["validate", "--save-runs", "s.json.gz", "--no-save-runs"], "not allowed with argument"),
    (["validate", "--workers-max", "1000000"], "--workers-max"),
    (["validate", "--repetitions", "1000000"], "--repetitions"),
    (["validate", "--from-runs", "none.json.gz", "--bandwidth", "0bps"], "--bandwidth"),
    (["validate", "--from-runs", "r", "--comm-cpu", "1", "--ring-cpu-work", "after"], "--ring"),
    (["validate", "--from-runs", "r.json.gz", "--steps", "5"], "--steps: not with --from-runs"),
    (["network", "measure", "--min-size", "0", "--quiet"], "--min-size"),
    (["network", "measure", "--min-size", "1MiB", "--max-size", "1KiB"], "--min-size 1MiB"),
    (["network", "measure", "--repeats", "0", "--quiet"], "--repeats"),
    (["network", "measure", "--rank", "0", "--quiet"], "--master-port"),
    (["network", "measure", "--ring-max", "-5", "--quiet"], "--ring-max"),
    (["network", "measure", "--keep-fit", "veth-1gbit", "--repeats", "3"], "--repeats"),
    (["network", "measure", "--keep-fit", "loopback", "--no-cpu", "--quiet"], "--no-cpu"),
]

# Every output option; {o} is the output path, {ext} its extension. The leading arguments make a
# command that skipped the check fail fast on something else (and so fail the test).
OUTPUT_SLOTS: dict[str, tuple[list[str], str, str]] = {
    "trace-export": (["trace", "export-chrome", "cnn-b32", "-o", "{o}"], "-o/--out", ".json"),
    "trace-import-kineto": (
        ["trace", "import-kineto", "missing.json", "-o", "{o}"],
        "-o/--out",
        ".json",
    ),
    "simulate-timeline": (
        ["simulate", "cnn-b32", "--timeline", "{o}", *FAST],
        "--timeline",
        ".json",
    ),
    "timeline-out": (["timeline", "cnn-b32", "-o", "{o}"], "-o/--out", ".png"),
    "timeline-chrome": (["timeline", "cnn-b32", "--chrome", "{o}"], "--chrome", ".json"),
    "profile": (["profile", "--model", "no-such-model", "-o", "{o}"], "-o/--out", ".json"),
    "network-measure": (
        ["network", "measure", "--min-size", "bogus", "-o", "{o}"],
        "-o/--out",
        ".json",
    ),
    "validate-out": (["validate", "--from-runs", "none.json.gz", "-o", "{o}"], "-o/--out", ".json"),
    "validate-save-runs": (
        ["validate", "--workers-max", "1000000", "--save-runs", "{o}"],
        "--save-runs",
        ".json",
    ),
}
# Bad output paths: (path template, extra arguments, what the message must say).
OUTPUT_KINDS: dict[str, tuple[str, list[str], str]] = {
    "missing-folder": ("nofolder/x{ext}", [], "folder nofolder does not exist"),
    "under-a-file": ("afile/x{ext}", [], "afile is not a folder"),
    "a-folder": ("afolder", [], "afolder: is a directory"),
    "a-folder-forced": ("afolder", ["--force"], "afolder: is a directory"),
    "wrong-extension": ("x.xyz", [], "unknown extension '.xyz'"),
    "no-extension": ("x", [], "no extension"),
    "existing": ("existing{ext}", [], "already exists; pass --force"),
    "empty": ("", [], "an empty path"),
    "device": ("/dev/null", ["--force"], "/dev/null"),
}


def run(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``sgdsim ARGV`` run in this process."""
    try:
        code = main(list(argv))
    except SystemExit as stop:  # usage errors exit from argparse
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working folder: files a careless writer could replace, and nothing else."""
    folder = tmp_path / "work"
    folder.mkdir()
    for name in ("existing.json", "existing.png", "afile"):
        (folder / name).write_bytes(b"mine")
    (folder / "afolder").mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A folder with one bad input file per kind (``missing`` is not created)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for kind, content in BAD_CONTENT.items():
        if content is None:
            (folder / f"{kind}.json").mkdir()
        else:
            (folder / f"{kind}.json").write_bytes(content)
    return folder


def assert_one_line_error(code: int, out: str, err: str, culprits: Sequence[str]) -> None:
    assert code != 0, f"exit 0 with stdout {out!r}"
    usage = err.endswith("--help)\n")  # what the argument parser refuses, not the input
    assert code == (2 if usage else 1), (code, err)
    assert "Traceback" not in out + err
    assert err.startswith("sgdsim: error: ") and err.count("\n") == 1, err
    assert any(c in err for c in culprits), f"{err!r} names none of {culprits}"


@pytest.mark.parametrize("kind", BAD_KINDS)
@pytest.mark.parametrize("slot", INPUT_SLOTS)
def test_a_bad_input_file_is_one_line_naming_it(
    slot: str,
    kind: str,
    inputs: Path,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = str(inputs / f"{kind}.json")
    before = snapshot(workdir)
    code, out, err = run([a.format(f=path) for a in INPUT_SLOTS[slot]], capsys)
    culprits = [path, SLOT_OPTION[slot]] if slot in SLOT_OPTION else [path]
    assert_one_line_error(code, out, err, culprits)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("what", ["trace", "network"])
def test_an_unsupported_version_is_named(
    what: str, tmp_path: Path, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (
        resolve_path("cnn-b32")
        if what == "trace"
        else resolve_path("loopback", SAMPLE_NETWORK_PACKAGE)
    )
    doc = json.loads(source.read_text())
    doc["schema_version"] = 99
    path = tmp_path / "v99.json"
    path.write_text(json.dumps(doc))
    argv = (
        ["simulate", str(path), *FAST]
        if what == "trace"
        else ["simulate", "cnn-b32", "--network", str(path), *FAST]
    )
    code, out, err = run(argv, capsys)
    assert_one_line_error(code, out, err, [str(path)])
    assert "99" in err and "version" in err


@pytest.mark.parametrize(
    ("field", "value", "culprit"),
    [
        ("duration", 1e300, "duration_s"),
        ("duration", -1.0, "duration_s"),
        ("duration", math.nan, "duration_s"),
        ("duration", math.inf, "duration_s"),
        ("nbytes", 10**30, "nbytes"),
        ("nbytes", 1e30, "nbytes"),
        ("batch_size", 10**30, "batch_size"),
        ("batch_size", 10**400, "batch_size"),
    ],
)
@pytest.mark.parametrize("command", ["trace show", "simulate", "analyze", "advise"])
def test_out_of_range_trace_values_are_named(
    field: str,
    value: float,
    culprit: str,
    command: str,
    tmp_path: Path,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = json.loads(resolve_path("cnn-b32").read_text())
    if field == "duration":
        compute = next(i for i, op in enumerate(doc["ops"]) if op["resource"] == "worker")
        doc["steps"][0]["duration_s"][compute] = value
    elif field == "nbytes":
        comm = next(op for op in doc["ops"] if "nbytes" in op)
        comm["nbytes"] = value
    else:
        doc["metadata"][field] = value
    path = tmp_path / "bad-values.json"
    path.write_text(json.dumps(doc))  # Python writes nan and inf as NaN and Infinity
    extra = ["--machines", "2"] if command == "advise" else []
    code, out, err = run([*command.split(), str(path), *extra], capsys)
    assert_one_line_error(code, out, err, [str(path)])
    assert culprit in err


@pytest.mark.parametrize(
    ("field", "value"),
    [("bandwidth_bps", 1e-300), ("bandwidth_bps", 1e300), ("latency_s", 1e300)],
)
@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "cnn-b32", *FAST],
        ["timeline", "cnn-b32", "-o", "x.png"],
        ["analyze", "cnn-b32"],
        ["advise", "cnn-b32", "--machines", "2"],
    ],
)
def test_an_out_of_range_network_profile_is_named(
    field: str,
    value: float,
    argv: list[str],
    tmp_path: Path,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = json.loads(resolve_path("loopback", SAMPLE_NETWORK_PACKAGE).read_text())
    doc[field] = value
    path = tmp_path / "link.json"
    path.write_text(json.dumps(doc))
    before = snapshot(workdir)
    code, out, err = run([*argv, "--network", str(path)], capsys)
    assert_one_line_error(code, out, err, [f"{path}: {field}"])
    assert snapshot(workdir) == before


@pytest.mark.parametrize(("argv", "culprit"), OPTION_CASES)
def test_a_bad_option_value_is_one_line_naming_the_option(
    argv: list[str], culprit: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(workdir)
    code, out, err = run(argv, capsys)
    assert_one_line_error(code, out, err, [culprit])
    assert snapshot(workdir) == before


@pytest.mark.parametrize("kind", OUTPUT_KINDS)
@pytest.mark.parametrize("slot", OUTPUT_SLOTS)
def test_a_bad_output_path_is_refused_before_any_work(
    slot: str, kind: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, option, ext = OUTPUT_SLOTS[slot]
    template, extra, message = OUTPUT_KINDS[kind]
    path = template.format(ext=ext)
    before = snapshot(workdir)
    code, out, err = run([*(a.format(o=path) for a in argv), *extra], capsys)
    assert_one_line_error(code, out, err, [f"{option}: "])
    assert message in err
    assert snapshot(workdir) == before  # nothing written, nothing replaced, no temporary file


def test_too_big_files_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simcore.files, "MAX_INPUT_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"pad": "x" * 2000}))
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(json.dumps({"pad": "x" * 100_000}).encode(), mtime=0))
    assert bomb.stat().st_size < 1000  # small compressed, large expanded
    for path, problem in ((big, "too big"), (bomb, "too big uncompressed")):
        code, out, err = run(["trace", "show", str(path)], capsys)
        assert_one_line_error(code, out, err, [str(path)])
        assert problem in err and "1000 B" not in err


def throughput(doc: dict[str, object]) -> float:
    value = doc["examples_per_s"]
    assert isinstance(value, dict)
    return float(value["value"])


@pytest.mark.parametrize("bandwidth", ["1bps", "1e18bps"])
def test_extreme_valid_bandwidths_give_finite_positive_results(
    bandwidth: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "cnn-b32", "--bandwidth", bandwidth, "--steps", "3", "--warmup", "1"]
    code, out, err = run([*argv, "--json"], capsys)
    assert code == 0, err
    rate = throughput(point(out))
    assert math.isfinite(rate) and rate > 0
    code, out, err = run(["analyze", "cnn-b32", "--bandwidth", bandwidth, "--json"], capsys)
    assert code == 0, err
    row = output(out)["points"][0]
    rates = [v["examples_per_s"] for v in row.values() if isinstance(v, dict)]
    assert rates and all(math.isfinite(r) and r > 0 for r in rates)


def test_the_longest_allowed_durations_give_a_finite_positive_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(resolve_path("cnn-b32").read_text())
    for step in doc["steps"]:
        step["duration_s"] = [None if d is None else 1e9 for d in step["duration_s"]]
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(["simulate", str(path), "--steps", "3", "--warmup", "1", "--json"], capsys)
    assert code == 0, err
    rate = throughput(point(out))
    ops = sum(op["resource"] == "worker" for op in doc["ops"])
    # A worker computes its ops one after another: ops * 1e9 s per step at least.
    assert 0 < rate <= doc["metadata"]["batch_size"] / (ops * 1e9) * (1 + 1e-9)


def test_a_step_without_computation_is_refused_where_its_rate_is_unbounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(resolve_path("cnn-b32").read_text())
    for step in doc["steps"]:
        step["duration_s"] = [None if d is None else 0.0 for d in step["duration_s"]]
    path = tmp_path / "instant.json"
    path.write_text(json.dumps(doc))
    ring = ["--arch", "allreduce", "--mode", "sync", "--workers", "1"]
    for argv in (
        ["simulate", str(path), *ring, *FAST],
        ["analyze", str(path), "--mode", "sync"],
        ["advise", str(path), "--machines", "2"],
    ):
        code, out, err = run(argv, capsys)
        assert_one_line_error(code, out, err, [str(path)])
    # With a parameter server the transfers still take time: a finite rate, bounded by the link.
    code, out, err = run(["simulate", str(path), *FAST, "--bandwidth", "1Gbps", "--json"], capsys)
    assert code == 0, err
    rate = throughput(point(out))
    pulled = sum(op["nbytes"] for op in doc["ops"] if op["kind"] == "pull")
    assert 0 < rate <= doc["metadata"]["batch_size"] * 1e9 / (8 * pulled) * (1 + 1e-9)


def test_gzip_outputs_are_gzip_and_read_back(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["trace", "export-chrome", "cnn-b32", "-o", "step.json.gz"], capsys)
    assert code == 0, err
    raw = (workdir / "step.json.gz").read_bytes()
    assert "traceEvents" in json.loads(gzip.decompress(raw))
    trace_gz = workdir / "cnn.json.gz"
    trace_gz.write_bytes(gzip.compress(resolve_path("cnn-b32").read_bytes()))
    assert load_trace(trace_gz).metadata.model_name == "cnn"


def test_a_figure_is_written_in_the_format_its_extension_names(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["timeline", "cnn-b32", "--steps", "4", "-o", "t.svg"], capsys)
    assert code == 0, err
    assert b"<svg" in (workdir / "t.svg").read_bytes()[:400]


def test_ctrl_c_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr("simcore.cli.trace_cmd.sample_names", interrupted)
    code, _, err = run(["trace", "list"], capsys)
    assert code == 130 and err == "sgdsim: interrupted\n"


def test_a_closed_pipe_ends_quietly() -> None:
    """``sgdsim ... | head -1``: the reader is gone before sgdsim writes; no traceback."""
    command = [sys.executable, "-m", "simcore.cli.main", "trace", "show", "resnet50-b32"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # as head does after its lines
    err = process.stderr.read()
    assert process.wait() == 141  # 128 + SIGPIPE, as for a command killed by the signal
    assert err == b""


def test_text_that_cannot_be_encoded_is_escaped_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(resolve_path("cnn-b32").read_text())
    doc["metadata"]["model_name"] = "\ud800cnn"  # a lone surrogate: valid JSON, not encodable
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(doc))  # ensure_ascii: written as the escape \\ud800
    code, out, err = run(["trace", "show", str(path)], capsys)
    assert code == 0, err
    assert "model      \\ud800cnn, batch 32" in out
