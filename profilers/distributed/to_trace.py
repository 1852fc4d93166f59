"""A single-worker run as an sgdsim trace, with the communication it measured (TPDS'22 4.1).

With one worker and a parameter server, the run *is* the paper's single-worker profile: every
layer's computation and transmission is timestamped. The trace gets the same layers and op ids as
the per-layer profiler's (:func:`simcore.trace.build.ps_step_ops` on the same fx layers), and:

- ``forward:L`` / ``backward:L``: the worker's measured durations (backward: the sum of L's
  autograd nodes, 0 when autograd ran none), start relative to the step's start;
- ``update:L``: the server's time applying L's gradients in that step;
- ``pull:L`` / ``push:L``: the *transfer* time, i.e. how long the connection was busy with L.
  All pulls are posted at once and arrive one after the other on one connection per server, so a
  pull's own time runs from when the previous one on that connection completed (or from its
  posting, if later) to its completion; pushes likewise from their sends. Summed, they give the
  time the connection was busy, which is what the simulator's transfer of ``nbytes`` stands for.

The format stores measured transfer times as the communication ops' ``duration_s``
(``simcore/trace/FORMAT.md``, steps); the simulator currently ignores them and uses
``nbytes / bandwidth`` (``SEMANTICS.md``), so they serve comparison, not replay.
"""

from __future__ import annotations

import dataclasses
import platform
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import torch

from profilers.distributed.config import Overlap, RunConfig
from profilers.distributed.launch import place_layers
from profilers.distributed.records import RunResult, Span
from profilers.distributed.task import build_setup
from simcore import __version__
from simcore.errors import ConfigError
from simcore.trace.build import ps_step_ops
from simcore.trace.model import (
    SCHEMA_VERSION,
    Op,
    OpKind,
    Resource,
    StepProfile,
    Trace,
    TraceMetadata,
)
from simcore.trace.parse import trace_from_dict, trace_to_dict

__all__ = ["pooled_trace", "run_to_trace", "with_compute_of"]

ROUND_DIGITS = 9  # nanoseconds, as the per-layer profiler
# Spans of computation (the worker's, and a layer's update), as opposed to transfers.
COMPUTATION_KINDS = ("forward", "backward", "update")


def run_to_trace(result: RunResult) -> Trace:
    """The post-warm-up steps of a one-worker parameter-server run as a validated trace.

    Raises
    ------
    ConfigError : the run had more than one worker or no parameter server.
    """
    config = result.config
    if config.workers != 1 or not config.architecture.uses_servers:
        raise ConfigError(
            f"run_to_trace: needs one worker and a parameter server, got {config.workers} "
            f"worker(s) with {config.architecture.value}"
        )
    setup = build_setup(config)
    layers = [layer.to_layer() for layer in setup.layers]
    ops = ps_step_ops(layers, setup.layer_inputs, overlap=config.overlap is Overlap.LAYERWISE)
    placement = place_layers(setup.param_layers, config.servers)
    server_of = {layer.name: placement[layer.index] for layer in setup.param_layers}
    starts = {s.step: s.start_s for s in result.steps}
    cpu = {s.step: s.cpu_s for s in result.steps}  # the process's, every thread's (or None)
    by_step: dict[int, list[Span]] = defaultdict(list)
    for span in result.spans:
        if span.step >= config.warmup:
            by_step[span.step].append(span)
    steps = tuple(
        dataclasses.replace(_profile(ops, by_step[n], starts[n], server_of), cpu_s=cpu[n])
        for n in sorted(by_step)
        if n in starts
    )
    dtypes = {str(p.dtype).removeprefix("torch.") for p in setup.module.parameters()}
    dtype = ",".join(sorted(dtypes)) or "none"
    metadata = _metadata(config, result.model_name, dtype, len(steps))
    trace = Trace(metadata, tuple(layers), ops, steps, SCHEMA_VERSION)
    source = f"<distributed run {result.model_name}>"
    return trace_from_dict(trace_to_dict(trace), source=source)  # validated like a file


def with_compute_of(trace: Trace, compute_run: RunResult | Sequence[RunResult]) -> Trace:
    """``trace`` with its computation as measured in ``compute_run``, a run of the same model and
    batch without transfers (one ring-AllReduce worker: it sends nothing); several such runs
    pool their steps, in order.

    In the one-worker parameter-server run the transfers' CPU work (gloo's thread, the kernel's
    network stack) ran on the worker's core beside its computation and slowed it, and on the
    server's core beside its updates; this trace keeps the computation alone, for a simulator
    that puts that work back itself (``SimulationConfig.comm_cpu_s_per_byte``): the forward and
    backward ops, and as each layer's update the ring worker's own SGD step on it. Step n takes
    the compute run's step n mod its steps; the compute run's idle gaps are charged as in
    :func:`run_to_trace`, and so are the time between one step's end and the next one's first op
    (to that op) and the time before each update beyond its all-reduce's return (to the update).
    The transfers stay as measured.

    Raises
    ------
    ConfigError : the compute run had transfers, another model or batch size, or no steps.
    """
    runs = [compute_run] if isinstance(compute_run, RunResult) else list(compute_run)
    if not runs:
        raise ConfigError("with_compute_of: no compute run")
    rows = [row for run in runs for row in _compute_rows(trace, run)]
    computation = [i for i, op in enumerate(trace.ops) if op.kind.value in COMPUTATION_KINDS]
    steps = []
    for n, step in enumerate(trace.steps):
        timed = rows[n % len(rows)]
        durations = list(step.duration_s)
        for i in computation:
            measured = timed.get(trace.ops[i].id)
            durations[i] = 0.0 if measured is None else round(max(measured[1], 0.0), ROUND_DIGITS)
        # No cpu_s: the compute runs' CPU is not this trace's, whose transfers stay measured.
        steps.append(StepProfile(duration_s=tuple(durations), start_s=step.start_s))
    meta = trace.metadata
    notes = f"{meta.notes}; computation from a run without transfers".lstrip("; ")
    out = dataclasses.replace(
        trace, metadata=dataclasses.replace(meta, notes=notes), steps=tuple(steps)
    )
    return trace_from_dict(trace_to_dict(out), source=f"{trace.source} (computation alone)")


def _compute_rows(trace: Trace, compute_run: RunResult) -> list[dict[str, tuple[float, float]]]:
    """Each post-warm-up step of ``compute_run``: op id -> (start, duration), gaps charged."""
    config = compute_run.config
    if config.workers != 1 or config.architecture.uses_servers:
        raise ConfigError(
            f"with_compute_of: needs a run without transfers (one ring-AllReduce worker), got "
            f"{config.workers} worker(s) with {config.architecture.value}"
        )
    meta = trace.metadata
    if compute_run.model_name != meta.model_name or config.batch_size != meta.batch_size:
        raise ConfigError(
            f"with_compute_of: the compute run is {compute_run.model_name} with batch "
            f"{config.batch_size}, the trace {meta.model_name} with batch {meta.batch_size}"
        )
    starts = {s.step: s.start_s for s in compute_run.steps}
    ends = {s.step: s.end_s for s in compute_run.steps}
    by_step: dict[int, dict[str, tuple[float, float]]] = defaultdict(dict)
    reduced: dict[int, dict[str, float]] = defaultdict(dict)  # layer -> its all-reduce's end
    for span in compute_run.spans:
        if span.step < config.warmup or span.step not in starts:
            continue
        start = span.start_s - starts[span.step]
        if span.kind in COMPUTATION_KINDS:
            by_step[span.step][f"{span.kind}:{span.layer}"] = (start, span.duration_s)
        elif span.kind == "allreduce":
            reduced[span.step][span.layer] = start + span.duration_s
    if not by_step:
        raise ConfigError("with_compute_of: the compute run has no steps after its warm-up")
    rows = [by_step[n] for n in sorted(by_step)]
    for n, timed in zip(sorted(by_step), rows, strict=True):
        # The worker was free from the previous step's end: the time until its first op (the
        # previous step's bookkeeping, the next batch, zeroing the gradients) is charged to
        # that op, since the throughput it is compared with counts it.
        ready = ends[n - 1] - starts[n] if n - 1 in ends else None
        _charge_gaps(trace.ops, timed, ready_s=ready)
        _charge_update_gaps(trace.ops, timed, reduced[n])
    return rows


def pooled_trace(runs: Sequence[RunResult]) -> Trace:
    """The post-warm-up steps of several one-worker parameter-server runs of one configuration
    as one trace (:func:`run_to_trace` of each, their steps in order): a profile that carries
    less of one run's luck.

    Raises
    ------
    ConfigError : no run, or runs whose traces differ in their ops (another configuration).
    """
    if not runs:
        raise ConfigError("pooled_trace: no run")
    traces = [run_to_trace(run) for run in runs]
    first = traces[0]
    for k, other in enumerate(traces[1:], start=1):
        if other.ops != first.ops:
            raise ConfigError(f"pooled_trace: run {k} is not the same configuration as run 0")
    if len(traces) == 1:
        return first
    steps = tuple(step for t in traces for step in t.steps)
    meta = dataclasses.replace(first.metadata, profiled_steps=len(steps))
    out = dataclasses.replace(first, metadata=meta, steps=steps)
    return trace_from_dict(trace_to_dict(out), source=f"<distributed runs {meta.model_name}>")


def _profile(
    ops: Sequence[Op], spans: Sequence[Span], t0: float, server_of: Mapping[str, int]
) -> StepProfile:
    timed: dict[str, tuple[float, float]] = {}  # op id -> (start relative to t0, duration)
    for span in spans:
        if span.kind in COMPUTATION_KINDS:
            timed[f"{span.kind}:{span.layer}"] = (span.start_s - t0, span.duration_s)
    for kind in ("pull", "push"):
        mine = [s for s in spans if s.kind == kind]
        timed.update(_busy_times(kind, mine, t0, server_of))
    _charge_gaps(ops, timed)
    durations: list[float | None] = []
    op_starts: list[float | None] = []
    for op in ops:
        start, duration = timed.get(op.id, (None, None))
        if duration is None and not op.is_communication:
            duration = 0.0  # autograd ran nothing for this layer (e.g. a flatten of the input)
        durations.append(None if duration is None else round(max(duration, 0.0), ROUND_DIGITS))
        op_starts.append(None if start is None else round(start, ROUND_DIGITS))
    return StepProfile(duration_s=tuple(durations), start_s=tuple(op_starts))


def _charge_gaps(
    ops: Sequence[Op], timed: dict[str, tuple[float, float]], *, ready_s: float | None = None
) -> None:
    """Charge each computation op with the time the worker spent before it for no recorded
    reason: from when it could have started (its predecessor on the worker done, its inputs and
    pulls arrived) to when it did. Python between layers, hooks and thread hand-offs take real
    time that no op records; left out, the simulator replays a step faster than it ran.
    ``ready_s``: when the worker became free for the step's first op (default: not known, and
    the first op is charged only for waiting on its inputs).
    """
    by_id = {op.id: op for op in ops}
    compute = sorted(
        (timed[op.id][0], op.id) for op in ops if op.resource is Resource.WORKER and op.id in timed
    )
    previous_end = -float("inf") if ready_s is None else ready_s
    for start, op_id in compute:
        ready = previous_end
        for dep in by_id[op_id].deps:
            if dep in timed:
                ready = max(ready, timed[dep][0] + timed[dep][1])
        duration = timed[op_id][1]
        if ready > -float("inf") and start > ready:
            duration += start - ready
            timed[op_id] = (ready, duration)
        previous_end = max(previous_end, timed[op_id][0] + duration)


def _charge_update_gaps(
    ops: Sequence[Op], timed: dict[str, tuple[float, float]], reduced: Mapping[str, float]
) -> None:
    """In a run without transfers, charge each layer's update with the time the worker spent
    before it for no recorded reason: from when it could have started (the worker's previous
    op done, the layer's one-worker all-reduce returned) to when it did. Waking up for each
    all-reduce's completion takes real time that no op records.
    """
    worker_ops = [timed[op.id] for op in ops if op.resource is Resource.WORKER and op.id in timed]
    previous_end = max((start + duration for start, duration in worker_ops), default=0.0)
    updates = sorted(
        (timed[op.id][0], op.id, op.layer or "")
        for op in ops
        if op.kind is OpKind.UPDATE and op.id in timed
    )
    for start, op_id, layer in updates:
        ready = max(previous_end, reduced.get(layer, previous_end))
        duration = timed[op_id][1]
        if start > ready:
            duration += start - ready
            timed[op_id] = (ready, duration)
        previous_end = max(previous_end, timed[op_id][0] + duration)


def _busy_times(
    kind: str, spans: Sequence[Span], t0: float, server_of: Mapping[str, int]
) -> dict[str, tuple[float, float]]:
    """Per transfer: (start, duration) of the time its connection spent on it alone."""
    out: dict[str, tuple[float, float]] = {}
    per_server: dict[int, list[Span]] = defaultdict(list)
    for span in spans:
        per_server[server_of[span.layer]].append(span)
    for transfers in per_server.values():
        free_at = -float("inf")
        for span in sorted(transfers, key=lambda s: s.start_s + s.duration_s):
            end = span.start_s + span.duration_s
            begin = max(span.start_s, free_at)
            out[f"{kind}:{span.layer}"] = (begin - t0, end - begin)
            free_at = end
    return out


def _metadata(config: RunConfig, model_name: str, dtype: str, n_steps: int) -> TraceMetadata:
    return TraceMetadata(
        model_name=model_name,
        batch_size=config.batch_size,
        device=config.device,
        dtype=dtype,
        framework="torch",
        framework_version=torch.__version__,
        profiled_steps=n_steps,
        warmup_steps=config.warmup,
        library_versions={"python": platform.python_version(), "torch": torch.__version__},
        host={"hostname": socket.gethostname(), "torch_threads": config.threads},
        profiler={
            "name": "sgdsim.profilers.distributed",
            "version": __version__,
            "timer": "time.perf_counter",
            "dag_source": "torch.fx symbolic trace (forward dataflow) + autograd graph",
            "granularity": "fx call node",
            "architecture": config.architecture.value,
            "overlap": config.overlap.value,
            "servers": config.servers,
            "communication": "measured: gloo point-to-point per layer, connection busy time",
            "optimizer": f"SGD(lr={config.lr}, momentum={config.momentum}) at the server",
            "seed": config.seed,
        },
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        notes=f"one worker of a real parameter-server run on {config.master_addr}; synthetic "
        "teacher-labelled batches",
    )
