"""Run a simulation until its throughput is known to a target precision (the stopping rule).

Every command and scenario that simulates shares this rule, so that a prediction takes the steps
it needs rather than a fixed, generous number. Precision is the relative half-width of the 95%
confidence interval of examples/s: ``(ci_high - value) / value``.

The procedure, deterministic for a seed (each round re-runs the configuration with the same
seed, only longer):

1. **Pilot**: ``rule.pilot_steps`` steps per worker, warm-up :func:`default_warmup_steps`
   (or ``rule.warmup_steps``).
2. If the precision ``h`` is within the target, stop.
3. Otherwise plan the next run from ``half-width ~ 1/sqrt(n)`` in the measured steps ``n`` (one
   run's batch means, or each replication's steps, whose means then vary less):
   ``n' = n * (h / target)^2 * MARGIN``, at least ``GROWTH`` and at most ``MAX_GROWTH`` times
   the last run, at most the cap ``rule.max_steps``. Re-run.
4. Stop after ``rule.max_rounds`` runs; at the cap; or when more steps will not help: a longer
   run did not narrow the interval by at least half of what ``1/sqrt(n)`` predicts (on a log
   scale), or, already after one run, the replications differ far more than each one's own
   batch means say they should (:func:`seed_disagreement`) and their workers lined up in
   different patterns. That is the case of Async-SGD
   seeds that settle in different phase patterns (:mod:`simcore.sim.phases`): the interval
   then measures the spread between seeds, which longer runs do not reduce; more
   replications would.

The returned result is the last run's, with :class:`~simcore.sim.results.Stopping` in its
``stopping`` field saying the steps used, the precision reached, and why the rule stopped.
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simcore.errors import ConfigError
from simcore.parallel import run_tasks
from simcore.sim.api import PARALLEL_MIN_OPS, simulate, validate
from simcore.sim.config import SimulationConfig
from simcore.sim.engine import ProgressCallback
from simcore.sim.results import SimulationResult, Stopping
from simcore.sim.settling import Settling
from simcore.trace.model import Trace

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_PILOT_STEPS",
    "DEFAULT_PRECISION",
    "PrecisionRule",
    "default_warmup_steps",
    "precision_text",
    "relative_precision",
    "seed_disagreement",
    "simulate_many",
    "simulate_sized",
    "simulate_to_precision",
    "stopping_note",
    "stopping_text",
    "worker_steps",
]

DEFAULT_PRECISION = 0.01  # relative half-width of the 95% CI of examples/s
DEFAULT_PILOT_STEPS = 100  # steps per worker of the first run
DEFAULT_MAX_STEPS = 1000  # the cap, steps per worker: the fixed length used before the rule
DEFAULT_MAX_ROUNDS = 3  # runs at most: the pilot and two longer ones
MARGIN = 1.3  # aim below the target: the half-width estimated from the pilot is itself noisy
GROWTH = 1.5  # a longer run is at least this many times the last one, or it is not worth it
# ... and at most this many times: a second run that did not narrow the CI (seeds that disagree)
# then stops the rule before it spends the cap
MAX_GROWTH = 4.0
# A longer run "helped" when its half-width shrank by at least this share of the log-shrinkage
# 1/sqrt(n) predicts (0.5: at least sqrt of the predicted ratio).
EXPECTED_SHRINK_SHARE = 0.5

# A warm-up that leaves the transient's trend in the mean step time by more than this share of
# the target precision is too short (simcore.sim.settling): the rule runs again past it.
UNSETTLED_SHARE = 0.5
SETTLE_MARGIN = 1.2  # the warm-up after a transient seen to end: this far past its end

# Replications whose means differ this many times more (in variance) than each one's own batch
# means say they should (F-like ratio; ~1 when seeds differ only by noise, 2.6 its 95th
# percentile for 5 seeds of 10 batches) settled in different patterns: lock-step against
# pipelined Async-SGD workers gives 15 (cnn, W = 2), while slowly drifting phases give 2-5.
SEEDS_DISAGREE = 8.0
# A stopping note suggests --replications up to this many seeds. Seeds that settle in different
# patterns (lock-step or spread out) can need thousands for a 1% CI of their mean (batch_size.py,
# cnn-b8 at W = 16: about 3700): the note then points at the patterns instead.
MAX_SUGGESTED_REPLICATIONS = 100

WARMUP_SHARE = 0.1  # warm-up: a tenth of the run ...
WARMUP_FLOOR = 10  # ... but at least this many steps, and at most half of the run;
# Async-SGD with W >= 2: at least this many steps per worker. The workers start together and
# take about as long to spread out over a shared link: resnet50-b32, W = 16 at 920 Mbit/s
# (saturated), 5 seeds of 100 steps: warm-up 10 -> 32.1 examples/s +-4.5%, 30 -> 35.5 +-3.3%,
# 40 -> 36.0 +-0.19%, 60 -> 36.03 +-0.09% (the steady state).
ASYNC_WARMUP_PER_WORKER = 2.5


def default_warmup_steps(steps: int, workers: int = 1, mode: str = "sync") -> int:
    """The warm-up of a run of ``steps`` steps per worker when none is given: a tenth of it, at
    least :data:`WARMUP_FLOOR` steps (Async-SGD with ``workers`` >= 2: at least
    :data:`ASYNC_WARMUP_PER_WORKER` steps per worker), but never more than half of the run (so
    that a short run still measures something): 1000 -> 100, 100 -> 10, 50 -> 10, 12 -> 6,
    3 -> 1, 1 -> 0; 100 steps of 16 async workers -> 40."""
    floor = WARMUP_FLOOR
    if mode == "async" and workers > 1:
        floor = max(floor, math.ceil(ASYNC_WARMUP_PER_WORKER * workers))
    return min(max(math.ceil(WARMUP_SHARE * steps), floor), steps // 2)


@dataclass(frozen=True)
class PrecisionRule:
    """When to stop: the target, the cap and the pilot.

    Attributes
    ----------
    target : relative half-width of the 95% CI of examples/s to reach (0.01 = 1%), > 0.
    max_steps : the cap, steps per worker of one run (warm-up included).
    pilot_steps : steps per worker of the first run; raised to ``min_steps`` if lower.
    max_rounds : runs at most (the pilot included), >= 1.
    warmup_steps : a fixed warm-up for every run; None: :func:`default_warmup_steps` of each.
    min_steps : no run shorter than this (e.g. a timeline window that must exist).
    """

    target: float = DEFAULT_PRECISION
    max_steps: int = DEFAULT_MAX_STEPS
    pilot_steps: int = DEFAULT_PILOT_STEPS
    max_rounds: int = DEFAULT_MAX_ROUNDS
    warmup_steps: int | None = None
    min_steps: int = 1

    def __post_init__(self) -> None:
        ok = isinstance(self.target, int | float) and not isinstance(self.target, bool)
        if not ok or not math.isfinite(self.target) or not 0 < self.target < 1:
            raise ConfigError(
                f"precision: must be a relative half-width between 0 and 1 (e.g. 0.01 for 1%), "
                f"got {self.target!r}"
            )
        for name, low in (("max_steps", 2), ("pilot_steps", 2), ("max_rounds", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name}: must be an integer >= {low}, got {value!r}")
        if self.warmup_steps is not None and self.warmup_steps >= self.max_steps:
            raise ConfigError(
                f"warmup_steps: {self.warmup_steps} leaves no measured step within max_steps "
                f"({self.max_steps})"
            )

    @property
    def first_steps(self) -> int:
        """Steps per worker of the pilot run."""
        low = max(self.pilot_steps, self.min_steps)
        if self.warmup_steps is not None:
            low = max(low, self.warmup_steps + 2)
        return min(low, self.max_steps)

    def warmup_for(self, steps: int, workers: int = 1, mode: str = "sync") -> int:
        """The warm-up of a run of ``steps`` steps per worker (of ``workers`` in ``mode``)."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return default_warmup_steps(steps, workers, mode)

    def steps_measuring(self, measured: int, workers: int = 1, mode: str = "sync") -> int:
        """The fewest steps per worker whose run measures at least ``measured`` steps."""
        if self.warmup_steps is not None:
            return measured + self.warmup_steps
        steps = max(1, math.floor(measured / (1 - WARMUP_SHARE)))
        while steps - self.warmup_for(steps, workers, mode) < measured:
            steps += 1
        return steps


def relative_precision(result: SimulationResult) -> float:
    """The relative half-width of ``result``'s 95% CI of examples/s; ``inf`` without a CI."""
    est = result.examples_per_s
    half = est.half_width
    if half is None or not math.isfinite(half) or est.value <= 0:
        return math.inf
    return half / est.value


def simulate_to_precision(
    trace: Trace | Sequence[Trace],
    config: SimulationConfig,
    rule: PrecisionRule,
    *,
    progress: ProgressCallback | None = None,
) -> SimulationResult:
    """Simulate ``config`` with as many steps as ``rule`` needs (module docstring); ``config``'s
    own ``steps`` and ``warmup_steps`` are replaced by the rule's.

    ``progress(done, total)`` counts worker-steps (every replication's, both runs of a hybrid)
    of all rounds so far; ``total`` grows when a longer round starts, ``done`` never goes back.

    Returns the last run's result with ``stopping`` set (:class:`Stopping`).

    Raises
    ------
    ConfigError
        If ``config`` with the pilot's or the cap's length does not fit the traces (checked
        before anything runs).
    """
    steps = rule.first_steps
    validate(trace, _sized(config, rule, rule.max_steps))  # every round's checks, up front
    history: list[tuple[int, float]] = []  # (measured steps, precision) per round
    spent = 0
    floor = 0  # a warm-up at least this long: where an earlier run's transient ended
    while True:
        sized = _sized(config, rule, steps, floor)
        result = simulate(trace, sized, progress=_shifted(progress, spent))
        spent += worker_steps(sized)
        precision = relative_precision(result)
        history.append((steps - sized.warmup_steps, precision))
        settling = result.settling
        if precision > rule.target and _seeds_settled_apart(result):
            # seeds in different patterns: longer runs would not help (more seeds would)
            return dataclasses.replace(
                result, stopping=_stopping(rule, result, history, "seeds", spent)
            )
        if (  # the warm-up left part of the start-up transient in: the CI does not show it
            rule.warmup_steps is None  # (a warm-up the user gave stays)
            and settling is not None
            and settling.biased(sized.warmup_steps, UNSETTLED_SHARE * rule.target)
        ):
            reason, steps, floor = _past_transient(rule, sized, settling, history, config)
            if reason:
                return dataclasses.replace(
                    result, stopping=_stopping(rule, result, history, reason, spent)
                )
            continue
        reason, next_steps = _next(rule, steps, history, config)
        if reason:
            return dataclasses.replace(
                result, stopping=_stopping(rule, result, history, reason, spent)
            )
        steps = next_steps


def _past_transient(
    rule: PrecisionRule,
    sized: SimulationConfig,
    settling: Settling,
    history: list[tuple[int, float]],
    config: SimulationConfig,
) -> tuple[str, int, int]:
    """The next run of a run whose warm-up ended inside its transient: ("", steps, warm-up
    floor), or ("unsettled", ...) when the rule may run no more or no longer.

    Too short to see the transient's end (the cut at its limit): a run MAX_GROWTH times as long
    that leaves out at least what this one showed. Seen to end: as many measured steps again,
    after a warm-up a fifth past that end."""
    steps = sized.steps
    if len(history) >= rule.max_rounds or steps >= rule.max_steps:
        return "unsettled", steps, 0
    if settling.at_limit:
        floor = settling.steps
        longer = max(math.floor(MAX_GROWTH * steps), 2 * floor + 2)
    else:
        floor = math.ceil(SETTLE_MARGIN * settling.steps)
        measured = steps - sized.warmup_steps
        _, planned = _next(rule, steps, history, config)  # what the CI alone would ask for
        longer = max(floor + measured, planned, math.ceil(GROWTH * steps))
    # Longer than this run: steps < max_steps here, and both lengths above exceed steps.
    longer = min(longer, rule.max_steps)
    return "", longer, min(floor, longer // 2)


def simulate_sized(
    trace: Trace | Sequence[Trace],
    config: SimulationConfig,
    rule: PrecisionRule | None,
    *,
    progress: ProgressCallback | None = None,
) -> SimulationResult:
    """``config`` as it is (its own ``steps``: a fixed length) when ``rule`` is None, else
    sized by ``rule`` (:func:`simulate_to_precision`)."""
    if rule is None:
        return simulate(trace, config, progress=progress)
    return simulate_to_precision(trace, config, rule, progress=progress)


def simulate_many(
    trace: Trace | Sequence[Trace],
    configs: Sequence[SimulationConfig],
    rule: PrecisionRule | None,
    *,
    progress: ProgressCallback | None = None,
    finished: Callable[[int, SimulationResult], None] | None = None,
) -> list[SimulationResult]:
    """:func:`simulate_sized` of every config (a sweep's points, a study's settings), in the
    order given, on the processes :func:`simcore.parallel.jobs` allows (the results do not
    depend on how many). Every config is validated before anything runs. ``finished(index,
    result)`` is told of each as it finishes (:func:`simcore.parallel.run_tasks`).

    ``progress(done, total)`` counts the worker-steps of all of them; a config not started yet
    counts as its first run, and totals grow as the rule adds runs.

    Raises
    ------
    ConfigError
        If a config does not fit the traces (before anything runs).
    simcore.parallel.Interrupted
        On Ctrl-C, carrying the results that finished (``finished``: index -> result).
    """
    traces = list(trace) if not isinstance(trace, Trace) else [trace]
    sized = [c if rule is None else _sized(c, rule, rule.first_steps) for c in configs]
    for config in configs:
        validate(traces, config if rule is None else _sized(config, rule, rule.max_steps))
    planned = [worker_steps(c) for c in sized]
    ops = max(len(t.ops) for t in traces)
    return run_tasks(
        simulate_point,
        [(traces, c, rule) for c in configs],
        planned=planned,
        progress=progress,
        cost=sum(planned) * ops,
        min_cost=PARALLEL_MIN_OPS,
        finished=finished,
    )


def simulate_point(
    point: tuple[list[Trace], SimulationConfig, PrecisionRule | None],
    progress: ProgressCallback | None,
) -> SimulationResult:
    traces, config, rule = point
    return simulate_sized(traces, config, rule, progress=progress)


def seed_disagreement(result: SimulationResult) -> float:
    """How much more the replications' examples/s differ than their own batch means say they
    should: ``var(X_r) / mean(se_r^2)`` (0 with fewer than two replications or no standard
    errors)."""
    values = result.replication_examples_per_s
    errors = result.replication_standard_errors
    if len(values) < 2 or len(errors) != len(values) or not all(map(math.isfinite, errors)):
        return 0.0
    noise = sum(e * e for e in errors) / len(errors)
    mean = sum(values) / len(values)
    spread = sum((x - mean) ** 2 for x in values) / (len(values) - 1)
    return spread / noise if noise > 0 else (math.inf if spread > 0 else 0.0)


def _seeds_settled_apart(result: SimulationResult) -> bool:
    """True when the seeds disagree far beyond their noise *and* their workers lined up in
    different patterns (:mod:`simcore.sim.phases`). Disagreement alone can be the warm-up's
    transient, which longer runs do remove (cnn at W = 4 and 1 Gbit/s, all seeds drifting:
    ratio > 8 after 100 steps, the CI from 11% down to 6% at 1000)."""
    labels = {p.label for p in result.phases}
    return len(labels) > 1 and seed_disagreement(result) > SEEDS_DISAGREE


def worker_steps(config: SimulationConfig) -> int:
    """Worker-steps one run of ``config`` simulates (every replication, both runs of a hybrid)."""
    return config.workers * config.steps * config.runs


def _sized(
    config: SimulationConfig, rule: PrecisionRule, steps: int, floor: int = 0
) -> SimulationConfig:
    """``config`` run for ``steps`` steps per worker with the rule's warm-up, at least ``floor``
    steps (never more than half of the run)."""
    warmup = rule.warmup_for(steps, config.workers, config.mode)
    if floor > warmup:
        warmup = min(floor, steps // 2)
    return dataclasses.replace(config, steps=steps, warmup_steps=warmup)


def _shifted(progress: ProgressCallback | None, spent: int) -> ProgressCallback | None:
    """Progress of one round reported as progress of all rounds so far."""
    if progress is None:
        return None
    report = progress

    def shifted(done: int, total: int) -> None:
        report(spent + done, spent + total)

    return shifted


def _next(
    rule: PrecisionRule,
    steps: int,
    history: list[tuple[int, float]],
    config: SimulationConfig | None = None,
) -> tuple[str, int]:
    """Why to stop (``Stopping.reason``), or "" and the next run's steps per worker (of
    ``config``'s workers and mode; None: one worker)."""
    measured, precision = history[-1]
    if precision <= rule.target:
        return "reached", steps
    if len(history) >= 2 and _did_not_help(history[-2], history[-1]):
        return "stalled", steps
    if steps >= rule.max_steps:
        return "cap", steps
    if len(history) >= rule.max_rounds:
        return "rounds", steps
    if math.isfinite(precision):
        wanted = math.ceil(measured * (precision / rule.target) ** 2 * MARGIN)
    else:  # no interval yet (too few batches or seeds): try twice as long
        wanted = 2 * measured
    shape = (1, "sync") if config is None else (config.workers, config.mode)
    longer = max(rule.steps_measuring(wanted, *shape), math.ceil(GROWTH * steps))
    return "", min(longer, math.floor(MAX_GROWTH * steps), rule.max_steps)


def _did_not_help(before: tuple[int, float], after: tuple[int, float]) -> bool:
    """True when the longer run's interval shrank by less than EXPECTED_SHRINK_SHARE of the
    log-shrinkage ``sqrt(n_before / n_after)`` predicts."""
    (n0, h0), (n1, h1) = before, after
    if not (math.isfinite(h0) and math.isfinite(h1)) or h0 <= 0:
        return False
    predicted = 0.5 * math.log(n0 / n1)  # < 0
    return math.log(h1 / h0) > EXPECTED_SHRINK_SHARE * predicted


def _stopping(
    rule: PrecisionRule,
    result: SimulationResult,
    history: list[tuple[int, float]],
    reason: str,
    spent: int,
) -> Stopping:
    return Stopping(
        reason=reason,
        target=rule.target,
        precision=history[-1][1],
        steps=result.config.steps,
        max_steps=rule.max_steps,
        rounds=len(history),
        worker_steps=spent,
        precisions=tuple(p for _, p in history),
        seeds=result.config.replication_count,
        warmup=result.config.warmup_steps,
        transient=(
            (result.settling.steps, result.settling.shift)
            if reason == "unsettled" and result.settling is not None
            else None
        ),
    )


def stopping_note(result: SimulationResult) -> str:
    """One line for a run that stopped short of its target (``""`` otherwise): the precision
    reached, why, and how to get more (the ``--max-steps``, ``--replications``, ``--steps``
    and ``--precision`` options every command and scenario shares)."""
    if result.stopping is None:
        return ""
    return stopping_text(result.stopping, result.examples_spread)


def precision_text(precision: float) -> str:
    """A precision reached, as printed: ``+-0.63%``, or ``no CI``."""
    return "no CI" if not math.isfinite(precision) else f"+-{100 * precision:.2g}%"


def stopping_text(s: Stopping, spread: tuple[float, float] | None = None) -> str:
    """:func:`stopping_note` from the record and the (min, max) examples/s over seeds."""
    if s.reached:
        return ""
    if s.reason == "unsettled":
        return _unsettled_text(s)
    got = precision_text(s.precision)
    head = f"precision {got} (target {100 * s.target:.2g}%) after {s.steps} steps/worker"
    accept = f"or accept it with --precision {_percent_up(s.precision)}"
    seeds = s.seeds
    more_seeds = ""
    if seeds >= 2:
        among = "" if spread is None else f" ({spread[0]:.4g} .. {spread[1]:.4g} examples/s)"
        wanted = _replications_for(seeds, s.precision, s.target)
        more_seeds = f"; the CI comes from {seeds} seeds{among}, " + (
            f"about {wanted} would narrow it (--replications {wanted})"
            if wanted <= MAX_SUGGESTED_REPLICATIONS
            else f"and about {wanted:,} would narrow it to the target, more than is worth "
            "simulating: how each seed's workers lined up says more than their mean"
        )
    if s.reason in ("stalled", "seeds"):
        why = (
            "a longer run did not narrow the CI"
            if s.reason == "stalled"
            else "the seeds differ far more than their own runs' noise explains, so longer runs "
            "would not narrow the CI"
        )
        if seeds >= 2:
            why += (
                " (they settle in different phases: --phases)"
                if s.reason == "seeds"
                else " (how the seeds' workers line up: --phases)"
            )
        return f"{head}: {why}{more_seeds}; {accept}"
    longer = _longer_run(s)
    if s.reason == "cap":
        where, option = "the cap", f"--max-steps {longer}"
    else:  # the runs allowed were spent below the cap
        where, option = f"{s.rounds} runs", f"--steps {longer}"
    return (
        f"{head} ({where}): the target needs about {longer:,} steps/worker ({option})"
        f"{more_seeds}; {accept}"
    )


def _unsettled_text(s: Stopping) -> str:
    """The note of a run whose warm-up ended inside its start-up transient."""
    got = precision_text(s.precision)
    end, shift = s.transient if s.transient is not None else (s.warmup, 0.0)
    warmup = max(100, math.ceil(SETTLE_MARGIN * end / 100) * 100)
    steps = max(2 * s.steps, 2 * warmup)
    longer = "longer" if shift >= 0 else "shorter"
    return (
        f"precision {got} (target {100 * s.target:.2g}%) after {s.steps} steps/worker, but the "
        f"workers had not settled: their step times still trend past the {s.warmup}-step "
        f"warm-up, up to about step {end} (the mean step after the warm-up is "
        f"{100 * abs(shift):.1f}% {longer} than after that), so examples/s may be off by about "
        f"as much; give a longer warm-up and run (--warmup {warmup} --max-steps {steps})"
    )


def _replications_for(seeds: int, precision: float, target: float) -> int:
    """Seeds whose mean would reach ``target`` if the spread between seeds stays as it is."""
    return max(seeds + 1, math.ceil(seeds * (precision / target) ** 2 * MARGIN))


def _longer_run(s: Stopping) -> int:
    """Steps per worker that 1/sqrt(n) says would reach the target (rounded up to 100)."""
    if not math.isfinite(s.precision):
        return 2 * s.steps
    wanted = s.steps * (s.precision / s.target) ** 2 * MARGIN
    return max(s.steps + 100, math.ceil(wanted / 100) * 100)


def _percent_up(precision: float) -> str:
    """The precision as an option value, rounded up (``3.2%`` -> ``4%``, ``0.43`` -> ``0.5%``)."""
    if not math.isfinite(precision):
        return "50%"
    pct = 100 * precision
    return f"{math.ceil(pct)}%" if pct >= 1 else f"{math.ceil(pct * 10) / 10:g}%"
