"""Checks shared by the commands: bounded numeric options, and results that must be finite.

The rule of the CLI: a run whose inputs are out of range is refused before it starts, naming the
option; and no throughput that is nan, inf or not positive is ever printed with exit code 0.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Mapping

from simcore.errors import ConfigError


def option_name(dest: str) -> str:
    """The option an argparse destination is parsed from: ``max_steps`` -> ``--max-steps``."""
    return "--" + dest.replace("_", "-")


def refuse_given(args: argparse.Namespace, dests: Iterable[str], why: str) -> None:
    """ConfigError ``--option: why`` for the first of the options ``dests`` that was given (not
    None; a flag, set): an option that would do nothing where it was given is refused, not
    ignored. The options checked must default to None (or False) so that given shows."""
    for dest in dests:
        value = getattr(args, dest, None)
        if value is not None and value is not False:
            raise ConfigError(f"{option_name(dest)}: {why}")


def fill_defaults(args: argparse.Namespace, defaults: Mapping[str, object]) -> None:
    """Give each option of ``defaults`` not given (None) its default: the options that
    :func:`refuse_given` checks take theirs once the check is done."""
    for dest, default in defaults.items():
        if getattr(args, dest, None) is None:
            setattr(args, dest, default)


def check_range(
    name: str, value: float | None, low: float, high: float, *, low_open: bool = False
) -> None:
    """ConfigError naming option ``name`` unless ``value`` (if given) is a finite number in
    [low, high] (``(low, high]`` with ``low_open``): nan, inf and 1e999 are refused too."""
    if value is None:
        return
    below = value <= low if low_open else value < low
    if not math.isfinite(value) or below or value > high:
        rule = f"{'>' if low_open else '>='} {low:g} and <= {high:g}"
        raise ConfigError(f"{name}: must be a finite number {rule}, got {value:g}")


MAX_SIMULATED_OPS = 1_000_000_000  # about an hour at the engine's usual few 100k ops/s


def check_work(simulated_ops: int, ops_per_step: int, options: str) -> None:
    """ConfigError if one command would simulate more than MAX_SIMULATED_OPS ops: a run of days
    is a typing mistake (``--steps 10000000000``), not a wait worth starting. ``options`` names
    the options whose product made the work, e.g. ``--workers x --steps``."""
    if simulated_ops > MAX_SIMULATED_OPS:
        raise ConfigError(
            f"{options}: {simulated_ops:.3g} simulated ops ({ops_per_step} per step) are more "
            f"than the {MAX_SIMULATED_OPS:.0e} one command runs (about an hour); lower them"
        )


def check_rates(rates: Iterable[tuple[str, float]]) -> None:
    """ConfigError unless every ``(what, examples per second)`` is finite and > 0.

    The input bounds make this unreachable in practice; it keeps a result that went wrong all
    the same from being printed as if it were one.
    """
    for what, value in rates:
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(
                f"{what}: the prediction came out as {value!r} examples/s, not a finite positive "
                "rate; the inputs are outside the range sgdsim can compute"
            )
