"""``sgdsim validate``: real distributed runs on this machine against the predictions.

Profiles one worker with the distributed runner (``profilers.distributed``), predicts W = 1..Wmax
with the simulator and the coarse model, runs the real job for each W and prints measured versus
predicted examples/s with each prediction's error and the co-location compute slowdown.
torch is imported only when the command runs, so the rest of the CLI starts fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simcore.cli.guards import check_range, fill_defaults, option_name, refuse_given
from simcore.cli.link_options import link_settings
from simcore.errors import ConfigError, SgdsimError
from simcore.files import check_output
from simcore.link_settings import (
    DEFAULT_SOURCE,
    FLOW_SHARINGS,
    FRESH_SHARING,
    WARM_SHARING,
    LinkSettings,
    Sourced,
)
from simcore.report.output import print_json
from simcore.report.scenario import nonnegative_int, positive_int
from simcore.sim.config import PARSE_PLACEMENTS
from simcore.units import parse_bandwidth, parse_duration

if TYPE_CHECKING:
    from collections.abc import Callable

    from profilers.distributed.measurements import Measurements, PointSelection
    from profilers.distributed.validation import ValidationPoint, ValidationReport
    from simcore.sim.occupancy import LinkOccupancy

ARCHITECTURES = ("ps-async", "ps-sync", "allreduce")  # the default; DDP when asked
ARCH_CHOICES = (*ARCHITECTURES, "ddp")
MODEL = "cnn"
BATCH_SIZE = 32
WORKERS_MAX = 4
REPETITIONS = 3
PROFILE_RUNS = 3  # = profilers.distributed.validation.PROFILE_RUNS (not imported: torch)
RING_CPU_PLACEMENT = "pipelined"  # = profilers.distributed.validation.RING_CPU_PLACEMENT
STEPS = 100  # per worker and run: fewer leave the 10-30% run-to-run spread of a busy VM
WARMUP_STEPS = 10
THREADS = 1  # torch threads per rank: co-located ranks would otherwise oversubscribe the cores
OVERLAP = "layerwise"
SEED = 0
# The options that say how to measure, with their defaults (given as None, so that one given
# with --from-runs, where the saved runs say it, is refused rather than silently ignored), and
# those that, with --from-runs, select among the saved points.
MEASURING = {
    "batch_size": BATCH_SIZE,
    "repetitions": REPETITIONS,
    "profile_runs": PROFILE_RUNS,
    "steps": STEPS,
    "warmup": WARMUP_STEPS,
    "overlap": OVERLAP,
    "threads": THREADS,
    "seed": SEED,
    "testbed": None,
    "testbed_burst": None,
    "bucket_cap": None,
    "first_bucket": None,
}
SELECTING = {"model": MODEL, "workers_max": WORKERS_MAX}


def add_run_options(p: argparse.ArgumentParser) -> None:
    """What to train and how to compare: shared with ``scenarios/validate.py``."""
    p.add_argument(
        "--model",
        help=f"built-in model or package.module:factory (default {MODEL}); with --from-runs: "
        "only the runs of this model (its name, or the report's label such as cnn-b32)",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        help=f"examples per worker and step (default {BATCH_SIZE})",
    )
    p.add_argument(
        "--workers-max",
        type=positive_int,
        help=f"largest W (default {WORKERS_MAX}); with --from-runs: only the points up to it",
    )
    p.add_argument(
        "--arch",
        action="append",
        choices=ARCH_CHOICES,
        help="architecture to run; repeat for several (default: ps-async, ps-sync and "
        "allreduce; ddp is PyTorch DistributedDataParallel); with --from-runs: only its points",
    )
    p.add_argument(
        "--bucket-cap",
        metavar="SIZE",
        action="append",
        help="--arch ddp: DDP's bucket_cap_mb (a plain number is MiB); repeat for several, each "
        "a point of its own at every W (default: torch's, 25 MiB with a 1 MiB first bucket; a "
        "cap given alone makes the first bucket as large, as torch does)",
    )
    p.add_argument(
        "--first-bucket",
        metavar="SIZE",
        help="--arch ddp: the first bucket's limit for every cap (default: as torch decides)",
    )
    p.add_argument(
        "--repetitions",
        type=positive_int,
        help=f"real runs per W (default {REPETITIONS})",
    )
    p.add_argument(
        "--profile-runs",
        type=positive_int,
        help=f"one-worker runs the profile pools, and as many of the computation alone "
        f"(default {PROFILE_RUNS})",
    )
    p.add_argument(
        "--steps",
        type=positive_int,
        help=f"steps per worker and run (default {STEPS})",
    )
    p.add_argument(
        "--warmup",
        type=nonnegative_int,
        help=f"steps per worker left out (default {WARMUP_STEPS})",
    )
    p.add_argument(
        "--overlap",
        choices=("layerwise", "strict"),
        help="how a worker overlaps its transfers with its computation, in the runs and the "
        "predictions: a layer waits only for its own pull and pushes after its own backward "
        f"(layerwise), or all pulls, then forward and backward, then all pushes (strict; "
        f"default {OVERLAP})",
    )
    add_prediction_link_options(p)
    p.add_argument(
        "--testbed",
        metavar="RATE",
        help="run every rank in a network namespace of its own with the server's link (ring: "
        "every worker's) shaped to RATE, e.g. 100Mbit/s, after measuring that link (flow "
        "shares, duplex, and a ring alone for every W); needs root (default: loopback)",
    )
    p.add_argument(
        "--testbed-burst",
        metavar="TIME",
        help="--testbed: each shaped link's tbf bucket as time at RATE (default 1ms). Below "
        "~545 Mbit/s 1ms is smaller than one of TCP's 64 KiB GSO packets, and tbf then "
        "segments every send in software, which costs the ranks CPU a real NIC's offload "
        "would not (scenarios/research/testbed_segmentation.py); e.g. 4ms keeps them whole from "
        "~140 Mbit/s, at the price of letting 4ms of bytes through at once",
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        help=f"torch threads per rank (default {THREADS})",
    )
    p.add_argument("--seed", type=int, help=f"seed of the model and data (default {SEED})")
    p.add_argument(
        "--from-runs",
        metavar="FILE",
        action="append",
        help="predict again from the runs an earlier validation saved (validate-runs.json.gz) "
        "instead of running anything: the runs say how they were measured (the options above "
        "that set it are refused), --model, --arch and --workers-max select among their "
        "points, and the link options replace what they measured. sgdsim validate also takes "
        "a campaign: a folder of such files, the option repeated, or the shipped 'campaign' "
        "(the README's accuracy table)",
    )


def add_prediction_link_options(p: argparse.ArgumentParser) -> None:
    """The link the predictions use, replacing what a validation measured: shared with
    ``scenarios/validation_campaign.py``."""
    p.add_argument("--bandwidth", help="link for the predictions, e.g. 1Gbps (default: measured)")
    p.add_argument(
        "--network",
        help="a network profile (file or sample) whose values replace what the validation "
        "measures for the predictions: bandwidth (and ring goodput per W), latency, flow weight "
        "cv, transfer CPU cost, duplex goodput; options given explicitly win",
    )
    p.add_argument("--latency", help="per-transfer latency for the predictions (default 0)")
    p.add_argument(
        "--flow-weight-cv",
        type=float,
        metavar="CV",
        help="flow weight cv for the predictions, one value for pulls and pushes (default: "
        "measured on the testbed for each direction, else 0)",
    )
    p.add_argument(
        "--flow-sharing",
        choices=FLOW_SHARINGS,
        default=FRESH_SHARING,
        help="which of the testbed's measurements of how the server's link shares concurrent "
        "transfers gives the parameter server's flow weight cvs: fresh = flows on new "
        "connections (default), warm = the model's transfers over connections kept open, as "
        "training's are (each direction its own; README: \"Concurrent transfers share the link "
        'less evenly in training" says why it is not the default); not with --flow-weight-cv',
    )
    p.add_argument(
        "--duplex",
        type=float,
        metavar="RATIO",
        help="what the server's link carries with pulls and pushes at once, as a multiple of one "
        "direction: 2 = full duplex (default: measured on the testbed, else 2)",
    )
    p.add_argument(
        "--duplex-interference",
        metavar="EFF,PULL,PUSH",
        help="instead of --duplex: each direction of the server's link slowed by the other's "
        "transfers, EFF * min(1, n/m) ** PULL (pulls) or ** PUSH (pushes) of its bandwidth with "
        "n transfers facing m (default, unless --duplex is given: measured on the testbed "
        "before the runs by profilers.distributed.link_interference; for runs saved before "
        "that measurement, the emulated testbed's)",
    )
    p.add_argument(
        "--comm-cpu",
        type=float,
        metavar="NS_PER_BYTE",
        help="transfer CPU cost for the ring AllReduce predictions, ns per byte, shared with the "
        "computation while a transfer runs (default: the CPU work per byte the one-worker runs "
        "showed, placed as --ring-cpu-work says); parameter-server predictions replay the "
        "one-worker run's computation either way",
    )
    p.add_argument(
        "--ring-cpu-work",
        choices=PARSE_PLACEMENTS,
        help="where a ring AllReduce worker does its transfers' CPU work per byte: on each of an "
        "all-reduce's messages (gloo's segments) once it has arrived, by a thread sharing the "
        "cores, one "
        "all-reduce at a time (default), or after each all-reduce on its computation (the "
        "model before 2026-11-27); not with --comm-cpu",
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "validate",
        help="run real distributed training here and compare it with the predictions",
        description="Profile one worker with real torch.distributed training (gloo, loopback), "
        "predict W = 1..--workers-max with the simulator and the coarse model, run the real job "
        "for each W and print measured vs predicted examples/s with the errors. On a machine "
        "busy with other jobs the measurements are noisy.",
    )
    add_run_options(p)
    p.add_argument(
        "--json", action="store_true", help="print one JSON document (sgdsim-output, OUTPUT.md)"
    )
    p.add_argument("-o", "--out", help="also write the solo trace to this file (.json or .json.gz)")
    runs = p.add_mutually_exclusive_group()
    runs.add_argument(
        "--save-runs",
        metavar="FILE",
        help="keep every run's timestamps in FILE (.json, or .json.gz compressed), written "
        "after every point, to predict again later with --from-runs (default: a new file in "
        f"{DEFAULT_RUNS_DIR}/, named after the model, the link and the time)",
    )
    runs.add_argument(
        "--no-save-runs",
        action="store_true",
        help="do not keep the runs (they cost minutes to hours of training to measure again)",
    )
    p.add_argument(
        "--save-network",
        metavar="FILE",
        help="also write the link as this validation measured it (bandwidth, flow weight cvs "
        "of new flows and of connections kept open, "
        "ring goodput, cost per message and bytes' rate per W, fitted transfer CPU cost) as a "
        "network profile, for --network",
    )
    p.add_argument(
        "--force", action="store_true", help="overwrite existing --out/--save-runs/--save-network"
    )
    p.add_argument(
        "--fit-rate",
        metavar="RATE",
        help="with a campaign (--from-runs given a folder, several files or a shipped name such "
        "as 'campaign'): the link rate of the half declared for fitting; the summary marks "
        "the other half as held out",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=run)


def settle_run_options(args: argparse.Namespace) -> None:
    """Give the run options not given their defaults; with ``--from-runs`` leave them unset
    and refuse those that say how to measure (the saved runs say it: a value given there would
    be ignored). Idempotent."""
    if args.from_runs:
        refuse_given(
            args,
            MEASURING,
            "not with --from-runs (the saved runs say how they were measured; --model, --arch "
            "and --workers-max select among them)",
        )
    else:
        fill_defaults(args, {**MEASURING, **SELECTING})
        _ddp_measuring(args)  # bad bucket options fail before anything is run or kept


def point_selection(args: argparse.Namespace) -> PointSelection:
    """The saved points ``--model``, ``--arch`` and ``--workers-max`` select (--from-runs)."""
    from profilers.distributed.measurements import PointSelection

    arch = getattr(args, "arch", None)
    return PointSelection(
        model=getattr(args, "model", None),
        architectures=tuple(dict.fromkeys(arch)) if arch else None,
        workers_max=getattr(args, "workers_max", None),
    )


def is_campaign(from_runs: list[str]) -> bool:
    """Whether ``--from-runs`` names a campaign (several files, a folder, a shipped campaign)
    rather than one validation's saved runs."""
    if len(from_runs) > 1:
        return True
    path = Path(from_runs[0])
    if path.is_dir():
        return True
    if path.exists():
        return False
    from profilers.distributed.campaign import shipped_campaigns

    return from_runs[0] in shipped_campaigns()


def assess_campaign_with(args: argparse.Namespace) -> Any:
    """The campaign ``--from-runs`` names, assessed with the link options given (shared with
    ``scenarios/validation_campaign.py``)."""
    from profilers.distributed.campaign import assess_campaign

    fit = parse_bandwidth(args.fit_rate, name="--fit-rate") if args.fit_rate else None
    progress = None if args.quiet else lambda line: print(line, file=sys.stderr)
    return assess_campaign(
        args.from_runs,
        link=_link_settings(args),
        fit_rate_bps=fit,
        progress=progress,
        ring_cpu_placement=ring_cpu_placement(args),
        flow_sharing=args.flow_sharing,
        selection=point_selection(args),
    )


# The link options only a parameter server's link uses (validate's predictions of rings leave
# them out).
SERVER_LINK_OPTIONS = ("flow_weight_cv", "duplex", "duplex_interference")


def check_server_options(args: argparse.Namespace, architectures: set[str]) -> None:
    """ConfigError for an option of the parameter server's link given where no point has a
    parameter server (ring AllReduce alone): it would change nothing, yet the report would
    name it as the predictions' value."""
    if all(arch in ("allreduce", "ddp") for arch in architectures):
        refuse_given(
            args,
            SERVER_LINK_OPTIONS,
            "only with a parameter-server point (these are rings alone, ring AllReduce or DDP, "
            "whose predictions do not use it)",
        )


def ring_cpu_placement(args: argparse.Namespace) -> str:
    """Where the ring predictions place the transfers' CPU work per byte (--ring-cpu-work, else
    the default); refused beside --comm-cpu, whose cost per byte replaces that work."""
    given = getattr(args, "ring_cpu_work", None)
    if given is not None and getattr(args, "comm_cpu", None) is not None:
        raise ConfigError(
            f"--ring-cpu-work {given}: not with --comm-cpu (its cost runs beside each transfer "
            "instead of the ring's measured work)"
        )
    return given or RING_CPU_PLACEMENT


def _link_settings(args: argparse.Namespace) -> LinkSettings:
    """The link values the options give; with --flow-sharing warm without a network
    profile's flow weight cvs, which it replaces (an option's it refuses)."""
    link = link_settings(args)
    given = link.flow_weight_cv
    if args.flow_sharing != WARM_SHARING or given.source == DEFAULT_SOURCE:
        return link
    if given.is_option:
        raise ConfigError(
            f"--flow-sharing warm takes each file's own warm-sharing cvs: not with {given.source}"
        )
    return dataclasses.replace(link, flow_weight_cv=Sourced(0.0), flow_weight_cv_push=None)


def _run_campaign(args: argparse.Namespace) -> int:
    from profilers.distributed.campaign import campaign_point_table, campaign_text

    for option in ("out", "save_runs", "save_network"):
        if getattr(args, option) is not None:
            name = "-o/--out" if option == "out" else "--" + option.replace("_", "-")
            given = " ".join(args.from_runs)
            raise ConfigError(f"{name}: not with a campaign (--from-runs {given})")
    report = assess_campaign_with(args)
    if args.json:
        # A point with one run has no standard error: null, as JSON has no NaN. Each point
        # says how its steps and transfers went, as one validation's JSON does.
        points = [
            {
                **{
                    k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()
                },
                **_point_details(p),
            }
            for row, (_, p, _) in zip(campaign_point_table(report).rows, report.rows(), strict=True)
        ]
        context = {
            "sources": list(report.sources),
            "fit_rate_bps": report.fit_rate_bps,
            "flow_sharing": args.flow_sharing,
            # configurations measured twice: the second mean over the first, less one
            "repeat_gaps": {
                kind: [{"label": g.label, "gap": g.gap} for g in gaps]
                for kind, gaps in report.repeat_gaps().items()
            },
            # configurations in two files: the measured means and the simulator's errors
            "repeated_points": [
                {
                    "label": r.label,
                    "architecture": r.architecture,
                    "sources": list(r.sources),
                    "measured": list(r.measured),
                    "errors": list(r.errors),
                }
                for r in report.repeated_points()
            ],
        }
        print_json(args, "validate", points, context=context)
    else:
        print(campaign_text(report))
    return 0


def validate_with(
    args: argparse.Namespace, checkpoint: Callable[[Measurements], None] | None = None
) -> ValidationReport:
    """Run the validation the options describe, or with ``--from-runs`` assess saved runs
    (shared with ``scenarios/validate.py``). ``checkpoint`` gets the runs measured so far after
    each point (see :func:`profilers.distributed.validation.measure`)."""
    from profilers.distributed.measurements import load_measurements
    from profilers.distributed.validation import assess, validate

    settle_run_options(args)
    link = _link_settings(args)  # only values given (not defaults) replace what is measured
    progress = None if args.quiet else lambda line: print(line, file=sys.stderr)
    if args.from_runs:
        if is_campaign(args.from_runs):
            raise ConfigError(
                f"--from-runs: one file of saved runs here; several, a folder or a shipped "
                f"campaign ({' '.join(args.from_runs)}): python scenarios/validation_campaign.py"
            )
        from profilers.distributed.campaign import campaign_files

        # Resolves the one file, or says it names neither a file nor a shipped campaign.
        [(_, path)] = campaign_files(args.from_runs)
        measured = load_measurements(path)
        selection = point_selection(args)
        if selection:
            selected = selection.apply(measured)
            if selected is None:
                raise ConfigError(selection.nothing_text(measured, str(path)))
            measured = selected
        check_server_options(args, {p.architecture.value for p in measured.points})
        return assess(
            measured,
            link=link,
            progress=progress,
            ring_cpu_placement=ring_cpu_placement(args),
            flow_sharing=args.flow_sharing,
        )
    check_server_options(args, set(args.arch or ARCHITECTURES))
    ddp = _ddp_measuring(args)
    rate = parse_bandwidth(args.testbed, name="--testbed") if args.testbed else None
    burst: dict[str, float] = {}  # default: the emulated cluster's own bucket
    if args.testbed_burst is not None:
        if rate is None:
            raise ConfigError("--testbed-burst: only with --testbed (the shaped links' bucket)")
        seconds = parse_duration(args.testbed_burst, name="--testbed-burst", default_unit="ms")
        check_range("--testbed-burst", seconds, 0, 1.0, low_open=True)
        burst["link_burst_s"] = seconds
    return validate(
        args.model,
        batch_size=args.batch_size,
        workers_max=args.workers_max,
        architectures=tuple(args.arch or ARCHITECTURES),
        repetitions=args.repetitions,
        profile_runs=args.profile_runs,
        steps=args.steps,
        warmup=args.warmup,
        overlap=args.overlap,
        link=link,
        link_rate_bps=rate,
        threads=args.threads,
        seed=args.seed,
        progress=progress,
        checkpoint=checkpoint,
        ring_cpu_placement=ring_cpu_placement(args),
        flow_sharing=args.flow_sharing,
        **burst,
        **ddp,
    )


def _ddp_measuring(args: argparse.Namespace) -> dict[str, Any]:
    """``measure``'s DDP bucket arguments (MiB) from --bucket-cap and --first-bucket, which
    need --arch ddp."""
    from simcore.sim.buckets import MIB, parse_bucket_size

    if args.bucket_cap is None and args.first_bucket is None:
        return {}
    if "ddp" not in (args.arch or ()):
        given = "--bucket-cap" if args.bucket_cap is not None else "--first-bucket"
        raise ConfigError(f"{given}: a DDP setting; give --arch ddp too")
    caps = tuple(parse_bucket_size(text, "--bucket-cap") / MIB for text in args.bucket_cap or ())
    first = None
    if args.first_bucket is not None:
        first = parse_bucket_size(args.first_bucket, "--first-bucket") / MIB
    return {"bucket_caps_mb": caps or (None,), "first_bucket_mb": first}


def run(args: argparse.Namespace) -> int:
    """Handler: validate, print the report (text or JSON), optionally save the solo trace."""
    from profilers.distributed.validation import report_text

    settle_run_options(args)
    ring_cpu_placement(args)  # refused combinations, before anything is read or run
    if args.from_runs:
        refuse_given(
            args,
            ("no_save_runs",),
            "not with --from-runs (nothing is measured, nothing kept: the saved runs are read)",
        )
    if args.from_runs and is_campaign(args.from_runs):
        return _run_campaign(args)
    if args.fit_rate is not None:
        raise ConfigError(
            "--fit-rate: only with a campaign (--from-runs given a folder, several files or a "
            "shipped campaign)"
        )
    # Checked before minutes of training, not after.
    if args.flow_sharing == WARM_SHARING and not args.from_runs and args.testbed is None:
        raise ConfigError(
            "--flow-sharing warm: only with --testbed (the warm sharing is measured on the "
            "emulated cluster's shaped link) or --from-runs"
        )
    if args.out is not None:
        check_output(args.out, "-o/--out", force=args.force)
    if args.save_runs is not None:
        check_output(args.save_runs, "--save-runs", force=args.force)
        if args.out is not None and Path(args.out).resolve() == Path(args.save_runs).resolve():
            raise ConfigError(f"--save-runs: {args.save_runs} is also the trace's path (-o)")
        if args.from_runs:
            raise ConfigError(
                f"--save-runs: not with --from-runs ({args.from_runs[0]} holds the runs already)"
            )
    elif not (args.from_runs or args.no_save_runs):
        args.save_runs = str(default_runs_path(args))  # a new name: nothing to overwrite
    if args.save_network is not None:
        check_output(args.save_network, "--save-network", force=args.force)
    if not args.from_runs:
        _check_run_sizes(args)
    if args.save_runs and not args.from_runs:
        if not args.quiet:  # (an interrupted validation leaves its points there too)
            print(
                f"sgdsim validate: keeping the runs in {args.save_runs}, after every point",
                file=sys.stderr,
            )
        report = validate_keeping_runs(args, Path(args.save_runs))
    else:
        report = validate_with(args)
    if args.save_runs and not args.quiet:
        print(
            f"sgdsim validate: runs kept in {args.save_runs} (`sgdsim validate --from-runs "
            f"{args.save_runs}` predicts them again without training)",
            file=sys.stderr,
        )
    if args.out:
        from simcore.trace.io import save_trace

        save_trace(report.trace, args.out, overwrite=args.force)
    if args.save_network and report.network is not None:
        from simcore.network_io import save_network_profile

        save_network_profile(report.network, args.save_network, overwrite=args.force)
    if args.json:
        context = _report_dict(report)
        context["runs_file"] = args.save_runs  # None: not kept, or read with --from-runs
        print_json(args, "validate", context.pop("points"), context=context)
    else:
        print(report_text(report))
    return 0


#: Where ``sgdsim validate`` keeps the runs it measures unless told otherwise.
DEFAULT_RUNS_DIR = "results/validate"


def default_runs_path(args: argparse.Namespace, now: datetime | None = None) -> Path:
    """A new file in DEFAULT_RUNS_DIR for this validation's runs, named after what it measures
    and when (UTC): ``runs-cnn-b32-300Mbit-20261129T130501Z.json.gz``; ``-2``, ``-3``, ... if
    that name is taken. Nothing is created here (:func:`validate_keeping_runs` makes the
    folder when it writes the first point). For ``args`` with their defaults
    (:func:`settle_run_options`)."""
    when = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    model = re.sub(r"[^A-Za-z0-9_.-]+", "-", args.model).strip("-.") or "model"
    link = "loopback"
    if args.testbed:
        link = f"{parse_bandwidth(args.testbed, name='--testbed') / 1e6:g}Mbit"
    folder = Path(DEFAULT_RUNS_DIR)
    stem = f"runs-{model}-b{args.batch_size}-{link}-{when}"
    path, n = folder / f"{stem}.json.gz", 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.json.gz"
    return path


# Limits of a validation run here: more is days of training or more ranks than a machine holds.
RUN_LIMITS = {
    "workers_max": 64,
    "repetitions": 100,
    "profile_runs": 100,
    "steps": 100_000,
    "warmup": 100_000,
}


def _check_run_sizes(args: argparse.Namespace) -> None:
    for key, limit in RUN_LIMITS.items():
        value = getattr(args, key)
        if value > limit:
            option = option_name(key)
            raise ConfigError(f"{option}: {value} is more than the {limit} a validation runs")


def validate_keeping_runs(args: argparse.Namespace, path: Path) -> ValidationReport:
    """:func:`validate_with`, saving the runs to ``path`` after every point (replacing what an
    earlier point wrote there): if a run fails, the error says where the earlier runs are."""
    from profilers.distributed.measurements import save_measurements

    saved = False

    def keep(measured: Measurements) -> None:
        nonlocal saved
        path.parent.mkdir(parents=True, exist_ok=True)
        save_measurements(measured, path, overwrite=True)
        saved = True

    try:
        return validate_with(args, keep)
    except SgdsimError as err:
        if not saved:
            raise
        raise type(err)(
            f"{err}; what was measured before it is in {path} (assess it with --from-runs)"
        ) from err


def _ring_cpu_work_dict(report: ValidationReport) -> dict[str, Any] | None:
    """A ring rank's CPU work per byte and the two measurements it is the larger of."""
    work = report.ring_cpu_work
    if work is None:
        return None
    return {
        "s_per_byte": work.s_per_byte,
        "from_runs_s_per_byte": work.from_runs_s_per_byte,
        "from_ring_s_per_byte": work.from_ring_s_per_byte,
    }


def _listed(values: tuple[float, ...] | None) -> list[float] | None:
    return None if values is None else list(values)


def _quantiles(values: tuple[float, float, float]) -> list[float] | None:
    """Step-time quantiles (5%, 50%, 95%); null where not known (JSON has no NaN)."""
    return None if any(math.isnan(v) for v in values) else list(values)


def _point_details(p: ValidationPoint) -> dict[str, Any]:
    """How a point's steps and transfers went, measured and simulated, as its tables show it:
    step-time quantiles (s), each run's or seed's phase pattern, the Async-SGD link occupancy
    and the Sync-SGD pull arrivals (null where not known)."""
    from simcore.sim.occupancy import occupancy_to_dict

    def occupancy(value: LinkOccupancy | None) -> dict[str, Any] | None:
        return None if value is None else occupancy_to_dict(value)

    return {
        "measured_step_s_quantiles": _quantiles(p.measured_step_s),
        "simulated_step_s_quantiles": _quantiles(p.simulated_step_s),
        "measured_phases": list(p.measured_phases),
        "simulated_phases": list(p.simulated_phases),
        # each run's / seed's median distance between workers' step starts (0 .. 0.5 steps)
        "measured_offsets": list(p.measured_offsets),
        "simulated_offsets": list(p.simulated_offsets),
        # each simulated seed's examples/s where the prediction is their mean (else empty)
        "simulated_seeds_examples_per_s": list(p.simulated_seeds),
        "measured_occupancy": occupancy(p.measured_occupancy),
        "simulated_occupancy": occupancy(p.simulated_occupancy),
        # Sync-SGD: the k-th pull's arrival after the release, in one pull alone
        "measured_pull_arrivals": _listed(p.measured_pull_arrivals),
        "simulated_pull_arrivals": _listed(p.simulated_pull_arrivals),
        "measured_computations": _listed(p.measured_computations),
        "simulated_computations": _listed(p.simulated_computations),
    }


def _report_dict(report: ValidationReport) -> dict[str, Any]:
    from profilers.distributed.validation import host_load_text

    return {
        "model_name": report.model_name,
        "batch_size": report.batch_size,
        "bandwidth_bps": report.bandwidth_bps,
        "ring_bandwidth_bps": report.ring_bandwidth_bps,
        "host_cpu_cores": report.host_cpu_cores,
        "threads": report.threads,
        "solo_examples_per_s": report.solo_examples_per_s,
        "solo_simulated_examples_per_s": report.solo_simulated,
        # runs that shared the machine with other work (profilers.host_load); "" if none
        "host_load_note": host_load_text(report.measurements),
        "testbed_link_rate_bps": report.link_rate_bps,
        "testbed_burst_s": report.testbed_burst_s,
        "flow_weight_cv": report.flow_weight_cv,
        "flow_sharing": report.flow_sharing,
        "link": report.link_text,
        "comm_cpu": None if report.comm_cpu is None else dataclasses.asdict(report.comm_cpu),
        "ring_cpu_work": _ring_cpu_work_dict(report),
        "points": [
            {
                "architecture": p.architecture,
                # DDP: the runs' bucket limits as torch applied them; null otherwise
                "buckets": p.buckets or None,
                "workers": p.workers,
                "measured_examples_per_s": list(p.measured),
                # the measured mean's standard error over the mean; null with one run
                "measured_relative_standard_error": (
                    None if math.isnan(p.standard_error) else p.standard_error
                ),
                "simulated_examples_per_s": p.simulated,
                "simulated_ideal_examples_per_s": p.simulated_ideal,
                "coarse_examples_per_s": p.coarse,
                "compute_slowdown": p.slowdown,
                # PS workers' CPU per step over the one-worker runs'; null: rings, not recorded
                "cpu_ratio": None if math.isnan(p.cpu_ratio) else p.cpu_ratio,
                **_point_details(p),
            }
            for p in report.points
        ],
    }
