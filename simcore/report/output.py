"""The one shape of every command's machine-readable output (``--json``) and its tables as CSV
(``--csv``): an edge module, so that every command, and later ones, print the same envelope.

A ``--json`` document (``sgdsim-output``, described in ``simcore/report/OUTPUT.md`` and checked by
``simcore/report/schema/sgdsim-output.schema.json``) says which schema and sgdsim made it, the
command line, every input file the command read (as the user named it, with the sha256 of its
bytes) and a list of ``points``, one per result, even when there is one. What a command knows
about the whole run (the trace's parameters, the link) goes into ``context``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from simcore import __version__
from simcore.trace.io import SAMPLE_NETWORK_PACKAGE, SAMPLE_TRACE_PACKAGE, resolve_path

SCHEMA_NAME = "sgdsim-output"
SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (SCHEMA_VERSION,)
SCHEMA_RESOURCE = "schema/sgdsim-output.schema.json"  # inside simcore.report

SAMPLE_TOPOLOGY_PACKAGE = "simcore.data.topologies"  # as simcore.topology_io's, without its import

# Options that name an input file: (attribute of the parsed arguments, role, sample package).
INPUT_OPTIONS: tuple[tuple[str, str, str | None], ...] = (
    ("trace", "trace", SAMPLE_TRACE_PACKAGE),
    ("network", "network", SAMPLE_NETWORK_PACKAGE),
    ("profile", "network", SAMPLE_NETWORK_PACKAGE),  # `network show PROFILE`
    ("topology", "topology", SAMPLE_TOPOLOGY_PACKAGE),
    ("placement", "placement", None),
    ("from_runs", "runs", None),
)

CsvCell = str | int | float | None


@dataclass(frozen=True)
class InputRef:
    """An input file a command read: ``given`` as the user typed it, ``sample`` when that named
    a shipped sample, and the sha256 (hex) of the file's bytes."""

    role: str
    given: str
    sample: bool
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "given": self.given,
            "sample": self.sample,
            "sha256": self.sha256,
        }


def file_sha256(path: Path) -> str:
    """The sha256 of the file's bytes, in hex (of the compressed bytes for a .gz file)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def input_ref(role: str, given: str, package: str | None) -> InputRef:
    """The reference of one input, resolved as the loaders resolve it (a file, else a sample)."""
    path = Path(given) if package is None else resolve_path(given, package)
    sample = package is not None and not Path(given).is_file()
    return InputRef(role, given, sample, file_sha256(path))


def command_inputs(args: argparse.Namespace) -> list[InputRef]:
    """Every input file the parsed arguments name (a list for options given several times)."""
    refs = []
    for attribute, role, package in INPUT_OPTIONS:
        value = getattr(args, attribute, None)
        if not isinstance(value, str | list):
            continue
        for given in value if isinstance(value, list) else [value]:
            if isinstance(given, str) and (package is not None or Path(given).is_file()):
                refs.append(input_ref(role, given, package))
    return refs


def output_document(
    command: str,
    argv: Sequence[str],
    inputs: Sequence[InputRef],
    points: Sequence[Mapping[str, Any]],
    *,
    context: Mapping[str, Any] | None = None,
    interrupted: bool = False,
) -> dict[str, Any]:
    """The ``sgdsim-output`` envelope around a command's ``points``."""
    return {
        "schema": {"name": SCHEMA_NAME, "version": SCHEMA_VERSION},
        "sgdsim_version": __version__,
        "command": command,
        "argv": ["sgdsim", *argv],
        "inputs": [ref.to_dict() for ref in inputs],
        "interrupted": interrupted,
        "context": dict(context or {}),
        "points": [dict(p) for p in points],
    }


def command_argv(args: argparse.Namespace) -> list[str]:
    """The arguments the command was run with (``main`` records them; else ``sys.argv``)."""
    argv = getattr(args, "argv", None)
    return list(sys.argv[1:] if argv is None else argv)


def print_json(
    args: argparse.Namespace,
    command: str,
    points: Sequence[Mapping[str, Any]],
    *,
    context: Mapping[str, Any] | None = None,
    interrupted: bool = False,
) -> None:
    """Print the command's document on stdout, as one line of strict JSON (no NaN)."""
    doc = output_document(
        command,
        command_argv(args),
        command_inputs(args),
        points,
        context=context,
        interrupted=interrupted,
    )
    print(json.dumps(doc, allow_nan=False))


def csv_text(header: Sequence[str], rows: Sequence[Sequence[CsvCell]]) -> str:
    """One header row (units in the column names), then the rows at full precision; an empty
    cell for None."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else v for v in row])
    return buffer.getvalue()


def schema_text() -> str:
    """The JSON Schema of the envelope, as shipped in the package."""
    return resources.files("simcore.report").joinpath(SCHEMA_RESOURCE).read_text("utf-8")
