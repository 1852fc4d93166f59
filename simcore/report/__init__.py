"""Edge package for what scenario scripts print and save: tables (text and CSV) and the standard
scenario command line, output folder and error handling. Nothing here runs a simulation.
"""

from simcore.report.scenario import (
    ScenarioOutput,
    base_config,
    finding_line,
    link_from_args,
    run_scenario,
    scenario_parser,
)
from simcore.report.table import Column, Table, estimate_cells, estimate_columns

__all__ = [
    "Column",
    "ScenarioOutput",
    "Table",
    "base_config",
    "estimate_cells",
    "estimate_columns",
    "finding_line",
    "link_from_args",
    "run_scenario",
    "scenario_parser",
]
