"""Every error is in the user's words: the option or file as typed, never a library parameter.

The library's checks (SimulationConfig, Topology, the analytic Cluster, the advisor) name their
parameters (``warmup_steps``, ``mode='sync'``); :mod:`simcore.cli.option_names` rewrites them
as options for every command and scenario. These tests trip each check through the command
line, with zero, negative and contradictory values, and read what reaches stderr.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from simcore.cli.main import main
from simcore.cli.option_names import OPTION_OF, user_message
from simcore.sim import SimulationConfig
from simcore.topology import Topology

from scenario_support import load_scenario

# Library parameter names that a message must not show: every underscored one the mapping
# knows, plus the reprs of a dataclass's fields.
INTERNAL = sorted(name for name in OPTION_OF if "_" in name)
REPR = re.compile(r"\b[a-z_]+=['\"\d]")

TRACE = "cnn-b32"
SIM = ["--workers", "2", "--steps", "40", "--warmup", "4", "--quiet"]
TIMELINE = ["--workers", "2", "--steps", "20", "-o", "x.png"]

# (command line, the option the error must name); each trips one check, most of them the
# library's own (SimulationConfig.__post_init__ / validate, the advisor's, the Cluster's).
CASES: list[tuple[list[str], str]] = [
    *(
        ([command, TRACE, *common, *extra], option)
        for command, common in (("simulate", SIM), ("timeline", TIMELINE))
        for extra, option in (
            (["--servers", "0"], "--servers"),
            (["--servers", "-2"], "--servers"),
            (["--replications", "0"], "--replications"),
            (["--seed", "-1"], "--seed"),
            (["--arch", "allreduce", "--mode", "async"], "--mode"),
            (["--arch", "allreduce", "--mode", "sync", "--servers", "2"], "--servers"),
            (
                ["--arch", "allreduce", "--mode", "sync", "--flow-weight-cv", "0.3"],
                "--flow-weight-cv",
            ),
            (
                ["--mode", "sync", "--sharing", "fcfs", "--flow-weight-cv", "0.3"],
                "--flow-weight-cv",
            ),
            (["--server-host", "7"], "--server-host"),
            (["--server-host", "-1"], "--server-host"),
            (["--worker-cores", "2"], "--worker-cores"),
            (["--host-cores", "2", "--worker-cores", "4"], "--worker-cores"),
            (["--colocated", "0"], "--colocated"),
            (["--colocated", "2", "--server-host", "1"], "--server-host"),  # one host
            (["--devices-per-host", "0"], "--devices-per-host"),
            (["--devices-per-host", "2"], "--intra-bandwidth"),
            (["--scheduler", "http2", "--http2-window", "0B"], "--http2-window"),
            (["--flow-cap", "0bps"], "--flow-cap"),
            (["--comm-cpu", "5"], "--comm-cpu"),
            (["--comm-cpu", "-5", "--host-cores", "2"], "--comm-cpu"),
        )
    ),
    (["simulate", TRACE, *SIM, "--steps", "3", "--warmup", "10"], "--steps"),
    (["simulate", TRACE, *SIM, "--batches", "0"], "--batches"),
    (["simulate", TRACE, *SIM, "--batches", "1000", "--mode", "sync"], "--batches"),
    (["simulate", TRACE, *SIM, "--jitter-cv", "-1"], "--jitter-cv"),
    (["simulate", TRACE, *SIM, "--speed", "1,2,3"], "--speed"),
    (["simulate", TRACE, *SIM, "--worker-types", "0,1"], "--worker-types"),
    (["simulate", TRACE, *SIM, "--parse-alpha", "-1ns/B"], "--parse-alpha"),
    (["simulate", TRACE, *SIM, "--parse-alpha", "2s/B"], "--parse-alpha"),
    (["simulate", TRACE, *SIM, "--parse-beta", "-1us"], "--parse-beta"),
    (["simulate", TRACE, *SIM, "--comm-thread", "-1ms"], "--comm-thread"),
    (["simulate", TRACE, *SIM, "--arch", "allreduce", "--comm-thread", "1ms"], "--comm-thread"),
    (
        ["simulate", TRACE, *SIM, "--comm-thread", "1ms", "--comm-cpu", "2", "--host-cores", "1"],
        "--comm-thread",
    ),
    (["simulate", TRACE, *SIM, "--worker-bandwidth", "0bps"], "--worker-bandwidth"),
    (["simulate", TRACE, *SIM, "--placement", "nowhere"], "--placement"),
    (["simulate", TRACE, *SIM, "--window", "64KiB", "--http2-window", "1MiB"], "--window"),
    (["analyze", TRACE, "--workers", "0"], "--workers"),
    (["analyze", TRACE, "--workers", "2", "--devices-per-host", "0"], "--devices-per-host"),
    (["analyze", TRACE, "--workers", "2", "--devices-per-host", "2"], "--intra-bandwidth"),
    (["analyze", TRACE, "--workers", "2", "--bandwidth", "0bps"], "--bandwidth"),
    (["advise", TRACE, "--machines", "0"], "--machines"),
    (["advise", TRACE, "--machines", "4", "--confirm", "-1"], "--confirm"),
    (["advise", TRACE, "--machines", "4", "--steps", "1"], "--steps"),
    (["advise", TRACE, "--machines", "4", "--seed", "-1"], "--seed"),
    (["advise", TRACE, "--machines", "4", "--replications", "0"], "--replications"),
    (["advise", TRACE, "--machines", "4", "--price", "-1"], "--price"),
    (["advise", TRACE, "--machines", "4", "--devices-per-host", "0"], "--devices-per-host"),
    (["advise", TRACE, "--machines", "4", "--devices-per-host", "2,2"], "--devices-per-host"),
    (["advise", TRACE, "--machines", "4", "--devices-per-host", "2"], "--intra-bandwidth"),
    (["advise", TRACE, "--machines", "4", "--flow-weight-cv", "-1"], "--flow-weight-cv"),
    (["advise", TRACE, "--machines", "4", "--comm-cpu", "5"], "--comm-cpu"),
    (["validate", "--steps", "5", "--warmup", "10"], "--warmup"),
]


def assert_in_user_words(err: str, culprit: str) -> None:
    """One error line naming ``culprit`` (an option, or a file) with no library name in it."""
    assert "Traceback" not in err
    [line] = [x for x in err.splitlines() if "error:" in x]
    assert culprit in line, line
    message = line.split("error:", 1)[1]
    assert re.search(r"(^|\s)(--[a-z0-9-]+|TRACE|\S+\.json)\b", message), line
    for name in INTERNAL:
        assert not re.search(rf"(?<![\w.-]){name}(?![\w-])", message), (name, line)
    assert not REPR.search(message), line


@pytest.mark.parametrize(("argv", "option"), CASES, ids=[" ".join(c[0][2:]) for c in CASES])
def test_each_check_names_the_option_not_the_parameter(
    argv: list[str],
    option: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's own refusal
        code = int(exit.code or 0)
    assert code != 0
    err = capsys.readouterr().err
    assert_in_user_words(err, option)
    assert list(tmp_path.iterdir()) == []  # refused before any output


@pytest.mark.parametrize("name", ["batch_size", "sharing_policies", "scaling"])
def test_a_scenario_names_the_option_too(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario(name)
    argv = ["--steps", "3", "--warmup", "10", "--quiet", "--out", str(tmp_path / "out")]
    assert scenario.main(argv) != 0
    err = capsys.readouterr().err
    assert err.startswith(f"{name}: error: ")
    assert_in_user_words(err, "--steps")


def test_every_parameter_a_user_reaches_has_an_option() -> None:
    """A new SimulationConfig or Topology field needs its option here (or errors leak it)."""
    fields = {f.name for f in dataclasses.fields(SimulationConfig)}
    fields |= {f.name for f in dataclasses.fields(Topology)} - {"description"}
    assert fields <= set(OPTION_OF), sorted(fields - set(OPTION_OF))
    assert all(o.startswith("--") or o == "TRACE" for o in OPTION_OF.values())


@pytest.mark.parametrize(
    ("library", "user"),
    [
        ("warmup_steps: must be >= 0, got -1", "--warmup: must be >= 0, got -1"),
        (
            "steps: must be greater than warmup_steps (50), got 10",
            "--steps: must be greater than --warmup (50), got 10",
        ),
        (
            "mode: ring AllReduce is synchronous; use mode='sync' with it",
            "--mode: ring AllReduce is synchronous; use --mode sync with it",
        ),
        (
            "flow_weight_cv: not arch='allreduce' with sharing 'allreduce'",
            "--flow-weight-cv: not --arch allreduce with sharing 'allreduce'",
        ),
        ("servers: use servers=1", "--servers: use --servers 1"),
        # A file's own fields are the user's words: left alone.
        ("net.json: bandwidth_bps: must be > 0", "net.json: bandwidth_bps: must be > 0"),
        # Prose and unknown names stay; the option as typed stays.
        ("--batches: 10 batches of 5 measured steps", "--batches: 10 batches of 5 measured steps"),
        (
            "--placement: 'my_layers.json' is not a file",
            "--placement: 'my_layers.json' is not a file",
        ),
        ("no colon here", "no colon here"),
    ],
)
def test_user_message(library: str, user: str) -> None:
    assert user_message(library) == user
