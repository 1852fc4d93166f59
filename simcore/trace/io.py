"""Edge module: read and write trace files, and find the shipped sample traces by name.

The rest of ``simcore`` never touches files; this module and the CLI do.
"""

from __future__ import annotations

import gzip
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from simcore.errors import ConfigError, TraceError
from simcore.files import atomic_output, read_json_file
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
    try:
        return _resolve(path, str(name_or_path), package)
    except OSError as err:  # a name too long for the file system, a loop of links
        raise ConfigError(f"{name_or_path}: {err.strerror or err}") from None


def _resolve(path: Path, typed: str, package: str) -> Path:
    if not typed:
        raise ConfigError("'': an empty name; give a file path or the name of a shipped sample")
    if path.is_file():
        return path
    candidate = resources.files(package).joinpath(f"{path.name.removesuffix('.json')}.json")
    if typed == path.name and candidate.is_file():
        return Path(str(candidate))
    if path.exists():
        raise ConfigError(
            f"{typed}: is a directory, not a file"
            if path.is_dir()
            else f"{typed}: is not a regular file"
        )
    names = ", ".join(sample_names(package)) or "(none shipped)"
    raise ConfigError(f"{typed}: no such file, and not a shipped sample; samples: {names}")


def read_json(path: Path) -> Any:
    """Decode a JSON file (gzip-compressed or not); any problem is one TraceError naming it."""
    return read_json_file(path, error=TraceError)


def load_trace(name_or_path: str | os.PathLike[str]) -> Trace:
    """Load and validate a trace from a file path or a shipped sample name (``resnet50-b32``).

    Its ``source``, which the commands print and errors name, is what the user typed: the
    sample's name, or the path as given (not sgdsim's own install path).
    """
    path = resolve_path(name_or_path)
    with gc_paused():  # decoding a large trace allocates much and frees nothing
        return trace_from_dict(read_json(path), source=os.fspath(name_or_path))


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, overwrite: bool = False) -> Path:
    """Write ``data`` as JSON so that ``path`` is either the old file or the complete new one;
    gzip-compressed when ``path`` ends in ``.gz``.

    Raises ConfigError if ``path`` exists and ``overwrite`` is false, so nothing a user made is
    replaced silently.
    """
    text = json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n"
    with atomic_output(path, overwrite=overwrite) as tmp, tmp.open("wb") as handle:
        if str(path).lower().endswith(".gz"):  # mtime=0: the same data gives the same bytes
            handle.write(gzip.compress(text.encode("utf-8"), mtime=0))
        else:
            handle.write(text.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    return Path(path)


def save_trace(trace: Trace, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``trace`` atomically as JSON; refuses to replace an existing file unless asked."""
    return write_json_atomic(path, trace_to_dict(trace), overwrite=overwrite)
