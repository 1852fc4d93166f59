"""``sgdsim run EXPERIMENT.toml``: every point of an experiment file's grid, in parallel.

The file holds ``sgdsim simulate``'s options in sections and a grid over them
(:mod:`simcore.experiment`); options after the file override its values (``sgdsim run
exp.toml --steps 100``). Every point is planned and checked before anything runs; then the
points' simulations run on ``--jobs`` processes, and each result is appended to the results
file (JSON lines: a header line, then one line per simulation) as soon as it finishes, so an
interrupted sweep keeps what finished and ``--resume`` runs only the rest. The same seeds give
the same results whatever the number of processes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

from simcore.cli.main import OneLineErrorParser
from simcore.cli.output_options import EXIT_INTERRUPTED, interrupted_note, simulation_points
from simcore.cli.progress import Progress
from simcore.errors import ConfigError
from simcore.executors import EXECUTORS, run_on
from simcore.experiment import SECTIONS, Point, expand, experiment_toml, section_of
from simcore.parallel import Interrupted
from simcore.sim import SimulationResult
from simcore.sim.precision import simulate_point, worker_steps
from simcore.units import format_number

RESULTS_SCHEMA = "sgdsim.run-results"
RESULTS_VERSION = 1
# Options of `sgdsim simulate` that are about one command's output, not an experiment's points.
_NOT_IN_FILES = frozenset(
    {
        "help",
        "jobs",
        "phases",
        "json",
        "csv",
        "timeline",
        "timeline-format",
        "hta-dir",
        "chakra-dir",
        "export-steps",
        "force",
        "quiet",
        "window",
        "save-experiment",
    }
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run every point of an experiment file (TOML) in parallel, resumably",
        description="Run the grid of an experiment file: sgdsim simulate's options in sections "
        "([workload], [cluster], [network], [algorithm], [run]), a list being an axis of the "
        "grid ([grid] combine = product or zip). Options after the file override it, with "
        "sgdsim simulate's names and units. Results go to a JSON-lines file as they finish.",
    )
    p.add_argument("experiment", metavar="EXPERIMENT", help="the experiment file (.toml)")
    p.add_argument(
        "--jobs",
        type=int,
        help="processes running points at once (default: one per usable core)",
    )
    p.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where the points run: this machine's processes (default), or a Dask or Ray "
        "cluster (pip install 'sgdsim[dask]' / 'sgdsim[ray]'; a local one of --jobs "
        "processes unless --address)",
    )
    p.add_argument(
        "--address",
        help="the cluster to run on: a Dask scheduler (tcp://host:8786) or what ray.init takes "
        "(auto, ray://host:10001)",
    )
    p.add_argument(
        "--out",
        help="results file, JSON lines (default: the experiment's name with .results.jsonl)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the results file of an interrupted run: run only what it lacks",
    )
    p.add_argument("--force", action="store_true", help="start the results file over")
    p.add_argument(
        "--dry-run", action="store_true", help="list the points and their commands, run nothing"
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=run, overrides_allowed=True)


class _Refused(ConfigError):
    """What the simulate parser refused, raised instead of exiting."""


class _RaisingParser(OneLineErrorParser):
    """``sgdsim simulate``'s parser for a point's arguments: an error is an exception (the
    caller names the file and the point), not an exit."""

    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def simulate_parser() -> argparse.ArgumentParser:
    """A parser of ``sgdsim simulate``'s arguments whose errors raise ConfigError."""
    from simcore.cli import simulate_cmd

    root = _RaisingParser(prog="sgdsim")
    subparsers = root.add_subparsers(dest="command", parser_class=_RaisingParser)
    simulate_cmd.register(subparsers)
    parser: argparse.ArgumentParser = subparsers.choices["simulate"]
    return parser


def file_keys(parser: argparse.ArgumentParser) -> tuple[dict[str, argparse.Action], frozenset[str]]:
    """The simulate options an experiment file takes (``{key: action}``, keys without dashes)
    and which of them are flags (no value)."""
    keys: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if not action.option_strings:
            keys[action.dest] = action  # the trace
            continue
        key = action.option_strings[-1].lstrip("-")
        if key not in _NOT_IN_FILES:
            keys[key] = action
    flags = frozenset(key for key, a in keys.items() if a.option_strings and a.nargs == 0)
    return keys, flags


@dataclass(frozen=True)
class PlannedPoint:
    """One point of the grid, planned: its index, the point, and its simulations' configs."""

    index: int
    point: Point
    plan: Any  # simulate_cmd.SimulationPlan


def run(args: argparse.Namespace) -> int:
    from simcore.cli.simulate_cmd import plan_simulation
    from simcore.parallel import jobs

    parser = simulate_parser()
    keys, flags = file_keys(parser)
    document = _read(args.experiment)
    overrides = _overrides(getattr(args, "overrides", []), keys, flags)
    points = expand(document, args.experiment, flags, overrides)
    if args.address is not None and args.executor == "local":
        raise ConfigError("--address: only with --executor dask or ray")
    out = Path(args.out) if args.out else _default_out(args.experiment)
    fingerprint = _fingerprint(points)
    if args.dry_run:
        for i, point in enumerate(points):
            print(
                f"{i + 1:>4}  {point.name or '(one point)'}: sgdsim simulate {' '.join(point.argv)}"
            )
        return 0
    done = _check_out(out, fingerprint, resume=args.resume, force=args.force)
    planned: list[PlannedPoint] = []
    for i, point in enumerate(points):  # every point checked before anything runs
        where = f"{args.experiment}: point {i + 1} ({point.name or 'the only one'})"
        try:
            point_args = parser.parse_args(list(point.argv))
            point_args.command = "simulate"
            point_args.save_experiment = None
            plan = plan_simulation(point_args)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None
        for note in plan.notes:
            print(f"sgdsim run: note: {where}: {note}", file=sys.stderr)
        planned.append(PlannedPoint(i, point, plan))
    tasks = [
        (p, w, config)
        for p in planned
        for w, config in enumerate(p.plan.configs)
        if (p.index, w) not in done
    ]
    total_runs = sum(len(p.plan.configs) for p in planned)
    if not tasks:
        print(f"sgdsim run: {out}: all {total_runs} simulations already there; nothing to run")
        return 0
    _start_out(out, fingerprint, continued=bool(done) or (args.resume and out.exists()))
    plans = [worker_steps(config) for _, _, config in tasks]
    progress = Progress("run", "worker-steps", enabled=not args.quiet)
    progress(0, sum(plans))
    if done:
        print(
            f"sgdsim run: resuming {out}: {len(done)} of {total_runs} simulations there, "
            f"{len(tasks)} to run",
            file=sys.stderr,
        )
    rows: list[tuple[PlannedPoint, int, SimulationResult]] = []
    with out.open("a", encoding="utf-8") as sink:

        def finished(k: int, result: SimulationResult) -> None:
            point, w, _ = tasks[k]
            _append(sink, point, w, result)
            rows.append((point, w, result))

        try:
            with jobs(args.jobs):
                run_on(
                    args.executor,
                    simulate_point,
                    [(p.plan.traces, config, p.plan.rule) for p, _, config in tasks],
                    address=args.address,
                    planned=plans,
                    progress=progress,
                    finished=finished,
                )
        except Interrupted:
            _print_table(rows)
            interrupted_note("run", len(done) + len(rows), total_runs)
            print(
                f"sgdsim run: {out}: run `sgdsim run {args.experiment} --resume` for the rest",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
    _print_table(sorted(rows, key=lambda r: (r[0].index, r[1])))
    print(f"wrote {out} ({len(rows)} simulations; {total_runs} in the experiment)")
    return 0


def _read(path: str) -> Mapping[str, Any]:
    try:
        with open(path, "rb") as handle:
            document: dict[str, Any] = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such experiment file") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason})") from None
    return document


def _overrides(
    tokens: Sequence[str], keys: Mapping[str, argparse.Action], flags: frozenset[str]
) -> dict[str, Any]:
    """The options after the experiment file, as ``{key: value}``: they replace the file's."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, _, inline = token.partition("=")
        key = name[2:] if name.startswith("--") else None
        if key is None or key not in keys or key == "trace":
            raise ConfigError(
                f"{token}: not an option an experiment can override (sgdsim simulate's, e.g. "
                "--steps 100 --bandwidth 10Gbps)"
            )
        if key in flags:
            if inline:
                raise ConfigError(f"--{key}: a flag takes no value")
            out[key] = True
            i += 1
            continue
        if inline:
            out[key] = inline
            i += 1
            continue
        if i + 1 >= len(tokens):
            raise ConfigError(f"--{key}: needs a value")
        out[key] = tokens[i + 1]
        i += 2
    return out


def _default_out(experiment: str) -> Path:
    path = Path(experiment)
    return path.with_name(f"{path.stem}.results.jsonl")


def _fingerprint(points: Sequence[Point]) -> str:
    """What the results file's header pins: every point's command, hashed."""
    text = "\n".join(" ".join(p.argv) for p in points)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _check_out(out: Path, fingerprint: str, *, resume: bool, force: bool) -> set[tuple[int, int]]:
    """Check that ``out`` may be written, before anything runs (nothing is changed here); the
    (point, simulation) pairs it already holds when it is continued.

    An existing file is continued only with ``--resume``, and only if it holds this
    experiment (its header's fingerprint), or started over with ``--force``.
    """
    if out.is_dir():
        raise ConfigError(f"--out: {out}: is a folder; give a file name")
    if not out.parent.is_dir():
        raise ConfigError(f"--out: {out}: the folder {out.parent} does not exist")
    if resume and force:
        raise ConfigError("--resume and --force: choose one (continue the file, or start over)")
    if not out.exists() or force:
        return set()
    if not resume:
        raise ConfigError(f"--out: {out}: exists; --resume continues it, --force starts it over")
    return _held(out, fingerprint)


def _start_out(out: Path, fingerprint: str, *, continued: bool) -> None:
    """Make ``out`` ready to append to: a new file gets its header line (in one rename); a
    continued one loses a half-written last line (the run was killed while writing)."""
    if continued:
        raw = out.read_bytes()
        tail = raw.rsplit(b"\n", 1)[-1]
        if tail:
            with out.open("r+b") as handle:
                handle.truncate(len(raw) - len(tail))
        return
    header = {
        "schema": RESULTS_SCHEMA,
        "schema_version": RESULTS_VERSION,
        "experiment": fingerprint,
    }
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(header) + "\n", encoding="utf-8")
    os.replace(tmp, out)


def _held(out: Path, fingerprint: str) -> set[tuple[int, int]]:
    """The (point, simulation) pairs of ``out``'s whole lines, once its header says it holds
    this experiment."""
    complete = out.read_bytes().split(b"\n")[:-1]  # a half-written last line does not count
    try:
        header = json.loads(complete[0]) if complete else {}
    except json.JSONDecodeError:
        header = {}
    if not isinstance(header, dict) or header.get("schema") != RESULTS_SCHEMA:
        raise ConfigError(f"--resume: {out}: not a results file of sgdsim run")
    if header.get("experiment") != fingerprint:
        raise ConfigError(
            f"--resume: {out}: holds the results of another experiment (or of this file before "
            "it changed); give another --out, or --force to start over"
        )
    done = set()
    for number, line in enumerate(complete[1:], start=2):
        try:
            record = json.loads(line)
            done.add((int(record["point"]), int(record["simulation"])))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ConfigError(f"--resume: {out}: line {number} is not a result record") from None
    return done


def _append(sink: TextIO, point: PlannedPoint, w: int, result: SimulationResult) -> None:
    """One result as one line, written whole and flushed (a reader or a resume sees it)."""
    record = {
        "point": point.index,
        "simulation": w,
        "name": point.point.name,
        "axes": dict(point.point.axes),
        **simulation_points([result], point.plan.link)[0],
    }
    sink.write(json.dumps(record, allow_nan=False) + "\n")
    sink.flush()


def _print_table(rows: Sequence[tuple[PlannedPoint, int, SimulationResult]]) -> None:
    if not rows:
        return
    width = max(len(p.point.name) for p, _, _ in rows)
    width = max(width, len("point"))
    print(f"{'point':<{width}}  {'W':>5}  {'examples/s':>12}  {'95% CI':>10}")
    for p, _, result in rows:
        rate = result.examples_per_s
        half = rate.half_width
        ci = ""
        if half is not None and rate.value > 0:
            ci = f"±{half / rate.value:.1%}" if half >= 0.0005 * rate.value else "±<0.1%"
        print(
            f"{p.point.name:<{width}}  {result.config.workers:>5}  "
            f"{format_number(rate.value):>12}  {ci:>10}"
        )


def save_experiment(args: argparse.Namespace, out: str, force: bool) -> str:
    """The experiment file ``args`` (a ``sgdsim simulate`` command line) means: every option
    given that differs from its default, in its section. Returns the text written."""
    parser = simulate_parser()
    keys, _ = file_keys(parser)
    values: dict[str, Any] = {}
    for key, action in keys.items():
        value = getattr(args, action.dest, None)
        if value is None or value == action.default or section_of(key) is None:
            continue
        values[key] = value if key != "trace" or len(value) > 1 else value[0]
    argv = getattr(args, "argv", None)
    header = [
        f"sgdsim simulate {' '.join(argv)}" if argv else "sgdsim simulate",
        "run it with: sgdsim run THIS_FILE (options after the file override it)",
    ]
    text = experiment_toml(values, header)
    from simcore.files import atomic_output, check_output

    check_output(out, "--save-experiment", force=force, suffixes=(".toml",))
    with atomic_output(out, overwrite=force) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return text


__all__ = ["SECTIONS", "register", "save_experiment", "simulate_parser"]
