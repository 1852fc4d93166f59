"""Entry point of the ``sgdsim`` console command.

Each subcommand lives in its own module exposing ``register(subparsers)``, which adds a parser and
sets ``handler``: a function taking the parsed arguments and returning an exit code. Errors that
sgdsim raises on purpose become one line on stderr and exit code 2; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from simcore import __version__
from simcore.errors import SgdsimError

# Subcommand modules in help order. Heavy imports (torch) happen inside handlers, not here.
COMMAND_MODULES = (
    "simcore.cli.profile_cmd",
    "simcore.cli.trace_cmd",
    "simcore.cli.simulate_cmd",
    "simcore.cli.timeline_cmd",
    "simcore.cli.analyze_cmd",
    "simcore.cli.advise_cmd",
    "simcore.cli.network_cmd",
    "simcore.cli.validate_cmd",
)

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage mistakes are one line, like every other sgdsim error.

    Subcommand parsers are made with the same class, so this covers every command.
    """

    def error(self, message: str) -> NoReturn:
        print(f"sgdsim: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="sgdsim",
        description="Predict distributed SGD throughput on W workers from a one-worker profile.",
    )
    parser.add_argument("--version", action="version", version=f"sgdsim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # a command not built yet; the others still work
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except SgdsimError as err:
        print(f"sgdsim: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("sgdsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
