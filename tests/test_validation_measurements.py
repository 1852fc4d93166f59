"""A validation's measurements saved and read back: runs, the link measurement, errors.

These build small runs by hand (no training): the round trips must give back every field, and a
damaged or mismatched file must fail with a message that names the file and the field.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from test_link_interference import model_report

from profilers.distributed.config import Architecture, RunConfig
from profilers.distributed.link_duplex import DuplexReport
from profilers.distributed.link_profile import measured_network_profile
from profilers.distributed.measurements import (
    MeasuredPoint,
    Measurements,
    load_measurements,
    measurements_from_dict,
    measurements_to_dict,
    save_measurements,
)
from profilers.distributed.records import RunResult, Span, StepRecord, run_from_dict, run_to_dict
from profilers.distributed.ring_goodput import RingGoodput
from profilers.distributed.to_trace import run_to_trace
from profilers.link_sharing import (
    LinkSharingReport,
    SharingTrial,
    sharing_from_dict,
    sharing_to_dict,
)
from profilers.netns_cluster import BURST_S
from profilers.warm_sharing import WarmRound, WarmSharingReport
from simcore.errors import ConfigError


def a_run(
    arch: str = "ps-async", workers: int = 1, batch: int = 8, model: str = "mlp"
) -> RunResult:
    servers = 0 if arch == "allreduce" else 1
    config = RunConfig(
        model,
        architecture=arch,
        workers=workers,
        servers=servers,
        batch_size=batch,
        steps=3,
        warmup=1,
        threads=1,
    )
    steps = tuple(
        StepRecord(w, n, 10.0 + n + 0.1 * w, 10.9 + n + 0.1 * w, 2.3 - 0.1 * n)
        for w in range(workers)
        for n in range(3)
    )
    spans = tuple(
        Span(servers + w, w, n, "fc1", kind, 10.0 + n + 0.01 * i, 0.005 * (i + 1))
        for w in range(workers)
        for n in range(3)
        for i, kind in enumerate(("forward", "backward", "push" if servers else "allreduce"))
    )
    return RunResult(config, model, {"fc1": 4000, "fc2": 400}, spans, steps)


def measurements(with_sharing: bool = True) -> Measurements:
    sharing = LinkSharingReport(
        1e8,
        (
            SharingTrial("into", 1000, (0.5,)),
            SharingTrial("out of", 1000, (0.45,)),
            SharingTrial("out of", 1000, (0.9, 1.0)),
            SharingTrial("into", 1000, (0.7, 1.1), 0.25),
        ),
    )
    base = RunConfig("mlp", batch_size=8, steps=3, warmup=1, threads=1)
    points = (
        MeasuredPoint(Architecture.PS_SYNC, 1, (a_run("ps-sync"),)),
        MeasuredPoint(Architecture.PS_SYNC, 2, (a_run("ps-sync", 2), a_run("ps-sync", 2))),
        MeasuredPoint(Architecture.ALLREDUCE, 2, (a_run("allreduce", 2),)),
    )
    ring = (
        RingGoodput(2, (4000, 400), (0.01, 0.012), 1e8, (0.002, 0.003), (0.001, 0.001))
        if with_sharing
        else None
    )
    # one way 2 workers x 1000 B in 0.1 ms; both ways at once 1.5x that
    duplex = DuplexReport(2, 1000, (1e-4,), (1e-4,), (4e-4 / 3,), 1e8) if with_sharing else None
    return Measurements(
        base,
        1e8,
        (0, 1),
        sharing if with_sharing else None,
        a_run(),
        a_run("allreduce"),
        points,
        ring,
        duplex,
        solo_more=(a_run(),) if with_sharing else (),
        alone_more=(a_run("allreduce"),) if with_sharing else (),
        interference=model_report(0.9, 0.7, 0.2) if with_sharing else None,
        warm_sharing=WARM if with_sharing else None,
    )


# Two pulls and two pushes at once over connections kept open, two rounds each.
WARM = WarmSharingReport(
    1e8,
    6000,
    0.3,
    {"into": 5e-4, "out of": 5e-4},
    (
        WarmRound("into", (6e-4, 1e-3)),
        WarmRound("into", (8e-4, 1e-3)),
        WarmRound("out of", (1e-3, 1e-3)),
        WarmRound("out of", (9e-4, 1e-3)),
    ),
)


def test_a_run_comes_back_with_every_timestamp() -> None:
    run = a_run("ps-sync", 2)
    back = run_from_dict(json.loads(json.dumps(run_to_dict(run))))
    assert back.config == run.config
    assert back.spans == run.spans and back.steps == run.steps
    assert back.layer_nbytes == run.layer_nbytes and back.model_name == "mlp"
    assert back.examples_per_s == run.examples_per_s  # 2 workers, 2 measured steps each


def test_a_runs_cpu_time_comes_back_and_an_older_run_has_none() -> None:
    run = a_run()
    timed = dataclasses.replace(
        run, steps=tuple(dataclasses.replace(s, cpu_s=0.5 + s.step) for s in run.steps)
    )
    back = run_from_dict(json.loads(json.dumps(run_to_dict(timed))))
    assert back.steps == timed.steps
    assert back.cpu_s_per_step() == pytest.approx(2.0)  # steps 1 and 2 after the warm-up
    older = json.loads(json.dumps(run_to_dict(run)))
    for step in older["steps"]:
        del step["cpu_s"]  # as a run recorded before the runner measured it
    assert run_from_dict(older).cpu_s_per_step() is None
    older["steps"][0]["cpu_s"] = -1.0
    with pytest.raises(ConfigError, match=r"run\.json: steps: "):
        run_from_dict(older, "run.json")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.update(schema="other"), "not a distributed run"),
        (lambda d: d.update(schema_version=9), "schema_version 9"),
        (lambda d: d.pop("steps"), "steps: missing field 'steps'"),
        (lambda d: d["spans"][0].pop(), "spans: "),
        (lambda d: d["config"].update(workers=0), "config: workers: must be an integer >= 1"),
        (lambda d: d["steps"][0].update(end_s="late"), "steps: could not convert"),
    ],
)
def test_a_damaged_run_names_the_source_and_the_field(damage: Any, message: str) -> None:
    data = json.loads(json.dumps(run_to_dict(a_run())))
    damage(data)
    with pytest.raises(ConfigError, match=f"run.json: {message}"):
        run_from_dict(data, "run.json")


def test_the_link_measurement_comes_back_and_gives_the_same_estimates() -> None:
    report = measurements().sharing
    assert report is not None
    back = sharing_from_dict(json.loads(json.dumps(sharing_to_dict(report))))
    assert back == report
    assert back.goodput_bps() == report.goodput_bps()
    assert back.weight_cv() == report.weight_cv()
    data = sharing_to_dict(report)
    data["trials"][1]["direction"] = "sideways"
    with pytest.raises(ConfigError, match=r"f\.json: link sharing: .*'sideways'"):
        sharing_from_dict(data, "f.json")
    del data["rate_bps"]
    with pytest.raises(ConfigError, match="missing field 'rate_bps'"):
        sharing_from_dict(data, "f.json")


@pytest.mark.parametrize("name", ["runs.json", "runs.json.gz"])
@pytest.mark.parametrize("with_sharing", [True, False])
def test_measurements_round_trip_through_a_file(
    tmp_path: Path, name: str, with_sharing: bool
) -> None:
    m = measurements(with_sharing)
    path = save_measurements(m, tmp_path / name)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    back = load_measurements(path)
    assert measurements_to_dict(back) == measurements_to_dict(m)
    assert back.base == m.base and back.cores == (0, 1) and back.link_rate_bps == 1e8
    assert back.ring == m.ring
    assert [(p.architecture, p.workers, len(p.runs)) for p in back.points] == [
        (Architecture.PS_SYNC, 1, 1),
        (Architecture.PS_SYNC, 2, 2),
        (Architecture.ALLREDUCE, 2, 1),
    ]
    with pytest.raises(ConfigError, match="already exists"):
        save_measurements(m, path)
    save_measurements(m, path, overwrite=True)
    if name.endswith(".gz"):  # no timestamp in the gzip header: same measurements, same bytes
        first = path.read_bytes()
        save_measurements(m, path, overwrite=True)
        assert path.read_bytes() == first


def test_further_profile_runs_come_back_and_older_files_have_none() -> None:
    m = measurements()
    back = measurements_from_dict(json.loads(json.dumps(measurements_to_dict(m))))
    assert back.solo_runs == (m.solo, *m.solo_more) and len(back.solo_runs) == 2
    assert back.alone_runs == (m.alone, *m.alone_more) and len(back.alone_runs) == 2
    older = measurements_to_dict(m)
    del older["solo_more"], older["alone_more"]
    assert measurements_from_dict(older).solo_runs == (m.solo,)
    other = measurements_to_dict(m)
    other["solo_more"] = [run_to_dict(a_run(batch=16))]
    with pytest.raises(ConfigError, match=r"solo_more\[0\] trained mlp with batch 16"):
        measurements_from_dict(other, "m.json")
    other["solo_more"] = {}
    with pytest.raises(ConfigError, match=r"m\.json: solo_more: expected a list of runs"):
        measurements_from_dict(other, "m.json")


def test_the_warm_sharing_comes_back_and_older_files_have_none() -> None:
    m = measurements()
    data = measurements_to_dict(m)
    back = measurements_from_dict(json.loads(json.dumps(data)))
    assert back.warm_sharing == WARM
    assert back.warm_sharing.weight_cv("out of") < back.warm_sharing.weight_cv("into")
    del data["warm_sharing"]  # as a file from before the measurement
    assert measurements_from_dict(data).warm_sharing is None
    data["warm_sharing"] = {"rate_bps": 1e8}
    with pytest.raises(ConfigError, match=r"m\.json: warm sharing: missing field"):
        measurements_from_dict(data, "m.json")


def test_the_testbeds_bucket_comes_back_and_older_files_have_the_default() -> None:
    m = dataclasses.replace(measurements(), link_burst_s=4e-3)
    data = measurements_to_dict(m)
    assert data["link_burst_s"] == 4e-3
    assert measurements_from_dict(json.loads(json.dumps(data))).link_burst_s == 4e-3
    # The cluster's own bucket is not written, and a file without one had it (every kept
    # campaign: 1 ms).
    default = measurements_to_dict(measurements())
    assert "link_burst_s" not in default
    assert measurements_from_dict(default).link_burst_s == BURST_S == 1e-3
    for bad in (0, -1e-3, "wide"):
        with pytest.raises(ConfigError, match=r"m\.json: .*link_burst_s"):
            measurements_from_dict({**data, "link_burst_s": bad}, "m.json")


def test_the_cli_refuses_a_bucket_without_a_testbed(capsys: pytest.CaptureFixture[str]) -> None:
    from simcore.cli.main import main

    for argv, says in (
        (["--testbed-burst", "4ms"], "--testbed-burst: only with --testbed"),
        (["--testbed", "300Mbit/s", "--testbed-burst", "0"], "--testbed-burst: '0' must be > 0"),
        (["--testbed", "300Mbit/s", "--testbed-burst", "2s"], "--testbed-burst: must be"),
        (["--testbed", "300Mbit/s", "--testbed-burst", "wide"], "--testbed-burst"),
    ):
        assert main(["validate", *argv]) == 1
        assert says in capsys.readouterr().err


def test_the_cli_defaults_are_the_librarys() -> None:
    from profilers.distributed.validation import PROFILE_RUNS, RING_CPU_PLACEMENT
    from simcore.cli import validate_cmd

    assert validate_cmd.PROFILE_RUNS == PROFILE_RUNS
    assert validate_cmd.RING_CPU_PLACEMENT == RING_CPU_PLACEMENT


def test_runs_that_do_not_belong_to_their_point_or_profile_are_refused() -> None:
    data = measurements_to_dict(measurements())
    wrong_w = json.loads(json.dumps(data))
    wrong_w["points"][1]["workers"] = 3
    with pytest.raises(ConfigError, match=r"m.json: points\[1\]: runs\[0\] is ps-sync with 2"):
        measurements_from_dict(wrong_w, "m.json")
    other_batch = json.loads(json.dumps(data))
    other_batch["points"][2]["runs"][0] = run_to_dict(a_run("allreduce", 2, batch=16))
    with pytest.raises(ConfigError, match="allreduce W=2 trained mlp with batch 16"):
        measurements_from_dict(other_batch, "m.json")
    empty = json.loads(json.dumps(data))
    empty["points"][0]["runs"] = []
    with pytest.raises(ConfigError, match=r"points\[0\]: no runs"):
        measurements_from_dict(empty, "m.json")
    bad_run = json.loads(json.dumps(data))
    bad_run["points"][1]["runs"][0]["steps"] = "none"
    with pytest.raises(ConfigError) as refused:
        measurements_from_dict(bad_run, "m.json")
    assert str(refused.value).startswith("m.json: points[1]: runs[0]: steps: ")  # named once
    bad_ring = json.loads(json.dumps(data))
    bad_ring["ring_goodput"]["times_s"] = []
    with pytest.raises(ConfigError, match=r"m\.json: ring_goodput: needs workers >= 2"):
        measurements_from_dict(bad_ring, "m.json")
    no_ring = json.loads(json.dumps(data))
    del no_ring["ring_goodput"]  # optional: files from before it was measured
    assert measurements_from_dict(no_ring, "m.json").ring is None
    bad_base = json.loads(json.dumps(data))
    bad_base["base"]["batch_size"] = 0
    with pytest.raises(ConfigError, match=r"m\.json: base: batch_size: must be an integer >= 1"):
        measurements_from_dict(bad_base, "m.json")
    missing = json.loads(json.dumps(data))
    del missing["alone"]
    with pytest.raises(ConfigError, match=r"m\.json: missing field 'alone'"):
        measurements_from_dict(missing, "m.json")


def test_rings_of_several_w_round_trip_and_make_the_profiles_rate_per_w() -> None:
    # Rings of 2 and 4 over a 100 Mbit/s link, layers of 4000 and 400 B (below gloo's
    # segment: 4(W-1) messages each): the ring of two's time beyond its bytes is the cost per
    # message; the ring of four's time beyond its 24 messages' cost is its bytes' time.
    base = measurements()
    assert base.ring is not None and base.sharing is not None
    layers, rate = base.ring.layer_nbytes, 1e8
    four = RingGoodput(4, layers, (0.05, 0.06, 0.07), rate)
    with_rings = dataclasses.replace(base, rings=(base.ring, four))
    data = json.loads(json.dumps(measurements_to_dict(with_rings)))
    back = measurements_from_dict(data, "m.json")
    assert back.rings == (base.ring, four) and back.ring_set == back.rings
    assert base.ring_set == (base.ring,)  # a file before the rings: the ring of two alone
    profile = measured_network_profile(back, run_to_trace(back.solo))
    ring = profile.ring_goodput
    assert ring is not None and ring.points == (
        (2, base.ring.goodput_bps()),
        (4, four.goodput_bps()),
    )
    link = base.sharing.goodput_bps()
    alpha = base.ring.message_latency_s(link)
    assert ring.message_latency_s == alpha
    assert four.messages == 24
    bits = 2 * 3 / 4 * 8 * sum(layers)
    expected = min(link, bits / (0.06 - 24 * alpha))
    assert dict(ring.bandwidths)[4] == pytest.approx(expected)
    assert dict(ring.bandwidths)[2] == pytest.approx(
        min(link, base.ring.bytes_bandwidth_bps(link, alpha))
    )


def test_a_ring_set_must_be_one_measurement() -> None:
    base = measurements()
    assert base.ring is not None
    four = RingGoodput(4, base.ring.layer_nbytes, (0.05,), base.ring.link_rate_bps)
    data = measurements_to_dict(dataclasses.replace(base, rings=(four, base.ring)))
    with pytest.raises(ConfigError, match=r"m\.json: ring_goodputs: the rings' workers must "):
        measurements_from_dict(json.loads(json.dumps(data)), "m.json")
    other = RingGoodput(4, (8,), (0.05,), base.ring.link_rate_bps)
    data = measurements_to_dict(dataclasses.replace(base, rings=(base.ring, other)))
    with pytest.raises(ConfigError, match=r"ring_goodputs\[1\]: its layers or link rate differ"):
        measurements_from_dict(json.loads(json.dumps(data)), "m.json")
    data = json.loads(json.dumps(measurements_to_dict(base)))
    data["ring_goodputs"] = [{"workers": 3}]
    with pytest.raises(ConfigError, match=r"m\.json: ring_goodputs\[0\]: missing field"):
        measurements_from_dict(data, "m.json")
    data["ring_goodputs"] = {"workers": 3}
    with pytest.raises(ConfigError, match=r"ring_goodputs: expected a list of rings, got dict"):
        measurements_from_dict(data, "m.json")


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nothing\.json.gz: no such file"):
        load_measurements(tmp_path / "nothing.json.gz")
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(b'{"schema": "sgdsim.validation_measurements"')[:-6])
    with pytest.raises(ConfigError, match=r"broken\.json.gz: cannot read validation measurements"):
        load_measurements(broken)
    other = tmp_path / "trace.json"
    other.write_text('{"schema": "sgdsim.trace"}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"trace\.json: not validation measurements"):
        load_measurements(other)


def test_measurements_without_a_point_cannot_be_assessed() -> None:
    from profilers.distributed.validation import assess

    empty = dataclasses.replace(measurements(), points=())
    with pytest.raises(ConfigError, match="no runs with W workers"):
        assess(empty)


def test_warm_flow_sharing_gives_each_direction_its_own_warm_cv() -> None:
    from profilers.distributed.validation import assess, report_text

    fresh = assess(measurements(), ideal=False)
    warm = assess(measurements(), ideal=False, flow_sharing="warm")
    pull, push = WARM.weight_cv("out of"), WARM.weight_cv("into")
    assert pull < push  # the two directions differ: a swap would show
    assert (warm.flow_weight_cv, warm.predictor.flow_weight_cv_push) == (pull, push)
    assert warm.predictor.flow_weight_cv == pull
    assert (fresh.flow_sharing, warm.flow_sharing) == ("fresh", "warm")
    assert fresh.flow_weight_cv != pull
    assert "over connections kept open" in warm.link_text
    assert "over connections kept open" not in fresh.link_text
    assert "not used by the predictions" in report_text(fresh)
    assert "not used by the predictions" not in report_text(warm)


def test_warm_flow_sharing_needs_the_measurement_where_a_server_shares_its_link() -> None:
    from profilers.distributed.validation import assess

    older = dataclasses.replace(measurements(), warm_sharing=None)
    with pytest.raises(ConfigError, match="no warm-sharing measurement"):
        assess(older, ideal=False, flow_sharing="warm")
    rings = tuple(p for p in older.points if p.architecture == Architecture.ALLREDUCE)
    ring_only = dataclasses.replace(older, points=rings)  # rings use no flow weight cv
    warm = assess(ring_only, ideal=False, flow_sharing="warm")
    fresh = assess(ring_only, ideal=False)
    assert [p.simulated for p in warm.points] == [p.simulated for p in fresh.points]
    # One worker's transfers share the server's link with nothing: no warm cv is needed.
    one = tuple(
        p for p in older.points if p.workers == 1 or p.architecture == Architecture.ALLREDUCE
    )
    assert assess(dataclasses.replace(older, points=one), ideal=False, flow_sharing="warm")


def test_warm_flow_sharing_refuses_a_given_cv_and_unknown_sharings_are_named() -> None:
    from profilers.distributed.validation import assess
    from simcore.link_settings import LinkSettings, Sourced

    given = LinkSettings(Sourced(0.0), flow_weight_cv=Sourced(0.3, "--flow-weight-cv"))
    with pytest.raises(ConfigError, match=r"a flow weight cv was given too \(--flow-weight-cv\)"):
        assess(measurements(), ideal=False, link=given, flow_sharing="warm")
    with pytest.raises(ConfigError, match="'lukewarm' is not one of fresh, warm"):
        assess(measurements(), ideal=False, flow_sharing="lukewarm")


def _with_cpu(run: RunResult, cpu_s: float) -> RunResult:
    return dataclasses.replace(
        run, steps=tuple(dataclasses.replace(s, cpu_s=cpu_s) for s in run.steps)
    )


def test_a_points_cpu_ratio_is_its_workers_cpu_per_step_over_the_one_worker_runs() -> None:
    from profilers.distributed.validation import COLUMNS_TEXT, assess, report_text

    m = measurements()
    # The one-worker runs used 10 ms per step; the W = 2 Sync-SGD runs 25 and 35 ms.
    timed = dataclasses.replace(
        m,
        solo=_with_cpu(m.solo, 0.010),
        solo_more=tuple(_with_cpu(r, 0.010) for r in m.solo_more),
        points=tuple(
            dataclasses.replace(
                p,
                runs=tuple(
                    _with_cpu(r, 0.010 if p.workers == 1 else 0.025 + 0.010 * i)
                    for i, r in enumerate(p.runs)
                ),
            )
            for p in m.points
        ),
    )
    ratios = {(p.architecture, p.workers): p.cpu_ratio for p in assess(timed, ideal=False).points}
    assert ratios[("ps-sync", 1)] == pytest.approx(1.0)
    assert ratios[("ps-sync", 2)] == pytest.approx(3.0)  # (25 + 35) / 2 over 10
    assert math.isnan(ratios[("allreduce", 2)])  # a ring's prediction charges CPU per byte
    # Runs that did not record their CPU time have none, and the table prints "-".
    untimed = assess(m, ideal=False)
    assert all(math.isnan(p.cpu_ratio) for p in untimed.points)
    text = report_text(untimed)
    assert COLUMNS_TEXT in text
    assert "cpu x" in text


def test_the_points_are_run_in_rounds_with_the_profile_spread_between_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One run of every point a round, the later one-worker pairs before the later rounds: the
    host's state of the moment touches every point and the profile alike."""
    from profilers.distributed import validation
    from profilers.distributed.testbed import Testbed

    order: list[str] = []

    def fake_run(self: Testbed, config: RunConfig, *args: object) -> RunResult:
        arch = config.architecture.value
        order.append("solo" if arch == "ps-async" else f"{arch} {config.workers}")
        return dataclasses.replace(a_run(arch, config.workers), config=config)

    monkeypatch.setattr(Testbed, "run", fake_run)
    kept: list[list[int]] = []
    measured = validation.measure(
        "mlp",
        architectures=("ps-sync", "allreduce"),
        workers_max=2,
        repetitions=3,
        profile_runs=3,
        steps=3,
        warmup=1,
        checkpoint=lambda m: kept.append([len(p.runs) for p in m.points]),
    )
    one_round = ["ps-sync 1", "ps-sync 2", "allreduce 1", "allreduce 2"]
    pair = ["solo", "allreduce 1"]  # the profile, then the computation alone
    assert order == pair + one_round + pair + one_round + pair + one_round
    assert [(p.architecture.value, p.workers, len(p.runs)) for p in measured.points] == [
        ("ps-sync", 1, 3),
        ("ps-sync", 2, 3),
        ("allreduce", 1, 3),
        ("allreduce", 2, 3),
    ]
    assert len(measured.solo_runs) == len(measured.alone_runs) == 3
    # A checkpoint before the points, then after every run: nothing measured is lost.
    assert kept[:3] == [[], [1], [1, 1]]
    assert kept[4] == [1, 1, 1, 1] and kept[5] == [2, 1, 1, 1] and kept[-1] == [3, 3, 3, 3]
    assert len(kept) == 1 + 12


def test_the_profile_pairs_before_each_round() -> None:
    from profilers.distributed.validation import _profile_rounds

    assert _profile_rounds(3, 3) == [-1, 1, 2]
    assert _profile_rounds(5, 3) == [-1, 1, 2, 1, 2]
    assert _profile_rounds(3, 1) == [-1, -1, -1]  # one round: all before it, as before
    assert _profile_rounds(1, 4) == [-1]


def test_the_validations_network_profile_carries_the_warm_cvs() -> None:
    m = measurements()
    own = measured_network_profile(m, run_to_trace(m.solo))
    assert own.flow_sharing is not None
    assert own.flow_sharing.warm_pull_cv == WARM.weight_cv("out of")
    assert own.flow_sharing.warm_push_cv == WARM.weight_cv("into")
    assert "connections kept open" in own.flow_sharing.method
    older = measured_network_profile(
        dataclasses.replace(m, warm_sharing=None), run_to_trace(m.solo)
    )
    assert older.flow_sharing is not None and older.flow_sharing.warm_pull_cv is None


def test_the_profile_runs_are_listed_with_how_far_apart_they_were() -> None:
    from profilers.distributed.validation import solo_runs_text

    slow, fast = a_run(batch=8), a_run(batch=10)  # the same steps: 1.25x the examples per second
    text = solo_runs_text((slow, fast))
    rates = f"{slow.examples_per_s:.1f}, {fast.examples_per_s:.1f}"
    assert text == f"mean of {rates}: 22.2% apart"  # 0.25 over their mean of 1.125
    assert solo_runs_text((slow,)) == solo_runs_text(()) == "mean"
