"""Property tests of the simulator on random DAG traces (hypothesis)."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

EPS = 1e-9


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    n = draw(st.integers(1, 6))
    inputs = {}
    for i in range(1, n):
        srcs = draw(st.sets(st.integers(0, i - 1), min_size=0, max_size=min(i, 3)))
        if srcs:
            inputs[f"l{i}"] = [f"l{j}" for j in sorted(srcs)]
    sizes = draw(st.lists(st.sampled_from([0, 1000, 25_000, 125_000]), min_size=n, max_size=n))
    steps = draw(st.integers(1, 3))
    dur = st.floats(0.0, 0.005, allow_nan=False)
    fwd = [draw(st.lists(dur, min_size=n, max_size=n)) for _ in range(steps)]
    bwd = [draw(st.lists(dur, min_size=n, max_size=n)) for _ in range(steps)]
    update = draw(st.floats(0.0, 0.002))
    return synthetic_trace(
        fwd, bwd, sizes, update_s=update, inputs=inputs, overlap=draw(st.booleans())
    )


@st.composite
def configs(draw: st.DrawFn) -> SimulationConfig:
    workers = draw(st.integers(1, 4))
    arch = draw(st.sampled_from(["ps", "ps", "allreduce"]))
    mode = "sync" if arch == "allreduce" else draw(st.sampled_from(["async", "sync"]))
    servers = 1 if arch == "allreduce" else draw(st.integers(1, 2))
    steps = draw(st.integers(1, 4))
    return SimulationConfig(
        workers=workers,
        bandwidth_bps=draw(st.sampled_from([1e8, 1e9])),
        arch=arch,
        mode=mode,
        sharing=None if arch == "allreduce" else draw(st.sampled_from(["ps", "fcfs"])),
        steps=steps,
        warmup_steps=draw(st.integers(0, steps - 1)),
        seed=draw(st.integers(0, 5)),
        flow_cap_bps=draw(st.sampled_from([None, 3e8])),
        cap_mode=draw(st.sampled_from(["clip", "maxmin"])),
        scheduler=draw(st.sampled_from(["fifo", "http2", "trace", "critical-path", "random"])),
        window_bytes=20_000,
        servers=servers,
        placement=draw(st.sampled_from(["greedy", "round-robin"])),
        timeline=True,
    )


def op_spans(result: SimulationResult) -> dict[tuple[int, int, str], tuple[float, float, str]]:
    """(worker, step, op) -> (first start, last end, resource); chunks of one op merged."""
    spans: dict[tuple[int, int, str], tuple[float, float, str]] = {}
    assert result.timeline is not None
    for r in result.timeline:
        key = (r.worker, r.step, r.op)
        if key in spans:
            s, e, res = spans[key]
            spans[key] = (min(s, r.start_s), max(e, r.end_s), res)
        else:
            spans[key] = (r.start_s, r.end_s, r.resource)
    return spans


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), config=configs())
def test_invariants_on_random_dags(trace: Trace, config: SimulationConfig) -> None:
    result = simulate(trace, config)
    timeline = result.timeline
    assert timeline is not None
    spans = op_spans(result)
    ring = config.arch == "allreduce"
    expected_ops = [op for op in trace.ops if not (ring and op.kind.value == "pull")]
    # Every step of every worker completed, with every op of the DAG.
    assert len(timeline.steps) == config.workers * config.steps
    for w in range(config.workers):
        for n in range(config.steps):
            for op in expected_ops:
                assert (w, n, op.id) in spans
    # Dependencies respected.
    for (w, n, op_id), (start, _, _) in spans.items():
        op = trace.ops[trace.op_index[op_id]]
        for dep in op.deps:
            if (w, n, dep) in spans:
                assert start >= spans[(w, n, dep)][1] - EPS
    # No worker runs two ops (or chunks) on one resource at once.
    by_resource: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for r in timeline:
        by_resource[(r.worker, r.resource)].append((r.start_s, r.end_s))
    for intervals in by_resource.values():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert start >= end - EPS
    # Bytes transferred equal the bytes in the trace.
    if not ring:
        sent = float(sum(r.nbytes for r in timeline if r.kind in ("pull", "push")))
        in_trace = sum(op.nbytes or 0 for op in trace.ops if op.is_communication)
        assert np.isclose(sent, in_trace * config.workers * config.steps, rtol=1e-9)
    # No link over capacity (a dedicated ring link per worker: no flow over it).
    for link in result.links:
        limit = link.capacity_bps * (1 + 1e-9)
        assert link.peak_flow_rate_bps <= limit
        if not ring:
            assert link.peak_rate_bps <= limit
        assert link.utilization <= 1 + 1e-9
    # Sync: all workers start every step together.
    if config.mode == "sync":
        starts: dict[int, set[float]] = defaultdict(set)
        for s in timeline.steps:
            starts[s.step].add(s.start_s)
        assert all(len(v) == 1 for v in starts.values())
    assert result.steps_per_s.value > 0


@settings(max_examples=30, deadline=None)
@given(trace=traces(), config=configs())
def test_same_seed_gives_identical_results(trace: Trace, config: SimulationConfig) -> None:
    a, b = simulate(trace, config), simulate(trace, config)
    assert a.steps_per_s == b.steps_per_s
    assert a.workers == b.workers
    assert a.timeline is not None and b.timeline is not None
    assert np.array_equal(a.timeline.start_s, b.timeline.start_s)
    assert np.array_equal(a.timeline.end_s, b.timeline.end_s)
    assert np.array_equal(a.timeline.op, b.timeline.op)
