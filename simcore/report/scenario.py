"""What every scenario script shares: its command line, its output folder and its error handling.

A scenario is a script a user runs with no arguments (``python scenarios/NAME.py``). The knobs
every one of them has are defined here once: ``--trace``, ``--bandwidth``/``--latency``/
``--network``, ``--workers``, ``--steps``, ``--warmup``, ``--seed``, ``--jobs``, ``--out``
(default ``results/NAME``), ``--force`` and ``--quiet``. Output files are claimed before the run
(so a clash is reported before minutes of simulation, not after) and written atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from simcore.cli.link_options import load_network_option, resolve_link
from simcore.cli.main import OneLineErrorParser
from simcore.cli.option_names import user_message
from simcore.cli.precision_options import (
    add_precision_options,
    first_length,
    notes,
    precision_rule,
    rule_text,
)
from simcore.errors import ConfigError, SgdsimError
from simcore.files import atomic_output, refuse_existing
from simcore.parallel import jobs
from simcore.report.table import Table, tables_csv_text
from simcore.sim import PrecisionRule, SimulationConfig, SimulationResult, simulate_many
from simcore.sim.config import ASYNC_REPLICATIONS, SYNC_REPLICATIONS
from simcore.sim.precision import stopping_note
from simcore.trace.model import Trace
from simcore.units import format_bandwidth, parse_bandwidth

EXIT_BAD_INPUT = 1  # the exit codes of sgdsim itself (simcore.cli.main, README)
EXIT_INTERRUPTED = 130


def bare_scenario_parser(name: str, doc: str | None) -> OneLineErrorParser:
    """A scenario's parser with no options yet: ``python scenarios/NAME.py``, the docstring's
    first paragraph as its description (for scenarios whose options are not the standard
    ones of :func:`scenario_parser`)."""
    return OneLineErrorParser(
        prog=f"python scenarios/{name}.py",
        description=(doc or name).strip().split("\n\n")[0],
        epilog="The script's docstring describes the question, the setup and the output.",
    )


def add_from_runs_option(parser: argparse.ArgumentParser, shipped: str | None) -> None:
    """``--from-runs PATH`` (repeatable; None when not given: the caller's default is the
    shipped campaign ``shipped``, or with None every shipped campaign), for the scenarios that
    assess saved validation runs."""
    default = "every shipped campaign" if shipped is None else f"the shipped {shipped!r}"
    parser.add_argument(
        "--from-runs",
        action="append",
        metavar="PATH",
        help=f"saved runs: files or folders of them, repeatable (default: {default})",
    )


def scenario_parser(
    name: str,
    doc: str | None,
    *,
    trace: str,
    workers: Sequence[int],
    steps: int | None = None,
    warmup: int | None = None,
    seed: int = 1,
    bandwidth: str | None = None,
    network: str | None = None,
    help_texts: Mapping[str, str] | None = None,
    precision: bool = False,
) -> argparse.ArgumentParser:
    """The standard scenario command line; a scenario adds its own options to the result.

    With ``precision`` every simulation runs until its CI is within ``--precision`` (the
    stopping rule, :func:`simulate_points`) unless ``--steps`` fixes the length, and ``--warmup``
    defaults to a share of each run; without it, ``steps`` and ``warmup`` are the defaults of
    ``--steps`` and ``--warmup`` (required then).

    ``bandwidth`` or ``network`` is the default link (a network profile's fitted bandwidth and
    latency); an explicit ``--bandwidth``/``--latency`` on the command line wins over it.
    ``help_texts`` replaces the help of standard options by name (``{"workers": "..."}``), for a
    scenario in which they drive something particular.
    """
    texts = dict(help_texts or {})
    parser = bare_scenario_parser(name, doc)
    parser.add_argument("--trace", default=trace, help=f"trace file or sample (default {trace})")
    link = parser.add_argument_group("link to the parameter server(s)")
    default_link = f"network profile {network}" if network else f"{bandwidth}, no latency"
    link.add_argument(
        "--bandwidth",
        help=texts.pop("bandwidth", f"e.g. 1Gbps, 10Gbps (default: {default_link})"),
    )
    link.add_argument("--latency", help="per-transfer latency, e.g. 50us")
    link.add_argument(
        "--network",
        default=network,
        help="measured network profile (file or sample name): its bandwidth and latency; "
        "sgdsim simulate --network also applies its flow weights and transfer CPU cost",
    )
    parser.set_defaults(default_bandwidth=bandwidth)
    parser.add_argument(
        "--workers",
        type=worker_list,
        default=tuple(workers),
        help=texts.pop(
            "workers", f"worker counts, e.g. 1-16 or 1,2,4,8 (default {format_workers(workers)})"
        ),
    )
    if precision:
        parser.add_argument(
            "--steps",
            type=positive_int,
            help="steps per worker (default: as many as --precision needs)",
        )
        parser.add_argument(
            "--warmup",
            type=nonnegative_int,
            help=texts.pop(
                "warmup",
                "steps per worker left out (default: a tenth of each run, at least 10 steps, "
                "or 2.5 per worker for async; at most half of the run)",
            ),
        )
        add_precision_options(parser)
    else:
        if steps is None or warmup is None:
            raise ValueError("steps, warmup: needed by a scenario without the stopping rule")
        parser.add_argument("--steps", type=positive_int, default=steps, help="steps per worker")
        parser.add_argument(
            "--warmup", type=nonnegative_int, default=warmup, help="steps per worker left out"
        )
    parser.add_argument("--seed", type=int, default=seed, help="random seed (default %(default)s)")
    parser.add_argument(
        "--replications",
        type=positive_int,
        default=None,
        help=f"independent runs (seeds) per point (default {ASYNC_REPLICATIONS} for Async-SGD "
        f"with W >= 2, else {SYNC_REPLICATIONS}: batch means)",
    )
    add_output_options(parser, name)
    if texts:
        raise ValueError(f"help_texts: no standard option {sorted(texts)} takes a new help")
    return parser


def add_output_options(parser: argparse.ArgumentParser, name: str) -> None:
    """``--out`` (default ``results/NAME``), ``--force`` and ``--quiet``: the output options of
    every scenario, also of one whose other options are not the standard ones."""
    parser.add_argument("--out", default=str(Path("results") / name), help="output folder")
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def link_from_args(args: argparse.Namespace) -> tuple[float, float, str]:
    """(bandwidth bit/s, latency s, a label for titles) from the standard link options."""
    profile = load_network_option(args.network)
    bandwidth = args.bandwidth
    if bandwidth is None and profile is None:
        bandwidth = args.default_bandwidth
    bandwidth_bps, latency_s = resolve_link(bandwidth, args.latency, profile)
    label = format_bandwidth(bandwidth_bps)
    if latency_s > 0:
        label += f" + {latency_s * 1e6:.0f} us/transfer"
    if profile is not None and args.bandwidth is None:
        label += f" ({args.network})"
    return bandwidth_bps, latency_s, label


def base_config(args: argparse.Namespace, **settings: Any) -> tuple[SimulationConfig, str]:
    """The simulation settings every run of a scenario shares, from the standard options (link,
    steps, warm-up, seed) and ``settings``; and the link's label (see :func:`link_from_args`)."""
    bandwidth_bps, latency_s, label = link_from_args(args)
    steps, warmup = args.steps, args.warmup
    if steps is None or warmup is None:  # the stopping rule, or a default warm-up
        steps, warmup = first_length(args, scenario_rule(args))
    config = SimulationConfig(
        bandwidth_bps=bandwidth_bps,
        latency_s=latency_s,
        steps=steps,
        warmup_steps=warmup,
        seed=args.seed,
        replications=getattr(args, "replications", None),  # None: by mode (async: 5 seeds)
        **settings,
    )
    return config, label


def scenario_rule(args: argparse.Namespace) -> PrecisionRule | None:
    """The stopping rule of a scenario made with ``precision=True``; None when ``--steps`` fixes
    the length (or the scenario has no rule)."""
    if not hasattr(args, "precision"):
        return None
    return precision_rule(args)


def simulate_points(
    trace: Trace | Sequence[Trace],
    configs: Sequence[SimulationConfig],
    args: argparse.Namespace,
    progress: Callable[[int, int], None] | None = None,
) -> list[SimulationResult]:
    """A scenario's simulations, all at once (:func:`simcore.sim.simulate_many`: on the
    processes ``--jobs`` allows, the results in the order of ``configs``); ``progress`` counts
    worker-steps."""
    return simulate_many(trace, configs, scenario_rule(args), progress=progress)


def length_setup(args: argparse.Namespace) -> str:
    """How long the runs are, for a scenario's setup line: ``120 steps/worker, 20 warm-up`` or
    ``steps until the 95% CI is within 1% (cap 1000 steps)``."""
    rule = scenario_rule(args)
    if rule is None:
        warmup = args.warmup
        if warmup is None:
            warmup = first_length(args, None)[1]
        return f"{args.steps} steps/worker, {warmup} warm-up"
    return rule_text(rule)


def precision_notes(results: Sequence[SimulationResult], prefix: str) -> str:
    """The runs that stopped short of the target, as ``note: PREFIX, W = n: ...`` lines ('' if
    none); more than two become one line naming them and the widest one's note."""
    lines = notes(results, lambda r: f"{prefix}, W = {r.config.workers}")
    if len(lines) <= 2:
        return "\n".join(lines)
    short = [r for r in results if r.stopping is not None and not r.stopping.reached]
    widest = max(short, key=lambda r: r.stopping.precision if r.stopping else 0.0)
    target = 100 * (widest.stopping.target if widest.stopping else 0.0)
    workers = ", ".join(str(r.config.workers) for r in short)
    return (
        f"note: {prefix}: W = {workers} stopped short of the {target:g}% target (their CIs are "
        f"in the table); the widest, W = {widest.config.workers}: {stopping_note(widest)}"
    )


def grouped_precision_notes(groups: Iterable[tuple[Sequence[SimulationResult], str]]) -> str:
    """:func:`precision_notes` of each ``(results, label)`` group, those with notes one after
    the other ('' if none)."""
    return "\n".join(text for results, label in groups if (text := precision_notes(results, label)))


class ScenarioOutput:
    """The output folder of one run: files are claimed up front and written atomically."""

    def __init__(self, folder: str | Path, files: Sequence[str], *, force: bool) -> None:
        self.folder = Path(folder)
        self.force = force
        if self.folder.exists() and not self.folder.is_dir():
            raise ConfigError(f"--out: {self.folder} exists and is not a folder")
        for name in files:
            refuse_existing(self.folder / name, force)
        self.claimed = tuple(files)
        self.written: list[Path] = []

    def path(self, name: str) -> Path:
        """Where ``name`` goes; plotting functions write there with ``overwrite=self.force``."""
        if name not in self.claimed:
            raise ValueError(f"{name}: not among the files this scenario claimed")
        target = self.folder / name
        self.written.append(target)
        return target

    def write_text(self, name: str, text: str) -> Path:
        target = self.path(name)
        with atomic_output(target, overwrite=self.force) as tmp:
            tmp.write_text(text, encoding="utf-8")
        return target

    def write_csv(self, name: str, tables: Table | Sequence[Table]) -> Path:
        """One table, or several with the same columns (a leading ``table`` column tells them
        apart)."""
        if isinstance(tables, Table):
            return self.write_text(name, tables.csv_text())
        return self.write_text(name, tables_csv_text(tables))

    def write_json(self, name: str, doc: Any) -> Path:
        return self.write_text(name, json.dumps(doc, indent=1, allow_nan=False) + "\n")

    def summary(self) -> str:
        return "\n".join(f"wrote {p}" for p in self.written)


def progress_printer(args: argparse.Namespace) -> Callable[[str], None] | None:
    """Where a scenario's progress lines go: stderr, as they come, unless ``--quiet``."""
    if args.quiet:
        return None
    return lambda line: print(line, file=sys.stderr, flush=True)


def finding_line(sentence: str) -> str:
    """``finding: SENTENCE``, the line in which a scenario states its answer: one sentence (one
    line, ending with a full stop, none inside); details go on the lines after it.

    Raises ValueError on more than one sentence: a scenario's own mistake, found by its tests.
    """
    if "\n" in sentence or not sentence.endswith(".") or ". " in sentence:
        raise ValueError(f"a finding is one sentence on one line, not {sentence!r}")
    return f"finding: {sentence}"


def run_scenario(
    name: str, body: Callable[[], None], args: argparse.Namespace | None = None
) -> int:
    """Run ``body``; sgdsim's errors become one line ``NAME: error: ...`` and exit code 1 (bad
    input), as from ``sgdsim`` itself; what argparse refuses exits 2 before ``body`` runs.
    Simulations run on the processes ``args.jobs`` (``--jobs``) allows, default all cores."""
    try:
        with jobs(getattr(args, "jobs", None)):  # --jobs; default: every usable core
            body()
    except SgdsimError as err:
        print(f"{name}: error: {user_message(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


def rate_list(text: str) -> tuple[float, ...]:
    """Parse ``300Mbit/s,500Mbit/s`` (``--rates``) into sorted distinct link rates, bit/s."""
    try:
        rates = tuple(parse_bandwidth(part, name="--rates") for part in text.split(","))
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    return tuple(sorted(set(rates)))


def worker_list(text: str) -> tuple[int, ...]:
    """Parse ``1-16``, ``1,2,4,8`` or ``1-4,8,16`` into sorted distinct worker counts."""
    values: set[int] = set()
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            first, last = int(low), int(high or low)
            if last < first:
                raise ValueError
            values.update(range(first, last + 1))
    except ValueError:
        values = set()
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected positive worker counts like 1-16 or 1,2,4,8"
        )
    return tuple(sorted(values))


def format_workers(workers: Sequence[int]) -> str:
    ws = sorted(workers)
    if ws == list(range(ws[0], ws[-1] + 1)) and len(ws) > 2:
        return f"{ws[0]}-{ws[-1]}"
    return ",".join(map(str, ws))


def positive_int(text: str) -> int:
    return _int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= {low}")
    return value
