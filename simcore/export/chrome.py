"""Chrome Trace Event format (opens in Perfetto UI and chrome://tracing).

Format reference: the "Trace Event Format" document of the Chromium project. We emit complete
events (``ph: "X"``) with microsecond ``ts``/``dur``, one process per worker or server and one
thread per resource, named with metadata events (``ph: "M"``) so the viewer shows readable labels.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from simcore.errors import TraceError
from simcore.trace.model import Resource, Trace

# Thread ids per resource, in the order a person reads a step: pull, compute, push, server.
RESOURCE_TIDS: dict[str, int] = {
    Resource.DOWNLINK.value: 1,
    Resource.WORKER.value: 2,
    Resource.UPLINK.value: 3,
    Resource.PS.value: 4,
}


@dataclass(frozen=True, slots=True)
class TimelineSpan:
    """One interval of a timeline: who did what, where, when (seconds)."""

    process: str  # "worker 0", "server 0"
    resource: str  # "downlink", "worker", "uplink", "ps" (or any label)
    name: str  # op id
    category: str  # op kind
    start_s: float
    duration_s: float
    args: dict[str, Any] = field(default_factory=dict)


def chrome_trace(
    spans: Iterable[TimelineSpan], metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Build a Chrome Trace Event JSON object from timeline spans.

    Processes get pids 0, 1, ... in order of first appearance; threads are resources (known
    resources keep a fixed tid so rows line up across workers). Returns the JSON-ready dict.
    """
    pids: dict[str, int] = {}
    tids: dict[tuple[int, str], int] = {}
    events: list[dict[str, Any]] = []
    for span in spans:
        pid = pids.setdefault(span.process, len(pids))
        key = (pid, span.resource)
        if key not in tids:
            tids[key] = RESOURCE_TIDS.get(span.resource, 100 + len(tids))
            events.append(_name_event("thread_name", pid, tids[key], span.resource))
        events.append(
            {
                "name": span.name,
                "cat": span.category,
                "ph": "X",
                "ts": span.start_s * 1e6,
                "dur": span.duration_s * 1e6,
                "pid": pid,
                "tid": tids[key],
                "args": dict(span.args),
            }
        )
    for process, pid in pids.items():
        events.append(_name_event("process_name", pid, 0, process))
        events.append(
            {
                "name": "process_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"sort_index": pid},
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": dict(metadata or {})}


def _name_event(kind: str, pid: int, tid: int, label: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": label}}


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
        args: dict[str, Any] = {"layer": op.layer}
        if op.nbytes is not None:
            args["bytes"] = op.nbytes
        process = "server 0" if op.resource is Resource.PS else "worker 0"
        spans.append(
            TimelineSpan(process, op.resource.value, op.id, op.kind.value, start, duration, args)
        )
    return spans
