# PYTHON_ARGCOMPLETE_OK
"""Entry point of the ``sgdsim`` console command.

Each subcommand lives in its own module exposing ``register(subparsers)``, which adds a parser and
sets ``handler``: a function taking the parsed arguments and returning an exit code. Errors that
sgdsim raises on purpose, and file-system errors, become one line on stderr and exit code 1 (bad
input); a usage mistake the argument parser finds exits with 2. Numpy
floating-point problems and RuntimeWarnings are errors too (outside the torch commands), so a
number that went wrong is refused rather than printed; they are a last resort behind the input
checks. A closed stdout pipe ends quietly with 141, Ctrl-C with 130. No traceback reaches the user.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

import argcomplete
import numpy as np

from simcore.cli.option_names import user_message
from simcore.errors import SgdsimError
from simcore.parallel import jobs

# Subcommand modules in help order. Heavy imports (torch) happen inside handlers, not here.
COMMAND_MODULES = (
    "simcore.cli.profile_cmd",
    "simcore.cli.trace_cmd",
    "simcore.cli.simulate_cmd",
    "simcore.cli.run_cmd",
    "simcore.cli.timeline_cmd",
    "simcore.cli.analyze_cmd",
    "simcore.cli.advise_cmd",
    "simcore.cli.network_cmd",
    "simcore.cli.validate_cmd",
)

# Commands whose work runs torch: numeric warnings are errors in every other command.
TORCH_COMMANDS = ("profile", "validate", "network")

EXIT_BAD_INPUT = 1  # any SgdsimError, or a file the system refused
EXIT_USAGE = 2  # what argparse refuses
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what `yes | head -1` leaves in ${PIPESTATUS[0]}


class OneLineErrorParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage mistakes are one line, like every other sgdsim error.

    Subcommand parsers are made with the same class, so this covers every command.
    """

    def error(self, message: str) -> NoReturn:
        print(
            f"{program_name(self.prog)}: error: {one_line(message)} (see {self.prog} --help)",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_USAGE)


def program_name(prog: str) -> str:
    """How errors name the program: ``sgdsim`` for ``sgdsim simulate``, ``scaling`` for a
    scenario's ``python scenarios/scaling.py`` (as its other errors do), the module for
    ``python -m MODULE``."""
    words = prog.split()
    if len(words) >= 2 and words[0] == "python" and words[1].endswith(".py"):
        return os.path.splitext(os.path.basename(words[1]))[0]
    if len(words) >= 3 and words[:2] == ["python", "-m"]:
        return words[2]
    return words[0] if words else "sgdsim"


def build_parser() -> argparse.ArgumentParser:
    # Imported here: simcore.report's package imports this module (OneLineErrorParser).
    from simcore.cli.version import VersionAction

    parser = OneLineErrorParser(
        prog="sgdsim",
        description="Predict distributed SGD throughput on W workers from a one-worker profile.",
    )
    parser.add_argument(
        "--version", action=VersionAction, help="the version of sgdsim and of the formats it reads"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # a command not built yet; the others still work
                continue
            raise
        module.register(subparsers)
    _quiet_everywhere(subparsers)
    return parser


QUIET_HELP = "no progress on stderr (this command shows none; accepted like everywhere)"


def _quiet_everywhere(subparsers: Any) -> None:
    """Give every command (and sub-command) ``--quiet``: a script that passes it to every call
    should not meet a usage error on the commands that have no progress to silence."""
    for command in subparsers.choices.values():
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if nested:
            for sub in nested:
                _quiet_everywhere(sub)
            continue
        if "--quiet" not in command._option_string_actions:
            command.add_argument("--quiet", action="store_true", help=QUIET_HELP)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    _tolerant_output()
    try:
        parser = build_parser()
        argcomplete.autocomplete(parser)  # answers a shell's completion request, then exits
        given = list(sys.argv[1:] if argv is None else argv)
        if not given:  # a bare `sgdsim`: what it can do, rather than an error
            parser.print_help()
            return 0
        args, extra = parser.parse_known_args(given)
        if extra and not getattr(args, "overrides_allowed", False):
            parser.parse_args(given)  # the usual one-line usage error
        args.overrides = extra  # `sgdsim run FILE --steps 100`: simulate's options, checked there
        args.argv = given  # for --json's "argv"
        return _run(args)
    except BrokenPipeError:
        # The reader went away (`sgdsim ... | head`): end quietly, as a command killed by SIGPIPE
        # would. stdout points at /dev/null so that Python's final flush cannot fail again.
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print("sgdsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    """The handler, with errors a user can cause as one line on stderr."""
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"), warnings.catch_warnings():
            if args.command not in TORCH_COMMANDS:  # torch's own warnings are not ours to judge
                warnings.simplefilter("error", RuntimeWarning)  # numpy's "mean of empty slice"
            with jobs(getattr(args, "jobs", None)):  # --jobs; default: every usable core
                code: int = args.handler(args)
        sys.stdout.flush()  # here, so that a closed pipe is noticed inside main
    except SgdsimError as err:  # in the user's words: options, not library parameter names
        return _error(user_message(str(err)))
    except BrokenPipeError:
        raise
    except OSError as err:  # the file system refused something the checks could not foresee
        where = f"{err.filename}: " if err.filename else ""
        return _error(f"{where}{err.strerror or err}")
    except RecursionError:  # a structure deeper than the input checks foresaw
        return _error("an input is nested too deeply for sgdsim to process")
    except MemoryError:
        return _error("out of memory; ask for a smaller run (fewer --workers, --steps, ...)")
    except (ArithmeticError, RuntimeWarning) as err:  # overflow, division by zero, nan
        return _error(
            f"the computation failed ({err}); an input is out of the range sgdsim handles "
            "(see `Command line` in the README)"
        )
    return code


def _error(message: str) -> int:
    print(f"sgdsim: error: {one_line(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def one_line(message: str) -> str:
    """``message`` with line breaks (say, in a file name) escaped: an error is one line."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


def _tolerant_output() -> None:
    """Print what cannot be encoded (a lone surrogate in a trace's names, a file name that is not
    UTF-8) as a backslash escape instead of failing with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor (a test's capture)
        pass


if __name__ == "__main__":
    sys.exit(main())
