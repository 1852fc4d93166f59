"""Chrome Trace Event format (opens in Perfetto UI and chrome://tracing), and the timeline spans
that plots and exports share.

Format reference: the "Trace Event Format" document of the Chromium project. We emit complete
events (``ph: "X"``) with microsecond ``ts``/``dur`` (rounded to the nanosecond), one process per
worker or server and one thread per resource, named with metadata events (``ph: "M"``) so the
viewer shows readable labels.

Where a simulated op goes (:func:`simulated_spans`), following what the simulator records:

- process ``worker w``: thread ``downlink`` (pulls from server 0; ``downlink[i]`` from server i),
  ``worker`` (forward, backward and the parsing of pulled parameters), ``uplink`` /
  ``uplink[i]`` (pushes; in ring AllReduce the AllReduce of each layer), and ``latency`` (the
  pure delay after each transfer; it occupies no resource, so several may overlap, and the export
  spreads overlapping ones over threads ``latency``, ``latency #2``, ...);
- process ``server k``: thread ``worker w`` for worker w's core at that server (each worker has
  its own, SEMANTICS.md), holding the updates and the parsing of pushed gradients. A transfer is
  one op of the worker's connection and appears once, in the worker's process. In ring
  AllReduce there is no server: the local updates stay in the worker's process, thread ``update``.

Every span's ``args`` hold ``worker``, ``step`` and ``bytes``, plus ``layer`` when the trace is
given. On every thread, events never overlap partially (they follow each other; the export puts
any that would overlap on an extra thread, ``NAME #2``), so viewers nest nothing by mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simcore.errors import ConfigError, TraceError
from simcore.sim.config import COLLECTIVE_ARCHS
from simcore.sim.dag import INTRA_BROADCAST, INTRA_REDUCE, RENDEZVOUS
from simcore.sim.results import Timeline
from simcore.trace.model import Resource, Trace
from simcore.trace.overhead import OVERHEAD_IDS

# Thread ids per resource, in the order a person reads a step: pull, compute, push, server.
RESOURCE_TIDS: dict[str, int] = {
    Resource.DOWNLINK.value: 1,
    Resource.WORKER.value: 2,
    Resource.UPLINK.value: 3,
    Resource.PS.value: 4,
    "latency": 5,
    "update": 6,
}

#: Display kinds, beyond the trace's op kinds: the simulator's parsing and latency ops.
PARSE = "parse"
ALLREDUCE = "allreduce"  # a ring's transfers (uplink ops of the step DAG)
INTRA = "intra-host"  # reduce and broadcast among a host's devices
LATENCY = "latency"
OVERHEAD = "overhead"  # a step's fixed costs outside its layers (simcore.trace.overhead)
WAIT = "wait"  # DDP: a rank waiting for the others to start (gate:) or finish (done:) a bucket
READY = "ready"  # DDP: the instant a bucket's gradients are all in it (ready:)
COPY = "copy"  # DDP: gradients copied into and out of buckets, fp16 casts
US_DECIMALS = 3  # timestamps in microseconds, rounded to the nanosecond


@dataclass(frozen=True, slots=True)
class TimelineSpan:
    """One interval of a timeline: who did what, where, when (seconds)."""

    process: str  # "worker 0", "server 0"
    resource: str  # "downlink", "worker", "uplink", "ps" (or any label): the thread
    name: str  # op id
    category: str  # op kind: pull, forward, backward, push, allreduce, update, parse, latency,
    # intra-host, overhead, other
    start_s: float
    duration_s: float
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def display_kind(op: str, kind: str) -> str:
    """The kind a timeline shows: the simulator's ``parse``, ``latency`` and intra-host ops are
    told apart by their id."""
    if op.startswith(("latency:", "join:")):  # a pipelined ring's join: an instant, with them
        return LATENCY
    if op.startswith(("parse:", "comm:")):  # comm: a worker's comm thread's work on a transfer
        return PARSE
    if op.startswith((f"{INTRA_REDUCE}:", f"{INTRA_BROADCAST}:")):
        return INTRA
    if op.startswith(("gate:", "done:")):
        return WAIT
    if op.startswith("ready:"):
        return READY
    if op.startswith(("bucket-copy:", "compress:", "decompress:")):
        return COPY
    if op in OVERHEAD_IDS:
        return OVERHEAD
    return kind


def chrome_trace(
    spans: Iterable[TimelineSpan], metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Build a Chrome Trace Event JSON object from timeline spans.

    Processes get pids 1, 2, ... in order of first appearance (Perfetto treats pid 0 as the
    kernel's idle process); threads are resources (known resources keep a fixed tid >= 1 so
    rows line up across workers). Spans that would overlap
    partially on one thread go to an extra thread ``NAME #2`` (then ``#3``...). Returns the
    JSON-ready dict.
    """
    pids: dict[str, int] = {}
    groups: dict[tuple[int, str], list[TimelineSpan]] = {}
    for span in spans:
        pid = pids.setdefault(span.process, len(pids) + 1)  # pid 0 is special in Perfetto
        groups.setdefault((pid, span.resource), []).append(span)
    events: list[dict[str, Any]] = []
    extra_tid = 100
    for (pid, resource), members in groups.items():
        for lane, lane_spans in enumerate(lanes(members)):
            label = resource if lane == 0 else f"{resource} #{lane + 1}"
            if lane == 0 and resource in RESOURCE_TIDS:
                tid = RESOURCE_TIDS[resource]
            else:
                tid = extra_tid
                extra_tid += 1
            events.append(_name_event("thread_name", pid, tid, label))
            events.append(_sort_event("thread_sort_index", pid, tid, tid))
            events.extend(_complete_event(span, pid, tid) for span in lane_spans)
    for process, pid in pids.items():
        events.append(_name_event("process_name", pid, 0, process))
        events.append(_sort_event("process_sort_index", pid, 0, pid))
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": dict(metadata or {})}


def _us(seconds: float) -> float:
    return round(seconds * 1e6, US_DECIMALS)


def lanes(
    spans: Sequence[TimelineSpan], us: Callable[[float], float] | None = None
) -> list[list[TimelineSpan]]:
    """Spans split into lanes, each sorted by start, where no two spans overlap.

    Greedy interval partitioning on the times the events will carry (``us``: seconds to the
    exported microseconds; default this format's, rounded to the nanosecond): a span goes to the
    first lane whose last span has ended by its start.
    """
    to_us = us or _us
    ordered = sorted(spans, key=lambda s: (to_us(s.start_s), -to_us(s.end_s)))
    out: list[list[TimelineSpan]] = []
    ends: list[float] = []
    for span in ordered:
        start = to_us(span.start_s)
        for i, end in enumerate(ends):
            if end <= start:
                out[i].append(span)
                ends[i] = to_us(span.end_s)
                break
        else:
            out.append([span])
            ends.append(to_us(span.end_s))
    return out


def _complete_event(span: TimelineSpan, pid: int, tid: int) -> dict[str, Any]:
    ts = _us(span.start_s)
    return {
        "name": span.name,
        "cat": span.category,
        "ph": "X",
        "ts": ts,
        "dur": max(0.0, round(_us(span.end_s) - ts, US_DECIMALS)),
        "pid": pid,
        "tid": tid,
        "args": dict(span.args),
    }


def _name_event(kind: str, pid: int, tid: int, label: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}}


def _sort_event(kind: str, pid: int, tid: int, index: int) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": index}}


def profiled_step_spans(trace: Trace, step: int = 0) -> list[TimelineSpan]:
    """The measured timeline of profiled step ``step`` (ops with a recorded start and duration).

    Communication ops of a solo profile have no measured time and are left out; the simulator's
    one-worker timeline shows them at a given bandwidth.
    """
    if not 0 <= step < trace.n_steps:
        raise TraceError(
            f"{trace.source}: step {step} does not exist; "
            f"the trace holds steps 0..{trace.n_steps - 1}"
        )
    profile = trace.steps[step]
    if profile.start_s is None:
        raise TraceError(
            f"{trace.source}: steps[{step}] has no 'start_s'; this trace records no op start times"
        )
    spans = []
    for op, start, duration in zip(trace.ops, profile.start_s, profile.duration_s, strict=True):
        if start is None or duration is None:
            continue
        args: dict[str, Any] = {"worker": 0, "step": step, "layer": op.layer}
        if op.nbytes is not None:
            args["bytes"] = op.nbytes
        process = "server 0" if op.resource is Resource.PS else "worker 0"
        spans.append(
            TimelineSpan(process, op.resource.value, op.id, op.kind.value, start, duration, args)
        )
    return spans


def simulated_spans(
    timeline: Timeline,
    *,
    workers: Sequence[int] | None = None,
    steps: tuple[int, int] | None = None,
    time_s: tuple[float, float] | None = None,
    trace: Trace | Sequence[Trace] | None = None,
    arch: str = "ps",
) -> list[TimelineSpan]:
    """The spans of a simulated timeline (``SimulationResult.timeline``), optionally a part of it.

    Parameters
    ----------
    timeline : a :class:`simcore.sim.results.Timeline`.
    workers : keep these workers only (default all).
    steps : ``(first, last)``, keep the ops of steps first..last (inclusive).
    time_s : ``(t0, t1)`` in seconds, keep the ops that overlap that interval.
    trace : the simulated trace(s); gives each span its ``layer``.
    arch : ``"ps"``, ``"allreduce"`` or ``"ddp"`` (no servers: updates stay with the worker;
        DDP's waits for the other ranks and its buckets' readiness go on the AllReduce's row).

    Returns
    -------
    The spans in record order; where each op goes is described in the module docstring.
    """
    keep = np.ones(len(timeline), dtype=bool)
    if workers is not None:
        keep &= np.isin(timeline.worker, np.asarray(list(workers), dtype=np.int64))
    if steps is not None:
        first, last = steps
        if last < first:
            raise ConfigError(f"steps: ({first}, {last}) is empty; expected first <= last")
        keep &= (timeline.step >= first) & (timeline.step <= last)
    if time_s is not None:
        keep &= (timeline.end_s > time_s[0]) & (timeline.start_s < time_s[1])
    layers = _layers(trace)
    slot_of = _transfer_slots(timeline) if LATENCY in timeline.slot_names else {}
    spans = []
    for i in np.flatnonzero(keep):
        op = int(timeline.op[i])
        worker = int(timeline.worker[i])
        op_id = timeline.op_ids[op]
        slot = timeline.slot_names[int(timeline.slot[i])]
        kind = display_kind(op_id, timeline.op_kinds[op])
        if arch in COLLECTIVE_ARCHS and kind == "push":
            kind = ALLREDUCE  # the ring's transfers: an AllReduce, not a push to a server
        args: dict[str, Any] = {
            "worker": worker,
            "step": int(timeline.step[i]),
            "bytes": float(timeline.nbytes[i]),
        }
        layer = layers.get(_base_op(op_id))
        if layer is not None:
            args["layer"] = layer
        if kind == LATENCY:
            link = slot_of.get((worker, _base_op(op_id)), "")
            # DDP's instant after its last bucket belongs to no transfer: with the AllReduces.
            collective = arch in COLLECTIVE_ARCHS and link in ("uplink", "")
            args["link"] = ALLREDUCE if collective else link
        process, thread = _place(worker, slot, arch)
        if kind in (WAIT, READY):  # a bucket's wait and readiness, beside its AllReduce
            thread = ALLREDUCE
        start = float(timeline.start_s[i])
        spans.append(
            TimelineSpan(
                process, thread, op_id, kind, start, float(timeline.end_s[i]) - start, args
            )
        )
    return spans


def server_of(resource: str) -> int:
    """The server index of a simulator slot label: ``ps`` -> 0, ``downlink[1]`` -> 1."""
    if resource.endswith("]") and "[" in resource:
        return int(resource[resource.index("[") + 1 : -1])
    return 0


def resource_base(resource: str) -> str:
    """A slot label without its server suffix: ``downlink[1]`` -> ``downlink``."""
    return resource.split("[", 1)[0]


def _place(worker: int, slot: str, arch: str) -> tuple[str, str]:
    """(process, thread) of an op on ``slot`` of ``worker``."""
    if resource_base(slot) == Resource.PS.value:
        if arch in COLLECTIVE_ARCHS:
            return f"worker {worker}", "update"
        return f"server {server_of(slot)}", f"worker {worker}"
    if arch in COLLECTIVE_ARCHS and slot in (Resource.UPLINK.value, RENDEZVOUS):
        return f"worker {worker}", ALLREDUCE
    return f"worker {worker}", slot


def _base_op(op_id: str) -> str:
    """The op a parsing, latency, comm-thread or join op, or a pipelined ring's message,
    belongs to: ``latency:pull:fc`` -> ``pull:fc``, ``parse:push:fc#3`` -> ``push:fc``."""
    for prefix in ("latency:", "parse:", "comm:", "join:"):
        if op_id.startswith(prefix):
            op_id = op_id[len(prefix) :]
            break
    head, sep, tail = op_id.rpartition("#")
    return head if sep and tail.isdigit() else op_id


def _layers(trace: Trace | Sequence[Trace] | None) -> dict[str, str]:
    if trace is None:
        return {}
    traces = [trace] if isinstance(trace, Trace) else list(trace)
    return {op.id: op.layer for t in traces for op in t.ops if op.layer is not None}


def _transfer_slots(timeline: Timeline) -> dict[tuple[int, str], str]:
    """(worker, transfer op id) -> the connection it used, to place latency after it."""
    out: dict[tuple[int, str], str] = {}
    network = [
        i
        for i, name in enumerate(timeline.slot_names)
        if resource_base(name) in (Resource.DOWNLINK.value, Resource.UPLINK.value)
    ]
    mask = np.isin(timeline.slot, np.asarray(network, dtype=np.int64))
    pairs = np.unique(
        np.stack([timeline.worker[mask], timeline.op[mask], timeline.slot[mask]], axis=1), axis=0
    )
    for worker, op, slot in pairs:
        out[(int(worker), timeline.op_ids[int(op)])] = timeline.slot_names[int(slot)]
    return out
