"""A real run as a Chrome trace (Perfetto), laid out like the simulator's timelines.

Put next to ``sgdsim simulate --timeline``'s export, the measured and the simulated steps can be
compared thread by thread: process ``worker w`` has threads ``downlink`` (pulls), ``worker``
(forward and backward, and a ring worker's local updates, which run on its main thread as in
the simulator), ``uplink`` (pushes) and ``allreduce`` (the AllReduce of each layer); process
``server s`` has one thread ``worker w`` per worker it serves (its updates; ps-sync's averaged
updates are on thread ``all workers``). Times start at the
run's first step. A backward span is placed at the layer's first autograd node and lasts the sum
of its nodes, so backward spans can overlap; the export then spreads them over extra threads.
"""

from __future__ import annotations

import json
import os

from profilers.distributed.records import RunResult, Span
from simcore.export.chrome import TimelineSpan, chrome_trace
from simcore.files import atomic_output

__all__ = ["run_timeline_spans", "save_run_chrome"]

_WORKER_THREAD = {
    "pull": "downlink",
    "forward": "worker",
    "backward": "worker",
    "push": "uplink",
    "allreduce": "allreduce",
    "update": "worker",  # a worker's own update: ring AllReduce's local SGD step
}


def run_timeline_spans(result: RunResult) -> list[TimelineSpan]:
    """Every span of ``result`` as a timeline span, seconds from the first step's start."""
    t0 = min((s.start_s for s in result.steps), default=0.0)
    servers = result.config.servers
    return [_span(span, t0, servers) for span in result.spans]


def _span(span: Span, t0: float, servers: int) -> TimelineSpan:
    if span.rank < servers:  # a server's update of one worker's (or all workers') gradients
        process = f"server {span.rank}"
        thread = "all workers" if span.worker < 0 else f"worker {span.worker}"
    else:
        process, thread = f"worker {span.worker}", _WORKER_THREAD[span.kind]
    return TimelineSpan(
        process=process,
        resource=thread,
        name=f"{span.kind}:{span.layer}",
        category=span.kind,
        start_s=span.start_s - t0,
        duration_s=span.duration_s,
        args={"worker": span.worker, "step": span.step, "layer": span.layer},
    )


def save_run_chrome(
    result: RunResult, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """Write the run's Chrome trace atomically (open it in https://ui.perfetto.dev)."""
    config = result.config
    metadata = {
        "source": "sgdsim profilers.distributed (measured)",
        "model": result.model_name,
        "architecture": config.architecture.value,
        "overlap": config.overlap.value,
        "workers": config.workers,
        "servers": config.servers,
        "batch_size": config.batch_size,
    }
    doc = chrome_trace(run_timeline_spans(result), metadata)
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8")
