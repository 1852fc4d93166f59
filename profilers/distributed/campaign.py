"""A validation campaign: many saved validations assessed together, errors summarized by half.

One validation (:mod:`profilers.distributed.validation`) is one model at one link rate with one
overlap mode. A campaign is a folder of their saved runs (``validate-runs.json.gz`` files, kept
compacted with :func:`~profilers.distributed.measurements.compacted`): every file is predicted
from its own one-worker profile and its own link measurement, exactly as ``sgdsim validate``
predicts a fresh validation, and the errors are summarized per architecture (with its overlap
mode) and per *half*: the link rate. Anything tuned on the campaign is tuned on one declared
half (``fit_rate_bps``); the other half is the held-out error that is reported.

Pure assessment: no real runs, no plotting; files are read by
:func:`~profilers.distributed.measurements.load_measurements`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from profilers.distributed.config import Architecture
from profilers.distributed.measurements import (
    Measurements,
    PointSelection,
    held_text,
    load_measurements,
)
from profilers.distributed.noise_floor import (
    NOISE_Z,
    NoiseFloor,
    RepeatGap,
    error_noise_sd,
    noise_floor,
    repeating_error_rms,
)
from profilers.distributed.validation import (
    COLUMNS_TEXT,
    RING_CPU_PLACEMENT,
    ValidationPoint,
    ValidationReport,
    assess,
    offsets_text,
    phase_counts_text,
)
from simcore.errors import ConfigError
from simcore.link_settings import FRESH_SHARING, WARM_SHARING, LinkSettings
from simcore.parallel import TaskProgress, run_tasks
from simcore.report.table import Cell, Column, Table
from simcore.sim.arrivals import arrivals_text
from simcore.sim.occupancy import short_occupancy_text
from simcore.units import format_bandwidth

__all__ = [
    "CampaignReport",
    "architecture_label",
    "assess_campaign",
    "campaign_async_table",
    "campaign_files",
    "campaign_point_table",
    "campaign_summary_table",
    "campaign_text",
    "point_label",
    "shipped_campaigns",
]

RUNS_SUFFIXES = (".json.gz", ".json")
SHIPPED_PACKAGE = "simcore.data.validation"  # one folder of saved runs per shipped campaign
ARCH_LABELS = {
    "ps-async": "PS async",
    "ps-sync": "PS sync",
    "allreduce": "ring AllReduce",
    "ddp": "DDP",
}

Progress = Callable[[str], None]


def architecture_label(architecture: str, overlap: str) -> str:
    """``ps-sync`` with ``strict`` -> ``PS sync, strict``: the campaign's architectures are the
    runner's architectures with their overlap mode (strict phases or per-layer overlap); a DDP
    point's name carries its buckets (``ddp 1 MiB`` -> ``DDP 1 MiB, layerwise``), each bucket
    setting an architecture of its own."""
    arch, _, buckets = architecture.partition(" ")
    label = ARCH_LABELS.get(arch, arch)
    return f"{label} {buckets}, {overlap}" if buckets else f"{label}, {overlap}"


def campaign_files(paths: Iterable[str]) -> list[tuple[str, Path]]:
    """Each path as given with the file it names: a file itself, or every saved-runs file in a
    folder and its sub-folders (sorted, so a campaign is assessed in the same order anywhere).

    Raises
    ------
    ConfigError : a path does not exist, or a folder holds no saved runs.
    """
    found: list[tuple[str, Path]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(RUNS_SUFFIXES)
            )
            if not inside:
                raise ConfigError(
                    f"--from-runs: {given} holds no saved runs (*.json.gz or *.json files)"
                )
            found += [(str(Path(given) / p.relative_to(path)), p) for p in inside]
        elif path.exists():
            found.append((given, path))
        elif given in shipped_campaigns():
            folder = Path(str(resources.files(SHIPPED_PACKAGE).joinpath(given)))
            found += [(f"{given}/{p.name}", p) for p in sorted(folder.glob("*.json.gz"))]
        else:
            names = ", ".join(shipped_campaigns()) or "(none shipped)"
            raise ConfigError(
                f"--from-runs: {given}: no such file or folder, and not a shipped campaign "
                f"({names})"
            )
    return found


def shipped_campaigns() -> list[str]:
    """Names of the campaigns shipped with sgdsim (folders of saved runs), sorted."""
    folder = resources.files(SHIPPED_PACKAGE)
    return sorted(
        p.name for p in folder.iterdir() if p.is_dir() and any(p.iterdir()) and p.name[0] != "_"
    )


@dataclass(frozen=True)
class CampaignReport:
    """Every validation of a campaign, assessed; ``sources`` names each one's file as given.
    ``fit_rate_bps``: the link rate of the half any tuning used (None: nothing declared)."""

    sources: tuple[str, ...]
    reports: tuple[ValidationReport, ...]
    fit_rate_bps: float | None = None

    def rows(self) -> list[tuple[ValidationReport, ValidationPoint, str]]:
        """(validation, point, architecture label) for every point of every validation."""
        return [(r, p, point_label(r, p)) for r in self.reports for p in r.points]

    def repeat_gaps(self) -> dict[str, list[RepeatGap]]:
        """:func:`repeat_gaps` of the validations' runs."""
        return repeat_gaps(r.measurements for r in self.reports if r.measurements is not None)

    def halves(self) -> list[float | None]:
        """The link rates of the campaign, fit half (if declared) first."""
        rates = sorted({r.link_rate_bps for r in self.reports}, key=lambda x: (x is None, x or 0))
        if self.fit_rate_bps in rates:
            rates.remove(self.fit_rate_bps)
            rates.insert(0, self.fit_rate_bps)
        return rates

    def points(self, rate: float | None = None, label: str | None = None) -> list[ValidationPoint]:
        """The points at link rate ``rate`` (None: every rate) and of the architecture
        ``label`` (None: every architecture)."""
        return [
            p
            for r, p, lab in self.rows()
            if (rate is None or r.link_rate_bps == rate) and (label is None or lab == label)
        ]

    def abs_errors(self, rate: float | None = None, label: str | None = None) -> list[float]:
        """|simulator error| of :meth:`points` ``(rate, label)``."""
        return [abs(p.error(p.simulated)) for p in self.points(rate, label)]

    def repeated_points(self) -> list[RepeatedPoint]:
        """:func:`repeated_points` of the campaign's validations."""
        return repeated_points(self)


@dataclass(frozen=True)
class RepeatedPoint:
    """One configuration validated twice, in two files of a campaign (made at different
    times), each time predicted from that validation's own one-worker profile and link
    measurement: the measured means (examples/s) and the simulator's relative errors, in the
    order of the campaign's files. ``label`` names the configuration, ``architecture`` its
    architecture with the overlap mode (:func:`architecture_label`)."""

    label: str
    architecture: str
    sources: tuple[str, str]
    measured: tuple[float, float]
    errors: tuple[float, float]

    @property
    def measured_gap(self) -> float:
        """The second measured mean relative to the first, less one (0.05: 5% higher)."""
        return self.measured[1] / self.measured[0] - 1.0

    @property
    def error_shift(self) -> float:
        """How far the simulator's error moved from the first validation to the second
        (0.05: five points of percentage higher)."""
        return self.errors[1] - self.errors[0]


def configuration_key(measured: Measurements, architecture: str, workers: int) -> tuple[Any, ...]:
    """What makes two validations' points the same experiment: the model and its batch, the
    testbed's link (rate and bucket), the architecture with its overlap mode, W and the
    servers, and the hosting (the machine's cores, torch threads per rank). Not the runs'
    length: a point measured over 24 steps or 100 is the same configuration."""
    base = measured.base
    return (
        str(base.model),
        base.batch_size,
        measured.link_rate_bps,
        measured.link_burst_s if measured.link_rate_bps is not None else None,
        architecture_label(architecture, base.overlap.value),
        workers,
        base.servers,
        measured.cores,
        base.threads,
    )


def repeated_configurations(measured: Sequence[Measurements]) -> list[set[int]]:
    """For each of ``measured``'s validations, the indices of the others that measured one of
    its configurations too (:func:`configuration_key`): a validation with an empty set has
    nothing to compare with."""
    keys = [{configuration_key(m, p.name, p.workers) for p in m.points} for m in measured]
    return [
        {j for j, other in enumerate(keys) if j != i and mine & other}
        for i, mine in enumerate(keys)
    ]


def repeated_points(report: CampaignReport) -> list[RepeatedPoint]:
    """Every configuration that two of the campaign's files both validated, once per pair of
    files (three files of one configuration make three pairs), in the order of the files.

    A point whose runs are the same in both files (a file given twice, or a copy) is not a
    repeat."""
    seen: dict[tuple[Any, ...], list[tuple[str, ValidationReport, ValidationPoint]]] = {}
    for source, r in zip(report.sources, report.reports, strict=True):
        if r.measurements is None:
            continue  # nothing says how its points were measured
        for p in r.points:
            key = configuration_key(r.measurements, p.name, p.workers)
            seen.setdefault(key, []).append((source, r, p))
    pairs: list[RepeatedPoint] = []
    for found in seen.values():
        for k, (first_source, first_report, first) in enumerate(found):
            for second_source, _, second in found[k + 1 :]:
                if first.measured == second.measured:
                    continue  # the same runs, given twice
                architecture = point_label(first_report, first)
                pairs.append(
                    RepeatedPoint(
                        f"{_model_text(first_report)} {_rate_text(first_report.link_rate_bps)} "
                        f"{architecture} W={first.workers}",
                        architecture,
                        (first_source, second_source),
                        (first.measured_mean, second.measured_mean),
                        (first.error(first.simulated), second.error(second.simulated)),
                    )
                )
    return pairs


@dataclass(frozen=True)
class RepeatMoves:
    """How far configurations validated twice moved between their two validations (relative:
    0.05 = 5%): the mean and largest absolute move of their measured means and of the
    simulator's error, the standard deviation of the part of an error that does not repeat
    (:func:`~profilers.distributed.noise_floor.error_noise_sd`) and the root mean square of
    the part that does (:func:`~profilers.distributed.noise_floor.repeating_error_rms`)."""

    pairs: int
    measured_mean: float
    measured_max: float
    error_mean: float
    error_max: float
    noise_sd: float
    own_rms: float


def repeat_moves(pairs: Sequence[RepeatedPoint]) -> RepeatMoves:
    """:class:`RepeatMoves` of ``pairs`` (at least one)."""
    if not pairs:
        raise ValueError("repeat_moves: no pairs")
    gaps = [abs(p.measured_gap) for p in pairs]
    shifts = [p.error_shift for p in pairs]
    return RepeatMoves(
        len(pairs),
        statistics.fmean(gaps),
        max(gaps),
        statistics.fmean(abs(s) for s in shifts),
        max(abs(s) for s in shifts),
        error_noise_sd(shifts),
        repeating_error_rms([p.errors for p in pairs]),
    )


def repeat_floor(pairs: Sequence[RepeatedPoint], points: int) -> NoiseFloor | None:
    """What the part of an error that did not repeat between ``pairs``' validations
    (:func:`~profilers.distributed.noise_floor.error_noise_sd`) costs, over ``points`` points,
    a model whose own error is nil; None without pairs or points."""
    sd = error_noise_sd([p.error_shift for p in pairs])
    if math.isnan(sd) or points < 1:
        return None
    return noise_floor([sd] * points)


def repeated_points_text(report: CampaignReport) -> str:
    """One paragraph on the configurations the campaign validated more than once: how far
    apart their measurements came out, how far the simulator's error moved between them, and
    what that costs a model with no error of its own over the campaign's points; empty
    without any."""
    pairs = report.repeated_points()
    floor = repeat_floor(pairs, len(report.rows()))
    if floor is None:
        return ""
    moves = repeat_moves(pairs)
    files = len({s for p in pairs for s in p.sources})
    return (
        f"(configurations validated twice, in two files, each time predicted from its own "
        f"profile and link measurement: {len(pairs)} pairs from {files} files; measured "
        f"{100 * moves.measured_mean:.1f}% / {100 * moves.measured_max:.1f}% apart (mean / "
        f"max), the simulator's error moved by {100 * moves.error_mean:.1f} / "
        f"{100 * moves.error_max:.1f} points between them. What moves between two validations of "
        f"one configuration is not the model's own error: it alone would put a model with no "
        f"error of its own {100 * floor.mean_abs_error:.1f}% off on average and "
        f"{100 * floor.max_abs_error:.1f}% at most over {len(report.rows())} points)"
    )


def assess_campaign(
    paths: Sequence[str],
    *,
    link: LinkSettings | None = None,
    fit_rate_bps: float | None = None,
    progress: Progress | None = None,
    ring_cpu_placement: str = RING_CPU_PLACEMENT,
    flow_sharing: str = FRESH_SHARING,
    selection: PointSelection | None = None,
) -> CampaignReport:
    """Assess every saved validation under ``paths`` (files or folders, see
    :func:`campaign_files`) as :func:`~profilers.distributed.validation.assess` does one;
    ``selection``: only its points, leaving out the files that hold none of them.

    Raises
    ------
    ConfigError : a path is missing or a file is not saved runs, or one cannot be assessed as
        asked (each named), or ``fit_rate_bps`` is not one of the campaign's link rates, or
        ``selection`` selects nothing.
    """
    say = progress or (lambda _line: None)
    files = campaign_files(paths)
    said = [0]

    def assessed(done: int, _total: int) -> None:
        if done > said[0]:  # files are independent: on the processes simcore.parallel allows
            said[0] = done
            say(f"assessed {done}/{len(files)} files")

    assessed_files = run_tasks(
        _assess_file,
        [(path, link, ring_cpu_placement, flow_sharing, selection) for _, path in files],
        planned=[1] * len(files),
        progress=assessed,
    )
    pairs = zip(files, assessed_files, strict=True)
    kept = [(given, r) for (given, _), r in pairs if isinstance(r, ValidationReport)]
    if not kept:
        assert selection is not None  # only a selection leaves a file out
        held = "; ".join(dict.fromkeys(r for r in assessed_files if isinstance(r, str)))
        raise ConfigError(
            f"{selection.text()}: no point of the campaign ({' '.join(paths)}) is selected; "
            f"it holds {held}"
        )
    reports = [r for _, r in kept]
    rates = {r.link_rate_bps for r in reports}
    if fit_rate_bps is not None and fit_rate_bps not in rates:
        known = ", ".join(_rate_text(r) for r in sorted(rates, key=lambda x: x or 0))
        raise ConfigError(
            f"--fit-rate: {_rate_text(fit_rate_bps)} is not a link rate of the campaign ({known})"
        )
    return CampaignReport(tuple(g for g, _ in kept), tuple(reports), fit_rate_bps)


def _assess_file(
    item: tuple[Path, LinkSettings | None, str, str, PointSelection | None],
    _progress: TaskProgress | None,
) -> ValidationReport | str:
    """The file's validation assessed; when ``selection`` leaves none of its points, what
    the file holds instead (its model and points, for the message if no file is selected)."""
    path, link, ring_cpu_placement, flow_sharing, selection = item
    measured = load_measurements(path)
    if selection:
        selected = selection.apply(measured)
        if selected is None:
            return held_text(measured)
        measured = selected
    try:
        return assess(
            measured,
            link=link,
            ideal=False,
            ring_cpu_placement=ring_cpu_placement,
            flow_sharing=flow_sharing,
        )
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


# Which point a row is: the first columns of every per-point table (_point_cells fills them).
KEY_COLUMNS = (
    Column("model", "model"),
    Column("link", "link"),
    Column("architecture", "architecture"),
    Column("workers", "W", "{:d}"),
)
POINT_COLUMNS = (
    *KEY_COLUMNS,
    Column("measured", "measured"),
    Column("spread_percent", "spread%", "{:.1f}"),
    Column("standard_error_percent", "se%", "{:.1f}"),
    Column("simulated", "sim"),
    Column("simulated_error_percent", "err%", "{:+.1f}"),
    Column("simulated_spread_percent", "seeds%", "{:.1f}"),
    Column("coarse", "coarse"),
    Column("coarse_error_percent", "err%", "{:+.1f}"),
    Column("slowdown", "compute x", "{:.2f}"),
    Column("cpu_ratio", "cpu x", "{:.2f}"),
)


def campaign_point_table(report: CampaignReport) -> Table:
    """Every point: measured examples/s (mean of its runs), the simulator's and the coarse
    model's predictions with their errors, the measured co-location compute slowdown, and the
    parameter-server workers' CPU per step over the one-worker runs' (ValidationPoint.cpu_ratio)."""
    table = Table(
        "every point (examples/s over all workers; err% against the measured mean)",
        POINT_COLUMNS,
    )
    for r, p, label in report.rows():
        table.add(
            **_point_cells(r, p, label),
            measured=p.measured_mean,
            spread_percent=100 * p.spread,
            standard_error_percent=100 * p.standard_error,
            simulated=p.simulated,
            simulated_error_percent=100 * p.error(p.simulated),
            simulated_spread_percent=100 * p.simulated_spread,
            coarse=p.coarse,
            coarse_error_percent=100 * p.error(p.coarse),
            slowdown=p.slowdown,
            cpu_ratio=p.cpu_ratio,
        )
    return table


SUMMARY_COLUMNS = (
    Column("half", "link (half)"),
    Column("architecture", "architecture"),
    Column("points", "points", "{:d}"),
    Column("mean_abs_error_percent", "mean |err|%", "{:.1f}"),
    Column("max_abs_error_percent", "max |err|%", "{:.1f}"),
    Column("beyond_noise", f"beyond {NOISE_Z:g} se", "{:d}"),
    Column("noise_mean_abs_error_percent", "noise mean%", "{:.1f}"),
    Column("noise_max_abs_error_percent", "noise max%", "{:.1f}"),
)


def campaign_summary_table(report: CampaignReport) -> Table:
    """The simulator's mean and maximum absolute error per half and architecture, each half
    over all its architectures, and the whole campaign; beside them how many of those errors
    are beyond the repetitions' noise and the noise floor (:mod:`noise_floor`: what predicting
    every point's true mean would score against the measured means)."""
    table = Table("the simulator's error by half and architecture", SUMMARY_COLUMNS)
    labels = sorted({label for _, _, label in report.rows()})
    halves: list[tuple[str, float | None, bool]] = [
        (_half_text(report, rate), rate, True) for rate in report.halves()
    ]
    halves.append(("all", None, False))
    for name, rate, by_rate in halves:
        for label in [*labels, None]:
            points = report.points(rate if by_rate else None, label)
            if not points:
                continue
            errors = [abs(p.error(p.simulated)) for p in points]
            floor = noise_floor([p.standard_error for p in points])
            table.add(
                half=name,
                architecture=label or "all",
                points=len(errors),
                mean_abs_error_percent=100 * statistics.fmean(errors),
                max_abs_error_percent=100 * max(errors),
                beyond_noise=sum(p.beyond_noise(p.simulated) for p in points),
                noise_mean_abs_error_percent=100 * floor.mean_abs_error if floor else math.nan,
                noise_max_abs_error_percent=100 * floor.max_abs_error if floor else math.nan,
            )
    return table


def _half_text(report: CampaignReport, rate: float | None) -> str:
    if report.fit_rate_bps is None:
        return _rate_text(rate)
    return _rate_text(rate) + (" (fit)" if rate == report.fit_rate_bps else " (held out)")


ASYNC_COLUMNS = (
    *KEY_COLUMNS,
    Column("measured_phases", "measured runs"),
    Column("simulated_phases", "simulated seeds"),
    Column("measured_offsets", "apart"),
    Column("simulated_offsets", "sim"),
    Column("measured_step_p50_ms", "step p50 ms"),
    Column("simulated_step_p50_ms", "sim"),
    Column("measured_step_p95_ms", "p95 ms"),
    Column("simulated_step_p95_ms", "sim"),
    Column("measured_link", "link pull/push/both %"),
    Column("simulated_link", "sim"),
)


def campaign_async_table(report: CampaignReport) -> Table:
    """Async-SGD with W >= 2: how the workers lined up in each real run and in each simulated
    seed (:mod:`simcore.sim.phases`) and how far apart they mostly started their steps (each
    run's or seed's median distance, the range over them), the median and 95% quantile of
    their step times, and the share of time every worker pulled, every worker pushed, and both
    directions of the server's link were busy (:mod:`simcore.sim.occupancy`; measured where
    the runs kept it)."""
    table = Table(
        "Async-SGD: phase pattern of each run / seed, how far apart consecutive workers "
        "started their steps (the median, in steps: 0 together, 0.5 alternating; range over runs "
        "/ seeds), the workers' step times, and the share of "
        "time every worker pulled / every worker pushed / both directions of the server's link "
        "were busy",
        ASYNC_COLUMNS,
    )
    for r, p, label in report.rows():
        if p.architecture != "ps-async" or p.workers < 2:
            continue
        table.add(
            **_point_cells(r, p, label),
            measured_phases=phase_counts_text(p.measured_phases),
            simulated_phases=phase_counts_text(p.simulated_phases),
            measured_offsets=offsets_text(p.measured_offsets),
            simulated_offsets=offsets_text(p.simulated_offsets),
            measured_step_p50_ms=1e3 * p.measured_step_s[1],
            simulated_step_p50_ms=1e3 * p.simulated_step_s[1],
            measured_step_p95_ms=1e3 * p.measured_step_s[2],
            simulated_step_p95_ms=1e3 * p.simulated_step_s[2],
            measured_link=short_occupancy_text(p.measured_occupancy),
            simulated_link=short_occupancy_text(p.simulated_occupancy),
        )
    return table


SYNC_COLUMNS = (
    *KEY_COLUMNS,
    Column("measured_arrivals", "measured"),
    Column("simulated_arrivals", "simulated"),
    Column("measured_computations", "computation measured"),
    Column("simulated_computations", "simulated"),
)


def campaign_sync_table(report: CampaignReport) -> Table:
    """Sync-SGD with W >= 2, where the runs kept their spans: when the first, second, ... of a
    step's pulls had arrived after the server's release, and each of those workers'
    computation in the step, measured and simulated (:mod:`simcore.sim.arrivals`)."""
    table = Table(
        "Sync-SGD: when the first, second, ... of a step's pulls arrived after the server's "
        "release, in one pull alone (median over steps; equal sharing: all at W, one after "
        "another: 1, 2, ... W), and the computation per step (forward and backward) of the "
        "first worker to have its pull, the second, ..., in the solo profile's",
        SYNC_COLUMNS,
    )
    for r, p, label in report.rows():
        if p.measured_pull_arrivals is None:
            continue
        table.add(
            **_point_cells(r, p, label),
            measured_arrivals=arrivals_text(p.measured_pull_arrivals),
            simulated_arrivals=arrivals_text(p.simulated_pull_arrivals),
            measured_computations=arrivals_text(p.measured_computations),
            simulated_computations=arrivals_text(p.simulated_computations),
        )
    return table


def campaign_text(report: CampaignReport) -> str:
    """What was assessed, every point, and the summary by architecture and half."""
    models = sorted({_model_text(r) for r in report.reports})
    runs = sum(len(p.measured) for _, p, _ in report.rows())
    lines = [
        f"{len(report.reports)} validation{'' if len(report.reports) == 1 else 's'} "
        f"({', '.join(models)}; links "
        f"{', '.join(_rate_text(r) for r in report.halves())}), {len(report.rows())} points, "
        f"{runs} real runs; each predicted from its own one-worker profile and link measurement"
        + (
            " (the parameter server's flow weight cvs from each file's warm sharing: its "
            "transfers over connections kept open, each direction its own; not the default)"
            if any(r.flow_sharing == WARM_SHARING for r in report.reports)
            else ""
        ),
        "",
        campaign_point_table(report).text(),
        "",
    ]
    for table in (campaign_async_table(report), campaign_sync_table(report)):
        if table.rows:
            lines += [table.text(), ""]
    lines += [
        campaign_summary_table(report).text(),
        f"(se%: the measured mean's standard error over its runs; beyond {NOISE_Z:g} se: the "
        f"points whose error is more than {NOISE_Z:g} of them; noise mean% / max%: what a "
        "prediction of every point's true mean would be off by, on average and at most (the "
        "median), from the runs' own noise)",
        COLUMNS_TEXT,
    ]
    repeats = repeat_gaps_text(report.repeat_gaps())
    if repeats:
        lines.append(repeats)
    repeated = repeated_points_text(report)
    if repeated:
        lines.append(repeated)
    return "\n".join(lines)


def repeat_gaps(measured: Iterable[Measurements]) -> dict[str, list[RepeatGap]]:
    """Every configuration these validations measured twice, minutes apart, by kind:
    ``profile``, a validation's one-worker profile runs against its PS Async-SGD W = 1 point;
    ``alone``, its computation-alone runs against its ring W = 1 point."""
    gaps: dict[str, list[RepeatGap]] = {"profile": [], "alone": []}
    for m in measured:
        where = f"{m.base.model}-b{m.base.batch_size} {_rate_text(m.link_rate_bps)}"
        pairs = (
            ("profile", m.solo_runs, Architecture.PS_ASYNC),
            ("alone", m.alone_runs, Architecture.ALLREDUCE),
        )
        for kind, earlier, arch in pairs:
            for point in m.points:
                same = point.runs[0].config == earlier[0].config
                if point.architecture is arch and point.workers == 1 and same:
                    gaps[kind].append(
                        RepeatGap(
                            f"{where}: {kind}",
                            tuple(run.examples_per_s for run in earlier),
                            tuple(run.examples_per_s for run in point.runs),
                        )
                    )
    return gaps


def repeat_gaps_text(gaps: dict[str, list[RepeatGap]]) -> str:
    """One paragraph: how far apart the repeats came out, and what their runs' spread
    explains (:func:`repeat_gaps`); empty without any."""
    every = [g for of in gaps.values() for g in of]
    if not every:
        return ""

    def summary(of: Sequence[RepeatGap]) -> str:
        sizes = [abs(g.gap) for g in of]
        return f"{100 * statistics.fmean(sizes):.1f}% / {100 * max(sizes):.1f}%"

    names = {"profile": "profile vs PS Async-SGD", "alone": "computation alone vs ring"}
    parts = [f"{names[kind]} {summary(of)}" for kind, of in gaps.items() if of]
    floor = noise_floor([g.standard_error for g in every])  # what the runs' spread explains
    explained = ""
    if floor is not None:
        explained = f"; the runs' own spread explains {100 * floor.mean_abs_error:.1f}% on average"
    return (
        f"(the same configuration measured twice in a validation, its one-worker runs (the "
        f"profile, the computation alone) and its W = 1 point: {summary(every)} apart, mean / "
        f"max of {len(every)} pairs ({'; '.join(parts)}){explained}: a perfect model is that "
        "far off at W = 1)"
    )


def _point_cells(r: ValidationReport, p: ValidationPoint, label: str) -> dict[str, Cell]:
    """The KEY_COLUMNS cells of point ``p`` of validation ``r``."""
    return {
        "model": _model_text(r),
        "link": _rate_text(r.link_rate_bps),
        "architecture": label,
        "workers": p.workers,
    }


def _model_text(r: ValidationReport) -> str:
    return f"{r.model_name}-b{r.batch_size}"


def point_label(report: ValidationReport, point: ValidationPoint) -> str:
    """``point``'s architecture with its validation's overlap mode (:func:`architecture_label`)."""
    measured = report.measurements
    overlap = measured.base.overlap.value if measured is not None else "layerwise"
    return architecture_label(point.name, overlap)


def _key(label: str) -> str:
    return label.lower().replace(", ", "_").replace(" ", "_")


def _rate_text(rate: float | None) -> str:
    return "loopback" if rate is None else format_bandwidth(rate)
