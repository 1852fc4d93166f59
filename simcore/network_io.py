"""Edge module: read and write network profile files, and find the shipped samples by name."""

from __future__ import annotations

import os
from pathlib import Path

from simcore.network import NetworkProfile, network_profile_from_dict, network_profile_to_dict
from simcore.trace.io import (
    SAMPLE_NETWORK_PACKAGE,
    read_json,
    resolve_path,
    sample_names,
    write_json_atomic,
)

__all__ = ["load_network_profile", "network_sample_names", "save_network_profile"]


def load_network_profile(name_or_path: str | os.PathLike[str]) -> NetworkProfile:
    """Load and validate a network profile from a file or a shipped sample name (``loopback``).

    Raises
    ------
    ConfigError
        No such file and no such sample (the message lists the samples).
    TraceError
        The file is not valid JSON or not a valid network profile (names the field).
    """
    path = resolve_path(name_or_path, SAMPLE_NETWORK_PACKAGE)
    # The source as typed: a sample by its name, a file by the path given.
    return network_profile_from_dict(read_json(path), source=os.fspath(name_or_path))


def save_network_profile(
    profile: NetworkProfile, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write ``profile`` atomically as JSON; refuses to replace an existing file unless asked."""
    return write_json_atomic(path, network_profile_to_dict(profile), overwrite=overwrite)


def network_sample_names() -> list[str]:
    """Names of the shipped network profiles, sorted."""
    return sample_names(SAMPLE_NETWORK_PACKAGE)
