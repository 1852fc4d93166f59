"""``sgdsim timeline``: simulate W workers and draw who does what when (a Gantt chart).

One row per worker and resource (pull, compute, push, update at the server), colored by op kind,
over a window of steps (``--window 10:12``) or of time (``--time 1.5s:2s``); ``--aggregate``
draws how many workers pull, compute, push and update over time instead; ``--profiled`` draws the
profiled step above the simulated one-worker step. ``--chrome`` writes what the figure shows as
Chrome Trace Event JSON (Perfetto UI, chrome://tracing).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from typing import Any

from simcore.cli.ddp_options import add_ddp_options, ddp_fields
from simcore.cli.guards import check_rates, check_work, fill_defaults, refuse_given
from simcore.cli.host_options import (
    add_host_options,
    apply_host_options,
    host_sources,
    load_topology_option,
    topology_bandwidth_bps,
    workers_text,
)
from simcore.cli.link_options import (
    DEFAULT_BANDWIDTH,
    NETWORK_HELP,
    add_effect_options,
    link_lines,
    link_settings,
)
from simcore.cli.output_options import add_output_options, simulation_points
from simcore.cli.precision_options import (
    add_precision_options,
    first_length,
    implied_mode,
    length_text,
    precision_rule,
)
from simcore.cli.seeds import (
    SIMULATE_PHASES,
    add_replications_options,
    lockstep_note,
    replications_option,
    shown_seed_note,
)
from simcore.cli.simulate_cmd import DEFAULT_HTTP2_WINDOW, check_window_scheduler
from simcore.errors import ConfigError
from simcore.export.chrome import (
    TimelineSpan,
    chrome_trace,
    profiled_step_spans,
    simulated_spans,
)
from simcore.files import FIGURE_SUFFIXES, check_output
from simcore.link_settings import LinkSettings, with_traces
from simcore.plots.timeline import plot_profiled_vs_simulated, plot_timeline, select
from simcore.report.output import print_json
from simcore.sim import SimulationConfig, SimulationResult, validate
from simcore.sim.config import ARCHS, MODES
from simcore.sim.occupancy import (
    LinkOccupancy,
    occupancy_text,
    occupancy_to_dict,
    timeline_occupancy,
)
from simcore.sim.precision import PrecisionRule, simulate_sized, stopping_note
from simcore.sim.sharing import sharing_policy_names
from simcore.sim.streams import stream_scheduler_names
from simcore.topology import Topology
from simcore.trace.io import load_trace, write_json_atomic
from simcore.trace.model import Trace
from simcore.units import (
    format_bandwidth,
    format_number,
    parse_bandwidth,
    parse_duration,
    parse_size,
)

WINDOW_STEPS = 3  # steps shown by default, from the middle of the run


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "timeline",
        help="draw the simulated timeline of W workers (Gantt chart, Chrome trace)",
        description="Simulate W workers with a timeline and draw it: one row per worker and "
        "resource (pull, compute, push, server update), colored by op kind, over a window of "
        "steps. Bandwidths and durations take units (1Gbps, 50us).",
    )
    p.add_argument("trace", metavar="TRACE", help="trace file or sample name")
    p.add_argument("--workers", help="W, a single count (default 4; 1 with --profiled)")
    p.add_argument(
        "--arch",
        choices=ARCHS,
        default="ps",
        help="parameter server, ring AllReduce of each layer, or PyTorch DDP (ps)",
    )
    p.add_argument("--mode", choices=MODES, help="default async, and sync with --arch allreduce")
    p.add_argument(
        "--sharing",
        choices=sharing_policy_names(),
        help="link sharing (default: ps, or allreduce for --arch allreduce)",
    )
    p.add_argument(
        "--bandwidth",
        help=f"server link bandwidth (default: --network's, else {DEFAULT_BANDWIDTH})",
    )
    p.add_argument("--network", help=NETWORK_HELP)
    p.add_argument("--latency", help="latency per transfer, e.g. 100us (default: --network's)")
    p.add_argument("--servers", type=int, default=1, help="parameter servers (default 1)")
    p.add_argument(
        "--scheduler",
        choices=stream_scheduler_names(),
        default="fifo",
        help="stream order on each connection (http2: multiplexing with --http2-window)",
    )
    p.add_argument(
        "--http2-window",
        help=f"HTTP/2 window WIN, with --scheduler http2 (default {DEFAULT_HTTP2_WINDOW})",
    )
    p.add_argument(
        "--steps", type=int, help="steps per worker (default: as many as --precision needs)"
    )
    add_precision_options(p)
    p.add_argument("--seed", type=int, default=1, help="root seed (default 1)")
    add_replications_options(p, phases=False)
    p.add_argument(
        "--window",
        help="steps to show, FIRST:LAST inclusive (default: 3 steps from the middle of the run)",
    )
    p.add_argument("--time", help="time window to show instead, T0:T1 (e.g. 1.5s:2s)")
    p.add_argument("--show-workers", help="workers to draw, e.g. 0,1,2 (default all)")
    p.add_argument(
        "--aggregate",
        action="store_true",
        help="draw the number of workers busy on each resource over time instead of the rows",
    )
    p.add_argument(
        "--profiled",
        action="store_true",
        help="draw the profiled step above the simulated one-worker step instead",
    )
    p.add_argument("--step", type=int, help="profiled step for --profiled (default 0)")
    p.add_argument("-o", "--out", help="output figure: .png, .svg or .pdf")
    p.add_argument(
        "--chrome", help="also write what is shown as Chrome Trace Event JSON (.json, .json.gz)"
    )
    p.add_argument("--title", help="figure title (default: what was simulated)")
    p.add_argument("--flow-cap", help="per-flow rate cap, e.g. 10Gbps (TPDS'22 4.4)")
    add_ddp_options(p)
    add_host_options(p, hosts_list=False)
    add_effect_options(p, cpu=False)
    p.add_argument("--force", action="store_true", help="overwrite existing output files")
    add_output_options(p, table=False)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.out is None and args.chrome is None:
        raise ConfigError("-o/--out: give an output PNG, or --chrome FILE, or both")
    _check_drawing_options(args)
    if args.out is not None:
        check_output(args.out, "-o/--out", force=args.force, suffixes=FIGURE_SUFFIXES)
    if args.chrome is not None:
        check_output(args.chrome, "--chrome", force=args.force)
    workers = _workers(args)
    window = _span(args.window, "--window") if args.window else None
    time_s = _time_window(args.time) if args.time else None
    if window is not None and time_s is not None:
        raise ConfigError("--time: give --window (steps) or --time, not both")
    shown = _int_list(args.show_workers, "--show-workers") if args.show_workers else None
    if shown is not None and not all(0 <= w < workers for w in shown):
        raise ConfigError(
            f"--show-workers: {args.show_workers!r} must name workers 0..{workers - 1}"
        )
    if args.steps is not None and args.steps < 1:
        raise ConfigError(f"--steps: must be >= 1, got {args.steps}")
    rule = precision_rule(args, min_steps=1 if window is None else window[1] + 1)
    longest = args.steps if rule is None else rule.max_steps
    limit = "--steps" if rule is None else "--max-steps"
    if window is not None and not 0 <= window[0] <= window[1] < longest:
        raise ConfigError(
            f"--window: {args.window!r} must be FIRST:LAST with 0 <= FIRST <= LAST < {limit} "
            f"({longest})"
        )
    trace = load_trace(args.trace)
    topology = load_topology_option(args)
    link = link_settings(
        args, topology_bps=topology_bandwidth_bps(args, topology), topology=args.topology
    )
    link = with_traces(link, [trace])
    config = _config(args, workers, link, topology, rule, trace)
    ops = len(trace.ops)
    check_work(config.workers * config.steps * ops, ops, "--workers x --steps")
    validate(trace, config)
    result = simulate_sized(trace, config, rule)
    check_rates([(f"--workers {workers}", result.examples_per_s.value)])
    if window is None and time_s is None:
        window = _middle_window(result.config.steps)
    occupancy = _occupancy(result)
    # With --json, stdout holds the document alone: what the drawing says goes to stderr.
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        if args.profiled:
            _profiled(args, trace, result)
        else:
            _timeline(args, trace, result, window, time_s, shown, occupancy)
    print("\n".join(link_lines(link, link.describe(config))), file=sys.stderr)
    if args.json:
        written = [path for path in (args.out, args.chrome) if path is not None]
        context = {
            "written": written,
            "window_steps": None if window is None else list(window),
            "link_occupancy": None if occupancy is None else occupancy_to_dict(occupancy),
        }
        points = simulation_points([result], link, host_sources(args, result.config))
        print_json(args, "timeline", points, context=context)
    return 0


def _check_drawing_options(args: argparse.Namespace) -> None:
    """ConfigError for a drawing option the drawing asked for does not use (each did nothing):
    --profiled draws one profiled step (--step) beside the simulated one, not a window of the
    run; the figure's options need the figure (-o). Gives --step its default."""
    if args.profiled:
        refuse_given(
            args,
            ("window", "time", "show_workers", "aggregate"),
            "not with --profiled (it draws one profiled step, --step, beside the simulated "
            "one-worker step)",
        )
        fill_defaults(args, {"step": 0})
    else:
        refuse_given(args, ("step",), "only with --profiled (--window picks the simulated steps)")
    if args.out is None:
        refuse_given(
            args, ("aggregate", "title"), "only with -o/--out (the figure; --chrome has none)"
        )


def _workers(args: argparse.Namespace) -> int:
    text = workers_text(args, default="1" if args.profiled else "4")
    option = "--hosts" if args.hosts is not None else "--workers"
    try:
        workers = int(text)
    except ValueError:
        raise ConfigError(f"{option}: {text!r} is not a single worker count") from None
    if workers < 1:
        raise ConfigError(f"{option}: must be >= 1, got {workers}")
    if args.profiled and workers != 1:
        raise ConfigError(
            "--profiled: compares the profile with one simulated worker; drop --workers"
        )
    return workers


def _middle_window(steps: int) -> tuple[int, int]:
    """WINDOW_STEPS steps from the middle of a run of ``steps`` steps (fewer if it is shorter)."""
    first = min(steps // 2, max(0, steps - WINDOW_STEPS))
    return first, min(steps, first + WINDOW_STEPS) - 1


def _config(
    args: argparse.Namespace,
    workers: int,
    link: LinkSettings,
    topology: Topology | None,
    rule: PrecisionRule | None,
    trace: Trace,
) -> SimulationConfig:
    check_window_scheduler(args.http2_window, "--http2-window", args.scheduler)
    mode = implied_mode(args.arch, args.mode)
    steps, warmup = first_length(args, rule, workers, mode)
    config = SimulationConfig(
        workers=workers,
        bandwidth_bps=link.bandwidth_bps.value,
        arch=args.arch,
        mode=mode,
        sharing=args.sharing,
        servers=args.servers,
        scheduler=args.scheduler,
        window_bytes=parse_size(args.http2_window or DEFAULT_HTTP2_WINDOW, name="--http2-window"),
        steps=steps,
        warmup_steps=warmup,
        batches=max(2, min(10, steps - warmup)),
        seed=args.seed,
        replications=replications_option(args),
        timeline=True,
        flow_cap_bps=None
        if args.flow_cap is None
        else parse_bandwidth(args.flow_cap, name="--flow-cap"),
        **ddp_fields(args),
    )
    return link.apply(apply_host_options(args, config, topology, [trace]))


def _timeline(
    args: argparse.Namespace,
    trace: Trace,
    result: SimulationResult,
    window: tuple[int, int] | None,
    time_s: tuple[float, float] | None,
    shown: list[int] | None,
    occupancy: LinkOccupancy | None,
) -> None:
    timeline = result.timeline
    assert timeline is not None
    c = result.config
    spans, _, bounds = select(
        timeline, workers=shown, steps=window, time_s=time_s, trace=trace, arch=c.arch
    )
    where = (
        f"steps {window[0]}..{window[1]}"
        if window
        else f"{format_number(bounds[0])}..{format_number(bounds[1])} s"
    )
    if args.out is not None:
        title = args.title or (
            f"{trace.metadata.model_name}, batch {trace.metadata.batch_size}: {c.workers} "
            f"worker{'s' if c.workers > 1 else ''}, {c.mode}, sharing {c.policy_name}, "
            f"{format_bandwidth(c.bandwidth_bps)}"
            + (f", {c.servers} servers" if c.servers > 1 else "")
            + (f", scheduler {c.scheduler}" if c.scheduler != "fifo" else "")
            + f"; {where}"
        )
        plot_timeline(
            timeline,
            args.out,
            title=title,
            workers=shown,
            steps=window,
            time_s=time_s,
            aggregate=args.aggregate,
            trace=trace,
            arch=c.arch,
            overwrite=args.force,
        )
        print(f"wrote {args.out} ({where}, {len(spans):,} ops)")
    if args.chrome is not None:
        _write_chrome(args, spans, trace, result, where)
    print(
        f"simulated {c.workers} workers x {length_text(result)}: "
        f"{format_number(result.examples_per_s.value)} examples/s" + shown_seed_note(result),
        file=sys.stderr,
    )
    if occupancy is not None and c.workers > 1:
        print(f"the servers' links after warm-up: {occupancy_text(occupancy)}", file=sys.stderr)
    for note in (stopping_note(result), lockstep_note(result, phases_option=SIMULATE_PHASES)):
        if note:
            print(f"note: {note}", file=sys.stderr)


def _occupancy(result: SimulationResult) -> LinkOccupancy | None:
    """How the parameter servers' links were occupied after warm-up (None: no servers)."""
    c = result.config
    if c.arch != "ps" or result.timeline is None:
        return None
    return timeline_occupancy(result.timeline, c.workers, c.warmup_steps)


def _profiled(args: argparse.Namespace, trace: Trace, result: SimulationResult) -> None:
    profiled = profiled_step_spans(trace, args.step)  # checks --step before drawing
    if args.out is not None:
        plot_profiled_vs_simulated(
            trace, result, args.out, step=args.step, title=args.title, overwrite=args.force
        )
        print(f"wrote {args.out} (profiled step {args.step} and a simulated one-worker step)")
    if args.chrome is not None:
        timeline = result.timeline
        assert timeline is not None
        own = [s for s in timeline.steps if s.profile_step == args.step]
        chosen = own[0] if own else timeline.steps[0]
        simulated = simulated_spans(
            timeline, steps=(chosen.step, chosen.step), trace=trace, arch=result.config.arch
        )
        spans = [_renamed(s, "profiled", 0.0) for s in profiled]
        spans += [_renamed(s, "simulated", chosen.start_s) for s in simulated]
        _write_chrome(args, spans, trace, result, f"profiled step {args.step}")


def _renamed(span: TimelineSpan, prefix: str, origin_s: float) -> TimelineSpan:
    """The span in process ``PREFIX process``, with time measured from ``origin_s``."""
    return dataclasses.replace(
        span, process=f"{prefix} {span.process}", start_s=span.start_s - origin_s
    )


def _write_chrome(
    args: argparse.Namespace,
    spans: list[TimelineSpan],
    trace: Trace,
    result: SimulationResult,
    where: str,
) -> None:
    c = result.config
    metadata = {
        "model": trace.metadata.model_name,
        "batch_size": trace.metadata.batch_size,
        "workers": c.workers,
        "mode": c.mode,
        "sharing": c.policy_name,
        "bandwidth_bps": c.bandwidth_bps,
        "window": where,
    }
    path = write_json_atomic(args.chrome, chrome_trace(spans, metadata), overwrite=args.force)
    print(f"wrote {path} ({len(spans):,} events; open it in https://ui.perfetto.dev)")


def _span(text: str, name: str) -> tuple[int, int]:
    first, sep, last = text.partition(":")
    try:
        if not sep:
            raise ValueError(text)
        return int(first), int(last)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not FIRST:LAST, e.g. 10:12") from None


def _time_window(text: str) -> tuple[float, float]:
    first, sep, last = text.partition(":")
    if not sep:
        raise ConfigError(f"--time: {text!r} is not T0:T1, e.g. 1.5s:2s")
    t0 = parse_duration(first, name="--time", positive=False)
    t1 = parse_duration(last, name="--time", positive=False)
    if not t0 < t1:
        raise ConfigError(f"--time: {text!r} is empty; T0 must be before T1")
    return t0, t1


def _int_list(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not a comma-separated list of workers") from None
