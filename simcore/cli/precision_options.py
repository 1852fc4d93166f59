"""The options of the stopping rule (``--precision``, ``--max-steps``) and what they print.

Every command and scenario that simulates runs until the throughput's 95% CI is within
``--precision`` (:mod:`simcore.sim.precision`), unless ``--steps`` fixes the length. The rule
itself lives in the library; this module only parses the options, names them in errors and
formats the outcome.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any

from simcore.errors import ConfigError
from simcore.parallel import usable_cores
from simcore.sim import SimulationResult
from simcore.sim.config import COLLECTIVE_ARCHS
from simcore.sim.precision import (
    DEFAULT_MAX_STEPS,
    DEFAULT_PRECISION,
    PrecisionRule,
    default_warmup_steps,
    precision_text,
    stopping_note,
)

# argparse formats help texts with %: a literal percent sign is written %%
PRECISION_HELP = (
    "stop when the 95%% CI of examples/s is within this share of it, e.g. 0.5%% (default "
    f"{100 * DEFAULT_PRECISION:g}%%); --steps N fixes the length instead"
)


def add_precision_options(parser: Any) -> None:
    """``--precision`` (e.g. ``1%``) and ``--max-steps`` (the cap, steps per worker)."""
    parser.add_argument("--precision", help=PRECISION_HELP)
    parser.add_argument(
        "--max-steps",
        type=int,
        help=f"the stopping rule's cap, steps per worker (default {DEFAULT_MAX_STEPS})",
    )
    add_jobs_option(parser)


def add_jobs_option(parser: Any) -> None:
    """``--jobs N``: processes that run independent simulations at once (simcore.parallel)."""
    parser.add_argument(
        "--jobs",
        type=_jobs_count,
        metavar="N",
        help=f"processes to simulate on at once: a sweep's points, a run's seeds (default: the "
        f"{usable_cores()} cores this machine lets sgdsim use; 1: one process); the results do "
        "not depend on it",
    )


def _jobs_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (1, 2, ...)")
    return value


def parse_precision(text: str, name: str = "--precision") -> float:
    """``1%``, ``0.5%`` or a fraction ``0.01`` as a fraction in (0, 1); ConfigError naming it."""
    body = text.strip()
    percent = body.endswith("%")
    try:
        value = float(body.rstrip("%").strip())
    except ValueError:
        value = math.nan
    if percent:
        value /= 100
    if not math.isfinite(value) or not 0 < value < 1 or (not percent and value >= 1):
        raise ConfigError(
            f"{name}: {text!r} is not a precision; give a percentage between 0 and 100 "
            "(e.g. 1% or 0.5%) or a fraction below 1 (0.01)"
        )
    return value


def precision_rule(
    args: argparse.Namespace, *, min_steps: int = 1, pilot_steps: int | None = None
) -> PrecisionRule | None:
    """The stopping rule the options ask for; None when ``--steps`` fixes the length.

    An explicit ``--warmup`` is kept for every run of the rule. ``--precision`` or
    ``--max-steps`` together with ``--steps`` is a contradiction (ConfigError naming both).
    """
    precision_given = getattr(args, "precision", None)
    max_steps = getattr(args, "max_steps", None)
    if args.steps is not None:
        for option, given in (("--precision", precision_given), ("--max-steps", max_steps)):
            if given is not None:
                raise ConfigError(
                    f"{option} {given} --steps {args.steps}: --steps fixes the length and turns "
                    f"the stopping rule off; give one of them"
                )
        return None
    target = DEFAULT_PRECISION if precision_given is None else parse_precision(precision_given)
    cap = DEFAULT_MAX_STEPS if max_steps is None else max_steps
    if isinstance(cap, int) and cap < 2:
        raise ConfigError(f"--max-steps: must be an integer >= 2, got {cap}")
    warmup = getattr(args, "warmup", None)
    if warmup is not None and warmup >= cap:
        raise ConfigError(
            f"--warmup {warmup} --max-steps {cap}: the warm-up leaves no step to measure"
        )
    extra = {} if pilot_steps is None else {"pilot_steps": pilot_steps}
    return PrecisionRule(
        target=target, max_steps=cap, warmup_steps=warmup, min_steps=min_steps, **extra
    )


def fixed_warmup(args: argparse.Namespace, steps: int, workers: int = 1, mode: str = "sync") -> int:
    """``--warmup`` if given, else the default share of ``steps`` (checked: < steps)."""
    warmup: int | None = getattr(args, "warmup", None)
    if warmup is None:
        return default_warmup_steps(steps, workers, mode)
    if warmup >= steps:
        raise ConfigError(
            f"--warmup {warmup} --steps {steps}: the warm-up must be shorter than the run"
        )
    return warmup


def first_length(
    args: argparse.Namespace, rule: PrecisionRule | None, workers: int = 1, mode: str = "sync"
) -> tuple[int, int]:
    """(steps, warm-up) of the first run of ``workers`` in ``mode``: ``--steps``, or the rule's
    pilot."""
    if rule is None:
        return args.steps, fixed_warmup(args, args.steps, workers, mode)
    steps = rule.first_steps
    return steps, rule.warmup_for(steps, workers, mode)


def length_text(result: SimulationResult) -> str:
    """``340 steps (34 warm-up)``, with how the rule chose them: ``CI +-0.8% (target 1%),
    2 runs``."""
    c = result.config
    text = f"{c.steps} steps ({c.warmup_steps} warm-up)"
    s = result.stopping
    if s is not None:
        got = precision_text(s.precision)
        runs = f", {s.rounds} runs" if s.rounds > 1 else ""
        text += f", CI {got} (target {100 * s.target:.2g}%{runs})"
    return text


def rule_text(rule: PrecisionRule | None, steps: int | None = None) -> str:
    """What sizes the runs, for a table's header: ``until the 95% CI is within 1% (cap 1000
    steps)`` or ``300 steps``."""
    if rule is None:
        return f"{steps} steps"
    return f"steps until the 95% CI is within {100 * rule.target:g}% (cap {rule.max_steps} steps)"


def notes(
    results: Sequence[SimulationResult], label: Callable[[SimulationResult], str]
) -> list[str]:
    """A ``note:`` line per result whose rule stopped short of its target, ``label`` naming it."""
    out = []
    for r in results:
        text = stopping_note(r)
        if text:
            out.append(f"note: {label(r)}: {text}")
    return out


def implied_mode(arch: str, mode: str | None) -> str:
    """The mode ``--arch`` implies when ``--mode`` is not given (ring AllReduce: sync; else
    async); a ``--mode`` that contradicts ``--arch`` is an error naming both as typed."""
    if arch in COLLECTIVE_ARCHS:
        if mode not in (None, "sync"):
            what = "ring AllReduce" if arch == "allreduce" else "DDP"
            raise ConfigError(
                f"--arch {arch} --mode {mode}: {what} is synchronous; drop --mode "
                f"(--arch {arch} implies --mode sync)"
            )
        return "sync"
    return "async" if mode is None else mode
