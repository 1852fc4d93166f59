"""Checks shared by the commands: bounded numeric options, and results that must be finite.

The rule of the CLI: a run whose inputs are out of range is refused before it starts, naming the
option; and no throughput that is nan, inf or not positive is ever printed with exit code 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from simcore.errors import ConfigError


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
