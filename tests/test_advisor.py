"""The configuration advisor: enumeration, analytic values, confirmation, costs, saturation, CLI."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from simcore.analytic import Cluster, predict_async, predict_sync, worker_type_from_trace
from simcore.analytic.advisor import (
    Candidate,
    advise,
    analytic_examples_per_s,
    busiest_server_share,
    cost_per_million_examples,
    effective_worker,
    enumerate_candidates,
)
from simcore.analytic.ddp_model import ddp_worker_from_trace, predict_ddp
from simcore.cli.main import main
from simcore.errors import ConfigError
from simcore.saturation import saturation_point
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace
from simcore.trace.model import Trace

from output_support import output

B = 1e9  # bit/s
M_BYTES = 1_250_000  # M/B = 10 ms at B
MB_S = 8 * M_BYTES / B


def comm_trace() -> Trace:
    """Strict phases (no overlap), no update, two equal layers: T_C = M/B = 10 ms, f = 1/2."""
    half = M_BYTES // 2
    return synthetic_trace([0.002, 0.002], [0.003, 0.003], [half, half], overlap=False)


def test_enumeration_for_three_machines_by_hand() -> None:
    # AllReduce W=1..3 (3); DDP ring W=1..3 (3) and tree W=2,3 (2: a tree needs two ranks);
    # one server W=1,2 x {async,sync} x {ps,fcfs,hybrid} (12); two servers W=1 x 6 (6):
    # 26 candidates, none over budget, none twice.
    cands = enumerate_candidates(3)
    assert len(cands) == 26 == len(set(cands))
    assert all(c.machines <= 3 for c in cands)
    by_kind = Counter((c.arch, c.sharing if c.arch == "ddp" else c.servers) for c in cands)
    assert by_kind == {
        ("allreduce", 1): 3,
        ("ddp", "ring"): 3,
        ("ddp", "tree"): 2,
        ("ps", 1): 12,
        ("ps", 2): 6,
    }
    assert Candidate("ps", "sync", "fcfs", 1, 2).machines == 3
    assert Candidate("allreduce", "sync", "allreduce", 3).machines == 3
    assert Candidate("ddp", "sync", "tree", 3).machines == 3
    assert enumerate_candidates(1) == [
        Candidate("allreduce", "sync", "allreduce", 1),
        Candidate("ddp", "sync", "ring", 1),
    ]


def test_communication_bound_ordering_matches_the_closed_forms() -> None:
    """M/B = T_C = m = 10 ms, batch 1, 4 machines.

    Eq. 11: ring W=4 does 4 / (m + 2*3/4*m) = 1.6/m = 160 examples/s, W=3 3 / (m + 4/3 m)
    = 9/(7m) = 128.6. Every PS configuration stays at or below 1/m = 100: with one server the
    downlink moves M per step (async at most 1/m; Eq. 8, W=3: 3 / (3m + m + m) = 60, Eq. 9:
    3 / (3m + m + 2m) = 50, Eq. 7: 3 / (3m + m + 3m) = 42.9); with two servers W <= 2 and each
    worker's NIC moves M each way per step, so a cycle takes >= T_C + 2m = 3m: <= 2/(3m) = 66.7.
    """
    advice = advise(comm_trace(), 4, B, confirm_top=0)
    # DDP puts both 625 kB layers in one bucket (it closes at 1.25 MB >= the first bucket's
    # 1 MiB) and, the phases strict, that bucket cannot overlap: DDP's ring is Eq. 11 exactly.
    top = [r.candidate for r in advice.ranked[:4]]
    assert top == [
        c
        for w in (4, 3)
        for c in (
            Candidate("allreduce", "sync", "allreduce", w),
            Candidate("ddp", "sync", "ring", w),
        )
    ]
    for r, expected in zip(advice.ranked, (1.6, 1.6, 9 / 7, 9 / 7), strict=False):
        assert r.examples_per_s == pytest.approx(expected / MB_S, rel=1e-12)
    ps = {r.candidate: r.examples_per_s for r in advice.ranked if r.candidate.arch == "ps"}
    assert max(ps.values()) <= 1 / MB_S * (1 + 1e-9)
    sync3 = {s: ps[Candidate("ps", "sync", s, 3)] * MB_S for s in ("ps", "fcfs", "hybrid")}
    assert sync3 == pytest.approx({"ps": 3 / 7, "fcfs": 3 / 5, "hybrid": 3 / 6})
    assert all(r.source == "analytic" for r in advice.ranked) and advice.simulated == ()


def test_analytic_values_are_the_models_own() -> None:
    trace = load_trace("cnn-b32")
    worker = worker_type_from_trace(trace)
    share = busiest_server_share(trace, 2)
    for r in advise(trace, 5, B, confirm_top=0).ranked:
        c = r.candidate
        w = worker if c.servers == 1 else effective_worker(worker, 2, share, B)
        cluster = Cluster.homogeneous(w, c.workers, B)
        if c.arch == "allreduce":
            expected = predict_sync(cluster).allreduce.examples_per_s
        elif c.arch == "ddp":
            ddp = ddp_worker_from_trace(trace)
            expected = predict_ddp([ddp], [c.workers], B, collective=c.sharing).examples_per_s
        elif c.mode == "sync":
            expected = getattr(predict_sync(cluster), c.sharing).examples_per_s
        else:
            expected = getattr(predict_async(cluster), c.sharing).examples_per_s
        assert r.analytic_examples_per_s == pytest.approx(expected, rel=1e-12), c.label


def test_two_servers_split_the_bytes_but_not_the_nic() -> None:
    """One worker, two servers, Eq. 8: f m + (T_C + 2 (1-f) m) + f m + f T_S = T_C + 2m + f T_S."""
    worker = worker_type_from_trace(load_trace("cnn-b32"))
    f = 0.75
    eff = effective_worker(worker, 2, f, B)
    step = predict_sync(Cluster.homogeneous(eff, 1, B)).fcfs.step_s
    m = worker.transfer_s(B)
    assert step == pytest.approx(worker.compute_s + 2 * m + f * worker.update_s, rel=1e-6)
    assert effective_worker(worker, 1, f, B) is worker
    assert 0.5 <= busiest_server_share(load_trace("cnn-b32"), 2) <= 1
    assert busiest_server_share(comm_trace(), 2) == 0.5


def test_top_candidates_are_simulated_and_match_exact_closed_forms() -> None:
    """Strict-phase Sync-SGD: Eq. 7, 8 and 11 are exact, so simulation equals the analytic value.

    Analytic (m = 10 ms = T_C): ring W=3 128.6, ring W=2 100, Eq. 8 W=2 2/(4m) = 50,
    Eq. 7 W=2 2/(5m) = 40: the first three are simulated, the last is not.
    """
    cands = [
        Candidate("allreduce", "sync", "allreduce", 3),
        Candidate("allreduce", "sync", "allreduce", 2),
        Candidate("ps", "sync", "fcfs", 2),
        Candidate("ps", "sync", "ps", 2),
    ]
    calls: list[tuple[int, int]] = []
    advice = advise(
        comm_trace(),
        4,
        B,
        candidates=cands[::-1],
        confirm_top=3,
        sim_steps=20,
        progress=lambda d, t: calls.append((d, t)),
    )
    assert advice.simulated == tuple(cands[:3])
    assert [r.candidate for r in advice.ranked] == cands
    for r in advice.ranked[:3]:
        assert r.simulated is not None and r.source == "simulated"
        assert r.simulated.value == pytest.approx(r.analytic_examples_per_s, rel=1e-6)
    assert advice.ranked[3].simulated is None and advice.ranked[3].source == "analytic"
    assert calls[-1] == (20 * (3 + 2 + 2), 20 * (3 + 2 + 2))


def test_cost_per_million_examples_by_hand() -> None:
    # 4 machines at 2.5/h = 1/360 per s; at 100 examples/s a million take 10^4 s: 27.78.
    assert cost_per_million_examples(4, 2.5, 100.0) == pytest.approx(250 / 9)
    assert math.isinf(cost_per_million_examples(4, 2.5, 0.0))
    advice = advise(comm_trace(), 4, B, price_per_machine_hour=3.6, confirm_top=1, sim_steps=20)
    for r in advice.ranked:  # 3.6/h = 1e-3 per machine-second
        expected = r.candidate.machines * 1e-3 / r.examples_per_s * 1e6
        assert r.cost_per_million_examples == pytest.approx(expected)
    # Ring W=1 (one machine, no communication): 100 examples/s for 1e-3/s, the cheapest.
    assert advice.by_cost[0].candidate == Candidate("allreduce", "sync", "allreduce", 1)
    assert advice.by_cost[0].cost_per_million_examples == pytest.approx(10.0)
    assert advise(comm_trace(), 2, B, confirm_top=0).by_cost == ()


def test_saturation_point_on_hand_made_curves() -> None:
    w = [1, 2, 3, 4, 5]
    assert saturation_point(w, [10, 20, 30, 31, 31.5]) == 3  # 30 >= 0.95 * 31.5; 20 is not
    assert saturation_point(w[:4], [10, 10.4, 11, 11.2]) == 3  # 10.4 < 0.95 * 11.2 <= 11
    assert saturation_point(w[:4], [10, 20, 19, 19.5]) == 2  # the best (20) is at W = 2
    assert saturation_point(w[:3], [1, 2, 3]) is None  # still growing
    assert saturation_point([1], [5.0]) is None
    sat = {s.family: s for s in advise(comm_trace(), 4, B, confirm_top=0).saturation}
    # Ring: 100, 100, 128.6, 160: only W = 4 reaches 95% of 160 (still climbing).
    assert sat["ring AllReduce"].workers is None and sat["ring AllReduce"].max_workers == 4
    assert sat["DDP, ring AllReduce"].max_workers == 4
    assert sat["DDP, tree AllReduce"].max_workers == 4
    assert len(sat) == 15 and sat["PS Sync, ps links, 2 servers"].max_workers == 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"machines": 0}, "machines"),
        ({"machines": 2.5}, "machines"),
        ({"bandwidth_bps": 0.0}, "bandwidth_bps"),
        ({"bandwidth_bps": math.nan}, "bandwidth_bps"),
        ({"confirm_top": -1}, "confirm_top"),
        ({"price_per_machine_hour": -1.0}, "price_per_machine_hour"),
        ({"sim_steps": 5}, "sim_steps"),
        ({"trace": "cnn-b32"}, "trace"),
        ({"candidates": [Candidate("ps", "sync", "ps", 4)]}, "candidates"),
        ({"candidates": [Candidate("allreduce", "async", "ps", 2)]}, "candidates"),
    ],
)
def test_bad_inputs_name_the_parameter(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {"trace": comm_trace(), "machines": 4, "bandwidth_bps": B}
    args.update(kwargs)
    with pytest.raises(ConfigError, match=f"^{name}: "):
        advise(**args)  # type: ignore[arg-type]


CLI = ["advise", "cnn-b32", "--machines", "4", "--bandwidth", "1Gbps", "--steps", "20"]


def test_cli_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CLI, "--price", "2.5", "--confirm", "2", "--top", "5"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0].startswith("cnn, batch 32/worker, ") and "budget 4 machines" in out[0]
    assert out[1].startswith("41 configurations") and "best 2 simulated" in out[1]
    assert out[2].startswith("ranked: the simulated configurations first")
    header = out[3].split("  ")
    header = [h.strip() for h in header if h.strip()]
    assert header == [
        "rank", "architecture", "servers", "sharing", "W", "machines", "examples/s", "by",
        "analytic", "simulated 95% CI", "seeds min .. max", "cost/M ex",
    ]  # fmt: skip
    rows = out[4:9]
    assert [r.split()[0] for r in rows] == ["1", "2", "3", "4", "5"]
    by = [r[out[3].index("by") :].split()[0] for r in rows]
    assert by == ["simulated", "simulated", "analytic", "analytic", "analytic"]
    for row in rows:  # each row says its architecture and, for a PS, its sharing assumption
        arch = row[out[3].index("architecture") :].split("  ")[0].strip()
        sharing = row[out[3].index("sharing") :].split()[0]
        assert arch in ("PS Async", "PS Sync", "ring AllReduce", "DDP")
        expected = {"ring AllReduce": ("-",), "DDP": ("ring", "tree")}
        assert sharing in expected.get(arch, ("ps", "fcfs", "hybrid"))
    assert all(".." in r for r in rows[:2]) and all(" - " in r for r in rows[2:])
    assert out[9].startswith("cheapest: ")
    assert out[10].startswith("saturation (analytic; fewest W reaching 95% of the best)")
    assert len(out) == 11 + 15 + 1
    assert out[-1] == "link: 1.00 Gbit/s (--bandwidth)"
    assert captured.err == ""  # progress is drawn on a terminal only


def test_cli_json_matches_the_library(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CLI, "--confirm", "1", "--top", "3", "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    full = output(captured.out)
    doc = {**full["context"], "ranked": full["points"]}
    assert captured.err == ""
    assert (doc["machines"], doc["bandwidth_bps"], doc["candidates"]) == (4, 1e9, 41)
    assert doc["price_per_machine_hour"] is None and len(doc["ranked"]) == 3
    advice = advise(load_trace("cnn-b32"), 4, 1e9, confirm_top=1, sim_steps=20)
    for row, r in zip(doc["ranked"], advice.ranked, strict=False):
        assert row["label"] == r.candidate.label and row["source"] == r.source
        assert row["examples_per_s"] == pytest.approx(r.examples_per_s)
        assert row["cost_per_million_examples"] is None
    assert doc["ranked"][0]["simulated_examples_per_s"]["ci_low"] is not None
    assert doc["ranked"][1]["simulated_examples_per_s"] is None
    assert doc["simulated"] == [advice.simulated[0].label] and len(doc["saturation"]) == 15


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--machines", "0"], "--machines: must be an integer >= 1, got 0"),
        (["--price", "-1"], "--price: must be a finite number >= 0"),
        (["--confirm", "-1"], "--confirm: must be an integer >= 0"),
        (["--top", "0"], "--top: must be an integer >= 1"),
        (["--bandwidth", "fast"], "--bandwidth: 'fast' is not a bandwidth"),
        (["--network", "nowhere"], "nowhere"),
    ],
)
def test_cli_errors_are_one_line(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["advise", "cnn-b32", "--machines", "4", "--steps", "20", "--quiet"]
    assert main([*args, *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sgdsim: error: ") and message in err and err.count("\n") == 1


def test_layouts_of_hosts_count_devices_and_use_the_host_closed_form() -> None:
    # 16 devices in hosts of 8: rings of 1 or 2 hosts; a server beside one host (9 or 10
    # machines); two hosts leave no room for a server.
    cands = enumerate_candidates(16, (8,))
    rings = sorted(c.workers for c in cands if c.arch == "allreduce")
    assert rings == [1, 2] and all(c.devices_per_host == 8 for c in cands)
    assert {(c.workers, c.servers) for c in cands if c.arch == "ps"} == {(1, 1), (1, 2)}
    assert Candidate("allreduce", "sync", "allreduce", 2, 1, 8).machines == 16
    assert (
        Candidate("ps", "sync", "ps", 1, 2, 8).family == "PS Sync, ps links, 2 servers, hosts of 8"
    )
    # One host of 8, ring: its step is T_C plus an intra-host AllReduce, 2(G-1)/G M / B_intra,
    # and it trains 8 batches.
    trace, b_intra = comm_trace(), 8e10
    worker = worker_type_from_trace(trace)
    one_host = Candidate("allreduce", "sync", "allreduce", 1, 1, 8)
    step = worker.compute_s + 2 * 7 / 8 * 8 * M_BYTES / b_intra
    eps = analytic_examples_per_s(one_host, worker, B, 1.0, b_intra)
    assert eps == pytest.approx(8 * worker.batch_size / step, rel=1e-12)
    advice = advise(
        trace,
        16,
        B,
        devices_per_host=(1, 8),
        intra_bandwidth_bps=b_intra,
        confirm_top=1,
        sim_steps=20,
    )
    assert {r.candidate.devices_per_host for r in advice.ranked} == {1, 8}
    [simulated] = advice.simulated
    assert simulated.devices_per_host == 8  # eight devices of one host beat eight hosts' links
    with pytest.raises(ConfigError, match="intra_bandwidth_bps: needed with hosts of 8"):
        advise(trace, 16, B, devices_per_host=(1, 8))
    with pytest.raises(ConfigError, match=r"devices_per_host: .* lists a host size twice"):
        advise(trace, 16, B, devices_per_host=(8, 8), intra_bandwidth_bps=b_intra)


def test_ddp_candidates_carry_the_bucket_limits_to_the_closed_form_and_the_simulator() -> None:
    """A 256 KiB cap splits cnn into more buckets than the 25 MiB default: the analytic value of
    each DDP candidate is the closed form of those buckets, and its simulator config has them."""
    trace = load_trace("cnn-b32")
    small = {"bucket_cap_bytes": 1 << 18, "first_bucket_bytes": 1 << 18}
    step = ddp_worker_from_trace(trace, bucket_cap_bytes=1 << 18, first_bucket_bytes=1 << 18)
    assert len(step.buckets) > len(ddp_worker_from_trace(trace).buckets)
    ranked = advise(trace, 4, B, confirm_top=0, ddp=small).ranked
    ddp_rows = [r for r in ranked if r.candidate.arch == "ddp"]
    assert len(ddp_rows) == 4 + 3  # ring W=1..4, tree W=2..4
    for r in ddp_rows:
        c = r.candidate
        expected = predict_ddp([step], [c.workers], B, collective=c.sharing).examples_per_s
        assert r.analytic_examples_per_s == pytest.approx(expected, rel=1e-12), c.label
        config = c.sim_config(B, steps=10, seed=1, ddp=small)
        assert (config.arch, config.collective, config.bucket_cap_bytes) == (
            "ddp",
            c.sharing,
            1 << 18,
        )
