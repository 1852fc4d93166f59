"""Kineto-style per-rank traces of a simulated run, for Meta's Holistic Trace Analysis (HTA).

:func:`hta_traces` turns a :class:`~simcore.sim.results.SimulationResult`'s timeline into one
JSON document per simulated worker, in the shape ``torch.profiler``'s ``export_chrome_trace``
writes (Kineto); :func:`write_hta_dir` writes them as ``rank-<r>.json`` into a folder that
``hta.trace_analysis.TraceAnalysis(trace_dir=...)`` loads. The documents are simulations, not
measurements: ``otherData.sgdsim`` says so and holds the configuration (arch, mode, workers,
bandwidth).

What a rank's document holds (placement from :func:`simcore.export.chrome.simulated_spans`):

- ``distributedInfo`` ``{"backend": "nccl", "rank": r, "world_size": W}``. Communication is
  written as NCCL kernels because HTA counts a kernel as communication only by its name
  (``^nccl.*Kernel``, ``hta/utils/utils.py``); the simulator models no backend library.
- One simulated device (pid 1, ``deviceProperties`` ``[{"id": 0, "name": ...}]``; no invented
  hardware numbers). Its streams: computation (forward, backward, local updates, parsing,
  overhead, DDP casts) as ``cat: "kernel"`` events on stream 7 (torch's default stream) and on
  one more stream per further simulator thread (``update``, ``comm``); DDP's bucket copies as
  ``Memcpy DtoD`` (``cat: "gpu_memcpy"``, what ``copy_`` into a bucket issues); communication
  on streams of their own, one per connection: ring/DDP AllReduce
  ``ncclDevKernel_AllReduce_Sum_<f32|f16>_<RING|TREE>_LL``, parameter-server pulls and pushes
  ``ncclDevKernel_SendRecv`` (``Collective name`` ``recv``/``send``), intra-host reduce and
  broadcast. Communication kernels carry torch's ``record_param_comms`` args (``Collective
  name``, ``In msg nelems``, ``Out msg nelems``, ``Group size``, ``dtype``, ``Process Group
  Name``/``Ranks``) and every kernel ``device``, ``stream``, ``correlation``, ``External id``
  and the simulator's own ``sgdsim op``, ``step`` and ``layer``. Ops that would overlap on one
  stream go to an extra stream (a CUDA stream runs one kernel at a time).
- On the CPU thread (pid 2): ``ProfilerStep#N`` (``cat: "user_annotation"``) over each exported
  step of the worker, and one ``cuda_runtime`` launch (``cudaLaunchKernel`` or
  ``cudaMemcpyAsync``, zero duration, same ``correlation``) per kernel at the start of its step.
  HTA drops every kernel without a launch, and gives a kernel the iteration of its launch. A
  launch at the step's start means: the host enqueued the whole step when the step began, so
  HTA's idle-time breakdown calls the gaps a kernel waited for another stream (a pull, an
  AllReduce) ``other`` and the gaps across a step boundary (the Sync-SGD barrier, the wait for
  the next step) ``host_wait``.
- Timestamps in integer microseconds of simulated time (0 = the run's start, one clock for all
  ranks). Integers, because HTA rounds float timestamps (start up, end down) to whole
  microseconds anyway, which would shorten every kernel by up to 2 us; here each start and end
  is rounded to the nearest microsecond, so kernels that follow each other still touch.

Left out, and why:

- the parameter servers' work (updates, parsing of pushed gradients): a server is no rank of
  the job and has no GPU stream in it; the worker sees it only as the wait between its push
  and its next pull (idle time on its streams). ``otherData.sgdsim.servers`` says how many;
- pure latency after a transfer, DDP's waits for the other ranks (``gate:``/``done:``) and its
  buckets' readiness instants: they occupy no resource, so they are no kernels; they show as
  gaps. (A real NCCL kernel would spin through the wait, so a measured trace books it as
  communication; the simulator's communication time is the link's transfer time only.)
- with ``devices_per_host > 1`` each rank is a host (the simulator's worker), whose one
  device talks to the network; ``world_size`` is the number of workers.

A ring AllReduce simulated as its messages (``ring_segment_bytes``) is one kernel per message.
HTA leaves out the last ``ProfilerStep`` of each rank unless it is loaded with
``TraceAnalysis(..., include_last_profiler_step=True)`` (real traces often end mid-step).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcore.errors import ConfigError
from simcore.export.chrome import (
    ALLREDUCE,
    INTRA,
    LATENCY,
    READY,
    WAIT,
    TimelineSpan,
    simulated_spans,
)
from simcore.export.chrome import lanes as interval_lanes
from simcore.files import atomic_output, check_rank_folder
from simcore.sim.results import SimulationResult, StepRecord
from simcore.trace.model import Trace

SCHEMA_VERSION = 1  # Kineto's trace schema version, as torch.profiler writes it
GPU_PID = 1  # pid 0 is the kernel's idle task to Perfetto, which also opens these files
CPU_PID = 2
CPU_TID = 1
DEVICE = 0  # each rank's one simulated device
COMPUTE_STREAM = 7  # torch's default stream, as Kineto numbers it
# The first correlation id. HTA stores the row index of a kernel's launch in a column made from
# the correlation column, which it first downcasts to the smallest integer type its values fit
# (hta/common/trace.py, transform_correlation_to_index); ids above 32767 keep that int32, so a
# trace of more than 127 (int8) or 32767 (int16) events loads. Real Kineto ids are that large.
FIRST_CORRELATION = 1 << 20
GPU_NAME = "sgdsim simulated worker"
PROFILER_STEP = "ProfilerStep#{}"
COMM_CATEGORIES = frozenset({"pull", "push", ALLREDUCE, INTRA})
NO_KERNEL_CATEGORIES = frozenset({LATENCY, WAIT, READY})
BUCKET_COPY = "bucket-copy:"
MEMCPY_NAME = "Memcpy DtoD (Device -> Device)"
# HTA reads a name containing these as memory or synchronization work, and one starting with
# "nccl" or "dma" as communication or memory, not computation (hta/utils/utils.py).
HTA_RESERVED_WORDS = ("Memcpy", "Memset", "Sync")
HTA_RESERVED_PREFIXES = ("nccl", "dma")
TRACE_SUFFIXES = (".json", ".gz")  # what HTA reads from a folder, every one as a rank


@dataclass(frozen=True, slots=True)
class _Kernel:
    """A span as a device event: its name, category, stream and args."""

    span: TimelineSpan
    name: str
    cat: str  # "kernel" or "gpu_memcpy"
    stream: int
    args: dict[str, Any]


def rank_file_name(rank: int) -> str:
    """The file name of rank ``rank``'s trace in an HTA folder."""
    return f"rank-{rank}.json"


def hta_traces(
    result: SimulationResult,
    trace: Trace | Sequence[Trace] | None = None,
    *,
    steps: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    """One Kineto-style trace document per simulated worker, rank order (module docstring).

    Parameters
    ----------
    result : a simulation run with ``timeline=True`` (with several replications, the timeline
        is that of the one replication the result keeps).
    trace : the simulated trace(s); gives each kernel its ``layer``.
    steps : ``(first, last)``, export steps first..last (inclusive); None: every recorded step.

    Returns
    -------
    JSON-ready dicts; ``doc["distributedInfo"]["rank"]`` is the worker index.

    Raises
    ------
    ConfigError
        The result has no timeline, or ``steps`` is empty or holds no recorded step.
    """
    timeline = result.timeline
    if timeline is None:
        raise ConfigError("the simulation recorded no timeline; simulate with timeline=True")
    recorded = sorted({record.step for record in timeline.steps})
    spans = simulated_spans(timeline, steps=steps, trace=trace, arch=result.config.arch)
    if steps is not None and not any(steps[0] <= s <= steps[1] for s in recorded):
        raise ConfigError(
            f"steps: ({steps[0]}, {steps[1]}) holds no recorded step; the timeline holds "
            f"steps {recorded[0]}..{recorded[-1]}"
        )
    config = result.config
    first, last = steps if steps is not None else (recorded[0], recorded[-1])
    return [
        _rank_doc(
            result,
            rank,
            [s for s in spans if s.args["worker"] == rank],
            [r for r in timeline.steps if r.worker == rank and first <= r.step <= last],
        )
        for rank in range(config.workers)
    ]


def write_hta_dir(
    directory: str | os.PathLike[str],
    docs: Sequence[dict[str, Any]],
    *,
    overwrite: bool = False,
) -> list[Path]:
    """Write ``docs`` (from :func:`hta_traces`) as ``rank-<r>.json`` into ``directory``.

    The folder is created if missing. Every file is checked before any is written, and each is
    written atomically. HTA reads every ``.json`` and ``.gz`` file of a folder as one rank, so
    a folder holding other such files is refused.

    Returns
    -------
    The paths written, in rank order.

    Raises
    ------
    ConfigError
        One line naming the path: the folder is a file, a target file exists and ``overwrite``
        is false, or another trace file is in the folder.
    """
    folder = Path(directory)
    ranks = [int(doc["distributedInfo"]["rank"]) for doc in docs]
    targets = _check_folder(folder, ranks, overwrite)
    for target, doc in zip(targets, docs, strict=True):
        with atomic_output(target, overwrite=overwrite) as tmp, tmp.open("w") as handle:
            # json's default ": " separator: HTA finds a file's rank with the regex
            # '"rank":\s+(\d+)' (hta/common/trace_file.py), and takes rank 0 without it.
            json.dump(doc, handle, allow_nan=False)
    return targets


def check_hta_dir(directory: str | os.PathLike[str], workers: int, *, overwrite: bool) -> None:
    """What :func:`write_hta_dir` would refuse for ``workers`` ranks, checked before a run."""
    _check_folder(Path(directory), list(range(workers)), overwrite)


def _check_folder(folder: Path, ranks: Sequence[int], overwrite: bool) -> list[Path]:
    return check_rank_folder(
        folder,
        [rank_file_name(rank) for rank in ranks],
        overwrite=overwrite,
        is_rank_file=lambda name: name.endswith(TRACE_SUFFIXES),
        stranger="HTA would read it as one more rank; give an empty folder or remove it",
    )


def _rank_doc(
    result: SimulationResult,
    rank: int,
    spans: Sequence[TimelineSpan],
    step_records: Sequence[StepRecord],
) -> dict[str, Any]:
    kernels = _kernels(result, spans)
    step_start = {r.step: _us(r.start_s) for r in step_records}
    events = _metadata_events(kernels)
    events.extend(_profiler_step(record) for record in step_records)
    for correlation, kernel in enumerate(kernels, start=FIRST_CORRELATION):
        launch_us = step_start[kernel.span.args["step"]]
        events.extend(_launch_and_kernel(kernel, correlation, launch_us))
    # distributedInfo before the events: HTA takes the first '"rank": N' of the file.
    return {
        "schemaVersion": SCHEMA_VERSION,
        "distributedInfo": {
            "backend": "nccl",
            "rank": rank,
            "world_size": result.config.workers,
        },
        "deviceProperties": [{"id": DEVICE, "name": GPU_NAME}],
        "displayTimeUnit": "ms",
        "otherData": {"sgdsim": _simulation_info(result, step_records)},
        "traceEvents": events,
    }


def _simulation_info(result: SimulationResult, records: Sequence[StepRecord]) -> dict[str, Any]:
    config = result.config
    steps = sorted({r.step for r in records})
    return {
        "simulated": True,
        "note": "simulated timeline, not a measurement; times in microseconds of simulated time",
        "arch": config.arch,
        "mode": config.mode,
        "workers": config.workers,
        "servers": config.servers if config.arch == "ps" else 0,
        "bandwidth_bps": config.bandwidth_bps,
        "latency_s": config.latency_s,
        "collective": config.collective,
        "steps": [steps[0], steps[-1]] if steps else [],
        "left_out": "parameter-server work, latency, DDP waits and readiness instants",
    }


def _kernels(result: SimulationResult, spans: Sequence[TimelineSpan]) -> list[_Kernel]:
    """The spans that are device work, each on its stream, in start order."""
    device = [s for s in spans if _is_device_work(s)]
    streams = _streams(device)
    kernels = [_kernel(result, span, streams[id(span)]) for span in device]
    return sorted(kernels, key=lambda k: (_us(k.span.start_s), k.stream))


def _is_device_work(span: TimelineSpan) -> bool:
    return span.process.startswith("worker ") and span.category not in NO_KERNEL_CATEGORIES


def _streams(spans: Sequence[TimelineSpan]) -> dict[int, int]:
    """id(span) -> stream: one stream per simulator thread and lane of non-overlapping spans;
    the worker's computation thread first (stream 7), then the others by name."""
    lanes: dict[tuple[str, int], list[TimelineSpan]] = {}
    for resource in sorted({s.resource for s in spans}, key=lambda r: (r != "worker", r)):
        on_thread = [s for s in spans if s.resource == resource]
        for lane, members in enumerate(interval_lanes(on_thread, _us)):
            lanes[(resource, lane)] = members
    return {
        id(span): COMPUTE_STREAM + index
        for index, members in enumerate(lanes.values())
        for span in members
    }


def _kernel(result: SimulationResult, span: TimelineSpan, stream: int) -> _Kernel:
    args: dict[str, Any] = {"device": DEVICE, "stream": stream, "sgdsim op": span.name}
    args["step"] = span.args["step"]
    if "layer" in span.args:
        args["layer"] = span.args["layer"]
    if span.category in COMM_CATEGORIES:
        name, comm_args = _communication(result, span)
        return _Kernel(span, name, "kernel", stream, {**args, **comm_args})
    if span.name.startswith(BUCKET_COPY):  # the timeline holds no size for copies
        return _Kernel(span, MEMCPY_NAME, "gpu_memcpy", stream, args)
    return _Kernel(span, _computation_name(span.name), "kernel", stream, args)


def _computation_name(op_id: str) -> str:
    """The op id, changed so that HTA cannot classify it as anything but computation: its
    reserved words lower-cased, a reserved prefix upper-cased."""
    for word in HTA_RESERVED_WORDS:
        op_id = op_id.replace(word, word.lower())
    if op_id.startswith(HTA_RESERVED_PREFIXES):
        op_id = op_id[:4].upper() + op_id[4:]
    return op_id


def _communication(result: SimulationResult, span: TimelineSpan) -> tuple[str, dict[str, Any]]:
    """The NCCL kernel name and torch's record_param_comms args of a transfer."""
    config = result.config
    half = config.arch == "ddp" and config.ddp_compression == "fp16"
    dtype, itemsize, short = ("Half", 2, "f16") if half else ("Float", 4, "f32")
    if span.category == ALLREDUCE:
        algo = "TREE" if config.arch == "ddp" and config.collective == "tree" else "RING"
        name, collective = f"ncclDevKernel_AllReduce_Sum_{short}_{algo}_LL", "allreduce"
        group = list(range(config.workers))
    elif span.category == INTRA:
        if span.name.startswith("intra-reduce:"):
            name, collective = f"ncclDevKernel_Reduce_Sum_{short}_RING_LL", "reduce"
        else:
            name, collective = "ncclDevKernel_Broadcast_RING_LL", "broadcast"
        group = list(range(config.devices_per_host))
    else:  # a parameter server's pull or push: a point-to-point pair, worker and server
        name, collective = "ncclDevKernel_SendRecv", "recv" if span.category == "pull" else "send"
        group = [0, 1]
    args: dict[str, Any] = {
        "Collective name": collective,
        "Group size": len(group),
        "dtype": dtype,
        "Process Group Name": "intra-host" if span.category == INTRA else "0",
        "Process Group Ranks": str(group),
    }
    if _bytes(span) > 0:  # the simulator records no size for intra-host ops
        nelems = round(_bytes(span) / itemsize)
        args.update({"In msg nelems": nelems, "Out msg nelems": nelems, "bytes": _bytes(span)})
    return name, args


def _bytes(span: TimelineSpan) -> int:
    return round(float(span.args.get("bytes", 0.0)))


def _launch_and_kernel(kernel: _Kernel, correlation: int, launch_us: int) -> list[dict[str, Any]]:
    ts = _us(kernel.span.start_s)
    launch_name = "cudaMemcpyAsync" if kernel.cat == "gpu_memcpy" else "cudaLaunchKernel"
    ids = {"correlation": correlation, "External id": correlation}
    launch = {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": launch_name,
        "pid": CPU_PID,
        "tid": CPU_TID,
        "ts": min(launch_us, ts),
        "dur": 0,
        "args": dict(ids),
    }
    device_event = {
        "ph": "X",
        "cat": kernel.cat,
        "name": kernel.name,
        "pid": GPU_PID,
        "tid": kernel.stream,
        "ts": ts,
        "dur": _us(kernel.span.end_s) - ts,
        "args": {**kernel.args, **ids},
    }
    return [launch, device_event]


def _profiler_step(record: StepRecord) -> dict[str, Any]:
    ts = _us(record.start_s)
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": PROFILER_STEP.format(record.step),
        "pid": CPU_PID,
        "tid": CPU_TID,
        "ts": ts,
        "dur": _us(record.end_s) - ts,
        "args": {},
    }


def _metadata_events(kernels: Iterable[_Kernel]) -> list[dict[str, Any]]:
    """Process and thread names, so that Perfetto shows readable rows."""
    streams: dict[int, str] = {}
    for kernel in kernels:
        streams.setdefault(kernel.stream, kernel.span.resource)
    events = [
        _name_event("process_name", GPU_PID, 0, f"GPU {DEVICE} (simulated)"),
        _name_event("process_name", CPU_PID, 0, "host (simulated)"),
        _name_event("thread_name", CPU_PID, CPU_TID, "main thread"),
    ]
    for stream, resource in sorted(streams.items()):
        events.append(_name_event("thread_name", GPU_PID, stream, f"stream {stream} {resource}"))
    return events


def _name_event(kind: str, pid: int, tid: int, label: str) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "ts": 0, "args": {"name": label}}


def _us(seconds: float) -> int:
    return round(seconds * 1e6)
