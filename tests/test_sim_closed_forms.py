"""The simulator against numbers we can defend: TPDS'22 Eq. 7, 8, 11 and hand-computed cases."""

from __future__ import annotations

import pytest

from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.dag import ring_message_count
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace

REL = 1e-9
B = 1e9  # bit/s

# A no-overlap trace (strict phases, TPDS'22 Fig. 4): every forward waits for all pulls and every
# push for the whole backward pass. Only layer 0 (pushed last) has an update, so the update phase
# does not overlap with pushes and T_S is exactly its duration.
FWD = [0.010, 0.020, 0.005]
BWD = [0.020, 0.030, 0.015]
SIZES = [1_000_000, 2_000_000, 500_000]
UPDATE_L0 = 0.004
M_BITS = 8.0 * sum(SIZES)
T_C = sum(FWD) + sum(BWD)


def strict_trace() -> Trace:
    return synthetic_trace(FWD, BWD, SIZES, update_s=[UPDATE_L0, 0.0, 0.0], overlap=False)


def run(trace: Trace, **kw: object) -> SimulationResult:
    base: dict[str, object] = {"bandwidth_bps": B, "steps": 6, "warmup_steps": 1}
    base.update(kw)
    return simulate(trace, SimulationConfig(**base))  # type: ignore[arg-type]


def pull_ends(result: SimulationResult, step: int = 0) -> dict[int, float]:
    """Per worker, the end of its last pull in ``step`` (s)."""
    assert result.timeline is not None
    ends: dict[int, float] = {}
    for rec in result.timeline:
        if rec.kind == "pull" and rec.step == step:
            ends[rec.worker] = max(ends.get(rec.worker, 0.0), rec.end_s)
    return ends


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_sync_ps_sharing_is_eq7(k: int) -> None:
    step = k * M_BITS / B + T_C + k * M_BITS / B + UPDATE_L0
    result = run(strict_trace(), workers=k, mode="sync", sharing="ps")
    assert result.steps_per_s.value == pytest.approx(k / step, rel=REL)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_sync_fcfs_sharing_is_eq8(k: int) -> None:
    step = k * M_BITS / B + T_C + M_BITS / B + UPDATE_L0
    result = run(strict_trace(), workers=k, mode="sync", sharing="fcfs")
    assert result.steps_per_s.value == pytest.approx(k / step, rel=REL)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_ring_allreduce_is_eq11(k: int) -> None:
    trace = synthetic_trace(FWD, BWD, SIZES, update_s=0.0, overlap=False)
    step = T_C + 2 * (k - 1) * M_BITS / (k * B)
    result = run(trace, workers=k, mode="sync", arch="allreduce")
    assert result.steps_per_s.value == pytest.approx(k / step, rel=REL)
    assert result.config.policy_name == "allreduce"


@pytest.mark.parametrize("placement", ["after", "pipelined"])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_ring_allreduce_pays_its_latency_per_hop(k: int, placement: str) -> None:
    # alpha-beta cost of a ring: each layer's AllReduce sends 2(K-1) chunks one after another,
    # each paying the latency, and the next layer's AllReduce waits for it (strict phases: the
    # three AllReduces run back to back after the backward pass). Pipelined or not, without CPU
    # work: its messages carry one latency each, and the next waits for the last.
    latency = 2e-4
    trace = synthetic_trace(FWD, BWD, SIZES, update_s=0.0, overlap=False)
    step = T_C + 2 * (k - 1) * M_BITS / (k * B) + len(SIZES) * 2 * (k - 1) * latency
    result = run(
        trace,
        workers=k,
        mode="sync",
        arch="allreduce",
        latency_s=latency,
        parse_placement=placement,
    )
    assert result.steps_per_s.value == pytest.approx(k / step, rel=REL)


def test_hybrid_is_the_mean_of_fcfs_and_ps() -> None:
    k = 4
    t_ps = k * M_BITS / B + T_C + k * M_BITS / B + UPDATE_L0
    t_fcfs = k * M_BITS / B + T_C + M_BITS / B + UPDATE_L0
    result = run(strict_trace(), workers=k, mode="sync", sharing="hybrid")
    assert result.steps_per_s.value == pytest.approx((k / t_ps + k / t_fcfs) / 2, rel=REL)
    assert [c.config.sharing for c in result.components] == ["fcfs", "ps"]


def test_one_worker_reproduces_each_profiled_step() -> None:
    fwd = [[0.010, 0.020], [0.012, 0.025], [0.009, 0.018]]
    bwd = [[0.020, 0.030], [0.021, 0.036], [0.019, 0.027]]
    trace = synthetic_trace(fwd, bwd, [1000, 2000], update_s=[0.001, 0.002])
    # The bandwidth is so high that transfers take ~1e-14 s: no sharing, no contention.
    result = run(trace, bandwidth_bps=1e18, steps=30, warmup_steps=0, timeline=True)
    expected = [sum(f) + sum(b) + 0.001 for f, b in zip(fwd, bwd, strict=True)]
    assert result.timeline is not None
    seen = set()
    for rec in result.timeline.steps:
        assert rec.end_s - rec.start_s == pytest.approx(expected[rec.profile_step], rel=REL)
        seen.add(rec.profile_step)
    assert seen == {0, 1, 2}  # sampling with replacement visits every profiled step


def test_k_equal_flows_on_a_ps_link_finish_at_k_s_over_b() -> None:
    size = 1_250_000  # 10 Mbit
    trace = synthetic_trace([0.0], [0.0], [size])
    for k in (1, 2, 3, 7):
        ends = pull_ends(
            run(trace, workers=k, sharing="ps", steps=1, warmup_steps=0, timeline=True)
        )
        for w in range(k):
            assert ends[w] == pytest.approx(k * 8 * size / B, rel=REL)


def test_ith_fcfs_flow_finishes_at_i_s_over_b() -> None:
    size = 1_250_000
    trace = synthetic_trace([0.0], [0.0], [size])
    ends = pull_ends(run(trace, workers=5, sharing="fcfs", steps=1, warmup_steps=0, timeline=True))
    for w in range(5):  # workers start in index order, so worker w is the (w+1)-th flow
        assert ends[w] == pytest.approx((w + 1) * 8 * size / B, rel=REL)


def test_fcfs_worker_with_queued_pulls_keeps_its_place() -> None:
    sizes = [1_000_000, 1_000_000]
    trace = synthetic_trace([0.0, 0.0], [0.0, 0.0], sizes)
    ends = pull_ends(run(trace, workers=3, sharing="fcfs", steps=1, warmup_steps=0, timeline=True))
    per_worker = 8 * sum(sizes) / B
    assert [ends[w] for w in range(3)] == pytest.approx(
        [per_worker, 2 * per_worker, 3 * per_worker], rel=REL
    )


@pytest.mark.parametrize(
    ("workers", "per_flow_gbps"), [(1, 10.0), (2, 10.0), (3, 25.0 / 3), (5, 5.0)]
)
def test_per_flow_cap_as_in_tpds_4_4(workers: int, per_flow_gbps: float) -> None:
    size = 125_000_000  # 1 Gbit
    trace = synthetic_trace([0.0], [0.0], [size])
    result = run(
        trace,
        workers=workers,
        bandwidth_bps=25e9,
        flow_cap_bps=10e9,
        steps=1,
        warmup_steps=0,
        timeline=True,
    )
    ends = pull_ends(result)
    for w in range(workers):
        assert ends[w] == pytest.approx(1e9 / (per_flow_gbps * 1e9), rel=REL)


def test_per_worker_caps_clip_or_maxmin() -> None:
    size = 125_000_000  # 1 Gbit
    trace = synthetic_trace([0.0], [0.0], [size])
    caps = (5e9, 25e9, 25e9)
    clip = pull_ends(
        run(
            trace,
            workers=3,
            bandwidth_bps=25e9,
            flow_cap_bps=caps,
            steps=1,
            warmup_steps=0,
            timeline=True,
        )
    )
    # clip: 5, 25/3, 25/3 Gbit/s (spare unused); worker 0 stays at its 5 Gbit/s cap.
    assert clip[0] == pytest.approx(1 / 5, rel=REL)
    assert clip[1] == pytest.approx(3 / 25, rel=REL)
    maxmin = pull_ends(
        run(
            trace,
            workers=3,
            bandwidth_bps=25e9,
            flow_cap_bps=caps,
            steps=1,
            warmup_steps=0,
            timeline=True,
            cap_mode="maxmin",
        )
    )
    # max-min: 5, 10, 10 Gbit/s.
    assert maxmin[0] == pytest.approx(1 / 5, rel=REL)
    assert maxmin[1] == pytest.approx(1 / 10, rel=REL)
    assert maxmin[2] == pytest.approx(1 / 10, rel=REL)


def test_forward_overlaps_with_later_pulls() -> None:
    # Two layers, overlap on: forward:l0 runs while pull:l1 is still arriving.
    s0, s1 = 1_000_000, 3_000_000  # 8 ms and 24 ms at 1 Gbit/s
    f0, f1, b0, b1 = 0.010, 0.005, 0.002, 0.003
    trace = synthetic_trace([f0, f1], [b0, b1], [s0, s1])
    result = run(trace, steps=1, warmup_steps=0, timeline=True)
    assert result.timeline is not None
    at = {rec.op: (rec.start_s, rec.end_s) for rec in result.timeline}
    p0, p1 = 8 * s0 / B, 8 * (s0 + s1) / B
    assert at["forward:l0"] == pytest.approx((p0, p0 + f0), rel=REL)
    assert at["pull:l1"][1] == pytest.approx(p1, rel=REL)
    assert at["forward:l0"][0] < at["pull:l1"][1]  # the overlap
    fwd1_start = max(p0 + f0, p1)
    assert at["forward:l1"][0] == pytest.approx(fwd1_start, rel=REL)
    end_bwd1 = fwd1_start + f1 + b1
    assert at["push:l1"] == pytest.approx((end_bwd1, end_bwd1 + 8 * s1 / B), rel=REL)
    # backward:l0 overlaps with push:l1; push:l0 waits for the uplink.
    assert at["push:l0"][0] == pytest.approx(end_bwd1 + 8 * s1 / B, rel=REL)


def test_http2_window_as_in_icpe_fig_12() -> None:
    # Three streams ready at t=0 in trace order A (3 WIN), B (WIN/2), C (2 WIN); WIN takes 1 ms.
    win = 125_000  # bytes: 1 Mbit = 1 ms at 1 Gbit/s
    trace = synthetic_trace([0.0] * 3, [0.0] * 3, [3 * win, win // 2, 2 * win])
    result = run(trace, scheduler="http2", window_bytes=win, steps=1, warmup_steps=0, timeline=True)
    assert result.timeline is not None
    chunks = [(r.op, r.start_s * 1e3, r.end_s * 1e3) for r in result.timeline if r.kind == "pull"]
    # A sends WIN (0-1) and is preempted; B fits (1-1.5); C sends WIN (1.5-2.5) and is preempted;
    # A, ready again since 1 ms, runs to its end (2.5-4.5); then C (4.5-5.5).
    expected = [
        ("pull:l0", 0, 1),
        ("pull:l1", 1, 1.5),
        ("pull:l2", 1.5, 2.5),
        ("pull:l0", 2.5, 4.5),
        ("pull:l2", 4.5, 5.5),
    ]
    assert [c[0] for c in chunks] == [e[0] for e in expected]
    for (_, s, e), (_, s2, e2) in zip(chunks, expected, strict=True):
        assert (s, e) == pytest.approx((s2, e2), rel=REL)


@pytest.mark.parametrize(
    ("scheduler", "order"),
    [
        ("trace", ["l0", "l1", "l2"]),
        ("reverse", ["l2", "l1", "l0"]),
        ("critical-path", ["l0", "l1", "l2"]),
    ],
)
def test_flow_control_off_orders_whole_streams(scheduler: str, order: list[str]) -> None:
    trace = synthetic_trace([0.001] * 3, [0.001] * 3, [100_000] * 3)
    result = run(trace, scheduler=scheduler, steps=1, warmup_steps=0, timeline=True)
    assert result.timeline is not None
    pulls = sorted((r.start_s, r.op) for r in result.timeline if r.kind == "pull")
    assert [op.split(":")[1] for _, op in pulls] == order


def test_heterogeneous_speed_factors_async() -> None:
    trace = synthetic_trace([0.010], [0.020], [1000])
    result = run(trace, workers=2, bandwidth_bps=1e18, speed_factors=(1.0, 2.0), steps=20)
    # Worker 0 steps in 30 ms, worker 1 (twice as fast) in 15 ms; no contention.
    assert result.steps_per_s.value == pytest.approx(1 / 0.030 + 1 / 0.015, rel=1e-6)
    assert result.workers[1].mean_step_s == pytest.approx(0.015, rel=1e-6)


def test_heterogeneous_traces_sync_waits_for_the_slowest() -> None:
    fast = synthetic_trace([0.010], [0.020], [1000])
    slow = synthetic_trace([0.030], [0.040], [1000])
    result = simulate(
        [fast, slow],
        SimulationConfig(
            workers=3,
            bandwidth_bps=1e18,
            mode="sync",
            steps=10,
            warmup_steps=1,
            worker_types=(0, 1, 0),
        ),
    )
    assert result.steps_per_s.value == pytest.approx(3 / 0.070, rel=1e-6)
    assert [w.trace for w in result.workers] == [0, 1, 0]


def test_parsing_overhead_and_latency_lengthen_each_transfer() -> None:
    size = 1_000_000
    alpha, beta, latency = 1e-9, 1e-4, 5e-4
    trace = synthetic_trace([0.010], [0.020], [size], update_s=0.001)
    result = run(
        trace,
        parse_alpha_s_per_byte=alpha,
        parse_beta_s=beta,
        latency_s=latency,
        steps=3,
        warmup_steps=0,
    )
    per_transfer = 8 * size / B + latency + alpha * size + beta
    step = 2 * per_transfer + 0.030 + 0.001
    assert result.steps_per_s.value == pytest.approx(1 / step, rel=REL)


@pytest.mark.parametrize(("comm_s", "step_s"), [(0.002, 0.047), (0.020, 0.048)])
def test_comm_thread_work_waits_for_nothing_but_ends_the_step(comm_s: float, step_s: float) -> None:
    # One layer on a host of its own: the pull and the push (T = 8 ms each) each bring half the
    # comm thread's work (equal bytes), on the worker's own comm slot: the pull's beside the
    # forward, the push's from the push's start (T + 30 ms). Nothing waits for it, so the step
    # ends with the later of the update (2T + 31 ms = 47 ms) and the push's share (T + 30 ms +
    # comm_s / 2: 39 ms, or 48 ms when the share outlasts the push and the update).
    size = 1_000_000
    trace = synthetic_trace([0.010], [0.020], [size], update_s=0.001)
    result = run(trace, comm_thread_s_per_step=comm_s, steps=3, warmup_steps=0)
    assert result.steps_per_s.value == pytest.approx(1 / step_s, rel=REL)


@pytest.mark.parametrize(("comm_s", "step_s"), [(0.008, 0.047), (0.020, 0.058)])
def test_comm_thread_work_takes_the_cores_the_computation_leaves(
    comm_s: float, step_s: float
) -> None:
    # The same layer on a host of one core, which the computation takes whole while it runs:
    # the pull's share waits for the backward to end (T + 30 ms), then the push's share
    # follows it on the comm thread, beside the push. With 4 ms each both are done at
    # T + 38 ms, inside the push and the update (2T + 31 ms = 47 ms): hidden in the waits, as
    # in the one-worker runs it is measured from. With 10 ms each the step ends with them at
    # T + 50 ms = 58 ms.
    size = 1_000_000
    trace = synthetic_trace([0.010], [0.020], [size], update_s=0.001)
    one_core = {"colocated_workers": 1, "host_cpu_cores": 1.0, "worker_cpu_cores": 1.0}
    result = run(trace, comm_thread_s_per_step=comm_s, steps=3, warmup_steps=0, **one_core)
    assert result.steps_per_s.value == pytest.approx(1 / step_s, rel=REL)
    # On two cores the computation leaves one: the pull's share runs beside the forward from
    # T (done by T + 10 ms), the push's from T + 30 ms beside the push: T + 40 ms at most.
    two_cores = {**one_core, "host_cpu_cores": 2.0}
    result = run(trace, comm_thread_s_per_step=0.020, steps=3, warmup_steps=0, **two_cores)
    assert result.steps_per_s.value == pytest.approx(1 / 0.048, rel=REL)


def test_workers_sharing_a_core_are_bounded_by_their_cpu_per_step() -> None:
    # Four workers on one core with a link so fast that transfers take microseconds: the core
    # is (almost) never idle, so the steps per second of all workers together approach
    # 1 / (computation + comm thread work) and never exceed it.
    trace = synthetic_trace([0.010], [0.020], [100_000])
    shared = {"colocated_workers": 4, "host_cpu_cores": 1.0, "worker_cpu_cores": 1.0}
    for comm_s in (0.0, 0.010):
        result = run(
            trace,
            workers=4,
            bandwidth_bps=1e12,
            comm_thread_s_per_step=comm_s,
            steps=200,
            warmup_steps=20,
            **shared,
        )
        bound = 1 / (0.030 + comm_s)
        assert 0.98 * bound <= result.steps_per_s.value <= bound * (1 + REL)


def test_comm_thread_work_is_for_a_parameter_server() -> None:
    trace = synthetic_trace([0.010], [0.020], [1000])
    with pytest.raises(ConfigError, match=r"^comm_thread_s_per_step: applies to a parameter"):
        run(trace, arch="allreduce", mode="sync", comm_thread_s_per_step=0.001)
    with pytest.raises(ConfigError, match=r"^comm_thread_s_per_step: "):
        run(trace, comm_thread_s_per_step=-1.0)
    with pytest.raises(ConfigError, match=r"^comm_thread_s_per_step: not with comm_cpu_s_per_byte"):
        run(trace, comm_thread_s_per_step=0.001, comm_cpu_s_per_byte=1e-9, host_cpu_cores=1.0)


RING_ALPHA = 2e-8  # s of CPU work per byte of the layer


def ring_of_two(trace: Trace, placement: str, alpha: float = RING_ALPHA, **kw: object) -> float:
    """Steps per second of two ranks all-reducing ``trace`` with ``alpha`` s of work per byte."""
    result = run(
        trace,
        workers=2,
        mode="sync",
        arch="allreduce",
        parse_alpha_s_per_byte=alpha,
        parse_placement=placement,
        **kw,
    )
    return result.steps_per_s.value


@pytest.mark.parametrize("alpha", [4e-9, RING_ALPHA])  # the work shorter / longer than the bytes
def test_a_pipelined_rings_work_follows_each_message(alpha: float) -> None:
    # One layer, two ranks with a host each: after backward (30 ms) the all-reduce sends
    # 2(k-1)/k = 1 times the layer's bytes (T) as 2(k-1) = 2 messages of T/2, and the rank's CPU
    # work alpha * bytes (P) is done after the transfer ("after"), or half of it on each
    # message once it has arrived while the next one moves ("pipelined"): the second half
    # starts when both the second message and the first half are done.
    size = 1_000_000
    trace = synthetic_trace([0.010], [0.020], [size])
    t, p = 8 * size / B, alpha * size
    pipelined = max(t, t / 2 + p / 2) + p / 2
    for placement, step in (("after", t + p), ("pipelined", pipelined)):
        assert ring_of_two(trace, placement, alpha) == pytest.approx(2 / (0.030 + step), rel=REL)


def test_a_pipelined_rings_work_shares_the_hosts_cores() -> None:
    # Both ranks on one host of one core (each rank's computation wants one core): their
    # forward and backward run side by side at half speed (60 ms); then each half of a rank's
    # work (P/2 alone) shares the core with the other rank's and takes P. T = 8 ms, P = 20 ms:
    # the first halves end at T/2 + P, the second at T/2 + 2P ("after": T + 2P).
    size = 1_000_000
    trace = synthetic_trace([0.010], [0.020], [size])
    t, p = 8 * size / B, RING_ALPHA * size
    one_core = {"colocated_workers": 2, "host_cpu_cores": 1.0, "worker_cpu_cores": 1.0}
    for placement, step in (("after", t + 2 * p), ("pipelined", t / 2 + 2 * p)):
        steps_per_s = ring_of_two(trace, placement, shared_nic=False, **one_core)
        assert steps_per_s == pytest.approx(2 / (0.060 + step), rel=REL)


def test_a_pipelined_rings_next_all_reduce_waits_for_the_last_ones_work() -> None:
    # Two layers, strict phases: both all-reduces are ready when backward ends (60 ms). Each
    # is 2 messages of T/2 with work P/2 after each; the second all-reduce starts when the
    # first has completed, its work included (one collective at a time).
    size = 1_000_000
    trace = synthetic_trace([0.010, 0.010], [0.020, 0.020], [size, size], overlap=False)
    t, p = 8 * size / B, RING_ALPHA * size
    one = t / 2 + p  # P > T: each all-reduce ends with its work
    assert ring_of_two(trace, "pipelined") == pytest.approx(2 / (0.060 + 2 * one), rel=REL)


def test_parse_placement_is_checked() -> None:
    trace = synthetic_trace([0.010], [0.020], [1000])
    with pytest.raises(ConfigError, match=r"^parse_placement: 'before' is not one of after"):
        run(trace, arch="allreduce", mode="sync", parse_placement="before")
    with pytest.raises(ConfigError, match=r"^parse_placement: 'pipelined' is for an AllReduce"):
        run(trace, parse_placement="pipelined")


@pytest.mark.parametrize(
    ("nbytes", "k", "segment", "expected"),
    [
        (1_000_000, 2, None, 2),  # the paper's ring: 2(k-1)
        (1_000_000, 4, None, 6),
        (1_000_000, 2, 1 << 20, 4),  # one segment's worth: at least 2 per rank, 2k = 4; 2*4*1/2
        (1_000_000, 4, 1 << 20, 12),  # 8 segments, 2*8*3/4
        (7_300_000, 2, 1 << 20, 8),  # ceil(6.96) = 7 segments, rounded up to a multiple of 2
        (7_300_000, 4, 1 << 20, 12),  # max(7, 8) = 8 segments: 2*8*3/4
        (9_000_000, 3, 1 << 20, 12),  # 9 segments (a multiple of 3): 2*9*2/3
        (1_000_000, 1, 1 << 20, 0),  # one participant sends nothing
    ],
)
def test_ring_message_count_by_hand(
    nbytes: int, k: int, segment: int | None, expected: int
) -> None:
    assert ring_message_count(nbytes, k, segment) == expected


@pytest.mark.parametrize("k", [2, 3, 4])
def test_a_segmented_ring_pays_the_latency_per_segment(k: int) -> None:
    # One layer of 3 MB, strict phases, a host per rank, no CPU work: after the step's 30 ms of
    # computation the all-reduce moves 2(k-1)/k of the bytes at B in gloo's segments of 1 MiB,
    # one after another, each followed by the latency: n of them (ring_message_count).
    size, alpha, segment = 3_000_000, 2e-4, 1 << 20
    trace = synthetic_trace([0.010], [0.020], [size], overlap=False)
    n = ring_message_count(size, k, segment)
    step = 0.030 + 2 * (k - 1) / k * 8 * size / B + n * alpha
    result = run(
        trace, workers=k, mode="sync", arch="allreduce", latency_s=alpha, ring_segment_bytes=segment
    )
    assert result.steps_per_s.value == pytest.approx(k / step, rel=REL)
    paper = run(trace, workers=k, mode="sync", arch="allreduce", latency_s=alpha)
    step = 0.030 + 2 * (k - 1) / k * 8 * size / B + 2 * (k - 1) * alpha
    assert paper.steps_per_s.value == pytest.approx(k / step, rel=REL)


@pytest.mark.parametrize("placement", ["after", "pipelined"])
def test_a_segmented_rings_work_after_or_with_each_segment(placement: str) -> None:
    # Two ranks, one layer of 1 MB below one segment: 4 messages of 1/4 of the bytes (T/4
    # each). "after": all the work P once the last message is in; "pipelined": P/4 on each
    # message as it arrives, the last quarter after the last message (P > T/4 here: the work
    # falls behind, each quarter starts when the previous one ends or its message arrives).
    size = 1_000_000
    trace = synthetic_trace([0.010], [0.020], [size])
    t, p = 8 * size / B, RING_ALPHA * size
    ends = 0.0
    for j in range(1, 5):
        ends = max(ends, j * t / 4) + p / 4
    step = t + p if placement == "after" else ends
    steps_per_s = ring_of_two(trace, placement, ring_segment_bytes=1 << 20)
    assert steps_per_s == pytest.approx(2 / (0.030 + step), rel=REL)


def test_ring_segments_are_checked() -> None:
    trace = synthetic_trace([0.010], [0.020], [1000])
    ring = {"arch": "allreduce", "mode": "sync", "workers": 2}
    with pytest.raises(ConfigError, match=r"^ring_segment_bytes: a segment holds at least"):
        run(trace, ring_segment_bytes=2, **ring)
    with pytest.raises(ConfigError, match=r"^ring_segment_bytes: is for a ring AllReduce"):
        run(trace, ring_segment_bytes=1 << 20)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_a_pipelined_ring_without_work_is_the_ring(k: int) -> None:
    # Per-layer overlap, a latency per message: with no CPU work the pipelined ring's messages
    # and its one-collective-at-a-time chain are exactly the ring's held connection.
    trace = synthetic_trace(FWD, BWD, SIZES, update_s=0.001)
    runs = [
        run(trace, workers=k, mode="sync", arch="allreduce", latency_s=3e-4, parse_placement=p)
        for p in ("after", "pipelined")
    ]
    assert runs[1].steps_per_s.value == pytest.approx(runs[0].steps_per_s.value, rel=REL)
