"""Experiments as files: sections of ``sgdsim simulate``'s options, and a grid over them.

An experiment file (TOML, read by the command line with the standard library's ``tomllib``)
says in sections what ``sgdsim simulate`` says in options, with the same names (without the
dashes) and the same values and units, so a command line and a file mean the same thing::

    [workload]
    trace = "cnn-b8"

    [cluster]
    workers = [1, 2, 4, 8]          # a list: one axis of the grid

    [network]
    bandwidth = ["1Gbps", "10Gbps"]

    [algorithm]
    arch = "ps"
    mode = "sync"

    [run]
    steps = 200
    seed = 1

    [grid]
    combine = "product"             # every combination of the axes (default); "zip": pairwise

A value that is a list is an axis of the grid; several traces (one per worker type) are a
list inside it (``trace = [["fast.json", "slow.json"]]``). A flag (``own-nics``) is ``true``
or ``false``. :func:`expand` turns the sections into points, each the argument list of one
``sgdsim simulate`` call and a name made of its axis values. This module is pure: no files.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from simcore.errors import ConfigError

__all__ = [
    "COMBINE",
    "SECTIONS",
    "Point",
    "expand",
    "experiment_toml",
    "section_of",
]

#: Each section's keys: ``sgdsim simulate``'s options without their dashes. The trace is the
#: command's positional argument.
SECTIONS: dict[str, tuple[str, ...]] = {
    "workload": ("trace", "worker-types", "speed", "jitter", "jitter-cv", "overlap"),
    "cluster": (
        "workers",
        "servers",
        "placement",
        "topology",
        "hosts",
        "devices-per-host",
        "intra-bandwidth",
        "server-host",
        "colocated",
        "own-nics",
        "host-cores",
        "worker-cores",
        "comm-cpu",
        "comm-thread",
    ),
    "network": (
        "network",
        "bandwidth",
        "latency",
        "worker-bandwidth",
        "sharing",
        "flow-cap",
        "cap-mode",
        "flow-weight-cv",
        "duplex",
        "duplex-interference",
    ),
    "algorithm": (
        "arch",
        "mode",
        "scheduler",
        "http2-window",
        "parse-alpha",
        "parse-beta",
        "parse-placement",
        "ring-segment",
        "bucket-cap",
        "first-bucket",
        "collective",
        "comm-hook",
        "bucket-copy",
        "gradient-as-bucket-view",
    ),
    "run": ("steps", "warmup", "precision", "max-steps", "seed", "replications", "batches"),
}
#: Ways to combine the grid's axes: every combination, or the i-th value of each.
COMBINE = ("product", "zip")
_GRID = "grid"
_SECTION_OF = {key: section for section, keys in SECTIONS.items() for key in keys}


def section_of(key: str) -> str | None:
    """The section an option (without dashes) belongs in; None if no section takes it."""
    return _SECTION_OF.get(key)


@dataclass(frozen=True)
class Point:
    """One point of the grid: its values of the axes that vary (``(key, value)`` in the file's
    order) and the argument list of the ``sgdsim simulate`` call it is."""

    axes: tuple[tuple[str, Any], ...]
    argv: tuple[str, ...]

    @property
    def name(self) -> str:
        """``key=value`` of each axis (``workers=4 bandwidth=10Gbps``); "" without axes."""
        return " ".join(f"{key}={_text(value)}" for key, value in self.axes)


def expand(
    document: Mapping[str, Any],
    source: str,
    flags: frozenset[str],
    overrides: Mapping[str, Any] | None = None,
) -> list[Point]:
    """The points of an experiment ``document`` (the decoded TOML), in grid order.

    ``source`` names the file in errors; ``flags`` are the options that take no value (given
    as ``true``/``false``); ``overrides`` replace the file's value of a key (the command line's
    options win over the file; an axis overridden is an axis no more).

    Raises
    ------
    ConfigError
        Naming the file, the section and key, and the value: an unknown section or key, a key
        in the wrong section, a value of the wrong type, axes of unequal length under
        ``zip``, no trace.
    """
    values: dict[str, Any] = {}
    combine = "product"
    for section, body in document.items():
        where = f"{source}: [{section}]"
        if not isinstance(body, Mapping):
            raise ConfigError(f"{source}: {section} = {_text(body)}: expected a [{section}] table")
        if section == _GRID:
            combine = _grid(body, where)
            continue
        if section not in SECTIONS:
            raise ConfigError(
                f"{where}: not a section; the sections are {', '.join([*SECTIONS, _GRID])}"
            )
        for key, value in body.items():
            home = section_of(key)
            if home is None:
                raise ConfigError(
                    f"{where} {key}: not a key of an experiment; [{section}] takes "
                    f"{', '.join(SECTIONS[section])}"
                )
            if home != section:
                raise ConfigError(f"{where} {key}: belongs in [{home}]")
            values[key] = _checked(value, f"{where} {key}", key in flags, key == "trace")
    for key, value in (overrides or {}).items():
        values[key] = value
    if "trace" not in values:
        raise ConfigError(f"{source}: [workload] trace: missing (a trace file or sample name)")
    axes = [(key, value) for key, value in values.items() if _is_axis(key, value)]
    if combine == "zip" and len({len(v) for _, v in axes}) > 1:
        lengths = ", ".join(f"{key} {len(v)}" for key, v in axes)
        raise ConfigError(
            f'{source}: [grid] combine = "zip": the axes differ in length ({lengths})'
        )
    rows = (
        itertools.product(*(v for _, v in axes))
        if combine == "product"
        else zip(*(v for _, v in axes), strict=True)
    )
    points = []
    for row in rows:
        chosen = dict(zip((key for key, _ in axes), row, strict=True))
        point_values = {key: chosen.get(key, value) for key, value in values.items()}
        # An axis of one value names no point: it only says the value is a list's item.
        varied = tuple((key, chosen[key]) for key, v in axes if len(v) > 1)
        points.append(Point(varied, tuple(_argv(point_values, flags))))
    return points


def _grid(body: Mapping[str, Any], where: str) -> str:
    for key in body:
        if key != "combine":
            raise ConfigError(f"{where} {key}: not a key of [grid]; it takes combine")
    combine = body.get("combine", "product")
    if combine not in COMBINE:
        raise ConfigError(
            f"{where} combine = {_text(combine)}: expected one of {', '.join(COMBINE)}"
        )
    return str(combine)


def _is_axis(key: str, value: Any) -> bool:
    return isinstance(value, list)


def _checked(value: Any, where: str, flag: bool, several: bool) -> Any:
    """``value`` if it is a value (or an axis of values) of an option, else a ConfigError.
    ``several``: an axis's value may itself be a list (the traces of several worker types)."""
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{where} = []: an axis needs at least one value")
        for item in value:
            _scalar(item, where, flag, inner_list=several)
        return value
    _scalar(value, where, flag, inner_list=False)
    return value


def _scalar(value: Any, where: str, flag: bool, inner_list: bool) -> None:
    if flag:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} = {_text(value)}: a flag, expected true or false")
        return
    if inner_list and isinstance(value, list) and value:
        for item in value:
            _scalar(item, where, flag, inner_list=False)
        return
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(
            f"{where} = {_text(value)}: expected a string or a number, as on the command line"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where} = {_text(value)}: expected a finite number")


def _argv(values: Mapping[str, Any], flags: frozenset[str]) -> list[str]:
    """The ``sgdsim simulate`` arguments of one point's values: the traces first."""
    trace = values["trace"]
    argv = [str(t) for t in trace] if isinstance(trace, list) else [str(trace)]
    for key, value in values.items():
        if key == "trace":
            continue
        if key in flags:
            if value:
                argv.append(f"--{key}")
            continue
        argv += [f"--{key}", _text(value)]
    return argv


def _text(value: Any) -> str:
    """A value as the command line writes it (numbers without a trailing .0 where exact)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, list):
        return json.dumps(value)
    return str(value)


def experiment_toml(values: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """The experiment file that holds ``values`` (``{key: value}``, keys without dashes; a
    flag's value True), each in its section, in the sections' order; ``header``: comment
    lines on top. The inverse of :func:`expand` for a file without axes."""
    lines = [f"# {line}" for line in header]
    for section, keys in SECTIONS.items():
        chosen = [(key, values[key]) for key in keys if key in values]
        if not chosen:
            continue
        if lines:
            lines.append("")
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in chosen]
    unknown = sorted(set(values) - set(_SECTION_OF))
    if unknown:
        raise ConfigError(f"experiment: no section takes {', '.join(unknown)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    # A TOML basic string takes JSON's escapes for quotes, backslashes and control characters.
    return json.dumps(str(value), ensure_ascii=False)
