"""Flat, typed records of a distributed run, and the summaries computed from them.

Every timestamp is ``time.perf_counter()`` of the process that took it, in seconds. On Linux that
is ``CLOCK_MONOTONIC``, one clock for every process of a host, so spans of different ranks on one
machine can be put on one timeline. Across hosts the clocks have unrelated origins: durations are
still right, but comparing a worker's timestamps with a server's on another host is not (nothing
here does; throughput uses each worker's own step ends).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch

from profilers.distributed.config import RunConfig
from simcore.errors import ConfigError
from simcore.files import atomic_output, read_json_file
from simcore.sim.arrivals import COMPUTATION_KINDS
from simcore.sim.occupancy import (
    PULL,
    PUSH,
    LinkOccupancy,
    TransferInterval,
    link_occupancy,
    occupancy_from_dict,
    occupancy_to_dict,
)

__all__ = [
    "RUN_SCHEMA",
    "DdpBucketRecord",
    "RunResult",
    "SlowdownReport",
    "Span",
    "StepRecord",
    "config_from_dict",
    "config_to_dict",
    "load_run",
    "run_from_dict",
    "run_to_dict",
    "save_run_json",
    "seconds_from_json",
]

RUN_SCHEMA = "sgdsim.distributed_run"
RUN_SCHEMA_VERSION = 1

# Span kinds. Worker side: pull (posted .. parameters in place), forward, backward, push (sent ..
# completed), allreduce (launched .. completed). Server side: update (one worker's gradients of one
# layer applied; in ps-sync, the averaged gradients, recorded once per step with worker -1).
UPDATE = "update"


@dataclass(frozen=True, slots=True)
class Span:
    """One timed piece of work of one layer in one step.

    ``start_s`` is a perf_counter timestamp (s); ``duration_s`` the time spent (s). For a backward
    it is the sum of the layer's autograd nodes, which may interleave with other layers, so
    ``start_s + duration_s`` is not necessarily when it ended.
    """

    rank: int
    worker: int  # the worker this work was for; -1 for a server's per-step work in ps-sync
    step: int
    layer: str
    kind: str
    start_s: float
    duration_s: float


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One worker's step: perf_counter start and end (s), its training loss and the CPU time
    its process used meanwhile, every thread's (s; None: not measured, as in runs recorded
    before it was).

    ``cpu_s`` is what the computation spans do not show: the communication threads' work
    (gloo's copies and sockets, the kernel's network stack on this process's behalf) and the
    Python around the layers. On a core of its own it hides while the worker waits; on cores
    shared by several workers it is CPU they compete for.
    """

    worker: int
    step: int
    start_s: float
    end_s: float
    loss: float
    cpu_s: float | None = None

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class DdpBucketRecord:
    """One of the buckets a real DDP run all-reduced once torch had rebuilt them after the
    first step: its index (launch order), its bytes and its parameters' qualified names in the
    bucket's order."""

    index: int
    nbytes: int
    params: tuple[str, ...]


@dataclass(frozen=True)
class SlowdownReport:
    """Compute time per step in a W-worker run relative to a solo (W=1) run.

    ``ratio`` is the mean post-warm-up forward+backward time per step over all workers of the run
    divided by the solo run's; ``per_layer`` the same ratio for each layer with compute in both.
    """

    workers: int
    compute_s: float
    solo_compute_s: float
    per_layer: Mapping[str, float]

    @property
    def ratio(self) -> float:
        return self.compute_s / self.solo_compute_s if self.solo_compute_s > 0 else math.nan


@dataclass(frozen=True)
class RunResult:
    """Everything measured in one run; ``final_state`` holds the trained parameters.

    ``final_state`` comes from the servers (PS) or worker 0 (AllReduce), keyed like the model's
    ``state_dict`` parameters; it is not part of the JSON dump. ``compute_summary`` stands in for
    compute spans a compacted run no longer holds (:meth:`without_spans`): its
    :meth:`compute_s_per_layer` as measured from them.
    """

    config: RunConfig
    model_name: str
    layer_nbytes: Mapping[str, int]  # parameterized layers, forward order
    spans: tuple[Span, ...]
    steps: tuple[StepRecord, ...]
    final_state: Mapping[str, torch.Tensor] = field(default_factory=dict)
    compute_summary: Mapping[str, float] | None = None
    # Stands in for the spans' link occupancy in a compacted run (link_occupancy).
    occupancy_summary: LinkOccupancy | None = None
    # The cores other processes used on average while the run ran (profilers.host_load); None:
    # not watched (a run by itself, or saved before 2026-11-29).
    other_cores: float | None = None
    # DDP: the buckets the run all-reduced after torch rebuilt them (worker 0's); () otherwise.
    buckets: tuple[DdpBucketRecord, ...] = ()

    # --- throughput ----------------------------------------------------------------------------

    @property
    def examples_per_s(self) -> float:
        """Examples/s over all workers after warm-up.

        Each worker contributes ``(N - k) * batch / (e[N-1] - e[k-1])``: its post-warm-up steps
        over the time they took (the simulator's estimator, so the two compare directly).
        """
        k, batch = self.config.warmup, self.config.batch_size
        total = 0.0
        for steps in self.steps_by_worker().values():
            ends = [s.end_s for s in steps]
            total += (
                (len(ends) - k)
                * batch
                / (ends[-1] - ends[k - 1] if k else ends[-1] - steps[0].start_s)
            )
        return total

    def steps_by_worker(self) -> dict[int, list[StepRecord]]:
        by: dict[int, list[StepRecord]] = defaultdict(list)
        for record in sorted(self.steps, key=lambda s: (s.worker, s.step)):
            by[record.worker].append(record)
        return dict(by)

    def step_times_s(self) -> list[float]:
        """Post-warm-up step durations of every worker (s)."""
        return [s.duration_s for s in self.steps if s.step >= self.config.warmup]

    def losses(self, worker: int = 0) -> list[float]:
        """Worker ``worker``'s training loss at each step."""
        return [s.loss for s in self.steps_by_worker()[worker]]

    # --- compute and co-location ----------------------------------------------------------------

    def compute_s_per_layer(self) -> dict[str, float]:
        """Mean forward+backward seconds per worker-step of each layer, after warm-up.

        The mean is over the worker-steps present in the spans (a single rank's records from a
        torchrun launch hold only that worker's). A run without spans gives its
        ``compute_summary``.
        """
        if not self.spans and self.compute_summary is not None:
            return dict(self.compute_summary)
        sums: dict[str, float] = defaultdict(float)
        worker_steps: set[tuple[int, int]] = set()
        for span in self._measured(COMPUTATION_KINDS):
            sums[span.layer] += span.duration_s
            worker_steps.add((span.worker, span.step))
        count = max(len(worker_steps), 1)
        return {layer: total / count for layer, total in sums.items()}

    def compute_s_per_step(self) -> float:
        """Mean forward+backward seconds per worker-step (the sum over layers), after warm-up."""
        return sum(self.compute_s_per_layer().values())

    def cpu_s_per_step(self) -> float | None:
        """Mean CPU seconds a worker's process used per step after warm-up (every thread's);
        None when the run did not measure it."""
        measured = [s.cpu_s for s in self.steps if s.step >= self.config.warmup]
        if not measured or any(cpu is None for cpu in measured):
            return None
        return statistics.fmean(cpu for cpu in measured if cpu is not None)

    def slowdown_vs(self, solo: RunResult) -> SlowdownReport:
        """This run's per-layer compute relative to ``solo``'s (same model, usually W=1)."""
        mine, theirs = self.compute_s_per_layer(), solo.compute_s_per_layer()
        per_layer = {
            layer: mine[layer] / theirs[layer]
            for layer in mine
            if layer in theirs and theirs[layer] > 0
        }
        return SlowdownReport(
            self.config.workers, self.compute_s_per_step(), solo.compute_s_per_step(), per_layer
        )

    def without_spans(self) -> RunResult:
        """The run with its steps and its compute per layer (``compute_summary``) but no spans:
        what throughput and the co-location slowdown are measured from, in a few kilobytes."""
        return dataclasses.replace(
            self,
            spans=(),
            compute_summary=self.compute_s_per_layer(),
            occupancy_summary=self.link_occupancy(),
            final_state={},
        )

    def link_occupancy(self) -> LinkOccupancy | None:
        """How the parameter servers' links were occupied after warm-up: the share of time
        ``i`` workers pulled and ``j`` pushed (:mod:`simcore.sim.occupancy`); None without
        servers or spans.

        The workers' spans alone would misplace both ends of the link's work: gloo reports a
        push sent once its last bytes are in the socket's buffer, which the link then drains
        for tens of milliseconds (mlp at 500 Mbit/s: a median 57 ms before the server had the
        gradients), and a worker posts its next pulls before the server, busy receiving that
        push, can send them. So a push lasts until the server began to apply it (its update
        span; a Sync-SGD server applies the averaged step once, so there a push still ends
        when gloo reported it sent), and a pull starts no earlier than the server's last
        update of the worker's previous step (Sync-SGD: of the averaged step) ended.
        """
        if not self.config.architecture.uses_servers:
            return None
        if not self.spans:
            return self.occupancy_summary
        applied: dict[tuple[int, int, str], float] = {}  # (worker, step, layer) -> update start
        step_done: dict[tuple[int, int], float] = {}  # (worker or -1, step) -> last update end
        for span in self.spans:
            if span.kind == UPDATE and span.rank < self.config.servers:  # a server's
                applied[(span.worker, span.step, span.layer)] = span.start_s
                key = (span.worker, span.step)
                step_done[key] = max(step_done.get(key, -math.inf), span.start_s + span.duration_s)
        intervals = []
        for span in self._measured((PULL, PUSH)):
            start, end = span.start_s, span.start_s + span.duration_s
            if span.kind == PUSH:
                end = max(end, applied.get((span.worker, span.step, span.layer), end))
            else:
                previous = step_done.get((span.worker, span.step - 1))
                if previous is None:
                    previous = step_done.get((-1, span.step - 1))
                if previous is not None:
                    start = min(max(start, previous), end)
            intervals.append(TransferInterval(span.worker, span.kind, start, end))
        if not intervals:
            return None
        return link_occupancy(intervals, self.config.workers)

    def pull_arrival_times(self) -> tuple[dict[tuple[int, int], float], dict[int, float]]:
        """For :func:`simcore.sim.arrivals.pull_arrivals`: when each worker's last pull of each
        step ended (``(step, worker)``), and when the servers' last update of each step ended
        (a Sync-SGD server's release of the next step). Empty without spans."""
        pull_ends: dict[tuple[int, int], float] = {}
        releases: dict[int, float] = {}
        for span in self.spans:
            end = span.start_s + span.duration_s
            if span.kind == "pull":
                key = (span.step, span.worker)
                pull_ends[key] = max(pull_ends.get(key, end), end)
            elif span.kind == "update":
                releases[span.step] = max(releases.get(span.step, end), end)
        return pull_ends, releases

    def computation_times(self) -> dict[tuple[int, int], float]:
        """Each worker's computation per step (``(step, worker)``): its forward and backward
        spans' wall times summed, the waits between them left out (for
        :func:`simcore.sim.arrivals.computations_by_arrival`). Empty without spans."""
        computations: dict[tuple[int, int], float] = {}
        for span in self.spans:
            if span.kind in COMPUTATION_KINDS:
                key = (span.step, span.worker)
                computations[key] = computations.get(key, 0.0) + span.duration_s
        return computations

    def _measured(self, kinds: Iterable[str]) -> Iterable[Span]:
        wanted = set(kinds)
        return (s for s in self.spans if s.kind in wanted and s.step >= self.config.warmup)

    def spans_of(self, worker: int, step: int) -> list[Span]:
        """Worker ``worker``'s spans of step ``step`` (server updates for it included)."""
        return [s for s in self.spans if s.worker == worker and s.step == step]


def config_to_dict(config: RunConfig) -> dict[str, Any]:
    """A run's configuration as JSON-ready data (a factory model becomes its name)."""
    data = asdict(config)
    data["architecture"] = config.architecture.value
    data["overlap"] = config.overlap.value
    data["comm_hook"] = config.comm_hook.value
    model = config.model
    data["model"] = model if isinstance(model, str) else getattr(model, "__qualname__", repr(model))
    return data


def run_to_dict(result: RunResult) -> dict[str, Any]:
    """The run as JSON-ready data: config, summary and every raw timestamp (no parameters)."""
    step_times = result.step_times_s()
    doc: dict[str, Any] = {
        "schema": RUN_SCHEMA,
        "schema_version": RUN_SCHEMA_VERSION,
        "clock": "time.perf_counter (CLOCK_MONOTONIC on Linux: one origin per host), seconds",
        "config": config_to_dict(result.config),
        "model_name": result.model_name,
        "layer_nbytes": dict(result.layer_nbytes),
        "summary": {
            "examples_per_s": result.examples_per_s,
            "mean_step_s": statistics.fmean(step_times) if step_times else None,
            "compute_s_per_step": result.compute_s_per_step(),
        },
        "steps": [asdict(s) for s in result.steps],
        "span_fields": list(Span.__slots__),
        "spans": [[getattr(s, f) for f in Span.__slots__] for s in result.spans],
    }
    if result.compute_summary is not None:
        doc["compute_s_per_layer"] = dict(result.compute_summary)
    if result.occupancy_summary is not None:
        doc["link_occupancy"] = occupancy_to_dict(result.occupancy_summary)
    if result.other_cores is not None:
        doc["other_cores"] = result.other_cores
    if result.buckets:
        doc["buckets"] = [asdict(b) for b in result.buckets]
    return doc


def run_from_dict(data: Any, source: str = "<memory>") -> RunResult:
    """The run :func:`run_to_dict` wrote (without ``final_state``, which the JSON does not hold).

    Raises
    ------
    ConfigError : not a run of this schema, or a field is missing or malformed (names ``source``
        and the field).
    """
    if not isinstance(data, dict) or data.get("schema") != RUN_SCHEMA:
        raise ConfigError(f"{source}: not a distributed run (schema {RUN_SCHEMA!r} expected)")
    if data.get("schema_version") != RUN_SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: schema_version {data.get('schema_version')!r} is not supported "
            f"(this sgdsim reads {RUN_SCHEMA_VERSION})"
        )
    where = "config"
    try:
        config = config_from_dict(data["config"])
        where = "layer_nbytes"
        layer_nbytes = {str(k): int(v) for k, v in data["layer_nbytes"].items()}
        where = "steps"
        steps = tuple(
            StepRecord(
                int(s["worker"]),
                int(s["step"]),
                float(s["start_s"]),
                float(s["end_s"]),
                float(s["loss"]),
                None if s.get("cpu_s") is None else seconds_from_json(s["cpu_s"]),
            )
            for s in data["steps"]
        )
        where = "spans"
        fields = list(data["span_fields"])
        if fields != list(Span.__slots__):
            raise ValueError(f"span_fields {fields} are not {list(Span.__slots__)}")
        spans = tuple(_span_from_row(row) for row in data["spans"])
        where = "model_name"
        model_name = str(data["model_name"])
        where = "compute_s_per_layer"
        raw_summary = data.get("compute_s_per_layer")
        summary = (
            None
            if raw_summary is None
            else {str(k): seconds_from_json(v) for k, v in dict(raw_summary).items()}
        )
        where = "link_occupancy"
        raw_occupancy = data.get("link_occupancy")
        occupancy = None if raw_occupancy is None else occupancy_from_dict(raw_occupancy)
        where = "other_cores"
        raw_other = data.get("other_cores")
        other_cores = (
            None if raw_other is None else _non_negative(raw_other, "a number of cores >= 0")
        )
        where = "buckets"
        buckets = tuple(
            DdpBucketRecord(int(b["index"]), int(b["nbytes"]), tuple(str(p) for p in b["params"]))
            for b in data.get("buckets", ())
        )
    except KeyError as err:
        raise ConfigError(f"{source}: {where}: missing field {err}") from None
    except (ConfigError, TypeError, ValueError, AttributeError) as err:
        raise ConfigError(f"{source}: {where}: {err}") from None
    return RunResult(
        config,
        model_name,
        layer_nbytes,
        spans,
        steps,
        compute_summary=summary,
        occupancy_summary=occupancy,
        other_cores=other_cores,
        buckets=buckets,
    )


def seconds_from_json(value: Any) -> float:
    """A duration read from a run file: a finite number >= 0 (ValueError otherwise)."""
    return _non_negative(value, "a duration in seconds")


def _non_negative(value: Any, what: str) -> float:
    """``value`` as a finite number >= 0; ValueError saying it is not ``what`` otherwise."""
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{value!r} is not {what}")
    return number


def config_from_dict(raw: Any) -> RunConfig:
    """The configuration :func:`config_to_dict` wrote; unknown keys are ignored. Raises
    ConfigError, TypeError or ValueError when a field is bad."""
    known = {f.name for f in fields(RunConfig)}
    values = {k: v for k, v in dict(raw).items() if k in known}
    if values.get("input_shape") is not None:
        values["input_shape"] = tuple(int(d) for d in values["input_shape"])
    return RunConfig(**values)


def _span_from_row(row: Sequence[Any]) -> Span:
    rank, worker, step, layer, kind, start, duration = row
    return Span(
        int(rank), int(worker), int(step), str(layer), str(kind), float(start), float(duration)
    )


def save_run_json(
    result: RunResult, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """Write :func:`run_to_dict` atomically; replace an existing file only with ``overwrite``."""
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(run_to_dict(result), indent=1) + "\n", encoding="utf-8")


def load_run(path: str | os.PathLike[str]) -> RunResult:
    """A run :func:`save_run_json` wrote (gzip-compressed or not). Raises ConfigError naming
    the file and the field on bad input."""
    return run_from_dict(read_json_file(path, what="distributed run"), str(path))


def merge(
    records: Sequence[tuple[Sequence[Span], Sequence[StepRecord]]],
) -> tuple[tuple[Span, ...], tuple[StepRecord, ...]]:
    """Concatenate the per-rank records, spans sorted by start time."""
    spans = sorted((s for r in records for s in r[0]), key=lambda s: s.start_s)
    steps = sorted((s for r in records for s in r[1]), key=lambda s: (s.worker, s.step))
    return tuple(spans), tuple(steps)
