"""What a validation measured, kept in one file: predicting again needs no new runs.

A validation spends tens of minutes on real training and a few seconds on predictions. Keeping
every run's timestamps (and the link measurement) lets a changed model, another bandwidth or a
closer look at one run's timeline be checked against the same ground truth, and lets others see
exactly what was measured. The file is JSON (gzip-compressed when its name ends in ``.gz``)::

    {"schema": "sgdsim.validation_measurements", "schema_version": 1,
     "base": {RunConfig of the runs: model, batch, steps, warm-up, overlap, threads, seed},
     "link_rate_bps": 1e8 | null,          # the testbed's shaped rate; null: loopback
     "link_burst_s": 0.004,                # optional: its tbf bucket as time at the rate
                                           # (since 2026-11-28; absent: 0.001, the default)
     "cores": [0, 1],                      # the cores the runs used (servers pinned to the first)
     "link_sharing": {...} | null,         # profilers.link_sharing.sharing_to_dict
     "ring_goodput": {"workers": 2, "layer_nbytes": [...], "times_s": [...],
                      "link_rate_bps": 1e8,
                      "cpu_s": [...], "flat_cpu_s": [...]} | null,  # optional: a ring alone
                      # (cpu_s, flat_cpu_s: its CPU time, optional; since 2026-11-27)
     "ring_goodputs": [{like ring_goodput}, ...],  # optional: rings of 2, 3, ... ranks measured
                      # one after another (since 2026-11-27; with it the ring predictions use
                      # these rather than ring_goodput)
     "duplex": {...} | null,               # optional: profilers.distributed.link_duplex
     "interference": {...},                # optional: profilers.distributed.link_interference
                                           # (since 2026-11-28)
     "warm_sharing": {...},                # optional: profilers.warm_sharing, the model's
                                           # bytes (since 2026-11-28)
     "solo": {run}, "alone": {run},        # profilers.distributed.records.run_to_dict
     "solo_more": [{run}, ...], "alone_more": [{run}, ...],  # optional: further such runs
     "points": [{"architecture": "ps-async", "workers": 2, "runs": [{run}, ...]}, ...]}

A run of a compacted file (:func:`compacted`, for files kept in a repository) may have no spans
and carry ``"compute_s_per_layer"`` instead: its mean forward+backward seconds per worker-step
of each layer after warm-up. A run's steps carry ``"cpu_s"``, the worker process's CPU time
during the step (every thread), since 2026-11-27; older files have none and load as they did.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profilers.distributed.config import Architecture, RunConfig
from profilers.distributed.link_duplex import DuplexReport, duplex_from_dict, duplex_to_dict
from profilers.distributed.link_interference import (
    InterferenceReport,
    interference_from_dict,
    interference_to_dict,
)
from profilers.distributed.records import (
    RunResult,
    config_from_dict,
    config_to_dict,
    run_from_dict,
    run_to_dict,
    seconds_from_json,
)
from profilers.distributed.ring_goodput import RingGoodput
from profilers.link_sharing import LinkSharingReport, sharing_from_dict, sharing_to_dict
from profilers.netns_cluster import BURST_S
from profilers.warm_sharing import (
    WarmSharingReport,
    warm_sharing_from_dict,
    warm_sharing_to_dict,
)
from simcore.errors import ConfigError
from simcore.files import atomic_output, read_json_file

__all__ = [
    "MeasuredPoint",
    "Measurements",
    "PointSelection",
    "compacted",
    "held_text",
    "load_measurements",
    "measurements_from_dict",
    "measurements_to_dict",
    "save_measurements",
]

SCHEMA = "sgdsim.validation_measurements"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class MeasuredPoint:
    """The repeated real runs of one architecture at one worker count."""

    architecture: Architecture
    workers: int
    runs: tuple[RunResult, ...]

    @property
    def name(self) -> str:
        """``ddp 1 MiB``, ``ps-async``: the architecture and, for DDP, the runs' buckets (two
        DDP points of one W differ by them)."""
        if self.architecture is Architecture.DDP and self.runs:
            return f"ddp {self.runs[0].config.buckets_text()}"
        return self.architecture.value


@dataclass(frozen=True)
class Measurements:
    """Everything one validation ran: the link, the two one-worker runs and every point's runs.

    ``base`` is the runs' common configuration (its architecture and worker count are those of
    the solo run); ``solo`` the one-worker parameter-server run (the profile), ``alone`` the
    one-worker ring run (the computation without transfers); ``ring`` the goodput of a ring
    AllReduce of the model's layers alone, on the testbed (None: not measured); ``duplex`` what
    the server's link carries with pulls and pushes at once (None: not measured);
    ``interference`` how much each direction of it slows beside the other's transfers (None: not
    measured, as in files before 2026-11-28); ``warm_sharing`` how it shares the model's
    transfers started together over connections kept open, as training's are
    (:mod:`profilers.warm_sharing`; None: not measured). The predictions use it only when
    asked (``assess(..., flow_sharing="warm")``, ``sgdsim validate --flow-sharing warm``; the
    top-level README's "Concurrent transfers share the link less evenly in training" says
    why it is not the default).
    ``solo_more`` and ``alone_more``: further runs like ``solo`` and ``alone``, whose steps the
    profile pools with theirs (one run carries its own luck: on the 2-core VM one-worker runs
    of one configuration differed by up to 20%). ``rings``: rings of 2, 3, ... ranks measured
    one after another, W ascending (empty: ``ring`` alone, as files before 2026-11-27 have it);
    a ring's cost per message comes from the fewest ranks, the rate its bytes move at from
    each W (:meth:`ring_set`).
    """

    base: RunConfig
    link_rate_bps: float | None
    cores: tuple[int, ...]
    sharing: LinkSharingReport | None
    solo: RunResult
    alone: RunResult
    points: tuple[MeasuredPoint, ...]
    ring: RingGoodput | None = None
    duplex: DuplexReport | None = None
    solo_more: tuple[RunResult, ...] = ()
    alone_more: tuple[RunResult, ...] = ()
    rings: tuple[RingGoodput, ...] = ()
    # The testbed's tbf bucket, as time at the link's rate (netns_cluster.BURST_S unless
    # `sgdsim validate --testbed-burst` chose another).
    link_burst_s: float = BURST_S
    interference: InterferenceReport | None = None
    warm_sharing: WarmSharingReport | None = None

    @property
    def ring_set(self) -> tuple[RingGoodput, ...]:
        """The rings the predictions use, fewest ranks first: ``rings``, else ``ring`` alone
        (else none)."""
        if self.rings:
            return self.rings
        return () if self.ring is None else (self.ring,)

    @property
    def solo_runs(self) -> tuple[RunResult, ...]:
        """Every one-worker parameter-server run the profile pools, ``solo`` first."""
        return (self.solo, *self.solo_more)

    @property
    def alone_runs(self) -> tuple[RunResult, ...]:
        """Every run of the computation alone the profile pools, ``alone`` first."""
        return (self.alone, *self.alone_more)

    def largest_named_points(self) -> dict[str, MeasuredPoint]:
        """Each named point's (:attr:`MeasuredPoint.name`: DDP with each bucket setting) with
        the most workers, in the order first measured."""
        largest: dict[str, MeasuredPoint] = {}
        for point in self.points:
            if point.workers >= largest.get(point.name, point).workers:
                largest[point.name] = point
        return largest

    def largest_points(self) -> dict[Architecture, MeasuredPoint]:
        """Each architecture's point with the most workers, in the order first measured."""
        largest: dict[Architecture, MeasuredPoint] = {}
        for point in self.points:
            if point.workers >= largest.get(point.architecture, point).workers:
                largest[point.architecture] = point
        return largest


COMPACT_DECIMALS = 7  # timestamps and durations to 0.1 us: far below any op the runs time


@dataclass(frozen=True)
class PointSelection:
    """Which points of saved runs to predict again (``sgdsim validate --from-runs`` with
    ``--model``, ``--arch`` or ``--workers-max``); None selects every model, architecture or W.
    The one-worker runs the profile pools are kept whatever is selected."""

    model: str | None = None
    architectures: tuple[str, ...] | None = None
    workers_max: int | None = None

    def __bool__(self) -> bool:
        return (self.model, self.architectures, self.workers_max) != (None, None, None)

    def apply(self, measured: Measurements) -> Measurements | None:
        """``measured`` with the selected points only; None when it holds none of them (another
        model, or none of the architectures and worker counts asked for)."""
        if not self.takes_model(measured):
            return None
        points = tuple(
            p
            for p in measured.points
            if (self.architectures is None or p.architecture.value in self.architectures)
            and (self.workers_max is None or p.workers <= self.workers_max)
        )
        return dataclasses.replace(measured, points=points) if points else None

    def takes_model(self, measured: Measurements) -> bool:
        """Whether ``measured`` is of the model asked for: its name as the runs were given it
        (``cnn``, ``pkg.mod:factory``) or as the reports label it (``cnn-b32``)."""
        base = measured.base
        return self.model is None or self.model in (base.model, f"{base.model}-b{base.batch_size}")

    def nothing_text(self, measured: Measurements, source: str) -> str:
        """Why ``apply`` selected nothing of ``measured``: what was asked and what it holds."""
        if not self.takes_model(measured):
            return f"--model {self.model}: {source} holds runs of {measured.base.model}"
        return f"{self.text()}: {source} holds no such point (it holds {held_text(measured)})"

    def text(self) -> str:
        """The options that made the selection, as given."""
        parts = [f"--model {self.model}"] if self.model is not None else []
        parts += [f"--arch {arch}" for arch in self.architectures or ()]
        if self.workers_max is not None:
            parts.append(f"--workers-max {self.workers_max}")
        return " ".join(parts)


def held_text(measured: Measurements) -> str:
    """``cnn-b32: ps-async W=1/2, allreduce W=1/2``: the model and points ``measured`` holds."""
    held: dict[str, list[str]] = {}
    for p in measured.points:
        held.setdefault(p.name, []).append(str(p.workers))
    points = ", ".join(f"{arch} W={'/'.join(workers)}" for arch, workers in held.items())
    return f"{measured.base.model}-b{measured.base.batch_size}: {points or 'no points'}"


def compacted(m: Measurements) -> Measurements:
    """``m`` small enough to keep in a repository. Every run keeps its steps and its compute
    per layer (throughput and the co-location slowdown are measured from them); the solo and
    alone runs (the trace is built from them) and the first run of each architecture's largest
    W (the timeline figures show it) keep all their spans. Timestamps are rounded to 0.1 us.
    """
    largest = {arch: point.workers for arch, point in m.largest_points().items()}
    points = tuple(
        dataclasses.replace(
            p,
            runs=tuple(
                _rounded(
                    run if k == 0 and p.workers == largest[p.architecture] else run.without_spans()
                )
                for k, run in enumerate(p.runs)
            ),
        )
        for p in m.points
    )
    return dataclasses.replace(
        m,
        solo=_rounded(m.solo),
        alone=_rounded(m.alone),
        solo_more=tuple(_rounded(r) for r in m.solo_more),
        alone_more=tuple(_rounded(r) for r in m.alone_more),
        points=points,
    )


def _rounded(run: RunResult) -> RunResult:
    def r(x: float) -> float:
        return round(x, COMPACT_DECIMALS)

    spans = tuple(
        dataclasses.replace(s, start_s=r(s.start_s), duration_s=r(s.duration_s)) for s in run.spans
    )
    steps = tuple(
        dataclasses.replace(
            s,
            start_s=r(s.start_s),
            end_s=r(s.end_s),
            cpu_s=None if s.cpu_s is None else r(s.cpu_s),
        )
        for s in run.steps
    )
    return dataclasses.replace(run, spans=spans, steps=steps)


def measurements_to_dict(m: Measurements) -> dict[str, Any]:
    """JSON-ready data (the module doc shows the layout)."""
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "base": config_to_dict(m.base),
        "link_rate_bps": m.link_rate_bps,
        **({"link_burst_s": m.link_burst_s} if m.link_burst_s != BURST_S else {}),
        "cores": list(m.cores),
        "link_sharing": None if m.sharing is None else sharing_to_dict(m.sharing),
        "ring_goodput": None if m.ring is None else _ring_to_dict(m.ring),
        "duplex": None if m.duplex is None else duplex_to_dict(m.duplex),
        **({"ring_goodputs": [_ring_to_dict(r) for r in m.rings]} if m.rings else {}),
        **(
            {"interference": interference_to_dict(m.interference)}
            if m.interference is not None
            else {}
        ),
        **(
            {"warm_sharing": warm_sharing_to_dict(m.warm_sharing)}
            if m.warm_sharing is not None
            else {}
        ),
        "solo": run_to_dict(m.solo),
        "alone": run_to_dict(m.alone),
        "solo_more": [run_to_dict(r) for r in m.solo_more],
        "alone_more": [run_to_dict(r) for r in m.alone_more],
        "points": [
            {
                "architecture": p.architecture.value,
                "workers": p.workers,
                "runs": [run_to_dict(r) for r in p.runs],
            }
            for p in m.points
        ],
    }


def measurements_from_dict(data: Any, source: str = "<memory>") -> Measurements:
    """The measurements :func:`measurements_to_dict` wrote.

    Raises
    ------
    ConfigError : another schema or version, a missing or malformed field, or runs that do not
        belong together (another model or batch size than the solo run); the message names
        ``source`` and the field.
    """
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ConfigError(f"{source}: not validation measurements (schema {SCHEMA!r} expected)")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: schema_version {data.get('schema_version')!r} is not supported (this "
            f"sgdsim reads {SCHEMA_VERSION})"
        )
    for key in ("base", "link_rate_bps", "cores", "link_sharing", "solo", "alone", "points"):
        if key not in data:
            raise ConfigError(f"{source}: missing field {key!r}")
    solo = run_from_dict(data["solo"], f"{source}: solo")
    alone = run_from_dict(data["alone"], f"{source}: alone")
    solo_more, alone_more = (
        tuple(
            run_from_dict(r, f"{source}: {key}[{k}]")
            for k, r in enumerate(_list(data.get(key, []), source, key))
        )
        for key in ("solo_more", "alone_more")
    )
    try:
        base = config_from_dict(data["base"])
    except (ConfigError, TypeError, ValueError, AttributeError) as err:
        raise ConfigError(f"{source}: base: {err}") from None
    points = []
    for i, raw in enumerate(data["points"]):
        where = f"{source}: points[{i}]"
        try:
            arch = Architecture(raw["architecture"])
            workers = int(raw["workers"])
            runs = tuple(run_from_dict(r, f"{where}: runs[{k}]") for k, r in enumerate(raw["runs"]))
        except ConfigError:
            raise  # run_from_dict named the file, the point and the run already
        except KeyError as err:
            raise ConfigError(f"{where}: missing field {err}") from None
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{where}: {err}") from None
        if not runs:
            raise ConfigError(f"{where}: no runs")
        for k, run in enumerate(runs):
            if run.config.architecture is not arch or run.config.workers != workers:
                raise ConfigError(
                    f"{where}: runs[{k}] is {run.config.architecture.value} with "
                    f"{run.config.workers} worker(s), the point {arch.value} with {workers}"
                )
        points.append(MeasuredPoint(arch, workers, runs))
    for what, run in (
        ("alone", alone),
        *((f"solo_more[{k}]", r) for k, r in enumerate(solo_more)),
        *((f"alone_more[{k}]", r) for k, r in enumerate(alone_more)),
        *((f"a run of {p.architecture.value} W={p.workers}", r) for p in points for r in p.runs),
    ):
        if run.model_name != solo.model_name or run.config.batch_size != solo.config.batch_size:
            raise ConfigError(
                f"{source}: {what} trained {run.model_name} with batch "
                f"{run.config.batch_size}, the solo run {solo.model_name} with batch "
                f"{solo.config.batch_size}"
            )
    rate = data["link_rate_bps"]
    sharing = data["link_sharing"]
    try:
        cores = tuple(int(c) for c in data["cores"])
        link_rate = None if rate is None else float(rate)
        burst = float(data.get("link_burst_s", BURST_S))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{source}: cores, link_rate_bps or link_burst_s: {err}") from None
    if not burst > 0:
        raise ConfigError(f"{source}: link_burst_s: must be > 0 seconds, got {burst}")
    if not cores:
        raise ConfigError(f"{source}: cores: empty")
    ring = data.get("ring_goodput")
    duplex = data.get("duplex")
    interference = data.get("interference")
    warm = data.get("warm_sharing")
    raw_rings = data.get("ring_goodputs", [])
    if not isinstance(raw_rings, list):
        raise ConfigError(
            f"{source}: ring_goodputs: expected a list of rings, got {type(raw_rings).__name__}"
        )
    rings = tuple(
        _ring_from_dict(r, source, f"ring_goodputs[{k}]") for k, r in enumerate(raw_rings)
    )
    _check_rings(rings, source)
    return Measurements(
        base=base,
        link_rate_bps=link_rate,
        cores=cores,
        sharing=None if sharing is None else sharing_from_dict(sharing, source),
        solo=solo,
        alone=alone,
        points=tuple(points),
        ring=None if ring is None else _ring_from_dict(ring, source),
        duplex=None if duplex is None else duplex_from_dict(duplex, source),
        solo_more=solo_more,
        alone_more=alone_more,
        rings=rings,
        link_burst_s=burst,
        interference=None if interference is None else interference_from_dict(interference, source),
        warm_sharing=None if warm is None else warm_sharing_from_dict(warm, source),
    )


def _check_rings(rings: tuple[RingGoodput, ...], source: str) -> None:
    """Rings measured as one set: W ascending and distinct, the same layers and link."""
    workers = [r.workers for r in rings]
    if workers != sorted(set(workers)):
        raise ConfigError(
            f"{source}: ring_goodputs: the rings' workers must ascend without repeats, got "
            f"{workers}"
        )
    for k, ring in enumerate(rings[1:], start=1):
        first = rings[0]
        if (ring.layer_nbytes, ring.link_rate_bps) != (first.layer_nbytes, first.link_rate_bps):
            raise ConfigError(
                f"{source}: ring_goodputs[{k}]: its layers or link rate differ from "
                "ring_goodputs[0]'s (one set measures one model on one link)"
            )


def _list(value: Any, source: str, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(f"{source}: {key}: expected a list of runs, got {type(value).__name__}")
    return value


def _ring_to_dict(ring: RingGoodput) -> dict[str, Any]:
    return {
        "workers": ring.workers,
        "layer_nbytes": list(ring.layer_nbytes),
        "times_s": list(ring.times_s),
        "link_rate_bps": ring.link_rate_bps,
    } | ({"cpu_s": list(ring.cpu_s), "flat_cpu_s": list(ring.flat_cpu_s)} if ring.cpu_s else {})


def _ring_from_dict(raw: Any, source: str, key: str = "ring_goodput") -> RingGoodput:
    try:
        rate = raw["link_rate_bps"]
        ring = RingGoodput(
            int(raw["workers"]),
            tuple(int(n) for n in raw["layer_nbytes"]),
            tuple(float(t) for t in raw["times_s"]),
            None if rate is None else float(rate),
            tuple(seconds_from_json(t) for t in raw.get("cpu_s", ())),
            tuple(seconds_from_json(t) for t in raw.get("flat_cpu_s", ())),
        )
    except KeyError as err:
        raise ConfigError(f"{source}: {key}: missing field {err}") from None
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{source}: {key}: {err}") from None
    if ring.workers < 2 or not ring.times_s or min(ring.times_s) <= 0 or not ring.layer_nbytes:
        raise ConfigError(
            f"{source}: {key}: needs workers >= 2, positive times and layers; got "
            f"{ring.workers}, {list(ring.times_s)}, {list(ring.layer_nbytes)}"
        )
    return ring


def save_measurements(
    m: Measurements, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write the measurements atomically (gzip if ``path`` ends in ``.gz``); an existing file is
    replaced only with ``overwrite``."""
    text = json.dumps(measurements_to_dict(m), separators=(",", ":"), allow_nan=False) + "\n"
    with atomic_output(path, overwrite=overwrite) as tmp:
        if str(path).lower().endswith(".gz"):
            # mtime=0: the same measurements give the same bytes
            tmp.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        else:
            tmp.write_text(text, encoding="utf-8")
    return Path(path)


def load_measurements(path: str | os.PathLike[str]) -> Measurements:
    """Read :func:`save_measurements`'s file; ConfigError naming the file when it cannot."""
    target = Path(path)
    data = read_json_file(target, error=ConfigError, what="validation measurements")
    return measurements_from_dict(data, str(target))
