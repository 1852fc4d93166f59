"""Parse and format quantities with units: bandwidths, sizes and durations.

Used by the CLI and by configuration files, so that a user writes ``10Gbps``, ``64KiB`` or ``20us``
and every error says which parameter was wrong and which units are accepted.

Rules
-----
- SI prefixes are powers of 10 (``k``/``K`` = 1e3, ``M``, ``G``, ``T``); IEC prefixes are powers
  of 2 (``Ki`` = 1024, ``Mi``, ``Gi``, ``Ti``). So ``1KB`` is 1000 bytes and ``1KiB`` 1024 bytes.
- Case matters for the base unit: ``b`` is a bit, ``B`` a byte (``1Gbps`` = 1e9 bit/s,
  ``1GBps`` = ``1GB/s`` = 8e9 bit/s). A lower-case ``m`` is never mega (it would be milli).
- Bandwidths are returned in bits per second, sizes in whole bytes, durations in seconds.
- A plain number (no unit) is a number of bytes for sizes. For bandwidths and durations it is
  rejected, because ``10`` could mean bit/s, byte/s, s or ms; a caller that has a natural unit can
  pass ``default_unit`` (for example ``default_unit="ms"``) to accept plain numbers in that unit.
- Values must be finite and, with ``positive=True`` (the default), > 0; with ``positive=False``
  zero is accepted too. A negative quantity is never accepted.
- Values must lie in the range sgdsim computes with (:data:`MIN_BANDWIDTH_BPS` to
  :data:`MAX_BANDWIDTH_BPS`, sizes up to :data:`MAX_SIZE_BYTES`, durations up to
  :data:`MAX_DURATION_S`): far beyond any real network or model, yet small enough that sums and
  products of millions of them stay finite, so that a result is never inf, nan or zero.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from simcore.errors import ConfigError

__all__ = [
    "MAX_BANDWIDTH_BPS",
    "MAX_DURATION_S",
    "MAX_SIZE_BYTES",
    "MIN_BANDWIDTH_BPS",
    "check_bandwidth_range",
    "check_duration_range",
    "format_bandwidth",
    "format_bytes",
    "format_number",
    "format_seconds",
    "parse_bandwidth",
    "parse_duration",
    "parse_size",
    "parse_time_per_size",
]

MIN_BANDWIDTH_BPS = 1.0  # 1 bit/s
MAX_BANDWIDTH_BPS = 1e18  # 1 Ebit/s
MAX_SIZE_BYTES = 2**60  # 1 EiB
MAX_DURATION_S = 1e9  # about 32 years

_NUMBER_AND_UNIT = re.compile(
    r"^\s*(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>\S*)\s*$"
)

_SI_PREFIXES: Mapping[str, float] = MappingProxyType(
    {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
)
_IEC_PREFIXES: Mapping[str, float] = MappingProxyType(
    {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
)


def _prefixed(base_units: Mapping[str, float]) -> Mapping[str, float]:
    """Every ``prefix + base unit`` spelling mapped to its factor."""
    table = {
        prefix + unit: prefix_factor * unit_factor
        for prefixes in (_SI_PREFIXES, _IEC_PREFIXES)
        for prefix, prefix_factor in prefixes.items()
        for unit, unit_factor in base_units.items()
    }
    return MappingProxyType(table)


@dataclass(frozen=True)
class _Kind:
    """What a quantity is called, its units (factor to the base unit) and how to describe it,
    and the range of values (in the base unit) sgdsim accepts, with their descriptions."""

    noun: str
    units: Mapping[str, float]
    examples: str
    accepted: str
    low: float = 0.0  # the smallest value > 0 accepted
    high: float = math.inf
    low_text: str = ""
    high_text: str = ""


# Factors to bit/s.
_BANDWIDTH = _Kind(
    noun="a bandwidth",
    units=_prefixed({"bps": 1.0, "bit/s": 1.0, "b/s": 1.0, "Bps": 8.0, "B/s": 8.0}),
    examples="10Gbps, 1.25GB/s, 800Mbit/s",
    accepted="bps, bit/s, b/s (bits) or Bps, B/s (bytes), with a prefix k M G T or Ki Mi Gi Ti",
    low=MIN_BANDWIDTH_BPS,
    high=MAX_BANDWIDTH_BPS,
    low_text="1 bit/s",
    high_text="1e18 bit/s",
)
# Factors to bytes.
_SIZE = _Kind(
    noun="a size",
    units=_prefixed({"B": 1.0, "b": 0.125, "bit": 0.125}),
    examples="512, 64KiB, 1MB, 4 GiB",
    accepted="B (bytes) or b, bit (bits), with a prefix k M G T or Ki Mi Gi Ti; "
    "a plain number is bytes",
    high=MAX_SIZE_BYTES,
    high_text="1 EiB (2**60 bytes)",
)
# Factors to seconds; both micro signs (U+00B5 and U+03BC) are accepted for microseconds.
_DURATION = _Kind(
    noun="a duration",
    units=MappingProxyType(
        {"s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ns": 1e-9}
    ),
    examples="5ms, 20us, 1.5s, 100ns",
    accepted="s, ms, us, ns",
    high=MAX_DURATION_S,
    high_text="1e9 s",
)


def _fail(kind: _Kind, name: str, value: object, reason: str = "") -> ConfigError:
    why = f"{reason}; " if reason else ""
    return ConfigError(
        f"{name}: {value!r} is not {kind.noun}; use a number with a unit such as "
        f"{kind.examples} ({why}units: {kind.accepted})"
    )


def _parse(
    kind: _Kind, value: str | float, name: str, default_unit: str | None, positive: bool
) -> tuple[float, str]:
    """``value`` in the kind's base unit, and the unit it was written in."""
    if isinstance(value, bool):  # bool is an int; True is never meant as "1 byte"
        raise _fail(kind, name, value)
    if isinstance(value, int | float):
        number, unit = float(value), ""
    else:
        match = _NUMBER_AND_UNIT.match(value)
        if match is None:
            raise _fail(kind, name, value)
        number, unit = float(match["number"]), match["unit"]
    if not unit and number == 0 and not positive:
        return 0.0, ""  # nothing needs no unit: `--comm-thread 0` turns a cost off
    if not unit:
        if default_unit is None:
            raise _fail(kind, name, value, "the unit is missing")
        unit = default_unit
    factor = kind.units.get(unit)
    if factor is None:
        raise _fail(kind, name, value, f"unknown unit {unit!r}")
    # Dividing by 1e6 rather than multiplying by 1e-6 keeps "20us" at exactly 2e-05 s.
    result = number * factor if factor >= 1 else number / (1 / factor)
    if not math.isfinite(result):
        raise _fail(kind, name, value, "not finite")
    if result < 0 or (positive and result == 0):
        rule = "> 0" if positive else ">= 0"
        raise ConfigError(f"{name}: {value!r} must be {rule}")
    if 0 < result < kind.low:
        raise ConfigError(f"{name}: {value!r} is below {kind.low_text}, the least sgdsim accepts")
    if result > kind.high:
        raise ConfigError(f"{name}: {value!r} is above {kind.high_text}, the most sgdsim accepts")
    return result, unit


def parse_bandwidth(
    value: str | float,
    *,
    name: str = "bandwidth",
    default_unit: str | None = None,
    positive: bool = True,
) -> float:
    """Parse a bandwidth such as ``10Gbps``, ``25 Gbit/s``, ``1.25GB/s`` or ``800MiB/s``.

    Parameters
    ----------
    value : str or float
        The text to parse, or a bare number (which needs ``default_unit``).
    name : str
        The parameter's name for error messages, e.g. ``"--bandwidth"``.
    default_unit : str, optional
        Unit of a plain number, e.g. ``"Gbps"``; without it a plain number is rejected.
    positive : bool
        Require a value > 0 (the default); otherwise 0 is accepted too.

    Returns
    -------
    float
        The bandwidth in bits per second.

    Raises
    ------
    ConfigError
        Naming ``name`` and the value, and listing the accepted units.

    Examples
    --------
    >>> parse_bandwidth("1.25GB/s")
    10000000000.0
    """
    return _parse(_BANDWIDTH, value, name, default_unit, positive)[0]


def parse_size(
    value: str | int,
    *,
    name: str = "size",
    default_unit: str = "B",
    positive: bool = True,
) -> int:
    """Parse a size such as ``512``, ``64KiB``, ``1MB`` or ``4 GiB`` into whole bytes.

    A prefixed value rounds to the nearest byte (``1.23KiB`` is 1260 bytes); an unprefixed one must
    already be whole bytes (``1.5`` or ``12b`` is rejected).

    Parameters
    ----------
    value : str or int
        The text to parse, or a bare integer (a number of ``default_unit``).
    name : str
        The parameter's name for error messages, e.g. ``"--max-size"``.
    default_unit : str
        Unit of a plain number; bytes unless the caller says otherwise.
    positive : bool
        Require a size > 0 (the default); otherwise 0 bytes is accepted too.

    Returns
    -------
    int
        The size in bytes.

    Raises
    ------
    ConfigError
        Naming ``name`` and the value, and listing the accepted units.

    Examples
    --------
    >>> parse_size("64KiB")
    65536
    """
    nbytes, unit = _parse(_SIZE, value, name, default_unit, positive)
    if unit in ("B", "b", "bit") and not nbytes.is_integer():
        raise _fail(_SIZE, name, value, "not a whole number of bytes")
    rounded = round(nbytes)
    if positive and rounded == 0:
        raise ConfigError(f"{name}: {value!r} is less than one byte; it must be > 0")
    return rounded


def parse_duration(
    value: str | float,
    *,
    name: str = "duration",
    default_unit: str | None = None,
    positive: bool = True,
) -> float:
    """Parse a duration such as ``5ms``, ``20us``, ``1.5s`` or ``100ns``.

    Parameters
    ----------
    value : str or float
        The text to parse, or a bare number (which needs ``default_unit``).
    name : str
        The parameter's name for error messages, e.g. ``"--timeout"``.
    default_unit : str, optional
        Unit of a plain number, e.g. ``"s"``; without it a plain number is rejected.
    positive : bool
        Require a duration > 0 (the default); otherwise 0 is accepted too.

    Returns
    -------
    float
        The duration in seconds.

    Raises
    ------
    ConfigError
        Naming ``name`` and the value, and listing the accepted units.

    Examples
    --------
    >>> parse_duration("20us")
    2e-05
    """
    return _parse(_DURATION, value, name, default_unit, positive)[0]


def parse_time_per_size(value: str, *, name: str = "time per size") -> tuple[float, bool]:
    """Parse a per-byte cost such as ``1ns/B``, ``0.5us/KiB`` or ``2ms/MB`` into seconds/byte.

    A duration (:func:`parse_duration`, 0 accepted) over a size (:func:`parse_size`; a bare
    unit means one of it: ``/KiB`` is per 1024 bytes). A bare number is read as seconds per byte,
    the unit this took before it took units; the second value returned is True then, so that a
    command can say which unit it assumed.

    Raises
    ------
    ConfigError
        Naming ``name``, the value, and the form expected.

    Examples
    --------
    >>> parse_time_per_size("1ns/B")
    (1e-09, False)
    >>> parse_time_per_size("0.5us/KiB")[0] * 1024
    5e-07
    """
    text = str(value).strip()
    time_text, slash, size_text = text.partition("/")
    expected = "a time per size such as 1ns/B or 0.5us/KiB (or a bare number of seconds per byte)"
    if not slash:
        try:
            seconds = float(text)
        except ValueError:
            raise ConfigError(f"{name}: {value!r} is not {expected}") from None
        if not math.isfinite(seconds) or seconds < 0:
            raise ConfigError(f"{name}: {value!r} must be a finite number >= 0")
        return seconds, True
    if not time_text.strip() or not size_text.strip():
        raise ConfigError(f"{name}: {value!r} is not {expected}")
    seconds = parse_duration(time_text, name=f"{name} (time before /)", positive=False)
    per = size_text.strip()
    if not per[0].isdigit() and per[0] != ".":
        per = "1" + per
    nbytes = parse_size(per, name=f"{name} (size after /)")
    return seconds / nbytes, False


def check_bandwidth_range(name: str, bps: float) -> None:
    """ConfigError naming ``name`` unless ``bps`` (bit/s, from any source: an option, a network
    profile, a topology) is in MIN_BANDWIDTH_BPS..MAX_BANDWIDTH_BPS (nan is outside too)."""
    if not MIN_BANDWIDTH_BPS <= bps <= MAX_BANDWIDTH_BPS:
        raise ConfigError(
            f"{name}: {bps!r} bit/s is outside 1 bit/s .. 1e18 bit/s, the range sgdsim accepts"
        )


def check_duration_range(name: str, seconds: float) -> None:
    """ConfigError naming ``name`` unless ``seconds`` is in 0..MAX_DURATION_S."""
    if not 0 <= seconds <= MAX_DURATION_S:
        raise ConfigError(f"{name}: {seconds!r} s is outside 0 .. 1e9 s, the range sgdsim accepts")


def _three_digits(value: float) -> str:
    """``value`` (>= 0, < 999.5) with three significant digits, never in exponent notation."""
    if value < 0.9995:
        return f"{value:.3g}"  # only below the smallest unit, e.g. 0.5 bit/s
    for limit, spec in ((9.995, ".2f"), (99.95, ".1f")):
        if value < limit:  # the limits are where rounding adds a digit: 9.995 -> "10.0"
            return format(value, spec)
    return f"{value:.0f}"


def _format_scaled(value: float, steps: tuple[tuple[float, str], ...]) -> str:
    """Format ``value`` with the largest unit of ``steps`` (ascending) that keeps it >= 1.

    Three significant digits; a value that would round to 1000 moves to the next unit up, so a
    table shows ``1.00 Gbit/s`` rather than ``1000 Mbit/s``.
    """
    if not math.isfinite(value):
        return f"{value} {steps[0][1]}"
    sign, magnitude = ("-" if value < 0 else ""), abs(value)
    index = 0
    while index + 1 < len(steps) and magnitude / steps[index + 1][0] >= 0.9995:
        index += 1
    scaled = magnitude / steps[index][0]
    text = _three_digits(scaled) if scaled < 999.5 else f"{scaled:.0f}"
    return f"{sign}{text} {steps[index][1]}"


_BANDWIDTH_STEPS = (
    (1.0, "bit/s"),
    (1e3, "kbit/s"),
    (1e6, "Mbit/s"),
    (1e9, "Gbit/s"),
    (1e12, "Tbit/s"),
)
_BYTE_STEPS = ((1.0, "B"), (2.0**10, "KiB"), (2.0**20, "MiB"), (2.0**30, "GiB"), (2.0**40, "TiB"))
_SECOND_STEPS = ((1e-9, "ns"), (1e-6, "us"), (1e-3, "ms"), (1.0, "s"))


def format_bandwidth(bps: float) -> str:
    """A bandwidth in bits per second as readable text with an SI prefix: ``1.25 Gbit/s``.

    Three significant digits; :func:`parse_bandwidth` reads the result back.
    """
    return _format_scaled(bps, _BANDWIDTH_STEPS)


def format_bytes(nbytes: float) -> str:
    """A size in bytes as readable text with an IEC prefix: ``512 B``, ``64.0 KiB``, ``1.50 GiB``.

    Whole bytes below 1 KiB are shown exactly; larger sizes with three significant digits.
    :func:`parse_size` reads the result back (to within that rounding).
    """
    if math.isfinite(nbytes) and abs(nbytes) < 1024 and float(nbytes).is_integer():
        return f"{int(nbytes)} B"
    return _format_scaled(nbytes, _BYTE_STEPS)


NUMBER_DIGITS = 4  # significant digits of every number a table prints


def format_number(value: float, digits: int = NUMBER_DIGITS) -> str:
    """A number as every table prints it: ``digits`` significant digits, trailing zeros kept so
    that a column reads at one precision (``16.60`` beside ``3.736``), no exponent from 1e-3 to
    below 1e15 (larger integers parts are printed whole: ``123457``).

    >>> format_number(16.6), format_number(3.7361), format_number(123456.7), format_number(0)
    ('16.60', '3.736', '123457', '0')
    """
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude < 1e-3 or magnitude >= 1e15:
        return f"{value:.{digits - 1}e}"
    exponent = math.floor(math.log10(magnitude))
    decimals = max(0, digits - 1 - exponent)
    text = f"{value:.{decimals}f}"
    if decimals and len(text.lstrip("-").replace(".", "").lstrip("0")) > digits:
        text = f"{value:.{decimals - 1}f}"  # rounding carried over a power of ten: 9.9996
    return text


def format_seconds(seconds: float) -> str:
    """A duration in seconds as readable text: ``100 ns``, ``20.0 us``, ``5.00 ms``, ``1.50 s``.

    Three significant digits (durations of 1000 s and more are shown in whole seconds);
    :func:`parse_duration` reads the result back. Zero is ``0 s``.
    """
    if seconds == 0:
        return "0 s"
    return _format_scaled(seconds, _SECOND_STEPS)
