"""``sgdsim trace``: look at a trace (``show``), export it (``export-chrome``), list samples."""

from __future__ import annotations

import argparse
from typing import Any

from simcore.cli.output_options import (
    TRACE_LAYERS_CSV_HEADER,
    add_output_options,
    print_csv,
    slowest_layers,
    trace_layer_rows,
    trace_show_document,
)
from simcore.errors import ConfigError
from simcore.export.chrome import chrome_trace, profiled_step_spans
from simcore.files import check_output
from simcore.report.output import print_json
from simcore.trace.cpu import measured_comm_thread, measured_worker_cores
from simcore.trace.io import load_trace, sample_names, save_trace, write_json_atomic
from simcore.trace.model import Trace
from simcore.trace.summary import Spread, TraceSummary, summarize
from simcore.units import format_bytes, format_number, format_seconds

SLOWEST_LAYERS_SHOWN = 10


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("trace", help="inspect, validate and export traces")
    actions = parser.add_subparsers(dest="trace_command", metavar="ACTION", required=True)

    show = actions.add_parser("show", help="a readable summary of a trace (validates it too)")
    show.add_argument("trace", help="trace file or shipped sample name (see `sgdsim trace list`)")
    show.add_argument(
        "--layers",
        type=int,
        help=f"slowest layers shown (default {SLOWEST_LAYERS_SHOWN}; --json gives every layer)",
    )
    add_output_options(show)
    show.set_defaults(handler=run_show)

    export = actions.add_parser("export-chrome", help="a profiled step as Chrome Trace Event JSON")
    export.add_argument("trace", help="trace file or shipped sample name")
    export.add_argument(
        "-o", "--out", required=True, help="output .json or .json.gz (opens in Perfetto UI)"
    )
    export.add_argument("--step", type=int, default=0, help="which profiled step (default 0)")
    export.add_argument("--force", action="store_true", help="overwrite an existing output file")
    export.set_defaults(handler=run_export_chrome)

    kineto = actions.add_parser(
        "import-kineto",
        help="a torch.profiler (Kineto) trace of training steps as an sgdsim trace",
        description="Turn the JSON that torch.profiler's export_chrome_trace writes (recorded with "
        "a schedule and prof.step(), with_stack=True, with_modules=True, record_shapes=True) into "
        "the trace the simulator reads: per-layer forward and backward times (GPU kernel time "
        "where the trace has a GPU), the optimizer step, the time outside layers, parameter bytes "
        "and the layers' DAG.",
    )
    kineto.add_argument("kineto", metavar="TRACE", help="the torch.profiler .json or .json.gz")
    kineto.add_argument("-o", "--out", required=True, help="output trace .json or .json.gz")
    model = kineto.add_mutually_exclusive_group()
    model.add_argument(
        "--model",
        help="the profiled model, built-in name: layer names, parameters and the dataflow DAG "
        "come from it (torch.fx) instead of the executed order",
    )
    model.add_argument("--model-path", help="the same, for a user model: package.module:factory")
    kineto.add_argument("--model-name", help="name recorded in the trace (default: the model's)")
    kineto.add_argument(
        "--batch-size", type=int, help="examples per step (default: read from the trace's shapes)"
    )
    kineto.add_argument("--force", action="store_true", help="overwrite an existing output file")
    kineto.set_defaults(handler=run_import_kineto)

    listing = actions.add_parser("list", help="the shipped sample traces")
    listing.set_defaults(handler=run_list)


def run_list(args: argparse.Namespace) -> int:
    for name in sample_names():
        print(name)
    return 0


def run_show(args: argparse.Namespace) -> int:
    if args.layers is not None and args.json:
        raise ConfigError("--layers: not with --json (its document holds every layer)")
    if args.layers is None:
        args.layers = SLOWEST_LAYERS_SHOWN
    if args.layers < 0:
        raise ConfigError(f"--layers: must be an integer >= 0, got {args.layers}")
    trace = load_trace(args.trace)
    summary = summarize(trace)
    if args.json:
        points, context = trace_show_document(trace, summary)
        print_json(args, "trace show", points, context=context)
    elif args.csv:
        print_csv(
            TRACE_LAYERS_CSV_HEADER, trace_layer_rows(slowest_layers(summary.layers, args.layers))
        )
    else:
        print(format_summary(trace, summary, args.layers))
    return 0


def run_export_chrome(args: argparse.Namespace) -> int:
    check_output(args.out, "-o/--out", force=args.force)
    trace = load_trace(args.trace)
    spans = profiled_step_spans(trace, args.step)
    metadata = {
        "model": trace.metadata.model_name,
        "batch_size": trace.metadata.batch_size,
        "source": trace.source,
        "step": args.step,
    }
    path = write_json_atomic(args.out, chrome_trace(spans, metadata), overwrite=args.force)
    print(f"wrote {len(spans)} events of step {args.step} to {path} (open it in ui.perfetto.dev)")
    return 0


def run_import_kineto(args: argparse.Namespace) -> int:
    from profilers.kineto import import_kineto  # the torch side, loaded for this action only

    if args.batch_size is not None and args.batch_size < 1:
        raise ConfigError(f"--batch-size: must be an integer >= 1, got {args.batch_size}")
    check_output(args.out, "-o/--out", force=args.force)
    trace = import_kineto(
        args.kineto,
        model=args.model or args.model_path,
        model_name=args.model_name,
        batch_size=args.batch_size,
    )
    path = save_trace(trace, args.out, overwrite=args.force)
    steps, layers = trace.n_steps, len(trace.layers)
    print(
        f"wrote {path}: {trace.metadata.model_name}, {layers} layers, "
        f"{format_bytes(trace.param_nbytes)} of parameters, {steps} step{'s' * (steps != 1)} "
        f"on {trace.metadata.device} (dataflow: {trace.metadata.profiler['dag_source']})"
    )
    return 0


def _ms(spread: Spread) -> str:
    """Milliseconds as every table prints numbers (:func:`format_number`)."""
    low, high = format_number(spread.min * 1e3), format_number(spread.max * 1e3)
    return (
        f"{format_number(spread.mean * 1e3):>10} ms  ± {format_number(spread.std * 1e3):>8}"
        f"   [{low} .. {high}]"
    )


def _mib(nbytes: int) -> str:
    return format_bytes(nbytes)


OVERHEAD_NOTES = {
    "begin": "before the backward, outside forward ops",
    "end": "the rest: autograd gaps, optimizer bookkeeping",
    "total": "step wall minus its layers' ops",
}


def _overhead_lines(trace: Trace, summary: TraceSummary) -> list[str]:
    """The per-step fixed costs (``overhead:begin``/``overhead:end``), or why there are none."""
    if not summary.overhead_s:
        why = (
            "not measured (a schema v1 trace: profile it again to include them)"
            if trace.schema_version < 2
            else "none in this trace"
        )
        return [f"  {'overhead':<22} {why}"]
    return [
        f"  {'overhead ' + part:<22} {_ms(spread)}   ({OVERHEAD_NOTES[part]})"
        for part, spread in summary.overhead_s.items()
    ]


def _cpu_lines(trace: Trace, summary: TraceSummary) -> list[str]:
    """The process's CPU time per step (schema v3), and what of it lies beyond the computation
    for a trace made beside a real parameter server; nothing when the steps did not record it."""
    if summary.cpu_s is None:
        return []
    what = "the process's, every thread"
    measured = measured_comm_thread(trace)
    cores = measured_worker_cores(trace)
    if cores is not None:
        what += (
            f"; {cores:.3g} cores held on average (CPU over wall time: the default --worker-cores)"
        )
    if measured is not None:
        what += (
            f"; {format_seconds(measured.beyond_s)} beyond the computation, charged to the "
            "communication threads of workers sharing cores"
        )
    return [f"  {'cpu (measured)':<22} {_ms(summary.cpu_s)}   ({what})"]


def format_summary(trace: Trace, summary: TraceSummary, n_layers: int) -> str:
    """The text of ``sgdsim trace show``."""
    md = trace.metadata
    host = md.host.get("hostname", "?")
    lines = [
        f"trace      {trace.source} (schema v{trace.schema_version})",
        f"model      {md.model_name}, batch {md.batch_size}, {md.dtype} on {md.device}, "
        f"{md.framework} {md.framework_version}, host {host}",
        f"profiled   {md.profiled_steps} steps after {md.warmup_steps} warm-up steps"
        + (f", {md.created_utc}" if md.created_utc else ""),
        f"layers     {summary.n_layers} ({summary.n_param_layers} with parameters), "
        f"{summary.param_count:,} parameters, {_mib(summary.param_nbytes)}",
        "ops/step   "
        + ", ".join(f"{k} {v}" for k, v in summary.op_counts.items())
        + f" (total {len(trace.ops)})",
        f"traffic    pull {_mib(summary.pull_nbytes)}, push {_mib(summary.push_nbytes)} per step",
        "",
        f"per step, over {md.profiled_steps} steps:   mean ± sd   [min .. max]",
    ]
    for kind, spread in summary.phase_s.items():
        lines.append(f"  {kind:<22} {_ms(spread)}   (sum of per-op times)")
    for phase, spread in summary.measured_s.items():
        what = "whole step" if phase == "step" else "whole phase"
        lines.append(f"  {phase + ' (measured)':<22} {_ms(spread)}   ({what}, wall clock)")
    lines += _overhead_lines(trace, summary)
    lines += _cpu_lines(trace, summary)
    if n_layers:
        slowest = sorted(summary.layers, key=lambda t: t.forward_s + t.backward_s, reverse=True)
        lines += [
            "",
            f"slowest {min(n_layers, len(slowest))} layers (mean per step):",
            f"  {'layer':<28} {'type':<18} {'forward':>11} {'backward':>11} {'params':>11}",
        ]
        for layer in slowest[:n_layers]:
            lines.append(
                f"  {layer.name[:28]:<28} {layer.module_type[:18]:<18} "
                f"{format_number(layer.forward_s * 1e3):>8} ms "
                f"{format_number(layer.backward_s * 1e3):>8} ms "
                f"{_mib(layer.param_nbytes):>11}"
            )
    return "\n".join(lines)
