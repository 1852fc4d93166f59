"""Property tests of the simulator on random DAG traces (hypothesis).

The invariants are checked on the timeline, independently of the engine's own statistics: every
step completes, dependencies hold, no resource runs two ops at once, bytes are conserved, no link,
flow or NIC carries more bits in any time window than its capacity allows, steps start when the
previous one (or the barrier) ends, and the same seed gives the same run. The same invariants,
and a host CPU never doing more work than its cores can, hold with the options of shared hosts:
co-located workers sharing a CPU, the transfers' CPU cost, unequal flow weights, and hosts of
several devices.
"""

from __future__ import annotations

import dataclasses
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
    ring_alone = config.arch == "allreduce" and config.workers == 1
    sends = has_params and (not ring_alone or config.devices_per_host > 1)  # or inside the host
    # A ring of one pays no message latency (2(W-1) messages a layer: simcore.sim.dag)
    latency = 0.0 if ring_alone else config.latency_s
    extra = latency + config.parse_alpha_s_per_byte + config.parse_beta_s
    if sends or (has_params and extra > 0):
        return False
    table = np.array([[d or 0.0 for d in step.duration_s] for step in trace.steps])
    rows = table.min(axis=0, keepdims=True) if config.jitter == "resample" else table
    return bool((rows.max(axis=1) == 0).any())


def simulated_unless_unbounded(trace: Trace, config: SimulationConfig) -> SimulationResult | None:
    """``simulate(trace, config)``; None when a step can take no time, after checking that the
    simulator refuses such a run (its throughput would be unbounded)."""
    if can_take_no_time(trace, config):
        with pytest.raises(ConfigError, match="throughput is unbounded"):
            simulate(trace, config)
        return None
    return simulate(trace, config)


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
    shared_nic = config.colocated_workers > 1 and config.shared_nic
    per_link: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    per_nic: dict[tuple[int, str], list[tuple[float, float, float]]] = defaultdict(list)
    for r in result.timeline:
        if r.resource.startswith(("downlink", "uplink")):
            chunk = (r.start_s, r.end_s, 8.0 * r.nbytes)
            assert chunk[2] <= flow_limit * (r.end_s - r.start_s + 1e-12) * (1 + 1e-9)
            ring_lane = f"/{r.worker}" if config.arch == "allreduce" else ""
            per_link[r.resource + ring_lane].append(chunk)
            # co-located workers sharing their host's NIC fill it together
            nic = config.host_of(r.worker) if shared_nic else r.worker
            per_nic[(nic, r.resource.split("[")[0])].append(chunk)
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


def check_run(trace: Trace, result: SimulationResult) -> None:
    """Every invariant of a run that the timeline shows (see the module docstring)."""
    config = result.config
    timeline = result.timeline
    assert timeline is not None
    spans = op_spans(result)
    ring = config.arch == "allreduce"
    # Every step of every worker completed, with every op of the compiled DAG (the trace's, and
    # the latency, parsing and intra-host ops inserted for the config).
    dag = compile_trace(trace, config)
    assert len(timeline.steps) == config.workers * config.steps
    for w in range(config.workers):
        for n in range(config.steps):
            for op_id in dag.op_ids:
                assert (w, n, op_id) in spans
    # Dependencies respected: the trace's, and the compiled DAG's (which routes them through the
    # inserted ops).
    for (w, n, op_id), (start, end, _) in spans.items():
        for d in dag.dependents[dag.op_ids.index(op_id)]:
            assert spans[(w, n, dag.op_ids[d])][0] >= end - EPS
        if op_id in trace.op_index:
            for dep in trace.ops[trace.op_index[op_id]].deps:
                if (w, n, dep) in spans:  # (a ring has no pulls)
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
    expected_ops = [op for op in trace.ops if not (ring and op.kind.value == "pull")]
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


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), config=configs())
def test_invariants_on_random_dags(trace: Trace, config: SimulationConfig) -> None:
    result = simulated_unless_unbounded(trace, config)
    if result is not None:
        check_run(trace, result)


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


# --- shared hosts: co-located workers, the transfers' CPU cost, flow weights, devices -----------


@st.composite
def host_configs(draw: st.DrawFn) -> SimulationConfig:
    """Configs with the options of shared hosts, alone or combined as far as they combine:
    co-located workers sharing a host CPU (``colocated_workers``, ``host_cpu_cores``,
    ``worker_cpu_cores``, ``shared_nic``), the transfers' CPU cost (``comm_cpu_s_per_byte``),
    unequal flow weights (``flow_weight_cv``, processor sharing on a parameter server only) and
    hosts of several devices (``devices_per_host``, ``intra_bandwidth_bps``). Each example
    turns one of them on for sure, and the others at random. No jitter, so that each computation
    op's work is its profiled duration."""
    focus = draw(st.sampled_from(["colocated", "comm", "weights", "devices"]))
    workers = draw(st.integers(2 if focus in ("colocated", "weights") else 1, 4))
    arch = "ps" if focus == "weights" else draw(st.sampled_from(["ps", "ps", "allreduce"]))
    mode = "sync" if arch == "allreduce" else draw(st.sampled_from(["async", "sync"]))
    sharing = None if arch == "allreduce" else draw(st.sampled_from(["ps", "ps", "fcfs"]))
    sharing = "ps" if focus == "weights" else sharing
    devices = draw(st.sampled_from({"devices": [2, 3], "colocated": [1]}.get(focus, [1, 1, 2])))
    colocated = 1 if devices > 1 else draw(st.integers(2 if focus == "colocated" else 1, workers))
    cores_drawn = st.sampled_from([0.5, 1.0, 2.0])
    cores = draw(cores_drawn if focus in ("colocated", "comm") else st.none() | cores_drawn)
    # at 1 Gbit/s: 0.125 of a core per transfer, or 2.5 cores (more than any host has)
    costs = [1e-9, 2e-8] if focus == "comm" else [0.0, 1e-9, 2e-8]
    weights = [0.3, 1.0] if focus == "weights" else [0.0, 0.3, 1.0]
    steps = draw(st.integers(1, 4))
    speeds = st.tuples(*[st.sampled_from([0.5, 1.0, 2.0])] * workers)
    return SimulationConfig(
        workers=workers,
        bandwidth_bps=draw(st.sampled_from([1e8, 1e9])),
        arch=arch,
        mode=mode,
        sharing=sharing,
        steps=steps,
        warmup_steps=draw(st.integers(0, steps - 1)),
        seed=draw(st.integers(0, 5)),
        flow_cap_bps=draw(st.sampled_from([None, 3e8])),
        scheduler=draw(st.sampled_from(["fifo", "http2", "critical-path"])),
        window_bytes=20_000,
        servers=1 if arch == "allreduce" else draw(st.integers(1, 2)),
        worker_bandwidth_bps=draw(st.sampled_from([None, 5e8])),
        latency_s=draw(st.sampled_from([0.0, 2e-4])),
        parse_alpha_s_per_byte=draw(st.sampled_from([0.0, 1e-9])),
        parse_beta_s=draw(st.sampled_from([0.0, 1e-5])),
        speed_factors=draw(st.one_of(st.none(), speeds)),
        timeline=True,
        devices_per_host=devices,
        intra_bandwidth_bps=None if devices == 1 else draw(st.sampled_from([1e9, 1e10])),
        colocated_workers=colocated,
        host_cpu_cores=cores,
        worker_cpu_cores=None if cores is None else draw(st.sampled_from([None, cores / 2])),
        shared_nic=draw(st.booleans()),
        comm_cpu_s_per_byte=0.0 if cores is None else draw(st.sampled_from(costs)),
        flow_weight_cv=draw(st.sampled_from(weights)) if sharing == "ps" else 0.0,
    )


def check_host_cpus(trace: Trace, result: SimulationResult) -> None:
    """No computation op runs faster than profiled alone, and no host CPU does more work in any
    window than its cores can: an op is ``duration * worker_cores`` core-seconds."""
    config = result.config
    cores = config.worker_cores
    if config.host_cpu_cores is None or cores is None:
        return
    dag = compile_trace(trace, config)
    speeds = config.speed_factors or (1.0,) * config.workers
    timeline = result.timeline
    assert timeline is not None
    sampled = {(s.worker, s.step): s.profile_step for s in timeline.steps}
    per_host: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    for r in timeline:
        if r.resource != "worker":
            continue
        i = dag.op_ids.index(r.op)
        duration = float(dag.durations[sampled[(r.worker, r.step)], i])
        if dag.scalable[i]:
            duration /= speeds[r.worker]
        assert r.end_s - r.start_s >= duration * (1 - 1e-9) - EPS
        per_host[config.host_of(r.worker)].append((r.start_s, r.end_s, duration * cores))
    for chunks in per_host.values():
        assert_fits(chunks, config.host_cpu_cores)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), config=host_configs())
def test_invariants_with_shared_hosts(trace: Trace, config: SimulationConfig) -> None:
    result = simulated_unless_unbounded(trace, config)
    if result is None:
        return
    check_run(trace, result)
    check_host_cpus(trace, result)
    again = simulate(trace, config)  # the same seed: the same run, weights and all
    assert again.timeline is not None and result.timeline is not None
    assert np.array_equal(again.timeline.start_s, result.timeline.start_s)
    assert np.array_equal(again.timeline.end_s, result.timeline.end_s)
    assert again.steps_per_s == result.steps_per_s


@settings(max_examples=40, deadline=None)
@given(trace=traces(), config=host_configs())
def test_options_that_cannot_matter_change_nothing(trace: Trace, config: SimulationConfig) -> None:
    """A host CPU with one worker per host and no transfer cost runs every op alone, at its
    profiled speed; one worker (host) alone on a link gets all of it, whatever its weight."""
    if can_take_no_time(trace, config) or config.comm_cpu_s_per_byte > 0:
        return
    if config.workers > 1:
        # A host CPU link may order simultaneous events differently (not their times), and
        # flow weights are drawn in the order transfers start: with several workers a tie
        # would change the draws, so the host CPU is compared without weights.
        config = dataclasses.replace(config, flow_weight_cv=0.0)
    plain = dataclasses.replace(config, flow_weight_cv=0.0)
    if config.colocated_workers == 1:
        plain = dataclasses.replace(plain, host_cpu_cores=None, worker_cpu_cores=None)
    if plain == config:
        return
    a, b = simulate(trace, config), simulate(trace, plain)
    assert a.timeline is not None and b.timeline is not None
    ta, tb = a.timeline, b.timeline
    # Every op (and chunk) of every worker's step, in a canonical order rather than the order
    # in which simultaneous events happened to be recorded.
    order_a = np.lexsort((ta.start_s, ta.op, ta.step, ta.worker))
    order_b = np.lexsort((tb.start_s, tb.op, tb.step, tb.worker))
    assert np.array_equal(ta.op[order_a], tb.op[order_b])
    assert np.allclose(ta.end_s[order_a], tb.end_s[order_b], rtol=1e-9, atol=1e-15)
    assert a.steps_per_s.value == pytest.approx(b.steps_per_s.value, rel=1e-9)
