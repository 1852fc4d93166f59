"""A measured point-to-point network profile and the linear transfer-time model fitted to it.

TPDS'22 section 2.2.1 (Fig. 6) finds that point-to-point transmission time with Gloo is a linear
function of the data size over a wide range of sizes, so the simulator models one transfer as

    time_s = latency_s + 8 * nbytes / bandwidth_bps.

This module is pure: the dataclass, the fit, and conversion to and from the versioned JSON form
(``schema`` ``"sgdsim.network"``). Files are read by :mod:`simcore.network_io`; measurements are
made by ``profilers.netprofile``.

Version 2 adds the link's measured effects (:mod:`simcore.network_effects`), each optional: how
unevenly concurrent flows share the link, the transfers' CPU cost per byte, a ring AllReduce's
goodput per W, and what a server's link carries both ways at once. Version 3 adds two optional
terms to the ring effect (:class:`RingGoodput`): a ring's fixed cost per message and its CPU per
byte, which ``sgdsim validate --save-network`` records. Version 4 adds, with them, the
bandwidth a ring of each W measured moved its bytes at (a ring point's ``bandwidth_bps``).
Version 5 adds the interference between a server link's two directions
(:class:`~simcore.network_effects.DuplexInterference`), the other model of what ``duplex``
describes. Files of versions 1 to 4 still load; :func:`profile_note` says what they lack.

A fitted profile's ``bandwidth_bps`` is the link's sustained rate: the slope of its largest
sizes (:func:`sustained_bandwidth`), which is what a training's transfers, one after another,
get. The line through every size (``line_bandwidth_bps``, kept beside it) reads high on a link
whose shaper or switch lets the start of each transfer through at once (a token bucket's
burst): 2-4% on the emulated cluster's tc-shaped links. Profiles fitted before this kept the
line's slope as their bandwidth and have no ``line_bandwidth_bps``; they load unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simcore.errors import ConfigError, ProfilingError
from simcore.network_effects import (
    EFFECT_KEYS,
    Duplex,
    DuplexInterference,
    FieldChecker,
    FlowSharing,
    RingGoodput,
    TransferCpu,
    effect_from_dict,
    effect_to_dict,
    non_negative,
    per_workers_text,
    positive,
)
from simcore.units import format_bandwidth, format_bytes, format_seconds

__all__ = [
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "SUPPORTED_SCHEMA_VERSIONS",
    "NetworkProfile",
    "fit_errors",
    "fit_linear_transfer",
    "fit_network_profile",
    "fit_rates",
    "network_profile_from_dict",
    "network_profile_table",
    "network_profile_to_dict",
    "profile_note",
    "sustained_bandwidth",
]

SCHEMA_NAME = "sgdsim.network"
SCHEMA_VERSION = 5
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1, 2, 3, 4, 5)

_REGENERATE_HINT = "re-measure it with `sgdsim network measure` (see simcore/data/network)"


@dataclass(frozen=True)
class NetworkProfile:
    """Latency and bandwidth of one point-to-point link, fitted to measured transfer times.

    Attributes
    ----------
    latency_s : float
        Fitted fixed cost of one transfer (the intercept), seconds, >= 0.
    bandwidth_bps : float
        The bandwidth the simulator uses, bits per second, > 0: in a fitted profile the
        sustained rate of the largest sizes (:func:`sustained_bandwidth`); in one fitted
        before it (no ``line_bandwidth_bps``), the line's.
    line_bandwidth_bps : float or None
        8 / slope of the line through every size (:func:`fit_linear_transfer`), whose
        intercept is ``latency_s``; informational. None: a profile written by hand or fitted
        before the sustained rate.
    r_squared : float or None
        Coefficient of determination of the fit (see :func:`fit_linear_transfer`); None for a
        profile written by hand rather than fitted.
    samples : tuple of (int, float)
        The measurements the fit used: ``(nbytes, one-way seconds)``, one per message size
        (the median of the repetitions).
    backend : str
        Transport measured, e.g. ``"gloo"``.
    endpoints : str
        Where the two ends were, e.g. ``"127.0.0.1 loopback, two processes on one host"``.
    method : str
        How one-way times were obtained (repetitions, warm-up, estimator).
    host : str
        Host name of the machine that ran rank 0.
    created_utc : str
        ISO 8601 time of the measurement, UTC.
    flow_sharing : FlowSharing or None
        How unevenly concurrent flows share the link (``flow_weight_cv``); None: not measured.
    transfer_cpu : TransferCpu or None
        The transfers' CPU cost per byte and the host's cores; None: not measured.
    ring_goodput : RingGoodput or None
        A ring AllReduce's goodput per W (and, from version 3, its cost per message and CPU per
        byte); None: not measured.
    duplex : Duplex or None
        What a server's link carries both ways at once, over one way; None: not measured.
    duplex_interference : DuplexInterference or None
        How much each direction of a server's link slows beside the other's transfers (version
        5); where present it is the model used for the two directions, not ``duplex``.
    latency_se_s, bandwidth_se_bps : float or None
        The fit's standard errors (bootstrap over each size's repetitions), where the
        measurement estimated them; informational (the simulator uses the fit itself), so a
        reader that does not know them loses nothing.
    source : str
        The file it was loaded from, for messages; not serialized.
    schema_version : int
        The version of the file it was loaded from (a new profile: the current one); not
        serialized (a profile is always written in the current version).
    """

    latency_s: float
    bandwidth_bps: float
    r_squared: float | None = None
    samples: tuple[tuple[int, float], ...] = ()
    backend: str = ""
    endpoints: str = ""
    method: str = ""
    host: str = ""
    created_utc: str = ""
    flow_sharing: FlowSharing | None = None
    transfer_cpu: TransferCpu | None = None
    ring_goodput: RingGoodput | None = None
    duplex: Duplex | None = None
    duplex_interference: DuplexInterference | None = None
    latency_se_s: float | None = None
    bandwidth_se_bps: float | None = None
    line_bandwidth_bps: float | None = None
    source: str = "<memory>"
    schema_version: int = SCHEMA_VERSION

    @property
    def lacks(self) -> tuple[str, ...]:
        """What the profile does not carry, by name (``flow weight cv``, ...), in schema order.
        Either model of the two directions (``duplex``, ``duplex_interference``) counts as
        carrying them; without both, it lacks ``duplex goodput``."""
        either = self.duplex is not None or self.duplex_interference is not None
        return tuple(
            name
            for key, name in EFFECT_KEYS.items()
            if key != "duplex_interference"
            and getattr(self, key) is None
            and not (key == "duplex" and either)
        )

    def transfer_time_s(self, nbytes: float) -> float:
        """Predicted one-way time of a message of ``nbytes`` bytes, in seconds."""
        return self.latency_s + 8.0 * nbytes / self.bandwidth_bps


def _check_fit_input(nbytes: Sequence[int], seconds: Sequence[float]) -> None:
    if len(nbytes) != len(seconds):
        raise ConfigError(
            f"nbytes and seconds must have the same length, got {len(nbytes)} and {len(seconds)}"
        )
    for i, (size, time_s) in enumerate(zip(nbytes, seconds, strict=True)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigError(f"nbytes[{i}]: must be an integer number of bytes >= 0, got {size!r}")
        if not isinstance(time_s, int | float) or not math.isfinite(time_s) or time_s <= 0:
            raise ConfigError(f"seconds[{i}]: must be a finite time > 0 s, got {time_s!r}")
    if len(set(nbytes)) < 2:
        raise ConfigError(
            f"nbytes: a line needs at least 2 distinct message sizes, got {sorted(set(nbytes))}"
        )


def _weighted_line(
    x: Sequence[float], y: Sequence[float], w: Sequence[float]
) -> tuple[float, float]:
    """Intercept and slope minimizing sum(w * (y - a - b x)**2), with the constraint a >= 0."""
    total = math.fsum(w)
    x_mean = math.fsum(wi * xi for wi, xi in zip(w, x, strict=True)) / total
    y_mean = math.fsum(wi * yi for wi, yi in zip(w, y, strict=True)) / total
    sxx = math.fsum(wi * (xi - x_mean) ** 2 for wi, xi in zip(w, x, strict=True))
    sxy = math.fsum(wi * (xi - x_mean) * (yi - y_mean) for wi, xi, yi in zip(w, x, y, strict=True))
    slope = sxy / sxx
    intercept = y_mean - slope * x_mean
    if intercept >= 0:
        return intercept, slope
    # A negative latency is not physical; with one linear constraint the constrained optimum lies
    # on its boundary, i.e. the best line through the origin.
    through_origin = math.fsum(wi * xi * yi for wi, xi, yi in zip(w, x, y, strict=True))
    return 0.0, through_origin / math.fsum(wi * xi * xi for wi, xi in zip(w, x, strict=True))


def fit_linear_transfer(
    nbytes: Sequence[int], seconds: Sequence[float]
) -> tuple[float, float, float]:
    """Fit ``seconds = latency_s + 8 * nbytes / bandwidth_bps`` by weighted least squares.

    Each squared residual is weighted by ``1 / seconds``, i.e. the timing noise is taken to grow in
    proportion to the transfer time (as it does when a transfer is a chain of packets or chunks).
    Message sizes are log-spaced over several decades (1 KiB .. 64 MiB), so an unweighted fit lets
    the noise of the largest message (milliseconds) swamp the latency (microseconds), while full
    relative weights (``1 / seconds**2``) let the many latency-bound small sizes pull the slope
    off the large ones; on this machine's loopback, 1/seconds kept the 64 MiB point within 2 % and
    the latency near the small-message times. A negative intercept is clipped to 0 (the best line
    through the origin).

    Parameters
    ----------
    nbytes : sequence of int
        Message sizes in bytes (>= 0), at least two distinct ones.
    seconds : sequence of float
        One-way transfer times in seconds (> 0), aligned with ``nbytes``.

    Returns
    -------
    latency_s : float
        The intercept, seconds (>= 0).
    bandwidth_bps : float
        8 / slope, bits per second (> 0).
    r_squared : float
        Coefficient of determination with the same weights, ``1 - SS_res / SS_tot``: the
        fraction of the weighted variance of the times that the line explains; 1 for exactly
        linear data.

    Raises
    ------
    ConfigError
        Lengths differ, fewer than two distinct sizes, or a size or time is out of range.
    ProfilingError
        The fitted time does not grow with size (slope <= 0): the measurements are dominated by
        noise; measure larger messages or more repetitions.
    """
    _check_fit_input(nbytes, seconds)
    x = [float(n) for n in nbytes]
    y = [float(t) for t in seconds]
    w = [1.0 / t for t in y]
    latency_s, slope = _weighted_line(x, y, w)
    if not slope > 0:
        raise ProfilingError(
            f"transfer time does not grow with message size (fitted slope {slope:.3g} s/byte); "
            "the measurements are dominated by noise: measure larger messages or more repeats"
        )
    y_mean = math.fsum(wi * yi for wi, yi in zip(w, y, strict=True)) / math.fsum(w)
    ss_res = math.fsum(
        wi * (yi - latency_s - slope * xi) ** 2 for wi, xi, yi in zip(w, x, y, strict=True)
    )
    ss_tot = math.fsum(wi * (yi - y_mean) ** 2 for wi, yi in zip(w, y, strict=True))
    return latency_s, 8.0 / slope, 1.0 - ss_res / ss_tot


#: The sizes :func:`sustained_bandwidth` reads: those whose time is at least this fraction of
#: the longest one (with sizes doubling, the longest four).
SUSTAINED_TIME_FRACTION = 1 / 8


def _free_line_slope(x: Sequence[float], y: Sequence[float], w: Sequence[float]) -> float:
    """The slope minimizing sum(w * (y - a - b x)**2), the intercept ``a`` free."""
    total = math.fsum(w)
    x_mean = math.fsum(wi * xi for wi, xi in zip(w, x, strict=True)) / total
    y_mean = math.fsum(wi * yi for wi, yi in zip(w, y, strict=True)) / total
    sxx = math.fsum(wi * (xi - x_mean) ** 2 for wi, xi in zip(w, x, strict=True))
    sxy = math.fsum(wi * (xi - x_mean) * (yi - y_mean) for wi, xi, yi in zip(w, x, y, strict=True))
    return sxy / sxx


def sustained_bandwidth(nbytes: Sequence[int], seconds: Sequence[float]) -> float | None:
    """The link's sustained rate, bits per second: 8 / the slope of the largest sizes.

    The sizes whose one-way time is at least :data:`SUSTAINED_TIME_FRACTION` of the longest
    get a line of their own, weighted by ``1 / seconds`` like :func:`fit_linear_transfer`'s,
    with a free intercept. A shaper or switch that lets the first bytes of each transfer
    through at once (a token bucket's burst) takes a fixed time off every large transfer: a
    negative intercept, which the line through every size, held at a latency >= 0, can only
    absorb by a steeper rate (2-4% on the emulated cluster's tc-shaped links). The slope of
    the largest sizes is the rate that transfers following one another, as a training's do,
    get once the burst is spent.

    Returns None when fewer than two distinct sizes qualify or their time does not grow with
    size (then the line's rate is all there is).
    """
    _check_fit_input(nbytes, seconds)
    longest = max(seconds)
    top = [
        (float(n), float(t))
        for n, t in zip(nbytes, seconds, strict=True)
        if t >= SUSTAINED_TIME_FRACTION * longest
    ]
    if len({n for n, _ in top}) < 2:
        return None
    slope = _free_line_slope([n for n, _ in top], [t for _, t in top], [1.0 / t for _, t in top])
    return 8.0 / slope if slope > 0 else None


def fit_rates(nbytes: Sequence[int], seconds: Sequence[float]) -> tuple[float, float, float, float]:
    """What a fitted profile holds: ``(latency_s, bandwidth_bps, r_squared, line_bps)``: the
    line through every size (:func:`fit_linear_transfer`: its latency, r² and rate), and the
    bandwidth to simulate with, the sustained rate (:func:`sustained_bandwidth`) where the
    largest sizes give one, else the line's."""
    latency_s, line_bps, r_squared = fit_linear_transfer(nbytes, seconds)
    sustained = sustained_bandwidth(nbytes, seconds)
    return latency_s, line_bps if sustained is None else sustained, r_squared, line_bps


def fit_errors(
    repetitions: Sequence[tuple[int, Sequence[float]]], resamples: int = 400, seed: int = 0
) -> tuple[float, float]:
    """Standard errors of :func:`fit_rates`'s latency and bandwidth when each size's
    time is the median of its repetitions (``(nbytes, one-way times)`` per size): a two-stage
    bootstrap (seeded) that resamples the sizes, and each chosen size's repetitions, with
    replacement, refits, and takes the spread of the fits (half their central 68 %).
    Resampling the sizes covers how far the times stray from one line (a link's burst, a busy
    moment between sizes), which the repetitions alone would not show."""
    rng = np.random.default_rng(seed)
    sizes = [n for n, _ in repetitions]
    times = [np.asarray(t, dtype=float) for _, t in repetitions]
    latencies, bandwidths = [], []
    for _ in range(resamples):
        chosen = rng.integers(len(sizes), size=len(sizes))
        if len({sizes[i] for i in chosen}) < 2:
            continue
        medians = [float(np.median(rng.choice(times[i], size=len(times[i])))) for i in chosen]
        try:
            latency_s, bandwidth_bps, _, _ = fit_rates([sizes[i] for i in chosen], medians)
        except ProfilingError:  # a resample without a growing time: no fit to count
            continue
        latencies.append(latency_s)
        bandwidths.append(bandwidth_bps)
    if len(bandwidths) < 2:
        return math.nan, math.nan

    # Half the central 68 %, a standard deviation for normal spreads: a resample of mostly
    # small sizes can put a slope near zero and a bandwidth far out, which would swamp the sd.
    def spread(values: list[float]) -> float:
        low, high = np.quantile(values, [0.16, 0.84])
        return float(high - low) / 2

    return spread(latencies), spread(bandwidths)


def fit_network_profile(
    samples: Sequence[tuple[int, float]],
    *,
    backend: str = "",
    endpoints: str = "",
    method: str = "",
    host: str = "",
    created_utc: str = "",
) -> NetworkProfile:
    """Fit :func:`fit_rates` to ``(nbytes, seconds)`` samples and build the profile.

    Raises the errors of :func:`fit_linear_transfer`.
    """
    ordered = tuple(sorted((int(n), float(t)) for n, t in samples))
    latency_s, bandwidth_bps, r_squared, line_bps = fit_rates(
        [n for n, _ in ordered], [t for _, t in ordered]
    )
    return NetworkProfile(
        latency_s=latency_s,
        bandwidth_bps=bandwidth_bps,
        line_bandwidth_bps=line_bps,
        r_squared=r_squared,
        samples=ordered,
        backend=backend,
        endpoints=endpoints,
        method=method,
        host=host,
        created_utc=created_utc,
    )


def network_profile_table(profile: NetworkProfile) -> str:
    """A readable table of the measured and fitted one-way time per size, then the fit."""
    lines = [f"{'size':>10}  {'measured':>10}  {'fitted':>10}"]
    for nbytes, seconds in profile.samples:
        fitted = profile.transfer_time_s(nbytes)
        cells = (format_bytes(nbytes), format_seconds(seconds), format_seconds(fitted))
        lines.append("  ".join(f"{cell:>10}" for cell in cells))
    r_squared = "n/a" if profile.r_squared is None else f"{profile.r_squared:.4f}"
    lines.append(
        f"latency {format_seconds(profile.latency_s)}, "
        f"bandwidth {format_bandwidth(profile.bandwidth_bps)}, r² {r_squared}"
    )
    line_bps = profile.line_bandwidth_bps
    if line_bps is not None and line_bps != profile.bandwidth_bps:
        lines.append(
            f"the bandwidth is the largest sizes' sustained rate; the line through every size "
            f"(the latency's) reads {format_bandwidth(line_bps)} "
            f"({line_bps / profile.bandwidth_bps - 1:+.1%})"
        )
    if profile.bandwidth_se_bps is not None and profile.latency_se_s is not None:
        lines.append(
            f"standard errors: latency {format_seconds(profile.latency_se_s)}, bandwidth "
            f"{format_bandwidth(profile.bandwidth_se_bps)} "
            f"({profile.bandwidth_se_bps / profile.bandwidth_bps:.1%})"
        )
    lines.extend(effect_lines(profile))
    note = profile_note(profile)
    if note:
        lines.append(note)
    return "\n".join(lines)


def effect_lines(profile: NetworkProfile) -> list[str]:
    """One line per measured effect: its value and how it was measured."""
    lines = []
    sharing = profile.flow_sharing
    if sharing is not None:
        directions = ", ".join(
            f"{name} {cv:.3g}"
            for name, cv in (("pull", sharing.pull_cv), ("push", sharing.push_cv))
            if cv is not None
        )
        warm = ""
        if sharing.warm_pull_cv is not None and sharing.warm_push_cv is not None:
            warm = (
                f"; over connections kept open pull {sharing.warm_pull_cv:.3g}, push "
                f"{sharing.warm_push_cv:.3g} (not applied; validate --flow-sharing warm)"
            )
        lines.append(
            f"flow weight cv {sharing.weight_cv:.3g}"
            + (f" ({directions})" if directions else "")
            + warm
            + _how(sharing.method, sharing.created_utc)
        )
    cpu = profile.transfer_cpu
    if cpu is not None:
        lines.append(
            f"transfer CPU {cpu.s_per_byte * 1e9:.3g} ns/B on {cpu.host_cpu_cores:g} cores"
            + _how(cpu.method, cpu.created_utc)
        )
    ring = profile.ring_goodput
    if ring is not None:
        points = per_workers_text(ring.points)
        terms = ""
        if ring.message_latency_s is not None:
            terms += f"; {format_seconds(ring.message_latency_s)} per message"
        if ring.segment_bytes is not None:
            terms += f" (segments of at most {format_bytes(ring.segment_bytes)})"
        if ring.bandwidths:
            terms += "; bytes at " + per_workers_text(ring.bandwidths)
        if ring.cpu_s_per_byte is not None:
            terms += f", CPU {ring.cpu_s_per_byte * 1e9:.3g} ns per byte sent or received"
        lines.append(
            f"ring AllReduce goodput {points}{terms}" + _how(ring.method, ring.created_utc)
        )
    duplex = profile.duplex
    if duplex is not None:
        lines.append(
            f"duplex goodput {duplex.ratio:.2f}x one way (2x: full duplex)"
            + _how(duplex.method, duplex.created_utc)
        )
    interference = profile.duplex_interference
    if interference is not None:
        lines.append(
            "duplex interference: "
            + interference.text()
            + _how(interference.method, interference.created_utc)
        )
    return lines


def _how(method: str, created_utc: str) -> str:
    parts = [part for part in (method, created_utc) if part]
    return f"; {', '.join(parts)}" if parts else ""


def profile_note(profile: NetworkProfile, name: str | None = None) -> str:
    """A note naming the effects ``profile`` does not carry (which are then off unless given as
    options), or "" when it carries them all. ``name``: how to call the profile (default: the
    file it was loaded from)."""
    if not profile.lacks:
        return ""
    version = f", schema version {profile.schema_version}" if profile.schema_version < 2 else ""
    lacks = ", ".join(profile.lacks)
    who = name or profile.source
    who = "this profile" if who == "<memory>" else f"network profile {who}"
    return (
        f"note: {who} has no {lacks}{version}; "
        "those effects are off unless given as options (re-measure with `sgdsim network measure` "
        "to record them)"
    )


_TEXT_FIELDS = ("backend", "endpoints", "method", "host", "created_utc")
# Informational numbers a profile may carry (a reader that does not know them predicts alike).
_OPTIONAL_NUMBERS = ("latency_se_s", "bandwidth_se_bps", "line_bandwidth_bps")


def network_profile_to_dict(profile: NetworkProfile) -> dict[str, Any]:
    """The JSON form of ``profile`` (the inverse of :func:`network_profile_from_dict`)."""
    data: dict[str, Any] = {
        "schema": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "latency_s": profile.latency_s,
        "bandwidth_bps": profile.bandwidth_bps,
    }
    if profile.r_squared is not None:
        data["r_squared"] = profile.r_squared
    for key in _OPTIONAL_NUMBERS:
        if getattr(profile, key) is not None:
            data[key] = getattr(profile, key)
    data.update({key: getattr(profile, key) for key in _TEXT_FIELDS})
    data["samples"] = [{"nbytes": n, "time_s": t} for n, t in profile.samples]
    for key in EFFECT_KEYS:
        effect = getattr(profile, key)
        if effect is not None:
            data[key] = effect_to_dict(effect)
    return data


def network_profile_from_dict(data: Any, source: str = "<memory>") -> NetworkProfile:
    """Validate the JSON form of a network profile and build a :class:`NetworkProfile`.

    Parameters
    ----------
    data : Any
        The decoded JSON document.
    source : str
        A name for error messages, usually the file path.

    Returns
    -------
    NetworkProfile
        With ``source`` set.

    Raises
    ------
    TraceError
        Naming the source, the field, the value and what is expected (and, for an unsupported
        ``schema_version``, the supported versions and how to re-measure).
    """
    check = FieldChecker(source)
    if not isinstance(data, Mapping):
        check.fail("top level", f"expected a JSON object, got {type(data).__name__}")
    version = _check_schema(check, data)
    effects: dict[str, Any] = {}
    for key in EFFECT_KEYS:
        if data.get(key) is not None:
            if version < 2:
                check.fail(f"field '{key}'", "needs schema_version 2 (version 1 has no effects)")
            effects[key] = effect_from_dict(check, key, data[key])
    flow_sharing, transfer_cpu, ring, duplex, interference = (
        effects.get(key) for key in EFFECT_KEYS
    )
    assert flow_sharing is None or isinstance(flow_sharing, FlowSharing)
    assert transfer_cpu is None or isinstance(transfer_cpu, TransferCpu)
    assert ring is None or isinstance(ring, RingGoodput)
    assert duplex is None or isinstance(duplex, Duplex)
    assert interference is None or isinstance(interference, DuplexInterference)
    if interference is not None and version < 5:
        # A reader of version 4 would drop it without a word and predict otherwise.
        check.fail("field 'duplex_interference'", "needs schema_version 5")
    if ring is not None and ring.bandwidths and version < 4:
        # A reader of version 3 would drop them without a word and predict otherwise.
        check.fail("field 'ring_goodput'", "a point's 'bandwidth_bps' needs schema_version 4")
    r_squared = None
    if data.get("r_squared") is not None:
        r_squared = check.number(data, "r_squared", "top level", "<= 1", lambda v: v <= 1)
    texts = {key: _text(check, data, key) for key in _TEXT_FIELDS}
    errors = {
        key: check.number(data, key, "top level", ">= 0", non_negative)
        for key in ("latency_se_s", "bandwidth_se_bps")
        if data.get(key) is not None
    }
    if data.get("line_bandwidth_bps") is not None:
        errors["line_bandwidth_bps"] = check.number(
            data, "line_bandwidth_bps", "top level", "> 0 (bits per second)", positive
        )
    return NetworkProfile(
        latency_s=check.number(data, "latency_s", "top level", ">= 0 (seconds)", non_negative),
        bandwidth_bps=check.number(
            data, "bandwidth_bps", "top level", "> 0 (bits per second)", positive
        ),
        r_squared=r_squared,
        samples=_samples(check, data.get("samples", [])),
        source=source,
        backend=texts["backend"],
        endpoints=texts["endpoints"],
        method=texts["method"],
        host=texts["host"],
        created_utc=texts["created_utc"],
        flow_sharing=flow_sharing,
        transfer_cpu=transfer_cpu,
        ring_goodput=ring,
        duplex=duplex,
        duplex_interference=interference,
        **errors,
        schema_version=version,
    )


def _check_schema(check: FieldChecker, data: Mapping[str, Any]) -> int:
    """The file's schema version, checked."""
    schema = data.get("schema", SCHEMA_NAME)
    if schema != SCHEMA_NAME:
        check.fail(
            "field 'schema'", f"expected {SCHEMA_NAME!r}, got {schema!r}: not a network profile"
        )
    if "schema_version" not in data:
        check.fail("top level", "missing required field 'schema_version'")
    version = data["schema_version"]
    if isinstance(version, bool) or version not in SUPPORTED_SCHEMA_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
        check.fail(
            "field 'schema_version'",
            f"version {version!r} is not supported; this sgdsim reads version(s) {supported}; "
            f"{_REGENERATE_HINT}",
        )
    return int(version)


def _text(check: FieldChecker, data: Mapping[str, Any], key: str) -> str:
    return check.text(data, key, "top level")


def _samples(check: FieldChecker, raw: Any) -> tuple[tuple[int, float], ...]:
    if not isinstance(raw, list):
        check.fail("field 'samples'", f"must be a list, got {type(raw).__name__}")
    samples = []
    for i, item in enumerate(raw):
        where = f"samples[{i}]"
        if not isinstance(item, Mapping):
            check.fail(where, f"expected a JSON object, got {item!r}")
        if "nbytes" not in item:
            check.fail(where, "missing required field 'nbytes'")
        nbytes = item["nbytes"]
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            check.fail(where, f"field 'nbytes' must be an integer >= 0, got {nbytes!r}")
        samples.append((nbytes, check.number(item, "time_s", where, "> 0 (seconds)", positive)))
    return tuple(samples)
