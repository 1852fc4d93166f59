"""Edge module: read and write topology files, and find the shipped samples by name."""

from __future__ import annotations

import os
from pathlib import Path

from simcore.topology import Topology, topology_from_dict, topology_to_dict
from simcore.trace.io import read_json, resolve_path, sample_names, write_json_atomic

__all__ = ["SAMPLE_TOPOLOGY_PACKAGE", "load_topology", "save_topology", "topology_sample_names"]

SAMPLE_TOPOLOGY_PACKAGE = "simcore.data.topologies"


def load_topology(name_or_path: str | os.PathLike[str]) -> Topology:
    """Load and validate a topology from a file or a shipped sample name (``aws-p3.16xlarge``)."""
    path = resolve_path(name_or_path, SAMPLE_TOPOLOGY_PACKAGE)
    # The source as typed: a sample by its name, a file by the path given.
    return topology_from_dict(read_json(path), source=os.fspath(name_or_path))


def save_topology(
    topology: Topology, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``topology`` atomically as JSON; refuses to replace an existing file unless asked."""
    return write_json_atomic(path, topology_to_dict(topology), overwrite=overwrite)


def topology_sample_names() -> list[str]:
    """Names of the shipped topologies, sorted."""
    return sample_names(SAMPLE_TOPOLOGY_PACKAGE)
