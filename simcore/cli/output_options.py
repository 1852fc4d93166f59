"""The commands' ``--json`` and ``--csv`` options and what they print, in one place.

``--json`` prints the ``sgdsim-output`` document of :mod:`simcore.report.output`; ``--csv`` prints
a command's table as CSV on stdout: one header row, the units in the column names, the same rows
as the text table, the numbers at full precision.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from simcore.analytic.advisor import Ranked
from simcore.link_settings import LinkSettings
from simcore.report.output import CsvCell, csv_text
from simcore.sim.results import SimulationResult, result_to_dict
from simcore.trace.cpu import measured_comm_thread, measured_worker_cores
from simcore.trace.model import Trace
from simcore.trace.summary import LayerTime, TraceSummary

EXIT_INTERRUPTED = 130  # as simcore.cli.main's: 128 + SIGINT


def add_output_options(parser: argparse.ArgumentParser, *, table: bool = True) -> None:
    """``--json`` (the versioned document) and, for a command that prints a table, ``--csv``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--json", action="store_true", help="print one JSON document (sgdsim-output, OUTPUT.md)"
    )
    if table:
        group.add_argument(
            "--csv", action="store_true", help="print the table as CSV (units in column names)"
        )
    parser.set_defaults(csv=False)


def print_csv(header: Sequence[str], rows: Sequence[Sequence[CsvCell]]) -> None:
    print(csv_text(header, rows), end="")


def interrupted_note(command: str, done: int, total: int, what: str = "points") -> None:
    """Say on stderr that Ctrl-C stopped a sweep and what is printed."""
    print(
        f"sgdsim: interrupted; {command} printed the {done} of {total} {what} that finished",
        file=sys.stderr,
    )


def simulation_points(
    results: Sequence[SimulationResult],
    link: LinkSettings,
    host_sources: Mapping[str, str] | None = None,
) -> list[Any]:
    """One point per simulation: the result (config, estimates with CIs, spread over seeds,
    workers, links), ``link``, which effects were on and where each value came from, and
    ``host``: the host settings a trace can supply (``worker_cpu_cores``,
    ``comm_thread_s_per_step``), each value with its source from ``host_sources`` (an option,
    ``trace`` or ``default``)."""
    sources = host_sources or {}
    return [
        {
            **result_to_dict(r),
            "link": link.to_dict(r.config),
            "host": {
                key: {"value": getattr(r.config, key), "source": sources.get(key, "default")}
                for key in HOST_SETTINGS
            },
        }
        for r in results
    ]


# The host settings whose source a point states (simulation_points).
HOST_SETTINGS = ("worker_cpu_cores", "comm_thread_s_per_step")


SIMULATE_CSV_HEADER = (
    "workers",
    "examples_per_s",
    "ci_low_examples_per_s",
    "ci_high_examples_per_s",
    "steps_per_s",
    "step_ms",
    "downlink_utilization_pct",
    "uplink_utilization_pct",
    "spread_min_examples_per_s",
    "spread_max_examples_per_s",
)


def simulate_csv_rows(results: Sequence[SimulationResult]) -> list[list[CsvCell]]:
    """The rows of simulate's sweep table: one per worker count (spread empty for one seed)."""
    rows: list[list[CsvCell]] = []
    for r in results:
        util = {link.name: link.utilization for link in r.links}
        down, up = util.get("downlink"), util.get("uplink")
        spread = r.examples_spread if len(r.replication_steps_per_s) > 1 else (None, None)
        rows.append(
            [
                r.config.workers,
                r.examples_per_s.value,
                r.examples_per_s.ci_low,
                r.examples_per_s.ci_high,
                r.steps_per_s.value,
                r.mean_step_s * 1e3,
                None if down is None else 100 * down,
                None if up is None else 100 * up,
                *spread,
            ]
        )
    return rows


TRACE_LAYERS_CSV_HEADER = ("layer", "type", "forward_ms", "backward_ms", "param_bytes")


def trace_layer_rows(layers: Sequence[LayerTime]) -> list[list[CsvCell]]:
    """The rows of trace show's table of slowest layers (mean per step)."""
    return [
        [t.name, t.module_type, t.forward_s * 1e3, t.backward_s * 1e3, t.param_nbytes]
        for t in layers
    ]


def slowest_layers(layers: Sequence[LayerTime], n: int) -> list[LayerTime]:
    """The ``n`` layers with the most forward + backward time, slowest first (as trace show)."""
    return sorted(layers, key=lambda t: t.forward_s + t.backward_s, reverse=True)[:n]


def analyze_csv(
    rows: Sequence[dict[str, Any]], models: Sequence[str]
) -> tuple[list[str], list[list[CsvCell]]]:
    """Header and rows of analyze's table: per worker count, every model's examples/s and
    steps/s, and the solver."""
    header = ["workers"]
    for name in models:
        header += [f"{name}_examples_per_s", f"{name}_steps_per_s"]
    out: list[list[CsvCell]] = []
    for row in rows:
        cells: list[CsvCell] = [row["workers"]]
        for name in models:
            cells += [row[name]["examples_per_s"], row[name]["steps_per_s"]]
        hybrid = row[models[0]].get("links") is not None  # async: which links the hybrid chose
        out.append([*cells, row["solver"], *([row["hybrid"]["links"]] if hybrid else [])])
    hybrid = bool(rows) and rows[0][models[0]].get("links") is not None
    return [*header, "solver", *(["hybrid_links"] if hybrid else [])], out


ARCHITECTURE_OF = {
    ("ps", "async"): "PS Async",
    ("ps", "sync"): "PS Sync",
    ("ddp", "sync"): "DDP",
}


def architecture_text(r: Ranked) -> str:
    """advise's architecture column: ``PS Async``, ``PS Sync``, ``ring AllReduce`` or ``DDP``
    (its collective in the sharing column)."""
    c = r.candidate
    return ARCHITECTURE_OF.get((c.arch, c.mode), "ring AllReduce")


def advise_csv(
    ranked: Sequence[Ranked], price: float | None
) -> tuple[list[str], list[list[CsvCell]]]:
    """Header and rows of advise's ranked table, its columns as the text table has them (a
    ring has no servers or sharing: empty cells; the cost column only with a price)."""
    header = [
        "rank",
        "architecture",
        "servers",
        "sharing",
        "devices_per_host",
        "workers",
        "machines",
        "examples_per_s",
        "by",
        "analytic_examples_per_s",
        "simulated_examples_per_s",
        "simulated_ci_low_examples_per_s",
        "simulated_ci_high_examples_per_s",
        "spread_min_examples_per_s",
        "spread_max_examples_per_s",
    ]
    rows: list[list[CsvCell]] = []
    for rank, r in enumerate(ranked, 1):
        sim = r.simulated
        simulated = [None] * 3 if sim is None else [sim.value, sim.ci_low, sim.ci_high]
        spread = [None, None] if r.simulated_spread is None else list(r.simulated_spread)
        cost = [] if price is None else [r.cost_per_million_examples]
        c = r.candidate
        lead: list[CsvCell] = [
            rank,
            architecture_text(r),
            c.servers if c.arch == "ps" else None,
            None if c.arch == "allreduce" else c.sharing,  # DDP: its collective
            c.devices_per_host,
            c.workers,
            c.machines,
            r.examples_per_s,
            r.source,
            r.analytic_examples_per_s,
        ]
        rows.append([*lead, *simulated, *spread, *cost])
    return header + ([] if price is None else ["cost_per_million_examples"]), rows


def trace_show_document(trace: Trace, summary: TraceSummary) -> tuple[Any, dict[str, Any]]:
    """trace show's points (every layer, in trace order, mean per step) and context (the trace's
    metadata and per-step spreads of each phase, in seconds)."""
    md = trace.metadata
    points = [
        {
            "layer": t.name,
            "type": t.module_type,
            "forward_s": t.forward_s,
            "backward_s": t.backward_s,
            "param_nbytes": t.param_nbytes,
        }
        for t in summary.layers
    ]
    context = {
        "source": trace.source,
        "schema_version": trace.schema_version,
        "model": md.model_name,
        "batch_size": md.batch_size,
        "dtype": md.dtype,
        "device": md.device,
        "profiled_steps": md.profiled_steps,
        "warmup_steps": md.warmup_steps,
        "layers": summary.n_layers,
        "param_layers": summary.n_param_layers,
        "param_count": summary.param_count,
        "param_nbytes": summary.param_nbytes,
        "op_counts": dict(summary.op_counts),
        "pull_nbytes": summary.pull_nbytes,
        "push_nbytes": summary.push_nbytes,
        "phase_s": {k: asdict(v) for k, v in summary.phase_s.items()},
        "measured_s": {k: asdict(v) for k, v in summary.measured_s.items()},
        "overhead_s": {k: asdict(v) for k, v in summary.overhead_s.items()},
        "cpu": _trace_cpu(trace, summary),
    }
    return points, context


def _trace_cpu(trace: Trace, summary: TraceSummary) -> dict[str, Any]:
    """What a trace's recorded CPU time says (schema version 3; None where it says nothing):
    the spread of the process's CPU per step, the cores the computation held (the default
    ``--worker-cores``) and, beside a parameter server, the CPU beyond the computation (the
    default ``--comm-thread``)."""
    threads = measured_comm_thread(trace)
    return {
        "cpu_s": None if summary.cpu_s is None else asdict(summary.cpu_s),
        "worker_cores": measured_worker_cores(trace),
        "comm_thread_s_per_step": None if threads is None else threads.beyond_s,
    }
