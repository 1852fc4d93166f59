"""``simulate``'s exports to other tools: ``--hta-dir`` (Kineto-style rank traces that Meta's
Holistic Trace Analysis loads) and ``--chakra-dir`` (MLCommons Chakra execution traces that
ASTRA-sim replays).

Both need the simulated timeline of one configuration. The steps exported are the first
measured ones, right after the warm-up: the run's start-up transient is what the warm-up leaves
out, so the exports show the steady state the throughput estimate describes. HTA gets
``--export-steps`` of them; Chakra one (an execution trace is one iteration, which ASTRA-sim
repeats).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from simcore.errors import ConfigError
from simcore.sim.config import COLLECTIVE_ARCHS
from simcore.sim.results import SimulationResult
from simcore.trace.model import Trace

DEFAULT_EXPORT_STEPS = 5


def add_export_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("exports to other tools")
    group.add_argument(
        "--hta-dir",
        metavar="DIR",
        help="write one Kineto-style trace per simulated rank (rank-<r>.json) into DIR, for "
        "Holistic Trace Analysis: TraceAnalysis(trace_dir=DIR)",
    )
    group.add_argument(
        "--chakra-dir",
        metavar="DIR",
        help="write the simulated ranks as Chakra execution traces (sgdsim.<r>.et) into DIR, "
        "for ASTRA-sim (needs the extra: pip install 'sgdsim[chakra]')",
    )
    group.add_argument(
        "--export-steps",
        type=int,
        metavar="N",
        help=f"steps --hta-dir holds, the first after the warm-up (default {DEFAULT_EXPORT_STEPS})",
    )


def exporting(args: argparse.Namespace) -> bool:
    return args.hta_dir is not None or args.chakra_dir is not None


def check_export_options(args: argparse.Namespace, worker_counts: Sequence[int]) -> None:
    """Refuse, before anything runs, what the exports cannot do."""
    if args.export_steps is not None:
        if args.hta_dir is None:
            raise ConfigError("--export-steps: only with --hta-dir")
        if args.export_steps < 1:
            raise ConfigError(f"--export-steps: must be an integer >= 1, got {args.export_steps}")
    for option, folder in (("--hta-dir", args.hta_dir), ("--chakra-dir", args.chakra_dir)):
        if folder is None:
            continue
        if len(worker_counts) > 1:
            raise ConfigError(f"{option}: needs a single worker count, not a sweep")
        path = Path(folder)
        if not folder or (path.exists() and not path.is_dir()):
            raise ConfigError(f"{option}: {folder!r} is not a folder")
        if not path.exists() and not path.parent.is_dir():
            raise ConfigError(f"{option}: {path.parent} does not exist")
    if args.chakra_dir is not None:
        from simcore.export.chakra import require_protobuf
        from simcore.export.chakra_files import check_chakra_dir

        require_protobuf("--chakra-dir")
        check_chakra_dir(
            args.chakra_dir, range(_chakra_ranks(args, worker_counts[0])), overwrite=args.force
        )
    if args.hta_dir is not None:
        from simcore.export.hta import check_hta_dir

        check_hta_dir(args.hta_dir, worker_counts[0], overwrite=args.force)


def write_exports(
    args: argparse.Namespace, result: SimulationResult, traces: Sequence[Trace]
) -> None:
    """Write the exports asked for, each file complete or not at all; one line each on stderr."""
    first = result.config.warmup_steps
    if args.hta_dir is not None:
        from simcore.export.hta import hta_traces, write_hta_dir

        count = args.export_steps or DEFAULT_EXPORT_STEPS
        last = min(first + count, result.config.steps) - 1
        docs = hta_traces(result, traces, steps=(first, last))
        paths = write_hta_dir(args.hta_dir, docs, overwrite=args.force)
        print(
            f"wrote {len(paths)} HTA rank traces of steps {first}..{last} to {args.hta_dir} "
            "(TraceAnalysis(trace_dir=...))",
            file=sys.stderr,
        )
    if args.chakra_dir is not None:
        from simcore.export.chakra import chakra_ranks
        from simcore.export.chakra_files import write_chakra_dir

        ranks = chakra_ranks(result, traces, step=first)
        paths = write_chakra_dir(args.chakra_dir, ranks, overwrite=args.force)
        print(
            f"wrote {len(paths)} Chakra execution traces of step {first} to {args.chakra_dir}",
            file=sys.stderr,
        )


def _chakra_ranks(args: argparse.Namespace, workers: int) -> int:
    """The ranks of a Chakra export: the workers, and with a parameter server its servers."""
    return workers + (args.servers if args.arch not in COLLECTIVE_ARCHS else 0)
