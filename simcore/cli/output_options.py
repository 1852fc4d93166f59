"""The commands' ``--json`` and ``--csv`` options and what they print, in one place.

``--json`` prints the ``sgdsim-output`` document of :mod:`simcore.report.output`; ``--csv`` prints
a command's table as CSV on stdout: one header row, the units in the column names, the same rows
as the text table, the numbers at full precision.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from simcore.link_settings import LinkSettings
from simcore.report.output import CsvCell, csv_text
from simcore.sim.results import SimulationResult, result_to_dict
from simcore.trace.summary import LayerTime

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


def interrupted_note(command: str, done: int, total: int) -> None:
    """Say on stderr that Ctrl-C stopped a sweep and what is printed."""
    print(
        f"sgdsim: interrupted; {command} printed the {done} of {total} points that finished",
        file=sys.stderr,
    )


def simulation_points(results: Sequence[SimulationResult], link: LinkSettings) -> list[Any]:
    """One point per simulation: the result (config, estimates with CIs, spread over seeds,
    workers, links) and ``link``, which effects were on and where each value came from."""
    return [{**result_to_dict(r), "link": link.to_dict(r.config)} for r in results]


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
