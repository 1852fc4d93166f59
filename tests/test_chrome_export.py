"""Chrome Trace Event export of simulated and profiled timelines, checked against the format.

The format (Chromium's "Trace Event Format"): complete events ``ph: "X"`` carry name, cat, ph,
ts and dur (microseconds, numbers, dur >= 0), pid, tid and args; metadata events ``ph: "M"``
named ``process_name`` / ``thread_name`` carry ``args.name``. Viewers nest the complete events of
one thread by time, so two of them may follow each other or nest, never overlap partially.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any

import pytest

from simcore.errors import ConfigError
from simcore.export.chrome import (
    TimelineSpan,
    chrome_trace,
    profiled_step_spans,
    simulated_spans,
)
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.io import load_trace
from simcore.trace.model import Trace

from trace_support import tiny_trace

B = 1e9
ROUNDING_US = 1e-6  # ts + dur of one event and ts of the next agree to float rounding


def tiny() -> Trace:
    return tiny_trace()


def run(trace: Trace, **kwargs: Any) -> SimulationResult:
    config = dict(bandwidth_bps=B, steps=4, warmup_steps=1, batches=3, seed=1, timeline=True)
    return simulate(trace, SimulationConfig(**{**config, **kwargs}))


def check_format(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Assert the Trace Event Format rules; returns the complete events."""
    json.dumps(doc, allow_nan=False)  # plain JSON, no NaN or infinity
    events = doc["traceEvents"]
    assert all(e["ph"] in ("X", "M") for e in events)
    complete = [e for e in events if e["ph"] == "X"]
    meta = [e for e in events if e["ph"] == "M"]
    for e in complete:
        assert set(e) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
        assert isinstance(e["name"], str) and isinstance(e["cat"], str)
        assert isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float)
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert e["pid"] >= 1 and e["tid"] >= 1  # 0 is the kernel's idle task to Perfetto
        assert isinstance(e["args"], dict)
    for e in meta:
        assert e["name"] in {
            f"{x}_{y}" for x in ("process", "thread") for y in ("name", "sort_index")
        }
        key = "name" if e["name"].endswith("_name") else "sort_index"
        assert key in e["args"]
    threads = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    processes = {e["pid"] for e in meta if e["name"] == "process_name"}
    lanes: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in complete:
        assert (e["pid"], e["tid"]) in threads
        assert e["pid"] in processes
        lanes[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for intervals in lanes.values():  # follow each other or nest, never overlap partially
        intervals.sort()
        for (_, end), (start, later_end) in itertools.pairwise(intervals):
            assert start >= end - ROUNDING_US or later_end <= end + ROUNDING_US
    return complete


def test_simulated_timeline_follows_the_format_with_latency_and_two_servers() -> None:
    trace = load_trace("cnn-b32")
    result = run(trace, workers=3, servers=2, latency_s=2e-4, parse_beta_s=1e-5)
    assert result.timeline is not None
    spans = simulated_spans(result.timeline, trace=trace)
    complete = check_format(chrome_trace(spans, {"model": "cnn"}))
    assert len(complete) == len(result.timeline)
    names = {
        e["args"]["name"] for e in chrome_trace(spans)["traceEvents"] if e["name"].endswith("_name")
    }
    # 200 us of latency overlaps the next transfers: the extra lanes keep every thread nested
    assert {"server 0", "server 1", "worker 2", "downlink[1]", "uplink[1]", "latency"} <= names
    assert "latency #2" in names
    assert {e["cat"] for e in complete} == {
        "pull", "forward", "backward", "push", "update", "parse", "latency",
    }  # fmt: skip


def test_each_op_goes_where_the_simulator_ran_it() -> None:
    trace = load_trace("cnn-b32")
    result = run(trace, workers=2, servers=2, latency_s=1e-4, parse_beta_s=1e-5)
    assert result.timeline is not None
    for span in simulated_spans(result.timeline, trace=trace):
        worker = span.args["worker"]
        assert {"worker", "step", "bytes", "layer"} <= set(span.args)
        if span.category in ("update",) or span.name.startswith("parse:push"):
            assert span.process.startswith("server ") and span.resource == f"worker {worker}"
        else:
            assert span.process == f"worker {worker}"
        if span.category in ("pull", "push"):
            assert span.args["bytes"] > 0 and span.resource.split("[")[0] in ("downlink", "uplink")
        if span.category == "latency":
            kind = span.name.split(":")[1]
            assert span.args["link"].startswith("downlink" if kind == "pull" else "uplink")
            assert span.duration_s == pytest.approx(1e-4)
        assert span.args["layer"] == span.name.rsplit(":", 1)[1]


def test_one_worker_times_are_the_closed_form() -> None:
    # One worker, step 0 samples a profiled step: pull l0 (400 kB) takes 8 * 400e3 / B = 3.2 ms,
    # then forward l0 starts at its end; pull l1 (200 kB) follows on the link: ends at 4.8 ms.
    trace = tiny()
    result = run(trace, workers=1)
    assert result.timeline is not None
    spans = {s.name: s for s in simulated_spans(result.timeline, steps=(0, 0))}
    doc = chrome_trace(spans.values())
    events = {e["name"]: e for e in check_format(doc)}
    assert events["pull:l0"]["ts"] == pytest.approx(0.0)
    assert events["pull:l0"]["dur"] == pytest.approx(3200.0)
    assert events["pull:l1"]["ts"] + events["pull:l1"]["dur"] == pytest.approx(4800.0)
    assert events["forward:l0"]["ts"] == pytest.approx(3200.0)
    assert events["pull:l0"]["args"]["bytes"] == 400_000


def test_filters_keep_the_chosen_workers_steps_and_time() -> None:
    trace = tiny()
    result = run(trace, workers=3)
    timeline = result.timeline
    assert timeline is not None
    spans = simulated_spans(timeline, workers=[1, 2], steps=(1, 2))
    assert {s.args["worker"] for s in spans} == {1, 2}
    assert {s.args["step"] for s in spans} == {1, 2}
    t0, t1 = 0.01, 0.02
    within = simulated_spans(timeline, time_s=(t0, t1))
    assert within and all(s.end_s > t0 and s.start_s < t1 for s in within)
    assert len(within) < len(timeline)
    with pytest.raises(ConfigError, match="steps: \\(2, 1\\) is empty"):
        simulated_spans(timeline, steps=(2, 1))


def test_ring_allreduce_updates_stay_with_the_worker() -> None:
    trace = tiny()
    result = run(trace, workers=2, arch="allreduce", mode="sync")
    assert result.timeline is not None
    spans = simulated_spans(result.timeline, arch="allreduce")
    assert {s.process for s in spans} == {"worker 0", "worker 1"}
    # No server: a worker applies its updates on its own compute, in turn with its layers.
    assert {s.resource for s in spans if s.category == "update"} == {"worker"}
    # A ring has no pushes: its transfers are shown as the AllReduce they are.
    assert {s.resource for s in spans if s.category == "allreduce"} == {"allreduce"}
    assert not [s for s in spans if s.category == "push"]
    check_format(chrome_trace(spans))


def test_a_pipelined_rings_messages_latencies_and_work_belong_to_their_layer() -> None:
    trace = tiny()
    result = run(
        trace,
        workers=3,
        arch="allreduce",
        mode="sync",
        latency_s=1e-4,
        parse_alpha_s_per_byte=1e-8,
        parse_placement="pipelined",
    )
    assert result.timeline is not None
    spans = simulated_spans(result.timeline, arch="allreduce", trace=trace)
    messages = [s for s in spans if s.category == "allreduce"]
    # 2(K-1) = 4 messages per layer, step and worker, each named for its layer.
    assert len(messages) == 4 * 2 * 3 * len({s.args["step"] for s in messages})
    assert {s.args["layer"] for s in messages} == {"l0", "l1"}
    # Every latency (and join) strip goes with the ring's link, the work on the comm thread.
    assert {s.args["link"] for s in spans if s.category == "latency"} == {"allreduce"}
    assert {s.resource for s in spans if s.category == "parse"} == {"comm"}
    assert all("layer" in s.args for s in spans if s.category in ("parse", "latency"))
    check_format(chrome_trace(spans))


def test_a_workers_comm_thread_work_sits_on_its_comm_row_with_its_layer() -> None:
    trace = tiny()
    result = run(trace, workers=2, comm_thread_s_per_step=2e-3)
    assert result.timeline is not None
    spans = simulated_spans(result.timeline, arch="ps", trace=trace)
    work = [s for s in spans if s.name.startswith("comm:")]
    # One share per transfer (2 layers, a pull and a push each), step and worker.
    assert len(work) == 4 * 2 * len({s.args["step"] for s in work})
    assert {(s.category, s.resource) for s in work} == {("parse", "comm")}
    assert {s.args["layer"] for s in work} == {"l0", "l1"}
    check_format(chrome_trace(spans))


def test_overlapping_spans_on_one_thread_go_to_extra_lanes() -> None:
    spans = [
        TimelineSpan("worker 0", "latency", "a", "latency", 0.0, 2e-3),
        TimelineSpan("worker 0", "latency", "b", "latency", 1e-3, 2e-3),  # overlaps a partially
        TimelineSpan("worker 0", "latency", "c", "latency", 2e-3, 1e-3),  # after a: lane 1
    ]
    doc = chrome_trace(spans)
    check_format(doc)
    threads = {
        e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"
    }
    lane = {e["name"]: threads[e["tid"]] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert lane == {"a": "latency", "b": "latency #2", "c": "latency"}


def test_profiled_spans_carry_worker_step_and_layer() -> None:
    trace = load_trace("cnn-b32")
    spans = profiled_step_spans(trace, 3)
    assert spans and all(s.args["step"] == 3 and s.args["worker"] == 0 for s in spans)
    assert {s.process for s in spans} == {"worker 0", "server 0"}
    check_format(chrome_trace(spans))


def test_intra_host_ops_are_shown_as_such() -> None:
    trace = tiny()
    result = run(trace, workers=2, mode="sync", devices_per_host=4, intra_bandwidth_bps=1e9)
    assert result.timeline is not None
    spans = simulated_spans(result.timeline, trace=trace)
    intra = [s for s in spans if s.resource == "intra"]
    assert intra and {s.category for s in intra} == {"intra-host"}
    assert {s.name.split(":")[0] for s in intra} == {"intra-reduce", "intra-broadcast"}
    check_format(chrome_trace(spans))
