"""Kineto-style per-rank export (simcore.export.hta), read back with Meta's HTA.

The pure tests check the documents themselves and run without HTA. The HTA tests (skipped
without the ``hta`` extra) load exported folders with ``TraceAnalysis`` and compare its numbers
with the simulator's own accounting, computed here from the timeline: HTA's temporal breakdown
(hta/analyzers/breakdown_analysis.py) is, per rank, the union of all kernels (kernel time = last
end - first start, idle = kernel time - union), compute time = the union of the computation
kernels; its comm/comp overlap (hta/analyzers/communication_analysis.py) is
|union(comm) & union(comp)| / |union(comm)|. Times are exported in whole microseconds, so each
start and end moves by at most 0.5 us: the tolerances allow 1 us per span.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from simcore.errors import ConfigError
from simcore.export.chrome import TimelineSpan, simulated_spans
from simcore.export.hta import hta_traces, rank_file_name, write_hta_dir
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.io import load_trace
from simcore.trace.model import Trace

from trace_support import tiny_trace

B = 1e9
COMM = {"pull", "push", "allreduce", "intra-host"}
COMPUTE = {"forward", "backward", "update", "parse", "overhead", "copy", "other"}
Interval = tuple[float, float]  # microseconds


def tiny() -> Trace:
    return tiny_trace()


def run(trace: Trace, **kwargs: Any) -> SimulationResult:
    config = dict(
        bandwidth_bps=B, steps=5, warmup_steps=1, batches=3, seed=1, timeline=True, replications=1
    )
    return simulate(trace, SimulationConfig(**{**config, **kwargs}))


def kernels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]


def cpu_events(doc: dict[str, Any], cat: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("cat") == cat]


# --- the documents (no HTA needed) -------------------------------------------------------------


def test_one_document_per_rank_with_the_kineto_fields() -> None:
    trace = tiny()
    result = run(trace, workers=3, arch="ps", mode="sync")
    docs = hta_traces(result, trace)
    assert [d["distributedInfo"]["rank"] for d in docs] == [0, 1, 2]
    for doc in docs:
        json.dumps(doc, allow_nan=False)
        assert list(doc)[:2] == ["schemaVersion", "distributedInfo"]  # HTA's rank regex
        assert doc["distributedInfo"] == {
            "backend": "nccl",
            "rank": doc["distributedInfo"]["rank"],
            "world_size": 3,
        }
        assert doc["deviceProperties"][0]["id"] == 0
        info = doc["otherData"]["sgdsim"]
        assert info["simulated"] and (info["arch"], info["mode"], info["workers"]) == (
            "ps",
            "sync",
            3,
        )
        assert info["bandwidth_bps"] == B and info["steps"] == [0, 4]
        steps = cpu_events(doc, "user_annotation")
        assert [e["name"] for e in steps] == [f"ProfilerStep#{n}" for n in range(5)]
        for event in doc["traceEvents"]:
            assert isinstance(event["ts"], int)
            assert event["ph"] == "M" or (isinstance(event["dur"], int) and event["dur"] >= 0)


def test_every_kernel_has_its_launch_inside_its_step() -> None:
    trace = load_trace("cnn-b32")
    result = run(trace, workers=2, arch="ddp", mode="sync", ddp_compression="fp16")
    for doc in hta_traces(result, trace):
        launches = {e["args"]["correlation"]: e for e in cpu_events(doc, "cuda_runtime")}
        steps = {int(e["name"].split("#")[1]): e for e in cpu_events(doc, "user_annotation")}
        device = kernels(doc)
        assert len(launches) == len(device)
        for kernel in device:
            args = kernel["args"]
            launch = launches[args["correlation"]]
            assert launch["args"]["External id"] == args["External id"]
            assert args["correlation"] > 2**15  # HTA needs the column int32 (FIRST_CORRELATION)
            assert launch["ts"] <= kernel["ts"]
            step = steps[args["step"]]
            assert step["ts"] <= launch["ts"] < step["ts"] + step["dur"]
            assert kernel["tid"] == args["stream"] and args["device"] == 0


def test_streams_run_one_kernel_at_a_time() -> None:
    trace = load_trace("cnn-b32")
    # latency and two servers make transfers of one direction overlap: extra streams
    result = run(trace, workers=2, arch="ps", mode="async", servers=2, latency_s=2e-4)
    for doc in hta_traces(result, trace):
        by_stream: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for kernel in kernels(doc):
            by_stream[kernel["tid"]].append((kernel["ts"], kernel["ts"] + kernel["dur"]))
        assert len(by_stream) >= 5  # worker, two downlinks, two uplinks
        for intervals in by_stream.values():
            intervals.sort()
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(intervals))


def test_communication_kernels_are_named_and_sized_as_torch_records_them() -> None:
    trace = tiny()
    ps = hta_traces(run(trace, workers=2, arch="ps", mode="sync"), trace)[0]
    ring = hta_traces(run(trace, workers=2, arch="allreduce", mode="sync"), trace)[0]
    tree = hta_traces(
        run(trace, workers=4, arch="ddp", mode="sync", collective="tree", ddp_compression="fp16"),
        trace,
    )[0]
    sendrecv = [k for k in kernels(ps) if k["name"] == "ncclDevKernel_SendRecv"]
    assert {k["args"]["Collective name"] for k in sendrecv} == {"send", "recv"}
    assert {k["args"]["In msg nelems"] for k in sendrecv} == {100_000, 50_000}  # float32 layers
    ring_names = {k["name"] for k in kernels(ring) if k["name"].startswith("nccl")}
    assert ring_names == {"ncclDevKernel_AllReduce_Sum_f32_RING_LL"}
    allreduce = [k for k in kernels(tree) if k["name"].startswith("nccl")]
    assert {k["name"] for k in allreduce} == {"ncclDevKernel_AllReduce_Sum_f16_TREE_LL"}
    for k in allreduce:
        assert k["args"]["dtype"] == "Half" and k["args"]["Group size"] == 4
        assert k["args"]["In msg nelems"] * 2 == k["args"]["bytes"]


def test_servers_latency_and_waits_are_left_out() -> None:
    trace = tiny()
    for arch in ("ps", "ddp"):
        result = run(trace, workers=2, arch=arch, mode="sync", latency_s=1e-4)
        assert result.timeline is not None
        spans = simulated_spans(result.timeline, arch=arch)
        kept = [s for s in spans if s.process.startswith("worker") and s.category in COMM | COMPUTE]
        docs = hta_traces(result, trace)
        assert sum(len(kernels(d)) for d in docs) == len(kept)
        ops = {k["args"]["sgdsim op"] for d in docs for k in kernels(d)}
        assert not any(op.startswith(("latency:", "gate:", "done:", "ready:")) for op in ops)
        if arch == "ps":  # the server's updates are no worker's kernels
            assert not any(op.startswith("update:") for op in ops)


def test_steps_filter_exports_only_those_steps() -> None:
    trace = tiny()
    result = run(trace, workers=2, arch="allreduce", mode="sync")
    for doc in hta_traces(result, trace, steps=(1, 2)):
        assert [e["name"] for e in cpu_events(doc, "user_annotation")] == [
            "ProfilerStep#1",
            "ProfilerStep#2",
        ]
        assert {k["args"]["step"] for k in kernels(doc)} == {1, 2}
        assert doc["otherData"]["sgdsim"]["steps"] == [1, 2]
    with pytest.raises(ConfigError, match=r"steps: \(3, 1\) is empty"):
        hta_traces(result, trace, steps=(3, 1))
    with pytest.raises(ConfigError, match=r"no recorded step; the timeline holds steps 0\.\.4"):
        hta_traces(result, trace, steps=(7, 9))


def test_a_result_without_timeline_is_refused() -> None:
    result = simulate(tiny(), SimulationConfig(workers=2, steps=3, warmup_steps=1, batches=2))
    with pytest.raises(ConfigError, match="timeline=True"):
        hta_traces(result)


def test_write_refuses_to_overwrite_and_to_mix_with_other_traces(tmp_path: Path) -> None:
    trace = tiny()
    docs = hta_traces(run(trace, workers=2, arch="ps", mode="sync"), trace)
    folder = tmp_path / "new" / "hta"
    paths = write_hta_dir(folder, docs)
    assert paths == [folder / "rank-0.json", folder / "rank-1.json"]
    for rank, path in enumerate(paths):
        text = path.read_text()
        assert json.loads(text) == docs[rank]
        # how HTA finds a file's rank (hta/common/trace_file.py)
        match = re.search(r'"rank":\s+(\d+)', text)
        assert match is not None and int(match.group(1)) == rank
    with pytest.raises(ConfigError, match=r"rank-0\.json: already exists") as err:
        write_hta_dir(folder, docs)
    assert "\n" not in str(err.value)
    assert write_hta_dir(folder, docs, overwrite=True) == paths
    (folder / "rank-7.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"rank-7\.json: HTA would read it"):
        write_hta_dir(folder, docs, overwrite=True)
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    with pytest.raises(ConfigError, match="is not a folder"):
        write_hta_dir(not_a_folder, docs)
    assert rank_file_name(3) == "rank-3.json"


# --- read back with HTA --------------------------------------------------------------------------

SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "ps-sync": ("tiny", dict(workers=2, arch="ps", mode="sync")),
    "ps-async": ("tiny", dict(workers=3, arch="ps", mode="async")),
    "ps-two-servers": ("cnn-b32", dict(workers=2, arch="ps", mode="sync", servers=2)),
    "ring": ("cnn-b32", dict(workers=3, arch="allreduce", mode="sync", latency_s=5e-5)),
    "ddp": ("cnn-b32", dict(workers=4, arch="ddp", mode="sync", bucket_cap_bytes=2**20)),
    # bucket copies are memory kernels, not computation; more than 127 events with fewer than
    # 127 kernels broke HTA's loading while correlation ids started at 1 (FIRST_CORRELATION)
    "ddp-fp16-copies": (
        "tiny",
        dict(
            workers=2,
            arch="ddp",
            mode="sync",
            ddp_compression="fp16",
            first_bucket_bytes=200_000,
            bucket_copy_s_per_byte=2e-9,
        ),
    ),
}


class Exported:
    """A run, its exported documents and HTA's analysis of the written folder."""

    def __init__(self, result: SimulationResult, docs: list[dict[str, Any]], analysis: Any):
        self.result = result
        self.docs = docs
        self.analysis = analysis
        assert result.timeline is not None
        self.spans = simulated_spans(result.timeline, arch=result.config.arch)

    def rank_spans(self, rank: int, categories: set[str]) -> list[TimelineSpan]:
        return [
            s
            for s in self.spans
            if s.process == f"worker {rank}"
            and s.category in categories
            and not (categories is COMPUTE and s.name.startswith("bucket-copy:"))
        ]


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    trace_name, kwargs = SCENARIOS[request.param]
    trace = tiny() if trace_name == "tiny" else load_trace(trace_name)
    result = run(trace, **kwargs)
    docs = hta_traces(result, trace)
    folder = tmp_path_factory.mktemp(request.param)
    write_hta_dir(folder, docs)
    # every exported step: HTA leaves out the last ProfilerStep unless told otherwise
    return Exported(
        result, docs, TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
    )


def union(spans: Iterable[TimelineSpan]) -> list[Interval]:
    merged: list[list[float]] = []
    for start, end in sorted((s.start_s * 1e6, s.end_s * 1e6) for s in spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def length(intervals: Sequence[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def intersection(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def test_hta_reads_the_ranks_world_size_and_steps(exported: Exported) -> None:
    workers = exported.result.config.workers
    t = exported.analysis.t
    assert t.get_ranks() == list(range(workers))
    for rank in range(workers):
        assert t.meta_data[rank]["distributedInfo"]["world_size"] == workers
        assert t.meta_data[rank]["distributedInfo"]["rank"] == rank
        assert [int(i) for i in t.get_iterations(rank)] == list(range(exported.result.config.steps))
        # HTA kept every kernel, each in the iteration of its step
        assert len(t.get_trace(rank).query("stream >= 0")) == len(kernels(exported.docs[rank]))


def test_temporal_breakdown_is_the_timelines_accounting(exported: Exported) -> None:
    table = exported.analysis.get_temporal_breakdown(visualize=False).set_index("rank")
    for rank in range(exported.result.config.workers):
        device = exported.rank_spans(rank, COMM | COMPUTE)
        busy = union(device)
        compute = length(union(exported.rank_spans(rank, COMPUTE)))
        span_us = busy[-1][1] - busy[0][0]
        tol = len(device) * 1.0
        row = table.loc[rank]
        assert row["kernel_time(us)"] == pytest.approx(span_us, abs=1.0)
        assert row["compute_time(us)"] == pytest.approx(compute, abs=tol)
        assert row["idle_time(us)"] == pytest.approx(span_us - length(busy), abs=tol)
        assert row["non_compute_time(us)"] == pytest.approx(length(busy) - compute, abs=tol)


def test_comm_comp_overlap_is_the_timelines_accounting(exported: Exported) -> None:
    table = exported.analysis.get_comm_comp_overlap(visualize=False).set_index("rank")
    for rank in range(exported.result.config.workers):
        comm = union(exported.rank_spans(rank, COMM))
        compute = union(exported.rank_spans(rank, COMPUTE))
        expected = 100 * intersection(comm, compute) / length(comm)
        n_spans = len(exported.rank_spans(rank, COMM | COMPUTE))
        tol = 100 * 2 * n_spans / length(comm) + 0.005  # 1 us per span, HTA's 2 decimals
        assert table.loc[rank, "comp_comm_overlap_pctg"] == pytest.approx(expected, abs=tol)


def test_idle_time_on_the_compute_stream_is_the_workers_waits(exported: Exported) -> None:
    """Stream 7 is the worker's computation thread. A gap before the first kernel of a step
    that began after the previous kernel ended is a host wait (the launches come at the step's
    start); every other gap is a wait for another stream: kernel_wait or other."""
    config = exported.result.config
    assert exported.result.timeline is not None
    step_start = {(r.worker, r.step): r.start_s * 1e6 for r in exported.result.timeline.steps}
    table, _ = exported.analysis.get_idle_time_breakdown(
        ranks=list(range(config.workers)), visualize=False
    )
    for rank in range(config.workers):
        on_thread = sorted(
            (s for s in exported.spans if s.process == f"worker {rank}" and s.resource == "worker"),
            key=lambda s: s.start_s,
        )
        host_wait = dependency_wait = 0.0
        for before, after in itertools.pairwise(on_thread):
            gap = (after.start_s - before.end_s) * 1e6
            if step_start[(rank, after.args["step"])] > before.end_s * 1e6 + 0.5:
                host_wait += gap
            else:
                dependency_wait += gap
        rows = table[(table["rank"] == rank) & (table["stream"] == 7)]
        idle = rows.set_index("idle_category")["idle_time"]  # HTA lists the categories it saw
        tol = len(on_thread) * 1.0
        assert idle.get("host_wait", 0.0) == pytest.approx(host_wait, abs=tol)
        other = idle.sum() - idle.get("host_wait", 0.0)
        assert other == pytest.approx(dependency_wait, abs=tol)
