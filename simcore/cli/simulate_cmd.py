"""``sgdsim simulate``: predict the throughput of W workers from a one-worker trace.

One worker count prints a summary (or one JSON object with ``--json``); a list or range
(``--workers 1-16``, ``--workers 1,2,4,8``) prints a table with confidence intervals. Bandwidths,
sizes and durations accept units (``10Gbps``, ``64KiB``, ``50us``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcore.cli.ddp_options import add_ddp_options, bucket_cap_note, ddp_fields, ddp_text
from simcore.cli.export_options import (
    add_export_options,
    check_export_options,
    exporting,
    write_exports,
)
from simcore.cli.guards import check_range, check_rates, check_work
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
    link_settings,
)
from simcore.cli.machine import available_memory_bytes
from simcore.cli.output_options import (
    EXIT_INTERRUPTED,
    SIMULATE_CSV_HEADER,
    add_output_options,
    interrupted_note,
    print_csv,
    simulate_csv_rows,
    simulation_points,
)
from simcore.cli.precision_options import (
    add_precision_options,
    first_length,
    implied_mode,
    length_text,
    notes,
    precision_rule,
)
from simcore.cli.progress import Progress
from simcore.cli.seeds import (
    add_replications_options,
    format_phases,
    format_spread,
    lockstep_note,
    replications_option,
    sweep_spread_cell,
)
from simcore.errors import ConfigError
from simcore.export.chrome import chrome_trace, simulated_spans
from simcore.files import check_output, read_json_file
from simcore.link_settings import LinkSettings, with_traces
from simcore.parallel import Interrupted, current_jobs, jobs
from simcore.report.output import print_json
from simcore.sim import SimulationConfig, SimulationResult, validate
from simcore.sim.config import (
    ARCHS,
    CAP_MODES,
    HYBRID,
    JITTERS,
    MODES,
    OVERLAPS,
    PARSE_PLACEMENTS,
)
from simcore.sim.precision import PrecisionRule, simulate_many, worker_steps
from simcore.sim.preflight import MEMORY_FRACTION, check_memory
from simcore.sim.results import timeline_to_dict
from simcore.sim.sharing import sharing_policy_names
from simcore.sim.streams import stream_scheduler_names
from simcore.topology import Topology
from simcore.trace.cpu import measured_comm_thread
from simcore.trace.io import load_trace, write_json_atomic
from simcore.trace.model import Trace
from simcore.units import (
    format_bandwidth,
    format_number,
    format_seconds,
    parse_bandwidth,
    parse_duration,
    parse_size,
    parse_time_per_size,
)

MAX_WORKERS_LISTED = 4096
DEFAULT_HTTP2_WINDOW = "64KiB"
DEFAULT_BATCHES = 10
MAX_JITTER_CV = 100.0  # beyond it lognormal draws overflow; real profiles show cv < 1
MAX_SPEED_FACTOR = 1e6  # --speed: 1e-6 to 1e6 times the profiled speed
PROGRESS_MIN_OPS = 2_000_000  # simulated ops; about 5 s at the engine's usual rate


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="predict throughput on W workers by discrete-event simulation",
        description="Predict the throughput of W workers from a one-worker trace by "
        "discrete-event simulation. Bandwidths, sizes and durations take units (10Gbps, 64KiB, "
        "50us); --workers takes a count, a list (1,2,4) or a range (1-16) for a sweep.",
    )
    p.add_argument(
        "trace",
        nargs="+",
        metavar="TRACE",
        help="trace file or sample name; several = one per worker type",
    )
    p.add_argument("--workers", help="W, a list 1,2,4 or a range 1-16 (default 1)")
    p.add_argument(
        "--bandwidth",
        help=f"server link bandwidth (default: --network's, else {DEFAULT_BANDWIDTH})",
    )
    p.add_argument("--network", help=NETWORK_HELP)
    p.add_argument(
        "--arch",
        choices=ARCHS,
        default="ps",
        help="parameter server, ring AllReduce of each layer, or PyTorch DDP (buckets; default ps)",
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        help="Async-SGD or Sync-SGD (a barrier after each step; default async, and sync with "
        "--arch allreduce)",
    )
    p.add_argument(
        "--sharing",
        choices=[*sharing_policy_names(), HYBRID],
        default=None,
        help="link sharing (default: ps, or allreduce for --arch allreduce)",
    )
    p.add_argument(
        "--steps", type=int, help="steps per worker (default: as many as --precision needs)"
    )
    p.add_argument(
        "--warmup",
        type=int,
        help="warm-up steps left out (default: a tenth of the run, at least 10 steps, or 2.5 "
        "per worker for async; at most half of the run)",
    )
    add_precision_options(p)
    p.add_argument("--seed", type=int, default=1, help="root seed (default 1)")
    add_replications_options(p)
    p.add_argument(
        "--batches",
        type=int,
        help=f"batches for batch means, at most the measured steps (default {DEFAULT_BATCHES}, "
        "or one per measured step if there are fewer)",
    )
    p.add_argument("--flow-cap", help="per-flow rate cap, e.g. 10Gbps (TPDS'22 4.4)")
    p.add_argument(
        "--cap-mode",
        choices=CAP_MODES,
        help="with --flow-cap: clip: min(share, cap), spare unused (the paper; default); "
        "maxmin: spare to uncapped flows",
    )
    p.add_argument(
        "--scheduler",
        choices=stream_scheduler_names(),
        default="fifo",
        help="stream order on each connection (http2: multiplexing with --http2-window)",
    )
    p.add_argument("--http2-window", help="HTTP/2 window WIN (default 64KiB)")
    # The name of --http2-window before timeline's --window (steps) made it ambiguous.
    p.add_argument("--window", help=argparse.SUPPRESS)
    p.add_argument(
        "--parse-alpha",
        default="0s/B",
        help="parsing overhead per byte, a time per size, e.g. 1ns/B or 0.5us/KiB (default 0; "
        "at most 1s/B)",
    )
    p.add_argument("--parse-beta", default="0s", help="parsing overhead per transfer, e.g. 50us")
    p.add_argument(
        "--parse-placement",
        choices=PARSE_PLACEMENTS,
        help="where the parsing work runs: after each transfer on the worker's computation "
        "(default), or, for --arch allreduce, pipelined with each all-reduce's messages "
        "on a communication thread sharing the host's cores (SEMANTICS.md; the default for "
        "the ring CPU work of a --network profile)",
    )
    p.add_argument(
        "--ring-segment",
        metavar="SIZE",
        help="--arch allreduce: send each all-reduce as gloo does, in segments of at most SIZE "
        "(gloo: 1MiB), at least two per worker, each with its latency and parsing work "
        "(default: --network's, else the paper's 2(W-1) messages of 1/W of a layer)",
    )
    p.add_argument(
        "--latency", help="latency per transfer, e.g. 100us (default: --network's, else 0)"
    )
    p.add_argument("--servers", type=int, default=1, help="parameter servers (default 1)")
    p.add_argument(
        "--placement",
        help="layers on the parameter servers: greedy (default), round-robin, or a JSON file "
        "{layer: server}",
    )
    p.add_argument("--worker-bandwidth", help="each worker's NIC (default: --bandwidth)")
    p.add_argument("--speed", help="per-worker compute speed factors, e.g. 1,1,2")
    p.add_argument("--worker-types", help="per-worker trace index when several traces, e.g. 0,1")
    p.add_argument(
        "--jitter",
        choices=JITTERS,
        default="none",
        help="resample: each op's duration drawn from its profiled values; exponential: "
        "durations and transfer sizes exponential around the profiled ones (default none)",
    )
    p.add_argument(
        "--jitter-cv",
        type=float,
        default=0.0,
        help="multiplicative noise on computation durations, coefficient of variation",
    )
    p.add_argument(
        "--overlap",
        choices=OVERLAPS,
        default="layerwise",
        help="layerwise: per-layer overlap of communication and computation, as in the trace; "
        "none: strict phases, all pulls then all computation then all pushes (default layerwise)",
    )
    add_ddp_options(p)
    add_host_options(p)
    add_effect_options(p, cpu=False)
    add_output_options(p)
    p.add_argument(
        "--timeline", help="write the simulated timeline to this .json (or .json.gz) file"
    )
    p.add_argument(
        "--timeline-format",
        choices=("chrome", "records"),
        help="--timeline's format: chrome (chrome://tracing, Perfetto) or records (columns and "
        "rows; default chrome)",
    )
    add_export_options(p)
    p.add_argument(
        "--force",
        action="store_true",
        help="overwrite existing output files (--timeline, --hta-dir, --chakra-dir)",
    )
    p.add_argument(
        "--save-experiment",
        metavar="FILE.toml",
        help="write the experiment file this command line means (sgdsim run FILE runs it) and "
        "run nothing",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(handler=run)


def parse_workers(text: str) -> list[int]:
    """``8``, ``1,2,4`` or ``1-16`` (or a mix, ``1-4,8``) as a list of worker counts."""
    counts: list[int] = []
    for part in text.split(","):
        try:
            if "-" in part.strip("-"):
                low, high = (int(x) for x in part.split("-", 1))
                if high < low or high - low > MAX_WORKERS_LISTED:
                    raise ValueError(part)
                counts.extend(range(low, high + 1))
            else:
                counts.append(int(part))
        except ValueError:
            raise ConfigError(
                f"--workers: {text!r} is not a count, list (1,2,4) or range (1-16)"
            ) from None
    return counts


def _speeds(text: str | None, name: str) -> tuple[float, ...] | None:
    """Speed factors, each from 1/MAX_SPEED_FACTOR to MAX_SPEED_FACTOR."""
    if text is None:
        return None
    try:
        speeds = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not a comma-separated list of numbers") from None
    low, high = 1 / MAX_SPEED_FACTOR, MAX_SPEED_FACTOR
    if not all(low <= v <= high for v in speeds):  # also refuses nan
        raise ConfigError(f"{name}: {text!r} must be factors from {low:g} to {high:g}")
    return speeds


def _ints(text: str | None, name: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not a comma-separated list of integers") from None


def _placement(text: str) -> str | dict[str, int]:
    if text in ("greedy", "round-robin"):
        return text
    path = Path(text)
    data = read_json_file(path, what="the --placement file") if path.is_file() else None
    if not isinstance(data, dict):
        raise ConfigError(
            f"--placement: {text!r} is not greedy, round-robin or a JSON file {{layer: server}}"
        )
    return data


def parse_alpha_option(text: str) -> tuple[float, bool]:
    """``--parse-alpha`` in seconds per byte, a time per size (``1ns/B``), and whether it was a
    bare number (still read as seconds per byte; :func:`run` then says so)."""
    seconds_per_byte, bare = parse_time_per_size(text, name="--parse-alpha")
    if not 0 <= seconds_per_byte <= 1:
        raise ConfigError(
            f"--parse-alpha: {text!r} is {seconds_per_byte:g} s per byte; give 0 to 1s/B, "
            "e.g. 1ns/B or 0.5us/KiB"
        )
    return seconds_per_byte, bare


def http2_window_option(args: argparse.Namespace) -> tuple[str, str]:
    """(text, option as typed) of the HTTP/2 window: ``--http2-window``, else the deprecated
    ``--window`` alias, else the 64KiB default."""
    if args.window is not None:
        if args.http2_window is not None:
            raise ConfigError("--window: give --http2-window alone (--window is its old name)")
        check_window_scheduler(args.window, "--window", args.scheduler)
        return args.window, "--window"
    check_window_scheduler(args.http2_window, "--http2-window", args.scheduler)
    return (args.http2_window or DEFAULT_HTTP2_WINDOW), "--http2-window"


def check_window_scheduler(window: str | None, option: str, scheduler: str) -> None:
    """ConfigError for an HTTP/2 window given with another stream scheduler: only the http2
    scheduler has a flow-control window (it did nothing there)."""
    if window is not None and scheduler != "http2":
        raise ConfigError(
            f"{option} {window}: only with --scheduler http2 (the window of HTTP/2's flow "
            f"control; --scheduler is {scheduler})"
        )


def command_link(args: argparse.Namespace, topology: Topology | None) -> LinkSettings:
    """The link of ``simulate`` and ``timeline``: options, else the topology's bandwidth, else
    ``--network``'s profile, else the defaults."""
    return link_settings(
        args, topology_bps=topology_bandwidth_bps(args, topology), topology=args.topology
    )


def build_config(
    args: argparse.Namespace,
    workers: int,
    link: LinkSettings,
    topology: Topology | None = None,
    rule: PrecisionRule | None = None,
    traces: Sequence[Trace] = (),
) -> SimulationConfig:
    """The SimulationConfig the arguments describe, for ``workers`` workers (or hosts).

    ``link`` (:func:`command_link`) supplies the link and its effects; ``topology``
    (``--topology``) the host settings that the host options leave open; ``rule`` (the stopping
    rule, None with ``--steps``) the first run's length; ``traces`` what the workers replay
    (a parameter server's communication threads may come from its measured CPU time).
    """
    parse_alpha = parse_alpha_option(args.parse_alpha)[0]
    window, window_option = http2_window_option(args)
    check_range("--jitter-cv", args.jitter_cv, 0, MAX_JITTER_CV)
    mode = implied_mode(args.arch, args.mode)
    steps, warmup = first_length(args, rule, workers, mode)
    config = SimulationConfig(
        workers=workers,
        bandwidth_bps=link.bandwidth_bps.value,
        arch=args.arch,
        mode=mode,
        sharing=args.sharing,
        steps=steps,
        warmup_steps=warmup,
        seed=args.seed,
        replications=replications_option(args),
        batches=DEFAULT_BATCHES if args.batches is None else args.batches,
        flow_cap_bps=None
        if args.flow_cap is None
        else parse_bandwidth(args.flow_cap, name="--flow-cap"),
        cap_mode=args.cap_mode or "clip",
        scheduler=args.scheduler,
        window_bytes=parse_size(window, name=window_option),
        parse_alpha_s_per_byte=parse_alpha,
        parse_beta_s=parse_duration(args.parse_beta, name="--parse-beta", positive=False),
        parse_placement=args.parse_placement or "after",
        ring_segment_bytes=None
        if args.ring_segment is None
        else parse_size(args.ring_segment, name="--ring-segment"),
        servers=args.servers,
        placement=_placement(args.placement or "greedy"),
        worker_bandwidth_bps=None
        if args.worker_bandwidth is None
        else parse_bandwidth(args.worker_bandwidth, name="--worker-bandwidth"),
        speed_factors=_speeds(args.speed, "--speed"),
        worker_types=_ints(args.worker_types, "--worker-types"),
        jitter=args.jitter,
        jitter_cv=args.jitter_cv,
        timeline=args.timeline is not None or exporting(args),
        overlap=args.overlap,
        **ddp_fields(args),
    )
    return link.apply(apply_host_options(args, config, topology, traces))


@dataclass(frozen=True)
class SimulationPlan:
    """What one ``sgdsim simulate`` command line runs, checked: its traces, one config per
    worker count, the stopping rule (None with ``--steps``), the link and the notes to print."""

    traces: list[Trace]
    configs: list[SimulationConfig]
    rule: PrecisionRule | None
    link: LinkSettings
    notes: list[str]


def plan_simulation(args: argparse.Namespace) -> SimulationPlan:
    """Check ``args`` (the options of ``sgdsim simulate``) and build what they run, before
    anything runs: every configuration is validated against the traces here (errors name
    options: cli.main). ``sgdsim run`` plans each point of an experiment with it."""
    notes_out: list[str] = []
    if args.window is not None:
        notes_out.append(
            "--window is deprecated, use --http2-window (the same HTTP/2 window); --window goes "
            "in the next release"
        )
    alpha, bare = parse_alpha_option(args.parse_alpha)
    if bare and alpha > 0:
        notes_out.append(
            f"--parse-alpha {args.parse_alpha} read as seconds per byte; write the unit, e.g. "
            "1ns/B or 0.5us/KiB"
        )
    _check_dependent_options(args)
    counts = parse_workers(workers_text(args))
    topology = load_topology_option(args)
    if args.timeline is not None:
        if len(counts) > 1:
            raise ConfigError("--timeline: needs a single worker count, not a sweep")
        check_output(args.timeline, "--timeline", force=args.force)
    check_export_options(args, counts)
    link = command_link(args, topology)
    rule = precision_rule(args)
    traces = [load_trace(t) for t in args.trace]
    link = with_traces(link, traces)
    configs = [build_config(args, w, link, topology, rule, traces) for w in counts]
    note = bucket_cap_note(args, ddp_fields(args), traces)
    if note:
        notes_out.append(note)
    total = sum(worker_steps(c) for c in configs)
    ops_per_step = max(len(t.ops) for t in traces)
    work = total * ops_per_step
    # Before validate(), whose checks alone take minutes for 1e8 workers.
    check_work(work, ops_per_step, "--workers x --steps x --replications")
    for config in configs:
        validate(traces, config)
        if args.batches is not None:
            _check_batches(config)
    if args.batches is not None:
        note = _batches_note(configs)
        if note:
            notes_out.append(note)
    return SimulationPlan(traces, configs, rule, link, notes_out)


def run(args: argparse.Namespace) -> int:
    if args.save_experiment is not None:
        from simcore.cli.run_cmd import save_experiment

        plan_simulation(args)  # a file that would not run is not written
        save_experiment(args, args.save_experiment, force=args.force)
        print(f"wrote {args.save_experiment} (run it with `sgdsim run {args.save_experiment}`)")
        return 0
    planned_run = plan_simulation(args)
    for note in planned_run.notes:
        print(f"sgdsim simulate: note: {note}", file=sys.stderr)
    traces, configs, rule, link = (
        planned_run.traces,
        planned_run.configs,
        planned_run.rule,
        planned_run.link,
    )
    available = available_memory_bytes()
    processes = current_jobs()
    if available is not None:  # refuse what this machine cannot hold, before anything runs
        # Memory grows with W alone between the configs of a sweep.
        largest = check_memory(traces, max(configs, key=lambda c: c.workers), available)
        # ... and with the processes that simulate at once: no more than the memory holds
        processes = min(processes, max(1, int(MEMORY_FRACTION * available // largest.memory_bytes)))
    planned = [worker_steps(c) for c in configs]  # the rule may add rounds: totals grow
    # Progress only for runs long enough to wait for (a few seconds and more).
    work = sum(planned) * max(len(t.ops) for t in traces)
    progress = Progress(
        "simulate",
        "worker-steps",
        enabled=not (args.quiet or args.json or args.csv) and work >= PROGRESS_MIN_OPS,
    )
    progress(0, sum(planned))  # on a terminal, the line shows before the first workers are built
    try:
        with jobs(processes):
            results = simulate_many(traces, configs, rule, progress=progress)
    except Interrupted as stop:  # Ctrl-C: keep the points that finished, if any
        if not stop.finished:
            raise
        results = [stop.finished[i] for i in sorted(stop.finished)]
    interrupted = len(results) < len(configs)
    check_rates((f"--workers {r.config.workers}", r.examples_per_s.value) for r in results)
    if args.timeline is not None:
        _write_timeline(args, results[0], traces[0])
    if exporting(args) and results:
        write_exports(args, results[0], traces)
    if args.json:
        sources = host_sources(args, results[0].config) if results else None
        points = simulation_points(results, link, sources)
        print_json(args, "simulate", points, interrupted=interrupted)
    elif args.csv:
        print_csv(SIMULATE_CSV_HEADER, simulate_csv_rows(results))
    elif len(configs) == 1:
        print(format_result(results[0], traces[0], host_sources(args, results[0].config)))
    else:
        print(format_sweep(results, traces[0], host_sources(args, results[0].config)))
    if not (args.json or args.csv):
        print(link_text(link, results))
    lines = []
    for result in results:
        lines += notes([result], lambda r: f"W = {r.config.workers}")
        lockstep = lockstep_note(result)
        if lockstep:
            lines.append(f"note: W = {result.config.workers}: {lockstep}")
    for line in lines:
        print(line, file=sys.stderr if args.json or args.csv else sys.stdout)
    if args.phases and not args.json:  # (--json: each point's phases are in the document)
        for result in results:
            # With --csv, stdout holds the table alone.
            print("\n".join(format_phases(result)), file=sys.stderr if args.csv else sys.stdout)
    if interrupted:
        interrupted_note("simulate", len(results), len(configs))
        return EXIT_INTERRUPTED
    return 0


def link_text(link: LinkSettings, results: list[SimulationResult]) -> str:
    """The link lines: one per distinct description (a ring's goodput varies with W), then the
    profile's note."""
    described = dict.fromkeys(link.describe(r.config) for r in results)
    return "\n".join([*described, *([link.note] if link.note else [])])


def _check_dependent_options(args: argparse.Namespace) -> None:
    """ConfigError for an option whose prerequisite is missing (each did nothing)."""
    needs = (
        ("--cap-mode", args.cap_mode, args.flow_cap, "--flow-cap (the caps it shares out)"),
        ("--timeline-format", args.timeline_format, args.timeline, "--timeline (its file)"),
        (
            "--placement",
            args.placement,
            "ps" if args.arch == "ps" else None,
            f"--arch ps (--arch {args.arch} has no servers to place layers on)",
        ),
    )
    for option, given, prerequisite, what in needs:
        if given is not None and prerequisite is None:
            raise ConfigError(f"{option} {given}: only with {what}")


def _batches_note(configs: Sequence[SimulationConfig]) -> str:
    """What --batches does not reach: runs of several replications take their interval from
    the replications' means, not from batch means (ConfigError if no run uses it at all)."""
    replicated = [c for c in configs if c.replication_count > 1]
    if not replicated:
        return ""
    runs = ", ".join(f"W={c.workers}" for c in replicated)
    why = (
        f"--batches: not used for {runs}: {replicated[0].replication_count} replications "
        "give the interval there (--replications 1 for batch means)"
    )
    if len(replicated) == len(configs):
        raise ConfigError(why)
    return why


def _check_batches(config: SimulationConfig) -> None:
    """ConfigError if batch means would get fewer measured steps than the --batches asked for."""
    measured = config.steps - config.warmup_steps
    if config.replication_count == 1 and config.batches > measured:
        raise ConfigError(
            f"--batches: {config.batches} batches of {measured} measured steps per worker "
            f"(--steps {config.steps} minus --warmup {config.warmup_steps}); give at most "
            f"{measured} batches or more --steps"
        )


def _write_timeline(args: argparse.Namespace, result: SimulationResult, trace: Trace) -> None:
    timeline = result.timeline
    assert timeline is not None
    if args.timeline_format == "records":  # (None: chrome)
        doc = timeline_to_dict(timeline)
    else:
        spans = simulated_spans(timeline, trace=trace, arch=result.config.arch)
        doc = chrome_trace(
            spans, {"model": trace.metadata.model_name, "workers": result.config.workers}
        )
    try:
        path = write_json_atomic(args.timeline, doc, overwrite=args.force)
    except OSError as err:
        raise ConfigError(f"--timeline: cannot write {args.timeline}: {err}") from err
    print(f"wrote {len(timeline)} timeline records to {path}", file=sys.stderr)


def _ci(result: SimulationResult, scale: float = 1.0) -> str:
    est = result.examples_per_s if scale == 1.0 else result.steps_per_s
    if est.ci_low is None or est.ci_high is None:
        return "n/a"
    return f"{format_number(est.ci_low)} .. {format_number(est.ci_high)}"


def format_result(
    result: SimulationResult, trace: Trace, sources: Mapping[str, str] | None = None
) -> str:
    """The text of a single simulation."""
    c = result.config
    est = result.examples_per_s
    method = (
        f"{est.samples} replications"
        if est.method == "replications"
        else f"batch means, {est.samples} batches"
    )
    lines = [
        f"model      {trace.metadata.model_name}, batch {trace.metadata.batch_size}",
        f"setup      {c.workers} workers, {c.arch}/{c.mode}, sharing {c.policy_name}, "
        f"{format_bandwidth(c.bandwidth_bps)}, scheduler {c.scheduler}, servers {c.servers}",
        *_host_lines(c, trace, sources or {}),
        *([f"ddp        {ddp_text(c, trace)}"] if c.arch == "ddp" else []),
        f"run        {length_text(result)}, seed {c.seed}",
        f"throughput {format_number(est.value)} examples/s  (95% CI {_ci(result)}; {method})",
        f"           {format_number(result.steps_per_s.value)} steps/s",
        *format_spread(result),
        *_components(result),
        f"step time  mean {format_number(result.mean_step_s * 1e3)} ms over workers",
    ]
    for link in result.links:
        lines.append(
            f"link       {link.name:<12} utilization {100 * link.utilization:5.1f}%, "
            f"mean active flows {link.mean_active_flows:.2f}"
        )
    lines.append(
        f"simulated  {result.simulated_ops:,} ops in {result.wall_time_s:.2f} s "
        f"({result.ops_per_wall_s:,.0f} ops/s)"
    )
    return "\n".join(lines)


def _host_lines(c: SimulationConfig, trace: Trace, sources: Mapping[str, str]) -> list[str]:
    """How workers map to hosts, when they do not each have a host of one device, and what a
    worker's computation and communication threads take; ``sources``: where those came from
    (an option, ``trace``: what ``trace`` measured, or ``default``)."""
    lines = []
    if c.devices_per_host > 1:
        intra = format_bandwidth(c.intra_bandwidth_bps or 0.0)
        lines.append(
            f"hosts      each worker is a host of {c.devices_per_host} devices "
            f"({c.workers * c.devices_per_host} devices), {intra} inside a host"
        )
    if c.colocated_workers > 1 or c.host_cpu_cores is not None:
        cpu = "" if c.host_cpu_cores is None else f", sharing {c.host_cpu_cores:g} CPU cores"
        if c.comm_cpu_s_per_byte > 0:
            cpu += f" with transfers costing {1e9 * c.comm_cpu_s_per_byte:g} ns/byte"
        cores_source = sources.get("worker_cpu_cores", "default")
        if c.worker_cpu_cores is not None and cores_source == "trace":
            cpu += (
                f"; one worker's computation holds {c.worker_cpu_cores:.3g} cores (measured: "
                "the trace's CPU time over its wall time)"
            )
        elif c.worker_cpu_cores is not None:
            cpu += f"; one worker's computation holds {c.worker_cpu_cores:g} cores ({cores_source})"
        lines.append(f"hosts      {c.colocated_workers} worker(s) per host{cpu}")
    if c.server_host is not None:
        lines.append(f"servers    {_server_text(c)}")
    if c.comm_thread_s_per_step > 0:
        where = (
            "on the cores the computation leaves"
            if c.host_cpu_cores is not None
            else "on a core of its own"
        )
        cpu_s = format_seconds(c.comm_thread_s_per_step)
        measured = measured_comm_thread(trace)
        if measured is not None and sources.get("comm_thread_s_per_step") == "trace":
            source = (
                f"measured: the trace's {format_seconds(measured.cpu_s_per_step)} of CPU per "
                f"step less the {format_seconds(measured.compute_s_per_step)} it computes"
            )
        else:
            source = "--comm-thread"
        lines.append(
            f"comm       each worker's communication threads: {cpu_s} of CPU per step beside "
            f"the computation, {where} ({source})"
        )
    if c.flow_cap_bps is not None:
        caps = c.flow_cap_bps if isinstance(c.flow_cap_bps, tuple) else (c.flow_cap_bps,)
        lines.append(f"flow cap   {', '.join(sorted({format_bandwidth(v) for v in caps}))}")
    return lines


def _server_text(c: SimulationConfig) -> str:
    """Where the parameter servers run, when on a training host: its network, its cores."""
    host = f"host {c.server_host}" if c.colocated_workers > 1 else f"worker {c.server_host}'s host"
    if c.server_nic == "own":
        nic = "with a NIC of their own"
    else:
        nic = "sharing its NIC (its workers' transfers to them take no time)"
    cpu = (
        f"; their updates share its {c.host_cpu_cores:g} CPU cores"
        if c.host_cpu_cores is not None
        else "; their updates on cores of their own"
    )
    return f"on {host}, {nic}{cpu}"


def _components(result: SimulationResult) -> list[str]:
    """For a hybrid prediction, the throughputs it averages (its statistics are the ps run's)."""
    if not result.components:
        return []
    parts = ", ".join(
        f"{c.config.policy_name} {format_number(c.steps_per_s.value)}" for c in result.components
    )
    return [f"hybrid     mean of {parts} steps/s; step time and links below: ps run"]


def format_sweep(
    results: list[SimulationResult], trace: Trace, sources: Mapping[str, str] | None = None
) -> str:
    """The table of a sweep over worker counts, after how its workers are hosted (the same
    for every count)."""
    c = results[0].config
    sized = c.warmup_steps if results[0].stopping is None else None
    length = f"{c.steps} steps ({sized} warm-up)" if sized is not None else "steps: see column"
    head = (
        f"{trace.metadata.model_name}, {c.arch}/{c.mode}, sharing {c.policy_name}, "
        f"{format_bandwidth(c.bandwidth_bps)}, {length}"
    )
    lines = [
        head,
        *_host_lines(c, trace, sources or {}),
        *([f"ddp: {ddp_text(c, trace)}"] if c.arch == "ddp" else []),
        f"{'W':>4} {'examples/s':>11} {'95% CI':>21} {'steps/s':>9} "
        f"{'step ms':>9} {'down util':>9} {'up util':>8}"
        + (f" {'steps':>6}" if sized is None else "")
        + ("  spread over seeds" if len(results[0].replication_steps_per_s) > 1 else ""),
    ]
    for r in results:
        util = {link.name: link.utilization for link in r.links}
        lines.append(
            f"{r.config.workers:>4} {format_number(r.examples_per_s.value):>11} {_ci(r):>21} "
            f"{format_number(r.steps_per_s.value):>9} {format_number(r.mean_step_s * 1e3):>9} "
            f"{_pct(util.get('downlink')):>9} {_pct(util.get('uplink')):>8}"
            + (f" {r.config.steps:>6}" if sized is None else "")
            + sweep_spread_cell(r)
        )
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"
