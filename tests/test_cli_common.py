"""What every sgdsim command shares, checked over the whole command tree."""

from __future__ import annotations

import argparse
from typing import Any

from simcore.cli.main import build_parser, main


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
