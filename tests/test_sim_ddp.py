"""PyTorch DDP in the simulator: torch's bucket rule, the collectives' costs, and the step
against its closed form (simcore.analytic.ddp_model), exactly."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.analytic.ddp_model import ddp_worker_from_trace, predict_ddp
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, SimulationResult, simulate
from simcore.sim.buckets import MIB, GradientTensor, assign_buckets, trace_buckets
from simcore.sim.collectives import (
    DoubleBinaryTree,
    RingAllReduce,
    binary_tree,
    double_binary_trees,
)
from simcore.trace.build import synthetic_trace
from simcore.trace.model import Layer, ParamTensor, Trace

REL = 1e-12
B = 1e9  # bit/s

# A chain of four layers, the first without parameters. The backward runs l3, l2, l1, l0, so
# DDP's gradients are ready in that order: 3 MB, 2 MB, then l1's 1 MB and l0's nothing.
FWD = [0.004, 0.010, 0.020, 0.006]
BWD = [0.008, 0.020, 0.030, 0.012]
SIZES = [0, 1_000_000, 2_000_000, 3_000_000]
UPDATES = [0.0, 0.001, 0.002, 0.003]


def chain(overlap: bool = True) -> Trace:
    return synthetic_trace(FWD, BWD, SIZES, update_s=UPDATES, overlap=overlap)


def run(trace: Trace | list[Trace], **kw: object) -> SimulationResult:
    base: dict[str, object] = {
        "arch": "ddp",
        "mode": "sync",
        "bandwidth_bps": B,
        "steps": 6,
        "warmup_steps": 1,
    }
    base.update(kw)
    return simulate(trace, SimulationConfig(**base))  # type: ignore[arg-type]


def step_s(result: SimulationResult) -> float:
    return result.config.workers / result.steps_per_s.value


def grad(name: str, nbytes: int, dtype: str = "float32") -> GradientTensor:
    return GradientTensor(name.split(".")[0], name, nbytes, dtype)


# ---------------------------------------------------------------- buckets (torch's rule)


def test_a_bucket_closes_once_it_holds_its_limit_and_the_first_limit_is_its_own() -> None:
    grads = [grad("a.w", 600), grad("b.w", 500), grad("c.w", 300), grad("d.w", 800)]
    # first limit 1000: a+b = 1100 >= 1000 closes it; then 2000: c+d = 1100 stays open.
    buckets = assign_buckets(grads, bucket_cap_bytes=2000, first_bucket_bytes=1000)
    assert [[t.name for t in b.tensors] for b in buckets] == [["a.w", "b.w"], ["c.w", "d.w"]]
    assert [b.nbytes for b in buckets] == [1100, 1100]
    # A limit reached exactly closes the bucket (>=), and one tensor alone may exceed it.
    buckets = assign_buckets(grads, bucket_cap_bytes=300, first_bucket_bytes=600)
    assert [b.nbytes for b in buckets] == [600, 500, 300, 800]


def test_buckets_hold_one_dtype_each() -> None:
    grads = [grad("a.w", 600), grad("b.w", 500, "float16"), grad("c.w", 600)]
    buckets = assign_buckets(grads, bucket_cap_bytes=1000, first_bucket_bytes=1000)
    # float32's first bucket closes at c (1200); float16's open bucket comes last.
    assert [[t.name for t in b.tensors] for b in buckets] == [["a.w", "c.w"], ["b.w"]]


@pytest.mark.parametrize("cap", [0, -1, 1.5, True])
def test_bucket_limits_must_be_positive_whole_bytes(cap: object) -> None:
    with pytest.raises(ConfigError, match="bucket_cap_bytes"):
        assign_buckets([grad("a.w", 4)], bucket_cap_bytes=cap)  # type: ignore[arg-type]


def test_gradients_come_in_backward_order_a_linear_layers_bias_first() -> None:
    # What torch 2.13's DDP recorded for cnn: 'rebuilt_per_bucket_param_indices' 9 8 7 6, 4 5
    # 2 3 0 1 and bucket sizes 2108456, 372992 with the default limits (25 MiB, first 1 MiB).
    layers = (
        Layer(
            "conv",
            "Conv2d",
            (
                ParamTensor("conv.weight", (8,), "float32", 32),
                ParamTensor("conv.bias", (2,), "float32", 8),
            ),
        ),
        Layer(
            "fc",
            "Linear",
            (
                ParamTensor("fc.weight", (64,), "float32", 2 * MIB),
                ParamTensor("fc.bias", (4,), "float32", 16),
            ),
        ),
    )
    trace = dataclasses.replace(
        synthetic_trace([0.01, 0.01], [0.01, 0.01], [40, 2 * MIB + 16]),
        layers=(
            dataclasses.replace(layers[0], name="l0"),
            dataclasses.replace(layers[1], name="l1"),
        ),
    )
    names = [[t.name for t in b.tensors] for b in trace_buckets(trace)]
    assert names == [["fc.bias", "fc.weight"], ["conv.weight", "conv.bias"]]


def test_the_chains_buckets_by_hand() -> None:
    assert [b.nbytes for b in trace_buckets(chain())] == [3_000_000, 3_000_000]
    assert [b.nbytes for b in trace_buckets(chain(), MIB, MIB)] == [3_000_000, 2_000_000, 1_000_000]
    assert [b.layers for b in trace_buckets(chain(), 25 * MIB, 25 * MIB)] == [("l3", "l2", "l1")]


# ---------------------------------------------------------------- collectives


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_the_ring_moves_2_k_minus_1_over_k_of_the_data_in_2_k_minus_1_hops(k: int) -> None:
    ring = RingAllReduce()
    assert ring.bits(1000, k) == pytest.approx(8000 * 2 * (k - 1) / k, rel=REL)
    assert ring.hops(k) == 2 * (k - 1)


def test_nccls_binary_tree_of_14_ranks_as_its_source_draws_it() -> None:
    # nccl/src/graph/trees.cc: 0-8; 8-(4, 12); 4-(2, 6); 12-(10, 13); 2-(1, 3) ...
    tree = {r: binary_tree(14, r) for r in range(14)}
    assert tree[0] == (-1, (8,))
    assert tree[8] == (0, (4, 12))
    assert tree[12] == (8, (10, 13))
    assert tree[13] == (12, ())
    assert tree[2] == (4, (1, 3))
    # 13 ranks: 12 has only the child 10 (12 + 2 and 12 + 1 leave the ranks).
    assert binary_tree(13, 12) == (8, (10,))


@pytest.mark.parametrize("k", [2, 3, 4, 5, 8, 13, 64])
def test_double_binary_trees_are_trees_and_inner_ranks_are_leaves_in_the_other(k: int) -> None:
    first, second = double_binary_trees(k)
    for tree in (first, second):
        roots = [r for r in range(k) if tree[r][0] < 0]
        assert len(roots) == 1
        for r in range(k):
            for child in tree[r][1]:
                assert tree[child][0] == r
    for r in range(k):  # at most one tree gives a rank two children
        assert min(len(first[r][1]), len(second[r][1])) <= 1 or k < 4


def test_a_tree_by_hand() -> None:
    # k = 2: each rank is the root of one tree and the leaf of the other: half the data each
    # way per tree, the ring's S; k = 4: ranks 1 and 2 are inner nodes (parent + 2 children)
    # of one tree and a leaf of the other: 4 links of S/2 = 2S, depth 2.
    tree = DoubleBinaryTree(chunk_bytes=100)
    s = 1_000_000
    assert tree.bits(s, 2) == pytest.approx(8 * (s + 1 * 100), rel=REL)
    assert tree.bits(s, 4) == pytest.approx(8 * (2 * s + 3 * 100), rel=REL)
    assert tree.hops(4) == 4


# ---------------------------------------------------------------- the step, exactly


def closed_form(trace: Trace | list[Trace], workers: int, **kw: object) -> float:
    traces = trace if isinstance(trace, list) else [trace]
    options = {k: kw.pop(k) for k in ("latency_s", "collective", "bandwidth_bps") if k in kw}
    types = [ddp_worker_from_trace(t, **kw) for t in traces]  # type: ignore[arg-type]
    counts = [workers] if len(types) == 1 else [1] * len(types)
    bandwidth = float(options.pop("bandwidth_bps", B))  # type: ignore[arg-type]
    return predict_ddp(types, counts, bandwidth, **options).step_s  # type: ignore[arg-type]


def test_one_worker_is_the_computation_alone() -> None:
    compute = sum(FWD) + sum(BWD) + sum(UPDATES)
    assert step_s(run(chain(), workers=1)) == pytest.approx(compute, rel=REL)
    assert closed_form(chain(), 1) == pytest.approx(compute, rel=REL)


@pytest.mark.parametrize("collective", ["ring", "tree"])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_strict_phases_add_every_buckets_allreduce_after_the_backward(
    k: int, collective: str
) -> None:
    latency = 3e-4
    algorithm = RingAllReduce() if collective == "ring" else DoubleBinaryTree()
    buckets = trace_buckets(chain(), MIB, MIB)
    comm = sum(algorithm.time_s(b.nbytes, k, B, latency) for b in buckets)
    expected = sum(FWD) + sum(BWD) + comm + sum(UPDATES)
    result = run(
        chain(overlap=False),
        workers=k,
        latency_s=latency,
        collective=collective,
        bucket_cap_bytes=MIB,
        first_bucket_bytes=MIB,
    )
    assert step_s(result) == pytest.approx(expected, rel=REL)
    formula = closed_form(
        chain(overlap=False),
        k,
        overlap="none",
        latency_s=latency,
        collective=collective,
        bucket_cap_bytes=MIB,
        first_bucket_bytes=MIB,
    )
    assert formula == pytest.approx(expected, rel=REL)


@pytest.mark.parametrize("bandwidth", [1e8, 1e9, 1e10])
@pytest.mark.parametrize("caps", [(MIB, MIB), (25 * MIB, MIB), (25 * MIB, 25 * MIB)])
@pytest.mark.parametrize("k", [2, 4])
def test_buckets_overlap_the_backward_as_the_recursion_says(
    k: int, caps: tuple[int, int], bandwidth: float
) -> None:
    cap, first = caps
    result = run(
        chain(),
        workers=k,
        bandwidth_bps=bandwidth,
        latency_s=1e-4,
        bucket_cap_bytes=cap,
        first_bucket_bytes=first,
    )
    formula = closed_form(
        chain(),
        k,
        bandwidth_bps=bandwidth,
        latency_s=1e-4,
        bucket_cap_bytes=cap,
        first_bucket_bytes=first,
    )
    assert step_s(result) == pytest.approx(formula, rel=REL)


def test_by_hand_a_bucket_waits_for_the_one_before() -> None:
    # 1 MiB caps, k = 2 at 1 Gbit/s: buckets of 3, 2, 1 MB take 24, 16, 8 ms. The backward
    # starts at 40 ms (the forward); l3's gradients are ready at 52, l2's at 82, l1's at 102 ms.
    # Bucket 0 runs 52-76, bucket 1 82-98, bucket 2 102-110; the backward ends at 110 too
    # (l0's 8 ms), so the step is 110 ms + the updates' 6 ms.
    result = run(chain(), workers=2, bucket_cap_bytes=MIB, first_bucket_bytes=MIB)
    assert step_s(result) == pytest.approx(0.116, rel=REL)
    # At 300 Mbit/s the buckets take 80, 53.3 and 26.7 ms: 52-132, 132-185.3, 185.3-212 ms.
    slow = run(chain(), workers=2, bandwidth_bps=3e8, bucket_cap_bytes=MIB, first_bucket_bytes=MIB)
    assert step_s(slow) == pytest.approx(0.052 + 0.080 + 0.160 / 3 + 0.080 / 3 + 0.006, rel=REL)


def test_a_slow_worker_holds_every_bucket_back() -> None:
    # Worker 1 computes at half speed: its gradients gate each bucket; the sim meets the
    # recursion with its ready times, and the fast worker waits (its gate ops last).
    result = run(
        chain(),
        workers=2,
        speed_factors=(1.0, 0.5),
        timeline=True,
        bucket_cap_bytes=MIB,
        first_bucket_bytes=MIB,
        replications=1,
    )
    # The slow worker's local updates are on its own device, slowed alike.
    halved = synthetic_trace(
        [2 * f for f in FWD], [2 * b for b in BWD], SIZES, update_s=[2 * u for u in UPDATES]
    )
    formula = closed_form([chain(), halved], 2, bucket_cap_bytes=MIB, first_bucket_bytes=MIB)
    assert step_s(result) == pytest.approx(formula, rel=REL)
    assert result.timeline is not None
    waits = {w: 0.0 for w in (0, 1)}
    for rec in result.timeline:
        if rec.op.startswith("gate:"):
            waits[rec.worker] += rec.end_s - rec.start_s
    assert waits[1] == pytest.approx(0.0, abs=1e-15)
    assert waits[0] > 0.0


def test_the_slowest_link_paces_every_rank() -> None:
    # Per-flow caps of 1 and 0.5 Gbit/s: every bucket takes what it takes at 0.5 Gbit/s.
    result = run(
        chain(), workers=2, flow_cap_bps=(1e9, 5e8), bucket_cap_bytes=MIB, first_bucket_bytes=MIB
    )
    formula = closed_form(
        chain(), 2, bandwidth_bps=5e8, bucket_cap_bytes=MIB, first_bucket_bytes=MIB
    )
    assert step_s(result) == pytest.approx(formula, rel=REL)


def test_fp16_compression_halves_the_bytes() -> None:
    plain = closed_form(chain(overlap=False), 3, overlap="none", bandwidth_bps=2e8)
    half = run(chain(overlap=False), workers=3, bandwidth_bps=2e8, ddp_compression="fp16")
    comm = sum(RingAllReduce().time_s(b.nbytes / 2, 3, 2e8, 0.0) for b in trace_buckets(chain()))
    assert step_s(half) == pytest.approx(sum(FWD) + sum(BWD) + comm + sum(UPDATES), rel=REL)
    assert step_s(half) < plain


def test_bucket_copies_delay_the_backward_and_a_bucket_view_removes_them() -> None:
    copy = 1e-9  # s/B: 1 ms per MB
    kw = {"workers": 2, "bucket_cap_bytes": MIB, "first_bucket_bytes": MIB}
    copied = run(chain(), bucket_copy_s_per_byte=copy, **kw)
    formula = closed_form(
        chain(), 2, copy_s_per_byte=copy, bucket_cap_bytes=MIB, first_bucket_bytes=MIB
    )
    assert step_s(copied) == pytest.approx(formula, rel=REL)
    viewed = run(chain(), bucket_copy_s_per_byte=copy, gradient_as_bucket_view=True, **kw)
    assert step_s(viewed) == pytest.approx(step_s(run(chain(), **kw)), rel=REL)
    # with W = 1 and no transfers the copies are exactly what is added: in and out, 6 MB each
    one = run(chain(), workers=1, bucket_copy_s_per_byte=copy)
    assert step_s(one) == pytest.approx(sum(FWD) + sum(BWD) + sum(UPDATES) + 12e-3, rel=REL)


def test_hosts_of_several_devices_reduce_inside_first() -> None:
    # Strict phases, one bucket of 6 MB, hosts of 4 devices on a 100 Gbit/s intra link: each
    # bucket pays its reduce-scatter and all-gather inside the host, 2 * 3/4 * 6 MB / B_intra.
    intra = 1e11
    result = run(
        chain(overlap=False),
        workers=2,
        devices_per_host=4,
        intra_bandwidth_bps=intra,
        bucket_cap_bytes=25 * MIB,
        first_bucket_bytes=25 * MIB,
    )
    inside = 2 * 0.75 * 8 * 6e6 / intra
    across = RingAllReduce().time_s(6e6, 2, B, 0.0)
    expected = sum(FWD) + sum(BWD) + inside + across + sum(UPDATES)
    assert step_s(result) == pytest.approx(expected, rel=REL)
    assert result.examples_per_s.value == pytest.approx(2 * 4 / expected, rel=REL)


def test_ddp_matches_the_per_layer_ring_where_buckets_are_layers() -> None:
    # Buckets of one layer each (caps of one byte) cut as the per-layer ring does: the same
    # AllReduces, one at a time, overlapped with the backward in the same way (without
    # updates: the ring applies each layer's after its AllReduce, DDP all of them at the end).
    trace = synthetic_trace(FWD, BWD, SIZES)
    kw = {"workers": 3, "latency_s": 1e-4, "bandwidth_bps": 5e8}
    ddp = run(trace, bucket_cap_bytes=1, first_bucket_bytes=1, ring_segment_bytes=2**20, **kw)
    ring = run(trace, arch="allreduce", ring_segment_bytes=2**20, **kw)
    assert step_s(ddp) == pytest.approx(step_s(ring), rel=1e-9)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bucket_cap_bytes": 0}, "bucket_cap_bytes: must be a whole number of bytes > 0"),
        ({"bucket_cap_bytes": -5}, "bucket_cap_bytes"),
        ({"first_bucket_bytes": 0}, "first_bucket_bytes"),
        ({"collective": "tree", "workers": 1}, "a tree needs at least 2 workers"),
        ({"collective": "star"}, "collective: 'star' is not one of ring, tree"),
        ({"mode": "async"}, "mode: DDP is synchronous"),
        ({"arch": "ps", "bucket_cap_bytes": MIB}, "bucket_cap_bytes: is an option of DDP"),
        ({"arch": "allreduce", "collective": "tree"}, "collective: is an option of DDP"),
        ({"ddp_compression": "int8"}, "ddp_compression"),
    ],
)
def test_bad_ddp_configurations_name_the_field(options: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"arch": "ddp", "mode": "sync", "workers": 2}
    base.update(options)
    with pytest.raises(ConfigError, match=message):
        SimulationConfig(**base)  # type: ignore[arg-type]


def test_ddp_replicates_one_model() -> None:
    other = synthetic_trace(FWD, BWD, [0, 1, 2, 3], update_s=UPDATES)
    with pytest.raises(ConfigError, match="DDP replicates one model"):
        run([chain(), other], workers=2, worker_types=(0, 1))
