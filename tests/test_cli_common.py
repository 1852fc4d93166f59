"""What every sgdsim command shares, checked over the whole command tree."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from simcore.cli.main import OneLineErrorParser, build_parser, main, program_name


def _leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Any]:
    leaves = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                leaves += _leaf_commands(sub, (*path, name))
    return leaves or [(path, parser)]


def test_every_command_takes_quiet() -> None:
    """A script that passes --quiet to every call meets no usage error, also on the commands
    that have no progress to silence (timeline, analyze, trace, network show)."""
    leaves = _leaf_commands(build_parser())
    assert len(leaves) >= 11  # simulate, timeline, trace *, network *, ...
    lacking = [" ".join(path) for path, p in leaves if "--quiet" not in p._option_string_actions]
    assert lacking == []
    assert main(["trace", "list", "--quiet"]) == 0


@pytest.mark.parametrize(
    ("prog", "name"),
    [
        ("sgdsim", "sgdsim"),
        ("sgdsim simulate", "sgdsim"),
        ("python scenarios/scaling.py", "scaling"),
        ("python -m profilers.distributed", "profilers.distributed"),
    ],
)
def test_usage_errors_name_the_program_as_its_other_errors_do(prog: str, name: str) -> None:
    assert program_name(prog) == name


def test_a_scenarios_usage_error_is_one_line_in_its_own_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = OneLineErrorParser(prog="python scenarios/scaling.py")
    parser.add_argument("--bandwidth")
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--bandwidth"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "scaling: error: argument --bandwidth: expected one argument "
        "(see python scenarios/scaling.py --help)\n"
    )
