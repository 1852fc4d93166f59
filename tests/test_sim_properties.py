"""Property tests of the simulator on random DAG traces (hypothesis).

The invariants are checked on the timeline, independently of the engine's own statistics: every
step completes, dependencies hold, no resource runs two ops at once, bytes are conserved, no link,
flow or NIC carries more bits in any time window than its capacity allows, steps start when the
previous one (or the barrier) ends, and the same seed gives the same run.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.dag import compile_trace
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

EPS = 1e-9
# Either no time at all or a realistic one: durations far below a profiler's resolution are
# rejected before simulating (simcore.sim.api.MIN_STEP_S), see test_degenerate_steps_*.
DURATIONS = st.one_of(st.just(0.0), st.floats(1e-6, 0.005))


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
    fwd = [draw(st.lists(DURATIONS, min_size=n, max_size=n)) for _ in range(steps)]
    bwd = [draw(st.lists(DURATIONS, min_size=n, max_size=n)) for _ in range(steps)]
    update = draw(st.one_of(st.just(0.0), st.floats(1e-6, 0.002)))
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
    speeds = st.tuples(*[st.sampled_from([0.5, 1.0, 2.0])] * workers)
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
        worker_bandwidth_bps=draw(st.sampled_from([None, 5e8])),
        latency_s=draw(st.sampled_from([0.0, 2e-4])),
        parse_alpha_s_per_byte=draw(st.sampled_from([0.0, 1e-9])),
        parse_beta_s=draw(st.sampled_from([0.0, 1e-5])),
        speed_factors=draw(st.one_of(st.none(), speeds)),
        jitter=draw(st.sampled_from(["none", "resample"])),
        jitter_cv=draw(st.sampled_from([0.0, 0.1])),
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


def can_take_no_time(trace: Trace, config: SimulationConfig) -> bool:
    """Whether a step can take no time: nothing to send, no latency or parsing, and a profiled
    step (with ``jitter="resample"``: the per-op shortest durations) computing nothing."""
    has_params = any(layer.param_nbytes > 0 for layer in trace.layers)
    sends = has_params and not (config.arch == "allreduce" and config.workers == 1)
    extra = config.latency_s + config.parse_alpha_s_per_byte + config.parse_beta_s
    if sends or (has_params and extra > 0):
        return False
    table = np.array([[d or 0.0 for d in step.duration_s] for step in trace.steps])
    rows = table.min(axis=0, keepdims=True) if config.jitter == "resample" else table
    return bool((rows.max(axis=1) == 0).any())


def assert_fits(chunks: list[tuple[float, float, float]], capacity_bps: float) -> None:
    """The bits of the chunks (start s, end s, bits) inside any window [a, b] fit in
    ``capacity_bps * (b - a)``: what a link of that capacity can carry."""
    arr = np.asarray(chunks, dtype=float).reshape(-1, 3)
    for a in np.unique(arr[:, 0]):
        inside = arr[arr[:, 0] >= a]
        inside = inside[np.argsort(inside[:, 1], kind="stable")]
        carried = np.cumsum(inside[:, 2])
        room = capacity_bps * (inside[:, 1] - a + 1e-12) * (1 + 1e-9)
        assert np.all(carried <= room), (a, capacity_bps)


def check_capacity(result: SimulationResult) -> None:
    """No link, flow or NIC over its capacity in any window, from the timeline alone."""
    config = result.config
    assert result.timeline is not None
    cap = config.flow_cap_bps if isinstance(config.flow_cap_bps, float) else np.inf
    flow_limit = min(config.bandwidth_bps, cap, config.nic_bps)
    per_link: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    per_nic: dict[tuple[int, str], list[tuple[float, float, float]]] = defaultdict(list)
    for r in result.timeline:
        if r.resource.startswith(("downlink", "uplink")):
            chunk = (r.start_s, r.end_s, 8.0 * r.nbytes)
            assert chunk[2] <= flow_limit * (r.end_s - r.start_s + 1e-12) * (1 + 1e-9)
            ring_lane = f"/{r.worker}" if config.arch == "allreduce" else ""
            per_link[r.resource + ring_lane].append(chunk)
            per_nic[(r.worker, r.resource.split("[")[0])].append(chunk)
    for chunks in per_link.values():
        assert_fits(chunks, config.bandwidth_bps)
    for chunks in per_nic.values():
        assert_fits(chunks, config.nic_bps)


def step_bounds(result: SimulationResult) -> tuple[np.ndarray, np.ndarray]:
    """(workers, steps) arrays of each step's first op start and last op end."""
    config = result.config
    first = np.full((config.workers, config.steps), np.inf)
    last = np.full((config.workers, config.steps), -np.inf)
    assert result.timeline is not None
    for r in result.timeline:
        first[r.worker, r.step] = min(first[r.worker, r.step], r.start_s)
        last[r.worker, r.step] = max(last[r.worker, r.step], r.end_s)
    return first, last


def check_step_boundaries(result: SimulationResult) -> None:
    """Steps start when the previous step (async) or the barrier (sync) ends, and end with their
    last op (async) or the barrier, which is the end of the slowest worker's step (sync)."""
    config = result.config
    first, last = step_bounds(result)
    ends = last.max(axis=0, keepdims=True) if config.mode == "sync" else last
    ends = np.broadcast_to(ends, last.shape)
    assert np.allclose(first[:, 0], 0.0, atol=EPS)
    assert np.allclose(first[:, 1:], ends[:, :-1], rtol=1e-12, atol=1e-15)
    assert result.timeline is not None
    for s in result.timeline.steps:
        assert s.end_s == pytest.approx(ends[s.worker, s.step], rel=1e-12, abs=1e-15)


def check_lower_bound(trace: Trace, result: SimulationResult) -> None:
    """No step is shorter than its worker's bound (longest path, transfers at full bandwidth)."""
    config = result.config
    if config.jitter_cv > 0:
        return  # the noise may shorten any op
    dag = compile_trace(trace, config)
    speeds = config.speed_factors or (1.0,) * config.workers
    per_op = config.jitter == "resample"
    assert result.timeline is not None
    for s in result.timeline.steps:
        bound = min(dag.step_lower_bounds_s(config.bandwidth_bps, speeds[s.worker], per_op))
        assert s.end_s - s.start_s >= bound * (1 - 1e-9)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), config=configs())
def test_invariants_on_random_dags(trace: Trace, config: SimulationConfig) -> None:
    if can_take_no_time(trace, config):
        with pytest.raises(ConfigError, match="throughput is unbounded"):
            simulate(trace, config)
        return
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
        if op_id not in trace.op_index:
            continue  # an inserted latency or parsing op
        op = trace.ops[trace.op_index[op_id]]
        for dep in op.deps:
            if (w, n, dep) in spans:
                assert start >= spans[(w, n, dep)][1] - EPS
    # No worker runs two ops (or chunks) on one resource at once (latency occupies nothing).
    by_resource: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for r in timeline:
        if r.resource != "latency":
            by_resource[(r.worker, r.resource)].append((r.start_s, r.end_s))
    for intervals in by_resource.values():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert start >= end - EPS
    # Bytes transferred equal the bytes in the trace (AllReduce: 2(K-1)/K of each push).
    factor = 2 * (config.workers - 1) / config.workers if ring else 1.0
    sent = float(sum(r.nbytes for r in timeline if r.kind in ("pull", "push")))
    in_trace = sum(op.nbytes or 0 for op in expected_ops if op.is_communication)
    assert np.isclose(sent, factor * in_trace * config.workers * config.steps, rtol=1e-9)
    # No link, flow or NIC over capacity: from the timeline, and as the links report it.
    check_capacity(result)
    for link in result.links:
        limit = link.capacity_bps * (1 + 1e-9)
        assert link.peak_flow_rate_bps <= limit
        if not ring:
            assert link.peak_rate_bps <= limit
        assert link.utilization <= 1 + 1e-9
    check_step_boundaries(result)
    check_lower_bound(trace, result)
    assert 0 < result.steps_per_s.value < np.inf


@settings(max_examples=30, deadline=None)
@given(trace=traces(), config=configs())
def test_same_seed_gives_identical_results(trace: Trace, config: SimulationConfig) -> None:
    if can_take_no_time(trace, config):
        return
    a, b = simulate(trace, config), simulate(trace, config)
    assert a.steps_per_s == b.steps_per_s
    assert a.workers == b.workers
    assert a.timeline is not None and b.timeline is not None
    assert np.array_equal(a.timeline.start_s, b.timeline.start_s)
    assert np.array_equal(a.timeline.end_s, b.timeline.end_s)
    assert np.array_equal(a.timeline.op, b.timeline.op)
