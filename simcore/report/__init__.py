"""Edge package for what scenario scripts print and save: tables (text and CSV) and the standard
scenario command line, output folder and error handling. Nothing here runs a simulation.
"""

from simcore.report.scenario import ScenarioOutput, link_from_args, run_scenario, scenario_parser
from simcore.report.table import Column, Table

__all__ = [
    "Column",
    "ScenarioOutput",
    "Table",
    "link_from_args",
    "run_scenario",
    "scenario_parser",
]
