"""How much a validation's predictions move with its one-worker runs: the profile's own noise.

A validation predicts every point from one-worker runs (``--profile-runs``, 3 by default: runs
beside a parameter server and runs of the computation alone, their steps pooled). Those runs
are samples too: on the 2-core VM the computation alone of one configuration ran up to a fifth
faster or slower from one run to the next, and every prediction of the file moves with it. The
runs' own noise (:mod:`profilers.distributed.noise_floor`) counts only the runs with W workers.

Predicting every point again from each single profile run (the i-th run beside the server with
the i-th run of the computation alone) gives n predictions; their standard deviation over
sqrt(n), relative to the pooled prediction, is the pooled prediction's standard error from the
profile's noise (a jackknife would use leave-one-out pools; with three runs the single runs are
as close as one gets and use each run once). Independent of the measured mean's own, the two
add in quadrature: what a predictor that knew every configuration's true throughput, made from
a profile as noisy as this one, would be off by (:func:`~profilers.distributed.noise_floor.
noise_floor` of the combined errors).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from profilers.distributed.campaign import campaign_files
from profilers.distributed.measurements import Measurements, load_measurements
from profilers.distributed.validation import ValidationPoint, ValidationReport, assess
from simcore.errors import ConfigError
from simcore.link_settings import LinkSettings
from simcore.parallel import TaskProgress, run_tasks

__all__ = [
    "ProfileNoise",
    "assess_profile_noise",
    "combined_standard_error",
    "profile_noise",
    "profile_standard_error",
]

Progress = Callable[[str], None]


def profile_standard_error(pooled: float, single: Sequence[float]) -> float:
    """The pooled prediction's standard error from the profile's noise, relative to it: the
    standard deviation of the ``single`` runs' predictions over sqrt(their number), over
    ``pooled``; NaN with fewer than two or a pooled prediction that is not positive."""
    if len(single) < 2 or not pooled > 0:
        return math.nan
    return statistics.stdev(single) / math.sqrt(len(single)) / pooled


def combined_standard_error(runs: float, profile: float) -> float:
    """The measured mean's and the prediction's relative standard errors together
    (independent: in quadrature); NaN if either is unknown."""
    return math.hypot(runs, profile)


@dataclass(frozen=True)
class ProfileNoise:
    """A validation assessed from its pooled profile (``report``) and, for each of its points,
    the predictions from each single profile run (``single[i]`` for ``report.points[i]``)."""

    report: ValidationReport
    single: tuple[tuple[float, ...], ...]

    @property
    def profile_runs(self) -> int:
        return len(self.single[0]) if self.single else 0

    def profile_standard_errors(self) -> list[float]:
        """Each point's prediction's relative standard error from the profile's noise."""
        return [
            profile_standard_error(p.simulated, s)
            for p, s in zip(self.report.points, self.single, strict=True)
        ]

    def combined_standard_errors(self) -> list[float]:
        """Each point's measured mean's and prediction's standard errors together."""
        return [
            combined_standard_error(p.standard_error, s)
            for p, s in zip(self.report.points, self.profile_standard_errors(), strict=True)
        ]


def profile_noise(measured: Measurements, *, link: LinkSettings | None = None) -> ProfileNoise:
    """Assess ``measured`` (:func:`~profilers.distributed.validation.assess`, without the
    ideal replay) from its pooled profile and from each single profile run.

    Raises
    ------
    ConfigError : fewer than two runs of either kind of profile run (nothing to compare), or
        what :func:`assess` raises.
    """
    solos, alones = measured.solo_runs, measured.alone_runs
    n = _profile_runs(measured)
    if n < 2:
        raise ConfigError(
            f"the profile's noise needs two or more one-worker runs of each kind; these "
            f"measurements have {len(solos)} beside a server and {len(alones)} of the "
            "computation alone (sgdsim validate --profile-runs)"
        )
    pooled = assess(measured, link=link, ideal=False)
    per_run = []
    for i in range(n):
        one = dataclasses.replace(
            measured, solo=solos[i], solo_more=(), alone=alones[i], alone_more=()
        )
        predicted = {_key(p): p.simulated for p in assess(one, link=link, ideal=False).points}
        per_run.append(predicted)
    single = tuple(tuple(run[_key(p)] for run in per_run) for p in pooled.points)
    return ProfileNoise(pooled, single)


def _profile_runs(measured: Measurements) -> int:
    """How many profiles of one run each the measurements give: one per pair of a run beside
    the server and a run of the computation alone."""
    return min(len(measured.solo_runs), len(measured.alone_runs))


def _key(point: ValidationPoint) -> tuple[str, int]:
    return (point.architecture, point.workers)


def assess_profile_noise(
    paths: Sequence[str],
    *,
    link: LinkSettings | None = None,
    progress: Progress | None = None,
) -> tuple[list[tuple[str, ProfileNoise]], list[str]]:
    """:func:`profile_noise` of every saved validation under ``paths`` (files or folders, as
    :func:`~profilers.distributed.campaign.campaign_files` finds them), on the processes
    ``simcore.parallel`` allows. Returns (folder/file name, result) for each file with two or
    more profile runs, and the names of those left out for having one.

    Raises
    ------
    ConfigError : a path is missing, a file is not saved runs (named), or no file has two or
        more profile runs.
    """
    say = progress or (lambda _line: None)
    files = [path for _, path in campaign_files(paths)]
    said = [0]

    def assessed(done: int, _total: int) -> None:
        if done > said[0]:
            said[0] = done
            say(f"assessed {done}/{len(files)} files, each from its pooled and single profile runs")

    results = run_tasks(
        _profile_noise_of_file,
        [(path, link) for path in files],
        planned=[1] * len(files),
        progress=assessed,
    )
    done = [(_name(p), r) for p, r in zip(files, results, strict=True) if r is not None]
    left_out = [_name(p) for p, r in zip(files, results, strict=True) if r is None]
    if not done:
        raise ConfigError(
            "no file has two or more one-worker runs of each kind to compare (sgdsim validate "
            f"--profile-runs): {', '.join(left_out)}"
        )
    return done, left_out


def _name(path: Path) -> str:
    """A file as its folder and name (two campaigns hold files of the same name)."""
    return f"{path.parent.name}/{path.name}"


def _profile_noise_of_file(
    item: tuple[Path, LinkSettings | None], _progress: TaskProgress | None
) -> ProfileNoise | None:
    """:func:`profile_noise` of one file; None when it has one profile run of a kind."""
    path, link = item
    measured = load_measurements(path)
    return profile_noise(measured, link=link) if _profile_runs(measured) >= 2 else None
