"""Edge module: read and write trace files, and find the shipped sample traces by name.

The rest of ``simcore`` never touches files; this module and the CLI do.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from simcore.errors import ConfigError, TraceError
from simcore.files import atomic_output
from simcore.gc_pause import gc_paused
from simcore.trace.model import Trace
from simcore.trace.parse import trace_from_dict, trace_to_dict

SAMPLE_TRACE_PACKAGE = "simcore.data.traces"
SAMPLE_NETWORK_PACKAGE = "simcore.data.network"


def sample_names(package: str = SAMPLE_TRACE_PACKAGE) -> list[str]:
    """Names of the shipped samples in ``package`` (file names without ``.json``), sorted."""
    folder = resources.files(package)
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def resolve_path(name_or_path: str | os.PathLike[str], package: str = SAMPLE_TRACE_PACKAGE) -> Path:
    """A file path for ``name_or_path``: an existing file, or the name of a shipped sample."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    candidate = resources.files(package).joinpath(f"{path.name.removesuffix('.json')}.json")
    if str(name_or_path) == path.name and candidate.is_file():
        return Path(str(candidate))
    if path.exists():
        raise ConfigError(f"{path}: is not a file")
    names = ", ".join(sample_names(package)) or "(none shipped)"
    raise ConfigError(f"{name_or_path}: no such file, and not a shipped sample; samples: {names}")


def read_json(path: Path) -> Any:
    """Decode a JSON file, turning I/O and syntax problems into one clear TraceError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise TraceError(f"{path}: cannot read: {err.strerror or err}") from err
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceError(
            f"{path}: not valid JSON (line {err.lineno}, column {err.colno}): {err.msg}"
        ) from err


def load_trace(name_or_path: str | os.PathLike[str]) -> Trace:
    """Load and validate a trace from a file path or a shipped sample name (``resnet50-b32``)."""
    path = resolve_path(name_or_path)
    with gc_paused():  # decoding a large trace allocates much and frees nothing
        return trace_from_dict(read_json(path), source=str(path))


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, overwrite: bool = False) -> Path:
    """Write ``data`` as JSON so that ``path`` is either the old file or the complete new one.

    Raises ConfigError if ``path`` exists and ``overwrite`` is false, so nothing a user made is
    replaced silently.
    """
    with atomic_output(path, overwrite=overwrite) as tmp, tmp.open("w", encoding="utf-8") as handle:
        json.dump(data, handle, separators=(",", ":"), allow_nan=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    return Path(path)


def save_trace(trace: Trace, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``trace`` atomically as JSON; refuses to replace an existing file unless asked."""
    return write_json_atomic(path, trace_to_dict(trace), overwrite=overwrite)
