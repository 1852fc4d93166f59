"""The spread over seeds and the workers' phases, for the commands that simulate Async-SGD.

Computation lives in ``simcore.sim.results`` and ``simcore.sim.phases``; this module only adds
the options (``--replications``, ``--phases``) and formats what they ask for.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from simcore.analytic.advisor import Ranked
from simcore.sim import SimulationResult
from simcore.sim.config import ASYNC_REPLICATIONS, SYNC_REPLICATIONS, default_replications
from simcore.sim.phases import MIXED
from simcore.units import format_number

# Where the commands without --phases (timeline, advise) send a user for each seed's pattern.
SIMULATE_PHASES = "sgdsim simulate --phases"
WORKERS_LISTED = 8  # --phases lists the step times of this many workers; --json has all


def add_replications_options(parser: Any, phases: bool = True) -> None:
    """``--replications N`` (default: by mode) and, with ``phases``, ``--phases``."""
    parser.add_argument(
        "--replications",
        type=int,
        default=None,
        help=f"independent runs (seeds) for the CI and the spread (default {ASYNC_REPLICATIONS} "
        f"for async with W >= 2, else {SYNC_REPLICATIONS}: batch means)",
    )
    if phases:
        parser.add_argument(
            "--phases",
            action="store_true",
            help="per seed, whether the workers ran in lock-step or pipelined; step times",
        )


def replications_option(args: argparse.Namespace) -> int | None:
    """``--replications`` as given; None lets the config take the mode's default."""
    given: int | None = getattr(args, "replications", None)
    return given


def format_spread(result: SimulationResult) -> list[str]:
    """The spread over seeds of a run with several replications (none for one)."""
    runs = len(result.replication_steps_per_s)
    if runs < 2:
        return []
    low, high = result.examples_spread
    spread = f"{format_number(low)} .. {format_number(high)}"
    return [f"spread     {spread} examples/s over {runs} seeds (min .. max)"]


def shown_seed_note(result: SimulationResult) -> str:
    """For a timeline of several replications: the spread, and which seed the figure shows."""
    runs = len(result.replication_examples_per_s)
    if runs < 2:
        return ""
    low, high = result.examples_spread
    shown = result.replication_examples_per_s[0]
    return (
        f" (mean of {runs} seeds, spread {format_number(low)} .. {format_number(high)}; "
        f"the timeline shows seed 0: {format_number(shown)}, {result.phases[0].label})"
    )


def advise_seeds_note(args: argparse.Namespace) -> str:
    """How many seeds advise's Async-SGD simulations ran (its header)."""
    runs = _advise_seeds(args)
    return f"; Async-SGD: mean of {runs} seeds, 'seeds' gives their range" if runs > 1 else ""


def advise_lockstep_note(ranked: Ranked, args: argparse.Namespace, *, uneven: bool) -> str:
    """An advise row's lock-step note ("" unless every seed of its simulation ran so)."""
    if not ranked.lockstep:
        return ""
    return lockstep_text(_advise_seeds(args), uneven=uneven, phases_option=SIMULATE_PHASES)


def _advise_seeds(args: argparse.Namespace) -> int:
    """How many seeds advise's Async-SGD simulations run (``--replications`` or the default)."""
    return default_replications("async") if args.replications is None else args.replications


def advise_spread_note(ranked: Ranked) -> str:
    """An advise row's ``seeds min..max`` (examples/s), when it was simulated with several."""
    if ranked.simulated_spread is None:
        return ""
    low, high = ranked.simulated_spread
    return f" seeds {format_number(low)}..{format_number(high)}"


def sweep_spread_cell(result: SimulationResult) -> str:
    """A sweep row's ``min .. max`` examples/s over seeds ('' for one replication)."""
    if len(result.replication_steps_per_s) < 2:
        return ""
    low, high = result.examples_spread
    return f"  {format_number(low)} .. {format_number(high)}"


def lockstep_note(result: SimulationResult, *, phases_option: str = "--phases") -> str:
    """Why an Async-SGD point whose every seed ran in lock-step may be far below a real cluster
    ("" otherwise: SimulationResult.ran_in_lockstep); ``phases_option``: how the command's
    user sees each seed's pattern."""
    if not result.ran_in_lockstep:
        return ""
    c = result.config
    uneven = bool(c.flow_weight_cv or c.flow_weight_cv_push)
    return lockstep_text(len(result.phases), uneven=uneven, phases_option=phases_option)


def lockstep_text(seeds: int, *, uneven: bool, phases_option: str = "--phases") -> str:
    """What lock-step over ``seeds`` seeds means for a prediction; without ``uneven`` (flow
    weights that vary) it names the options that give the link's measured unevenness."""
    runs = "every seed" if seeds > 1 else "the run"
    text = (
        f"{runs} ran in lock-step (the workers pulled, computed and pushed together, as they "
        "started): identical workers sharing a link equally can stay so for this run's length "
        "or for ever, where real Async-SGD workers drift apart and can pipeline, one pulling "
        "while another pushes, so a real "
        f"cluster may run well above this ({phases_option}; README: 'Async-SGD: what makes "
        "workers drift')"
    )
    if not uneven:
        text += "; the link's measured unevenness (--network, --flow-weight-cv) lets them drift"
    return text


def format_phases(result: SimulationResult) -> list[str]:
    """``--phases``: per seed, how the workers lined up (simcore.sim.phases), and step times."""
    c = result.config
    lines = [
        f"phases     W = {c.workers}, {c.arch}/{c.mode}: per seed, how far apart consecutive "
        "workers start their steps (fraction of a step: 0 together, 0.5 alternating; the "
        "circular mean, and the median distance to starting together)"
    ]
    for rep in result.phases:
        pairs = rep.pairs
        detail = ""
        if pairs:
            mean = sum(min(p.mean_offset, 1 - p.mean_offset) for p in pairs) / len(pairs)
            together = sum(p.lockstep_share for p in pairs) / len(pairs)
            locked = min(p.concentration for p in pairs)
            detail = (
                f": mean offset {mean:.2f}, median distance {rep.median_distance:.2f}, "
                f"{100 * together:.0f}% of starts together, concentration >= {locked:.2f}"
            )
            if rep.label == MIXED:
                counts = Counter(p.label for p in pairs)
                detail += " (pairs: " + ", ".join(f"{n} {k}" for k, n in counts.items()) + ")"
        lines.append(
            f"  seed {rep.replication}  {rep.steps_per_s:10.4g} steps/s  {rep.label}{detail}"
        )
    if c.mode == "sync":
        lines.append("  (Sync-SGD starts every step at the barrier: lock-step by construction)")
    for w in result.workers[:WORKERS_LISTED]:
        lines.append(
            f"  worker {w.worker:<3} step ms: p5 {w.p05_step_s * 1e3:.3f}, median "
            f"{w.median_step_s * 1e3:.3f}, p95 {w.p95_step_s * 1e3:.3f}, mean "
            f"{w.mean_step_s * 1e3:.3f}"
        )
    if len(result.workers) > WORKERS_LISTED:
        lines.append(f"  ... and {len(result.workers) - WORKERS_LISTED} more workers (--json)")
    return lines
