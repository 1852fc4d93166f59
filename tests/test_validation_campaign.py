"""A validation campaign: runs compacted to keep in the repository, and many saved validations
assessed together with their errors summarized by half and architecture.

The runs are built by hand (no training, see test_validation_measurements.py); the shipped
campaign is assessed once, so that the README's table is what the data in the repository gives.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import statistics
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from test_link_interference import model_report
from test_validation_measurements import measurements

from profilers.distributed.campaign import (
    CampaignReport,
    architecture_label,
    assess_campaign,
    campaign_files,
    campaign_point_table,
    campaign_summary_table,
    campaign_text,
    repeat_floor,
    repeat_gaps,
    repeat_gaps_text,
    shipped_campaigns,
)
from profilers.distributed.comm_cpu import (
    RingCpuWork,
    compute_s_per_step,
    ring_cpu_work,
    ring_cpu_work_s_per_byte,
)
from profilers.distributed.config import Overlap, RunConfig
from profilers.distributed.link_profile import measured_ring_cpu_work
from profilers.distributed.measurements import (
    Measurements,
    PointSelection,
    compacted,
    held_text,
    load_measurements,
    measurements_to_dict,
    save_measurements,
)
from profilers.distributed.noise_floor import error_noise_sd, noise_floor, repeating_error_rms
from profilers.distributed.records import RunResult, StepRecord, run_from_dict, run_to_dict
from profilers.distributed.ring_goodput import RingGoodput
from profilers.distributed.to_trace import pooled_trace, run_to_trace, with_compute_of
from profilers.distributed.validation import (
    ValidationPoint,
    assess,
    measured_phases,
    measured_step_quantiles,
    offset_gap_line,
    offsets_text,
)
from simcore.cli.main import main
from simcore.errors import ConfigError
from simcore.link_settings import LinkSettings, Sourced
from simcore.network_io import save_network_profile
from simcore.parallel import jobs, usable_cores
from simcore.trace.cpu import measured_comm_thread
from simcore.trace.io import load_trace, save_trace
from simcore.trace.model import Resource

from output_support import output


def on_every_core(paths: list[str], **options: Any) -> CampaignReport:
    """:func:`assess_campaign` with its files on every usable core, as the CLI assesses them
    (the README's numbers are whole kept sets: minutes on one core). Each set is assessed once
    a session with the same options: several tests read the same kept set's numbers, and the
    assessment is a pure function of the files and the options."""
    return _assessed(tuple(paths), tuple(sorted(options.items())))


@functools.cache
def _assessed(paths: tuple[str, ...], options: tuple[tuple[str, Any], ...]) -> CampaignReport:
    with jobs(None):
        return assess_campaign(list(paths), **dict(options))


def test_a_compacted_run_keeps_its_throughput_and_compute_slowdown() -> None:
    m = measurements()
    small = compacted(m)
    for before, after in zip(m.points, small.points, strict=True):
        for k, (run, kept) in enumerate(zip(before.runs, after.runs, strict=True)):
            assert math.isclose(kept.examples_per_s, run.examples_per_s, rel_tol=1e-9)
            assert math.isclose(
                kept.slowdown_vs(small.solo).ratio, run.slowdown_vs(m.solo).ratio, rel_tol=1e-6
            )
            largest = max(p.workers for p in m.points if p.architecture is before.architecture)
            full = k == 0 and before.workers == largest
            assert bool(kept.spans) == full, (before.architecture, before.workers, k)
    # the trace is built from these: they stay whole
    assert len(small.solo.spans) == len(m.solo.spans)
    assert len(small.alone.spans) == len(m.alone.spans)


def test_a_run_without_spans_comes_back_with_its_compute_per_layer() -> None:
    run = measurements().points[1].runs[1].without_spans()
    data = json.loads(json.dumps(run_to_dict(run)))
    assert data["spans"] == [] and set(data["compute_s_per_layer"]) == {"fc1"}
    back = run_from_dict(data, "r.json")
    assert back.compute_s_per_layer() == run.compute_s_per_layer()
    data["compute_s_per_layer"]["fc1"] = -1.0
    with pytest.raises(ConfigError, match=r"r\.json: compute_s_per_layer: -1\.0 is not"):
        run_from_dict(data, "r.json")


def test_compacting_makes_the_file_smaller_and_it_loads(tmp_path: Path) -> None:
    m = measurements()
    full = save_measurements(m, tmp_path / "full.json")
    small = save_measurements(compacted(m), tmp_path / "small.json")
    assert small.stat().st_size < full.stat().st_size
    back = load_measurements(small)
    assert [len(p.runs) for p in back.points] == [len(p.runs) for p in m.points]


def _campaign(tmp_path: Path) -> tuple[Path, list[Measurements]]:
    """Two validations at two link rates, one of them with strict phases."""
    first = measurements()
    second = dataclasses.replace(
        measurements(),
        link_rate_bps=2e8,
        base=dataclasses.replace(first.base, overlap=Overlap.STRICT),
    )
    folder = tmp_path / "campaign"
    (folder / "b").mkdir(parents=True)
    save_measurements(first, folder / "a.json.gz")
    save_measurements(second, folder / "b" / "runs.json.gz")
    (folder / "notes.txt").write_text("not runs\n")
    return folder, [first, second]


def test_a_folder_is_every_saved_runs_file_in_it_in_order(tmp_path: Path) -> None:
    folder, _ = _campaign(tmp_path)
    found = campaign_files([str(folder)])
    assert [given for given, _ in found] == [
        str(folder / "a.json.gz"),
        str(folder / "b" / "runs.json.gz"),
    ]
    with pytest.raises(ConfigError, match="no such file or folder, and not a shipped campaign"):
        campaign_files([str(tmp_path / "missing")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no saved runs"):
        campaign_files([str(tmp_path / "empty")])


def test_validate_names_the_shipped_campaigns_when_from_runs_names_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped campaign name given to ``sgdsim validate --from-runs``: one line listing the
    shipped campaigns, as the campaign scenario gives it, not a bare "no such file"."""
    missing = str(tmp_path / "check-999")
    assert main(["validate", "--from-runs", missing, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "no such file or folder, and not a shipped campaign" in err
    assert all(name in err for name in shipped_campaigns())
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_summary_is_the_mean_and_max_of_the_points_it_covers(tmp_path: Path) -> None:
    folder, saved = _campaign(tmp_path)
    report = assess_campaign([str(folder)], fit_rate_bps=1e8)
    assert report.halves() == [1e8, 2e8]
    points = campaign_point_table(report).rows
    assert len(points) == sum(len(m.points) for m in saved)
    assert {row["architecture"] for row in points} == {
        architecture_label("ps-sync", "layerwise"),
        architecture_label("allreduce", "layerwise"),
        architecture_label("ps-sync", "strict"),
        architecture_label("allreduce", "strict"),
    }
    summary = {(r["half"], r["architecture"]): r for r in campaign_summary_table(report).rows}
    errors = [abs(float(r["simulated_error_percent"])) for r in points]  # type: ignore[arg-type]
    whole = summary["all", "all"]
    assert whole["points"] == len(points)
    assert math.isclose(float(whole["mean_abs_error_percent"]), statistics.fmean(errors))  # type: ignore[arg-type]
    assert math.isclose(float(whole["max_abs_error_percent"]), max(errors))  # type: ignore[arg-type]
    held_out = [
        abs(float(r["simulated_error_percent"]))  # type: ignore[arg-type]
        for r in points
        if r["link"] == "200 Mbit/s"
    ]
    row = summary["200 Mbit/s (held out)", "all"]
    assert math.isclose(float(row["mean_abs_error_percent"]), statistics.fmean(held_out))  # type: ignore[arg-type]
    assert ("100 Mbit/s (fit)", "all") in summary
    # Beside the errors: how many are beyond 2 standard errors of their measured mean, and the
    # floor the runs' noise sets, over the same points.
    every = report.points()
    assert whole["beyond_noise"] == sum(
        abs(p.error(p.simulated)) > 2 * p.standard_error for p in every
    )
    floor = noise_floor([p.standard_error for p in every])
    assert floor is not None
    assert math.isclose(float(whole["noise_mean_abs_error_percent"]), 100 * floor.mean_abs_error)  # type: ignore[arg-type]
    assert math.isclose(float(whole["noise_max_abs_error_percent"]), 100 * floor.max_abs_error)  # type: ignore[arg-type]
    assert [float(r["standard_error_percent"]) for r in points] == pytest.approx(  # type: ignore[arg-type]
        [100 * p.standard_error for p in every], nan_ok=True
    )


def test_a_fit_rate_outside_the_campaign_is_an_error(tmp_path: Path) -> None:
    folder, _ = _campaign(tmp_path)
    with pytest.raises(ConfigError, match=r"--fit-rate: 300 Mbit/s is not a link rate .*100"):
        assess_campaign([str(folder)], fit_rate_bps=3e8)


def test_validate_from_a_folder_prints_the_campaign_and_its_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, saved = _campaign(tmp_path)
    args = ["validate", "--from-runs", str(folder), "--quiet", "--fit-rate", "100Mbit/s"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "the simulator's error by half and architecture" in text
    assert "100 Mbit/s (fit)" in text and "200 Mbit/s (held out)" in text
    assert main([*args, "--json"]) == 0
    doc = output(capsys.readouterr().out)
    assert len(doc["points"]) == sum(len(m.points) for m in saved)
    assert doc["context"]["fit_rate_bps"] == 1e8


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--save-runs", "x.json.gz"], "--save-runs: not with a campaign"),
        (["-o", "t.json"], "-o/--out: not with a campaign"),
    ],
)
def test_a_campaign_refuses_the_options_of_one_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    folder, _ = _campaign(tmp_path)
    assert main(["validate", "--from-runs", str(folder), "--quiet", *extra]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_validate_with_warm_flow_sharing_predicts_with_each_files_warm_cvs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = save_measurements(measurements(), tmp_path / "runs.json.gz")
    warm = measurements().warm_sharing
    assert warm is not None
    pull = warm.weight_cv("out of")
    args = ["validate", "--from-runs", str(runs), "--json", "--quiet", "--flow-sharing", "warm"]
    assert main(args) == 0
    doc = output(capsys.readouterr().out)
    context = doc["context"]
    assert (context["flow_sharing"], context["flow_weight_cv"]) == ("warm", pull)
    assert all(p["cpu_ratio"] is None for p in doc["points"])  # the runs carry no CPU time
    # A network profile's flow weight cvs give way to the warm ones; its bandwidth stays.
    assert main([*args, "--network", "veth-1gbit"]) == 0
    context = output(capsys.readouterr().out)["context"]
    assert (context["flow_sharing"], context["flow_weight_cv"]) == ("warm", pull)
    assert "(veth-1gbit)" in context["link"]
    # An option's cv is refused: the two say different things.
    assert main([*args, "--flow-weight-cv", "0.3"]) == 1
    err = capsys.readouterr().err
    assert "--flow-sharing warm takes each file's own warm-sharing cvs: not with" in err
    assert "--flow-weight-cv" in err and "Traceback" not in err


def test_warm_flow_sharing_is_refused_before_runs_it_could_not_predict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "--model", "cnn", "--flow-sharing", "warm", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "--flow-sharing warm: only with --testbed" in err and "Traceback" not in err


def test_a_campaign_with_warm_flow_sharing_says_so_and_names_a_file_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = _campaign(tmp_path)
    args = ["validate", "--from-runs", str(folder), "--quiet", "--flow-sharing", "warm"]
    assert main(args) == 0
    assert "flow weight cvs from each file's warm sharing" in capsys.readouterr().out
    assert main([*args[:-2], "--json"]) == 0
    context = output(capsys.readouterr().out)["context"]
    assert context["flow_sharing"] == "fresh"
    assert context["repeat_gaps"] == {"profile": [], "alone": []}  # no W = 1 of either kind
    older = dataclasses.replace(measurements(), warm_sharing=None)
    save_measurements(older, folder / "older.json.gz")
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "older.json.gz: flow sharing 'warm': these runs hold no warm-sharing" in err


@pytest.mark.slow
def test_a_campaigns_json_says_how_each_points_steps_and_transfers_went(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As one validation's JSON does, and as the tables show it: the step-time quantiles and
    each run's and seed's phase pattern of every point, the link's occupancy of Async-SGD with
    W >= 2, and where the runs kept spans (check-rounds keeps them for its largest W) the k-th
    Sync-SGD pull's arrival after the release; null where not known."""
    assert main(["validate", "--from-runs", "check-rounds", "--json", "--quiet"]) == 0
    points = output(capsys.readouterr().out)["points"]
    kept = [p for p in points if p["measured_pull_arrivals"] is not None]
    assert [(p["model"], p["architecture"], p["workers"]) for p in kept] == [
        ("resnet8-b16", "PS sync, layerwise", 4)
    ]
    for key in ("measured_pull_arrivals", "simulated_pull_arrivals"):
        arrivals = kept[0][key]
        assert len(arrivals) == 4 and arrivals[0] > 0 and arrivals == sorted(arrivals)
    assert all(p["simulated_pull_arrivals"] is None for p in points if p not in kept)
    # and each of those workers' computation: four workers sharing one core stretch it, at
    # most to W times alone when all four compute at once (more: the transfers' CPU)
    for key in ("measured_computations", "simulated_computations"):
        assert len(kept[0][key]) == 4 and all(x > 1.0 for x in kept[0][key])
    assert all(p["simulated_computations"] is None for p in points if p not in kept)
    for p in points:
        for side in ("measured", "simulated"):
            low, median, high = p[f"{side}_step_s_quantiles"]
            assert 0 < low <= median <= high
        assert len(p["measured_phases"]) == 3  # one per run
        occupancies = [p["measured_occupancy"], p["simulated_occupancy"]]
        if p["architecture"].startswith("PS async") and p["workers"] >= 2:
            for occ in occupancies:
                assert occ["workers"] == p["workers"]
                assert math.isclose(sum(s["share"] for s in occ["shares"]), 1.0)
        else:
            assert occupancies == [None, None]


def test_fit_rate_without_a_campaign_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = save_measurements(measurements(), tmp_path / "runs.json.gz")
    args = ["validate", "--from-runs", str(runs), "--fit-rate", "1Gbps", "--quiet"]
    assert main(args) == 1
    assert "--fit-rate: only with a campaign" in capsys.readouterr().err


def mean_max(errors: list[float]) -> str:
    """``errors`` (absolute, relative) as the README writes them: mean / max in percent."""
    return f"{100 * statistics.fmean(errors):.1f}% / {100 * max(errors):.1f}%"


def readme_flowing() -> str:
    """The README with its line breaks and runs of spaces as single spaces."""
    return " ".join((Path(__file__).parents[1] / "README.md").read_text("utf-8").split())


def shipped_runs(campaign: str, file_name: str) -> Measurements:
    """The measurements of one file of a shipped campaign."""
    [path] = [p for given, p in campaign_files([campaign]) if given.endswith(file_name)]
    return load_measurements(path)


@pytest.mark.slow
@pytest.mark.skipif("campaign" not in shipped_campaigns(), reason="no campaign shipped")
def test_a_parameter_servers_workers_are_charged_the_cpu_their_runs_used_beyond_the_trace() -> None:
    from profilers.distributed.config import Architecture

    m = shipped_runs("campaign", "resnet8-500-layerwise.json.gz")
    m = dataclasses.replace(m, points=m.points[:1])  # the predictor is what is looked at
    older = assess(m, ideal=False)  # recorded before the runner measured CPU time
    assert older.predictor is not None and older.predictor.comm_thread_s_per_step == 0.0
    assert "CPU beside their computation not charged" in older.link_text
    # The same runs as if each step's CPU time had been half-way from the trace's computation
    # to the step's wall time (one worker on one core: at most all of its idle time).
    compute = compute_s_per_step(older.trace)
    solo = statistics.fmean(r.examples_per_s for r in m.solo_runs)
    beyond = (m.base.batch_size / solo - compute) / 2
    assert beyond > 0
    solos = [
        dataclasses.replace(
            run, steps=tuple(dataclasses.replace(s, cpu_s=compute + beyond) for s in run.steps)
        )
        for run in m.solo_runs
    ]
    timed = dataclasses.replace(m, solo=solos[0], solo_more=tuple(solos[1:]))
    report = assess(timed, ideal=False)
    predictor = report.predictor
    assert predictor is not None
    assert predictor.comm_thread_s_per_step == pytest.approx(beyond)
    assert "CPU per step beside its computation" in report.link_text
    for arch in (Architecture.PS_ASYNC, Architecture.PS_SYNC):
        config = predictor.config(arch, 3, ideal=False)
        assert config.comm_thread_s_per_step == pytest.approx(beyond)
        assert predictor.config(arch, 3, ideal=True).comm_thread_s_per_step == 0.0
    assert predictor.config(Architecture.ALLREDUCE, 3, ideal=False).comm_thread_s_per_step == 0.0
    # The transfers' latency is fitted with the work in place: one worker still replays the
    # one-worker runs' step, and four sharing a core are predicted slower than without it.
    assert predictor.simulated(Architecture.PS_ASYNC, 1) == pytest.approx(solo, rel=5e-3)
    assert predictor.ps_latency_s <= older.predictor.ps_latency_s
    assert predictor.simulated(Architecture.PS_SYNC, 4) < older.predictor.simulated(
        Architecture.PS_SYNC, 4
    )


@pytest.mark.slow
@pytest.mark.skipif("campaign-2" not in shipped_campaigns(), reason="campaign-2 not shipped")
def test_runs_with_cpu_time_charge_what_their_one_worker_runs_used() -> None:
    from profilers.distributed.config import Architecture

    for given, path in campaign_files(["campaign-2"]):
        m = load_measurements(path)
        assert all(r.cpu_s_per_step() is not None for r in m.solo_runs), given
    m = shipped_runs("campaign-2", "resnet8-300-layerwise.json.gz")
    m = dataclasses.replace(m, points=m.points[:1])
    report = assess(m, ideal=False)
    predictor = report.predictor
    assert predictor is not None
    measured = measured_comm_thread(report.trace)  # the solo runs' CPU time, in the trace
    assert measured is not None and measured.beyond_s > 0
    runs_cpu = statistics.fmean(r.cpu_s_per_step() or math.nan for r in m.solo_runs)
    assert measured.cpu_s_per_step == pytest.approx(runs_cpu, rel=1e-9)
    assert predictor.comm_thread_s_per_step == measured.beyond_s
    assert "communication threads" in report.link_text
    # One worker still takes about the measured step: the work fills what the computation
    # leaves of its core. Not exactly: the replay's waits are shorter than the real ones
    # (633 examples/s replayed without the work, 609 measured), so some of the 2.5 ms a step
    # lands after the step's other work, and no latency is left to fit (604.7 replayed).
    solo = statistics.fmean(r.examples_per_s for r in m.solo_runs)
    assert predictor.simulated(Architecture.PS_ASYNC, 1) == pytest.approx(solo, rel=1e-2)
    assert predictor.ps_latency_s == 0.0


def test_a_one_worker_runs_trace_carries_its_cpu_time_and_the_alone_trace_does_not() -> None:
    run = measurements().solo
    trace = run_to_trace(run)
    compute = compute_s_per_step(trace)
    timed = dataclasses.replace(
        run, steps=tuple(dataclasses.replace(s, cpu_s=compute + 0.002) for s in run.steps)
    )
    measured = measured_comm_thread(run_to_trace(timed))
    assert measured is not None and measured.beyond_s == pytest.approx(0.002)
    assert measured_comm_thread(trace) is None  # the run did not record its CPU time
    pooled = pooled_trace([timed, run])  # one run without CPU time: no mean to speak of
    assert measured_comm_thread(pooled) is None
    alone = with_compute_of(run_to_trace(timed), measurements().alone)
    assert all(step.cpu_s is None for step in alone.steps)


@pytest.mark.skipif(not shipped_campaigns(), reason="no campaign shipped")
def test_the_shipped_campaign_loads_and_every_file_is_compact() -> None:
    for name in shipped_campaigns():
        files = campaign_files([name])
        assert files, name
        for given, path in files:
            m = load_measurements(path)
            assert m.link_rate_bps is not None, given  # made on the emulated cluster
            assert measurements_to_dict(compacted(m)) == measurements_to_dict(m), (
                f"{given} is not compacted: keep it small with profilers.distributed."
                "measurements.compacted"
            )


def _two_worker_run(offset: float) -> RunResult:
    """Two Async-SGD workers with 1 s steps, the second starting ``offset`` s after the first."""
    config = RunConfig(
        "mlp", architecture="ps-async", workers=2, servers=1, batch_size=8, steps=12, warmup=2
    )
    steps = tuple(
        StepRecord(w, n, 100.0 + w * offset + n, 100.0 + w * offset + n + 1.0, 1.0)
        for w in range(2)
        for n in range(12)
    )
    return RunResult(config, "mlp", {"fc1": 4000}, (), steps)


def test_a_real_runs_phase_pattern_is_read_from_its_step_ends() -> None:
    assert measured_phases(_two_worker_run(0.0)).label == "lock-step"
    assert measured_phases(_two_worker_run(0.5)).label == "pipelined"
    assert measured_phases(measurements().solo).label == "one worker"
    # how far apart: the second worker 0.3 s into the first's 1 s steps, or 0.7 (0.3 before)
    assert measured_phases(_two_worker_run(0.3)).median_distance == pytest.approx(0.3)
    assert measured_phases(_two_worker_run(0.7)).median_distance == pytest.approx(0.3)
    assert measured_phases(_two_worker_run(0.5)).median_distance == pytest.approx(0.5)
    assert math.isnan(measured_phases(measurements().solo).median_distance)


def test_measured_step_quantiles_count_each_step_from_the_previous_end() -> None:
    run = _two_worker_run(0.3)
    assert measured_step_quantiles([run]) == pytest.approx((1.0, 1.0, 1.0))
    # Worker 0's step 5 ends 2 s late (and so do the later ones: they follow it), so one of the
    # 2 x 10 measured steps takes 3 s. Sorted, 19 ones and a 3: numpy's linear quantile puts
    # the 95% one at position 0.95 * 19 = 18.05, i.e. 1 + 0.05 * (3 - 1) = 1.1.
    slow = tuple(
        dataclasses.replace(s, end_s=s.end_s + 2.0 * (s.worker == 0 and s.step >= 5))
        for s in run.steps
    )
    q = measured_step_quantiles([dataclasses.replace(run, steps=slow)])
    assert q == pytest.approx((1.0, 1.0, 1.1))


@pytest.mark.slow
@pytest.mark.parametrize(("campaign", "label"), [("campaign", ""), ("campaign-2", "campaign-2, ")])
def test_the_readme_table_is_what_the_shipped_campaign_gives(campaign: str, label: str) -> None:
    """The README's accuracy table, row by row, against the shipped runs assessed now: a change
    to the model that moves a number must update the README with it."""
    if campaign not in shipped_campaigns():
        pytest.skip(f"{campaign} not shipped")
    report = on_every_core([campaign], fit_rate_bps=3e8)
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    columns = ["PS async, layerwise", "PS sync, layerwise", "PS sync, strict"]
    columns += ["ring AllReduce, layerwise", None]
    rows = ((3e8, f"| {label}300 Mbit/s (fit half) |"), (5e8, f"| {label}500 Mbit/s (held out) |"))
    for rate, row_start in rows:
        cells = []
        for label in columns:
            errors = report.abs_errors(rate, label)
            cell = mean_max(errors)
            cells.append(cell if label else f"**{cell}**")
        row = row_start + "".join(f" {cell} |" for cell in cells)
        assert row in readme, f"README row should read:\n{row}"
    # The held-out half's noise floor, as the paragraph under the table gives it.
    held_out = report.points(5e8)
    floor = noise_floor([p.standard_error for p in held_out])
    assert floor is not None
    if campaign == "campaign":
        beyond = sum(p.beyond_noise(p.simulated) for p in held_out)
        phrases = [
            f"{100 * floor.mean_abs_error:.1f}% on average and {100 * floor.max_abs_error:.1f}% "
            f"at most (the median of its largest error, which exceeds "
            f"{100 * floor.max_abs_error_p90:.1f}% one time in ten) on this held-out half",
            f"{beyond} of the {len(held_out)} held-out errors are beyond two standard errors",
        ]
    else:
        phrases = [
            f"{100 * floor.mean_abs_error:.1f}% / {100 * floor.max_abs_error:.1f}% on campaign-2's"
        ]
    flowing = " ".join(readme.split())
    for phrase in phrases:
        assert phrase in flowing, f"README should say: {phrase}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("check", "rate", "row_start"),
    [
        ("check-400", 4e8, "| 400 Mbit/s, batch 16 (check-400) |"),
        ("check-250", 2.5e8, "| 250 Mbit/s, batch 24 (check-250) |"),
        ("check-450", 4.5e8, "| 450 Mbit/s, batch 24 (check-450) |"),
        ("check-200", 2e8, "| 200 Mbit/s, batch 16 (check-200) |"),
    ],
)
def test_the_readme_check_rows_are_what_the_shipped_checks_give(
    check: str, rate: float, row_start: str
) -> None:
    """The README's row for each independent check, as the shipped runs give it."""
    report = on_every_core([check])
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    cells = []
    for label in ("PS async, layerwise", "PS sync, layerwise", "ring AllReduce, layerwise", None):
        errors = report.abs_errors(rate, label)
        cell = mean_max(errors)
        cells.append(cell if label else f"**{cell}**")
    row = row_start + "".join(f" {cell} |" for cell in cells)
    assert row in readme, f"README row should read:\n{row}"
    # "The host's CPU per step differs": each CPU-bound model's parameter-server errors as
    # they are, and had the predictions charged each point's own CPU per step.
    flowing = " ".join(readme.split())
    for model, words in CPU_BOUND_PHRASES.get(check, ()):
        errors = [
            (p.error(p.simulated), p.cpu_ratio)
            for r, p, _ in report.rows()
            if r.model_name == model and not math.isnan(p.cpu_ratio)
        ]
        assert len(errors) == 8
        given = [abs(e) for e, _ in errors]
        charged = [abs((1 + e) / ratio - 1) for e, ratio in errors]
        phrase = words.format(mean_max(charged), mean_max(given))
        assert phrase in flowing, f"README should say: {phrase}"
        if check == "check-200" and model == "resnet8":  # against check-rounds' range
            ratios = [ratio for _, ratio in errors]
            phrase = f"({min(ratios):.2f}-{max(ratios):.2f} on check-200)"
            assert phrase in flowing, f"README should say: {phrase}"
    if check == "check-200":  # cnn's first of four pulls after a Sync-SGD release
        [first] = [
            p.measured_pull_arrivals[0]
            for r, p, _ in report.rows()
            if r.model_name == "cnn" and p.measured_pull_arrivals is not None
        ]
        phrase = f"the first of four pulls arrived after a median {first:.1f} alone-times at 200"
        assert phrase in flowing, f"README should say: {phrase}"


CPU_BOUND_PHRASES = {
    "check-200": [("resnet8", "resnet8's would be {} instead of {} on check-200")],
    "check-450": [
        ("resnet8", "{} instead of {} on check-450, the transformer's"),
        ("transformer", "the transformer's on check-450 {} instead of {}."),
    ],
}


@pytest.mark.slow
def test_the_readme_rounds_validation_is_what_its_runs_give() -> None:
    """check-rounds, the first validation taken in rounds: its CPU per step over the profile's
    and its errors, as the README gives them."""
    report = on_every_core(["check-rounds"])
    ratios = [p.cpu_ratio for _, p, _ in report.rows() if not math.isnan(p.cpu_ratio)]
    assert len(ratios) == 8  # resnet8's parameter-server points; mlp's rings have none
    errors = report.abs_errors(2e8, None)
    phrase = (
        f"`cpu x` {min(ratios):.2f}-{max(ratios):.2f} at every point (0.98-1.16 on check-200), "
        f"errors {mean_max(errors)} (kept: `check-rounds`)"
    )
    assert phrase in readme_flowing(), f"README should say: {phrase}"


@pytest.mark.slow
def test_the_readme_warm_sharing_numbers_are_what_check_200_gives() -> None:
    """The README's check-200 with each file's warm cvs (`--flow-sharing warm`): every point,
    Sync-SGD and Async-SGD as the bullet gives them (the fresh side is the table's row)."""
    report = on_every_core(["check-200"], flow_sharing="warm")

    mean = 100 * statistics.fmean(report.abs_errors(2e8, None))
    phrase = (
        f"check-200 6.0% -> {mean:.1f}% mean, its PS Sync-SGD 4.5% / 12.5% -> "
        f"{mean_max(report.abs_errors(2e8, 'PS sync, layerwise'))} and PS Async-SGD 7.0% / "
        f"25.4% -> {mean_max(report.abs_errors(2e8, 'PS async, layerwise'))};"
    )
    assert phrase in readme_flowing(), f"README should say: {phrase}"


@pytest.mark.slow
def test_the_readme_ring_check_is_what_its_runs_give() -> None:
    """check-rings: the README's row, and mlp with four ranks with and without the rings of
    each W that were timed beside its runs."""
    report = on_every_core(["check-rings"])
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    cells = []
    for rate in (4.5e8, 5e8, None):
        errors = report.abs_errors(rate)
        cell = mean_max(errors)
        cells.append(cell if rate else f"**{cell}**")
    row = "| check-rings, ring AllReduce |" + "".join(f" {cell} |" for cell in cells)
    assert row in readme, f"README row should read:\n{row}"
    mlp = shipped_runs("check-rings", "mlp-b32-500-layerwise.json.gz")
    assert [r.workers for r in mlp.rings] == [2, 3, 4]
    for measured, text in ((mlp, "+1%"), (dataclasses.replace(mlp, rings=()), "+30%")):
        four = next(p for p in assess(measured, ideal=False).points if p.workers == 4)
        assert f"{100 * four.error(four.simulated):+.0f}%" == text


@pytest.mark.slow
def test_the_readme_second_ring_check_is_what_its_runs_give() -> None:
    """check-rings-2: the README's row, and mlp within 1.1% at every W >= 2 now that a ring's
    CPU per byte is the larger of the one-worker runs' and the ring's own."""
    report = on_every_core(["check-rings-2"])
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    cells = []
    for rate in (3e8, 4e8, 5e8, None):
        errors = report.abs_errors(rate)
        cell = mean_max(errors)
        cells.append(cell if rate else f"**{cell}**")
    row = "| check-rings-2, ring AllReduce |" + "".join(f" {cell} |" for cell in cells)
    assert row in readme, f"README row should read:\n{row}"
    for name in ("mlp-b16-300-layerwise.json.gz", "mlp-b24-400-layerwise.json.gz"):
        points = assess(shipped_runs("check-rings-2", name), ideal=False).points
        assert max(abs(p.error(p.simulated)) for p in points if p.workers > 1) <= 0.011


@pytest.mark.slow
def test_validate_json_says_which_measurement_a_rings_cpu_work_came_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """mlp (three large layers): the ring of two's own CPU per byte, above its one-worker runs';
    the text names both values, the JSON carries both and the one used."""
    [path] = [
        p
        for g, p in campaign_files(["check-rings-2"])
        if g.endswith("mlp-b16-300-layerwise.json.gz")
    ]
    assert main(["validate", "--from-runs", str(path), "--json", "--quiet"]) == 0
    doc = output(capsys.readouterr().out)
    work = doc["context"]["ring_cpu_work"]
    own = load_measurements(path).ring_set[0].cpu_costs()
    assert own is not None and work["from_ring_s_per_byte"] == own.s_per_byte
    assert work["s_per_byte"] == own.s_per_byte > work["from_runs_s_per_byte"] >= 0
    ns = f"{own.s_per_byte * 1e9:.3g} ns"
    assert f"the ring of two's ranks' CPU time alone: {ns}" in doc["context"]["link"]
    # The testbed's links: 300 Mbit/s, with the cluster's 1 ms bucket (the file names none).
    assert doc["context"]["testbed_link_rate_bps"] == 300e6
    assert doc["context"]["testbed_burst_s"] == 1e-3
    # A profile's value (here: none, from --comm-cpu) replaces the measurement: nothing to say.
    assert main(["validate", "--from-runs", str(path), "--json", "--quiet", "--comm-cpu", "3"]) == 0
    assert output(capsys.readouterr().out)["context"]["ring_cpu_work"] is None


@pytest.mark.slow
def test_a_campaign_assessed_on_two_processes_is_the_one_assessed_on_one() -> None:
    with jobs(1):
        one = campaign_text(assess_campaign(["check-400"]))
    if usable_cores() >= 2:  # the README row's assessment, already on several processes
        two = campaign_text(on_every_core(["check-400"]))
    else:
        with jobs(2):
            two = campaign_text(assess_campaign(["check-400"]))
    assert two == one


def test_a_rings_message_cost_is_its_time_beyond_the_bytes_per_message() -> None:
    # Two nodes, two layers of 1000 B: each link carries 2(2-1)/2 * 8 * 2000 = 16000 bits, 16 ms
    # at 1 Mbit/s; the median repetition took 20 ms: gloo's 4(W-1) * 2 = 8 messages (two
    # segments per rank of each layer) cost 0.5 ms each, the paper's 2(W-1) * 2 = 4 1 ms each.
    ring = RingGoodput(2, (1000, 1000), (0.019, 0.020, 0.030), 1e6)
    assert ring.message_latency_s(1e6) == pytest.approx(0.0005)
    assert ring.message_latency_s(1e6, segment_bytes=None) == pytest.approx(0.001)
    assert ring.message_latency_s(0.5e6) == 0.0  # the bytes alone take longer: no message cost


def test_a_rings_cpu_work_per_byte_is_the_one_worker_runs_extra_computation() -> None:
    trace = load_trace("cnn-b32")
    worker_compute = [i for i, op in enumerate(trace.ops) if op.resource is Resource.WORKER]
    halved = tuple(
        dataclasses.replace(
            step,
            duration_s=tuple(
                (d or 0.0) / 2 if i in worker_compute else d for i, d in enumerate(step.duration_s)
            ),
        )
        for step in trace.steps
    )
    alone = dataclasses.replace(trace, steps=halved)
    moved = sum(op.nbytes or 0 for op in trace.ops if op.is_communication)
    expected = compute_s_per_step(trace) / 2 / moved
    assert ring_cpu_work_s_per_byte(trace, alone) == pytest.approx(expected)
    assert ring_cpu_work_s_per_byte(alone, trace) == 0.0  # slower alone: no work to charge
    # Beside the ring of two's own CPU per byte: the larger of the two, either way round.
    assert ring_cpu_work(trace, alone).s_per_byte == pytest.approx(expected)
    assert not ring_cpu_work(trace, alone).from_ring
    more = ring_cpu_work(trace, alone, 3 * expected)
    assert more.s_per_byte == pytest.approx(3 * expected) and more.from_ring
    less = ring_cpu_work(trace, alone, expected / 3)
    assert less.s_per_byte == pytest.approx(expected) and not less.from_ring
    with pytest.raises(ConfigError, match=r"ring_s_per_byte: must be >= 0; got -1e-09"):
        ring_cpu_work(trace, alone, -1e-9)


def test_a_rings_cpu_work_says_where_each_value_came_from() -> None:
    # 2 ns/B from the one-worker runs, 5 ns/B from the ring alone: the ring's, and both named.
    work = RingCpuWork(2e-9, 5e-9)
    assert work.s_per_byte == 5e-9 and work.from_ring
    assert work.text() == (
        "the larger of the one-worker run's computation beside its transfers, less alone, per "
        "byte moved: 2 ns, and the ring of two's ranks' CPU time alone: 5 ns"
    )
    # No ring timed: the runs' value, and only it named.
    alone = RingCpuWork(2e-9)
    assert alone.s_per_byte == 2e-9 and not alone.from_ring
    assert "ring of two" not in alone.text() and alone.text().endswith(": 2 ns")


@pytest.mark.slow
@pytest.mark.skipif("campaign" not in shipped_campaigns(), reason="no campaign shipped")
def test_the_predictions_take_the_cpu_and_the_ring_as_the_one_worker_runs_showed() -> None:
    from profilers.distributed.config import Architecture

    # mlp at 300 Mbit/s: its ring of two nodes and its one-worker runs were measured (the
    # hand-built runs above are too regular to have a message cost or CPU work to charge).
    m = shipped_runs("campaign", "mlp-300-layerwise.json.gz")
    assert m.ring is not None and m.sharing is not None
    predictor = assess(m, ideal=False).predictor
    assert predictor is not None and predictor.alone is not None
    # parameter server: the profile as it ran, no transfer CPU put back, and each transfer's
    # fixed cost fitted so that one worker replays the one-worker runs' step
    ps = predictor.config(Architecture.PS_SYNC, 2, ideal=False)
    assert predictor.replayed_trace(Architecture.PS_SYNC) is predictor.trace
    assert ps.comm_cpu_s_per_byte == 0.0 and ps.parse_alpha_s_per_byte == 0.0
    assert ps.latency_s == predictor.ps_latency_s > 0
    solo = statistics.fmean(r.examples_per_s for r in m.solo_runs)
    assert predictor.simulated(Architecture.PS_ASYNC, 1) == pytest.approx(solo, rel=5e-3)
    # ring: the computation alone, a rank's CPU work per byte (2(W-1)/W of a layer's bytes each
    # way) pipelined with each all-reduce's messages, and the alpha-beta link. For mlp (three
    # large layers, whose transfers mostly ran while its one worker waited) the ring of two's
    # ranks spent more per byte alone than the one-worker run's computation showed.
    config = predictor.config(Architecture.ALLREDUCE, 3, ideal=False)
    assert predictor.replayed_trace(Architecture.ALLREDUCE) is predictor.alone
    measured = measured_ring_cpu_work(m, predictor.trace, predictor.alone)
    cost = m.ring_set[0].cpu_costs()
    assert cost is not None and measured.from_ring_s_per_byte == cost.s_per_byte
    assert measured.from_ring and measured.s_per_byte > measured.from_runs_s_per_byte > 0
    assert measured.from_runs_s_per_byte == ring_cpu_work_s_per_byte(
        predictor.trace, predictor.alone
    )
    work = measured.s_per_byte
    assert config.latency_s > 0
    assert config.parse_alpha_s_per_byte == pytest.approx(work * 4 * 2 / 3)
    assert config.comm_cpu_s_per_byte == 0.0
    # (the ring's message cost is its own measurement, from its ring of two, not the server's
    # fitted latency; its bytes at the rate the ring of three moved them at beyond that cost)
    goodput = m.sharing.goodput_bps()
    two, three = m.ring_set[0], m.ring_set[1]
    assert (two.workers, three.workers) == (2, 3)
    alpha = two.message_latency_s(goodput)
    assert config.latency_s == pytest.approx(alpha)
    assert config.bandwidth_bps == pytest.approx(three.bytes_bandwidth_bps(goodput, alpha))
    assert config.bandwidth_bps <= goodput
    assert config.parse_placement == "pipelined"
    given = LinkSettings(Sourced(0.0), latency_s=Sourced(1e-4, "--latency"))
    with_latency = assess(m, ideal=False, link=given).predictor
    assert with_latency is not None and with_latency.ps_latency_s == 0.0
    assert with_latency.config(Architecture.PS_SYNC, 2, ideal=False).latency_s == 1e-4
    before = assess(m, ideal=False, ring_cpu_placement="after").predictor
    assert before is not None
    assert before.config(Architecture.ALLREDUCE, 3, ideal=False).parse_placement == "after"


@pytest.mark.slow
@pytest.mark.skipif("campaign-2" not in shipped_campaigns(), reason="no campaign-2 shipped")
def test_simulate_with_the_saved_network_predicts_a_ring_as_the_validation_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What a user does with a validation's link: `--save-network`, then `sgdsim simulate
    --network` on the computation alone with the testbed's hosting stated as options. The
    ring's cost per message and CPU per byte travel in the profile, so the prediction is the
    validation's own (before they did, the profile's goodput of a ring of two nodes made it
    35% lower for resnet8, and the transfers' fitted CPU cost up to 70% lower for mlp)."""
    from profilers.distributed.config import Architecture

    m = shipped_runs("campaign-2", "mlp-500-layerwise.json.gz")
    rings = [p for p in m.points if p.architecture is Architecture.ALLREDUCE and p.workers > 1]
    report = assess(dataclasses.replace(m, points=tuple(rings)), ideal=False)
    assert report.network is not None and report.alone_trace is not None
    network = save_network_profile(report.network, tmp_path / "link.json")
    alone = save_trace(report.alone_trace, tmp_path / "alone.json")
    for point in report.points:
        w = str(point.workers)
        args = ["simulate", str(alone), "--network", str(network), "--arch", "allreduce"]
        args += ["--workers", w, "--colocated", w, "--host-cores", str(report.cores)]
        args += ["--worker-cores", "1", "--own-nics", "--json", "--quiet"]
        assert main(args) == 0
        simulated = output(capsys.readouterr().out)["points"][0]["examples_per_s"]["value"]
        assert simulated == pytest.approx(point.simulated, rel=0.01)


@pytest.mark.slow
@pytest.mark.skipif("campaign" not in shipped_campaigns(), reason="no campaign shipped")
def test_a_validation_predicts_the_same_from_the_network_profile_it_saved(tmp_path: Path) -> None:
    """Everything the predictions took from the link travels in the saved profile: the fitted
    latency of a parameter server's transfers (2-3 ms for resnet8's 38 small transfers), the
    ring's cost per message and CPU per byte; `validate --network` on it predicts the same."""
    import argparse

    from simcore.cli.link_options import link_settings
    from simcore.network_io import load_network_profile

    m = shipped_runs("campaign", "resnet8-500-layerwise.json.gz")
    m = dataclasses.replace(m, points=tuple(p for p in m.points if p.workers == 3))
    own = assess(m, ideal=False)
    assert own.network is not None and own.predictor is not None
    assert own.network.latency_s == own.predictor.ps_latency_s > 1e-3
    saved = save_network_profile(own.network, tmp_path / "link.json")
    assert load_network_profile(saved).latency_s == own.network.latency_s
    again = assess(m, ideal=False, link=link_settings(argparse.Namespace(network=str(saved))))
    assert [p.simulated for p in again.points] == pytest.approx(
        [p.simulated for p in own.points], rel=1e-9
    )
    assert f"({saved})" in again.link_text


@pytest.mark.slow
@pytest.mark.skipif("campaign" not in shipped_campaigns(), reason="no campaign shipped")
def test_the_server_link_is_the_testbeds_interference_unless_an_option_chooses() -> None:
    from profilers.distributed.config import Architecture
    from profilers.distributed.link_interference import TESTBED_INTERFERENCE

    m = shipped_runs("campaign", "cnn-300-layerwise.json.gz")
    assert m.duplex is not None  # measured, but its shared limit is not the model used
    report = assess(m, ideal=False)
    predictor = report.predictor
    assert predictor is not None
    assert predictor.duplex_interference == TESTBED_INTERFERENCE.parameters
    assert predictor.duplex_bps is None
    async_config = predictor.config(Architecture.PS_ASYNC, 2, ideal=False)
    assert async_config.duplex_interference == TESTBED_INTERFERENCE.parameters
    assert predictor.config(Architecture.ALLREDUCE, 2, ideal=False).duplex_interference is None
    assert "each direction slowed by the other's transfers" in report.link_text
    assert f"instead of both directions together at most {m.duplex.ratio():.3g}x" in (
        report.link_text
    )
    # a validation that measured the interference itself predicts with its own
    own = assess(dataclasses.replace(m, interference=model_report(0.9, 0.7, 0.2)), ideal=False)
    assert own.predictor is not None
    assert own.predictor.duplex_interference == pytest.approx((0.9, 0.7, 0.2))
    assert "measured on the testbed's link shaped to 100 Mbit/s (link_interference)" in (
        own.link_text
    )
    # --duplex chooses the shared limit; --duplex-interference its own numbers
    ratio = assess(
        m, ideal=False, link=LinkSettings(Sourced(0.0), duplex_ratio=Sourced(1.5, "--duplex"))
    )
    assert ratio.predictor is not None and ratio.predictor.duplex_interference is None
    assert ratio.predictor.duplex_bps == pytest.approx(1.5 * predictor.bandwidth_bps)
    given = LinkSettings(
        Sourced(0.0),
        duplex_interference=Sourced((1.0, 0.0, 0.0), "--duplex-interference"),
    )
    full = assess(m, ideal=False, link=given)
    assert full.predictor is not None and full.predictor.duplex_interference == (1.0, 0.0, 0.0)
    assert "(--duplex-interference)" in full.link_text
    # no loss and no exponent is full duplex: the same predictions as --duplex 2 (up to the
    # rounding of the coupled links' other order of operations, which several async workers'
    # pattern amplifies: those are left out)
    duplex = assess(
        m, ideal=False, link=LinkSettings(Sourced(0.0), duplex_ratio=Sourced(2.0, "--duplex"))
    )
    for a, b in zip(full.points, duplex.points, strict=True):
        if a.architecture != "ps-async" or a.workers == 1:
            assert a.simulated == pytest.approx(b.simulated, rel=1e-9)
    assert [p.simulated for p in full.points] != [p.simulated for p in report.points]


def _at_pace(run: RunResult, seconds_per_step: float) -> RunResult:
    """``run`` with each worker's steps ending every ``seconds_per_step``."""
    return dataclasses.replace(
        run,
        steps=tuple(
            dataclasses.replace(
                s, start_s=s.step * seconds_per_step, end_s=(s.step + 1) * seconds_per_step
            )
            for s in run.steps
        ),
    )


def test_a_configuration_measured_twice_gives_its_gap_and_the_spread_it_explains() -> None:
    from profilers.distributed.config import Architecture
    from profilers.distributed.measurements import MeasuredPoint
    from profilers.distributed.noise_floor import RepeatGap

    gap = RepeatGap("x", (100.0, 100.0), (105.0, 115.0))
    assert gap.gap == pytest.approx(0.10)
    # relative standard errors 0 and (7.07 / 110): combined in quadrature
    assert gap.standard_error == pytest.approx(statistics.stdev((105, 115)) / math.sqrt(2) / 110)
    assert math.isnan(RepeatGap("one run each", (1.0,), (2.0,)).standard_error)
    with pytest.raises(ValueError, match="needs runs on both sides"):
        RepeatGap("empty", (), (1.0,))
    m = measurements()
    # The profile at 8 examples/s (batch 8, 1 s a step), its PS Async-SGD W = 1 point at 10;
    # the computation alone at 8 too, its ring W = 1 point at 8 and 16 (12 on average).
    solo = _at_pace(m.solo, 1.0)
    alone = _at_pace(m.alone, 1.0)
    ps_one = MeasuredPoint(Architecture.PS_ASYNC, 1, (_at_pace(m.solo, 0.8),))
    ring_one = MeasuredPoint(
        Architecture.ALLREDUCE, 1, (_at_pace(m.alone, 1.0), _at_pace(m.alone, 0.5))
    )
    timed = dataclasses.replace(
        m, solo=solo, solo_more=(), alone=alone, alone_more=(), points=(ps_one, ring_one, *m.points)
    )
    gaps = repeat_gaps([timed])
    assert [g.gap for g in gaps["profile"]] == [pytest.approx(0.25)]
    assert [g.gap for g in gaps["alone"]] == [pytest.approx(0.5)]
    assert gaps["profile"][0].label == "mlp-b8 100 Mbit/s: profile"
    text = repeat_gaps_text(gaps)
    assert "37.5% / 50.0% apart, mean / max of 2 pairs" in text
    assert "profile vs PS Async-SGD 25.0% / 25.0%; computation alone vs ring 50.0% / 50.0%" in text
    # Points of another configuration (W = 2, Sync-SGD) are no repeat.
    assert repeat_gaps([m]) == {"profile": [], "alone": []}
    assert repeat_gaps_text(repeat_gaps([m])) == ""


def test_the_readme_repeat_gaps_are_what_the_kept_runs_give() -> None:
    """The README's "same configuration measured twice" numbers, from every kept file (the
    runs only: nothing is simulated)."""
    kept = [load_measurements(path) for _, path in campaign_files(shipped_campaigns())]
    gaps = repeat_gaps(kept)
    alone, profile = ([abs(g.gap) for g in gaps[kind]] for kind in ("alone", "profile"))
    phrase = (
        f"{mean_max(alone)} apart over {len(alone)} kept validations, and its one-worker "
        f"profile runs and its parameter-server W = 1 point {mean_max(profile)} ({len(profile)})"
    )
    assert phrase in readme_flowing(), f"README should say: {phrase}"


def test_a_selection_keeps_the_points_asked_for_and_says_what_a_file_holds() -> None:
    m = measurements()  # mlp, batch 8: ps-sync W=1/2, allreduce W=2
    assert not PointSelection()
    kept = PointSelection(architectures=("ps-sync",), workers_max=1).apply(m)
    assert kept is not None
    assert [(p.architecture.value, p.workers) for p in kept.points] == [("ps-sync", 1)]
    assert (kept.solo, kept.alone, kept.solo_more) == (m.solo, m.alone, m.solo_more)
    by_label = PointSelection(model="mlp-b8", architectures=("allreduce",)).apply(m)
    assert by_label is not None and [p.workers for p in by_label.points] == [2]
    assert PointSelection(model="cnn").apply(m) is None
    assert PointSelection(architectures=("ps-async",)).apply(m) is None
    assert held_text(m) == "mlp-b8: ps-sync W=1/2, allreduce W=2"
    missing = PointSelection(architectures=("ps-async",), workers_max=3)
    assert missing.nothing_text(m, "r.json.gz") == (
        "--arch ps-async --workers-max 3: r.json.gz holds no such point "
        "(it holds mlp-b8: ps-sync W=1/2, allreduce W=2)"
    )
    assert PointSelection(model="cnn").nothing_text(m, "r.json.gz") == (
        "--model cnn: r.json.gz holds runs of mlp"
    )


def test_validate_from_runs_predicts_only_the_points_selected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--arch and --workers-max select among saved points, as --model among a campaign's files;
    what selects nothing is named with what is there, one line, nothing printed on stdout."""
    runs = save_measurements(measurements(), tmp_path / "runs.json.gz")
    args = ["validate", "--from-runs", str(runs), "--quiet", "--json"]
    assert main([*args, "--arch", "ps-sync", "--workers-max", "1"]) == 0
    points = output(capsys.readouterr().out)["points"]
    assert [(p["architecture"], p["workers"]) for p in points] == [("ps-sync", 1)]
    assert main([*args, "--arch", "ps-async"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"--arch ps-async: {runs} holds no such point (it holds mlp-b8: ps-sync" in err
    folder, _ = _campaign(tmp_path)
    campaign = ["validate", "--from-runs", str(folder), "--quiet", "--json"]
    assert main([*campaign, "--model", "mlp", "--arch", "allreduce"]) == 0
    points = output(capsys.readouterr().out)["points"]
    assert [(p["architecture"], p["workers"]) for p in points] == [
        (architecture_label("allreduce", "layerwise"), 2),
        (architecture_label("allreduce", "strict"), 2),
    ]
    assert main([*campaign, "--model", "cnn"]) == 1
    err = capsys.readouterr().err
    assert "--model cnn: no point of the campaign" in err and "it holds mlp-b8: ps-sync" in err


@pytest.mark.parametrize(
    "given",
    [
        ["--steps", "5"],
        ["--batch-size", "4"],
        ["--repetitions", "2"],
        ["--overlap", "strict"],
        ["--seed", "3"],
        ["--testbed", "100Mbit/s"],
    ],
)
def test_validate_from_runs_refuses_how_to_measure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str]
) -> None:
    """The saved runs say how they were measured: a value given for it would be ignored."""
    runs = save_measurements(measurements(), tmp_path / "runs.json.gz")
    folder, _ = _campaign(tmp_path)
    for source in (str(runs), str(folder)):
        assert main(["validate", "--from-runs", source, "--quiet", *given]) == 1
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err
        assert f"{given[0]}: not with --from-runs (the saved runs say how" in err


def test_the_link_is_said_once_in_the_report_not_again_in_the_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = save_measurements(measurements(), tmp_path / "runs.json.gz")
    assert main(["validate", "--from-runs", str(runs)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == ["predicting 3 point(s) from the solo profile"]
    assert [line for line in out.splitlines() if line.startswith("link: ")] != []
    assert len([line for line in out.splitlines() if line.startswith("link: ")]) == 1


def test_the_simulate_command_of_one_worker_runs_as_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One worker on its host has its NIC to itself: the printed command still says
    --own-nics, as every W's does (simulate takes it, a no-op there), and gives the point's
    prediction."""
    from profilers.distributed.config import Architecture
    from profilers.distributed.validation import simulate_argv

    report = assess(measurements(), ideal=False)
    assert report.network is not None and report.alone_trace is not None
    files = {
        "trace_file": str(save_trace(report.trace, tmp_path / "solo.json")),
        "alone_file": str(save_trace(report.alone_trace, tmp_path / "alone.json")),
        "network_file": str(save_network_profile(report.network, tmp_path / "link.json")),
    }
    argv = simulate_argv(report, Architecture.PS_SYNC, 1, **files)
    assert "--own-nics" in argv and argv[argv.index("--colocated") + 1] == "1"
    assert main([*argv[1:], "--json", "--quiet"]) == 0
    simulated = output(capsys.readouterr().out)["points"][0]["examples_per_s"]["value"]
    [point] = [p for p in report.points if p.architecture == "ps-sync" and p.workers == 1]
    assert simulated == pytest.approx(point.simulated, rel=0.01)
    two = simulate_argv(report, Architecture.PS_SYNC, 2, **files)
    assert "--own-nics" in two


@pytest.mark.parametrize(
    "given", [["--flow-weight-cv", "0.5"], ["--duplex", "1.5"], ["--duplex-interference", "1,1,1"]]
)
def test_a_server_links_option_is_refused_for_rings_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str]
) -> None:
    """Ring AllReduce points alone (saved, selected or to be run): an option of the server's
    link would change no prediction, yet the report named it as used."""
    runs = save_measurements(measurements(), tmp_path / "runs.json.gz")
    for argv in (
        ["--from-runs", str(runs), "--arch", "allreduce"],
        ["--arch", "allreduce", "--model", "test_distributed_runner:TinyNet"],
    ):
        assert main(["validate", *argv, *given, "--quiet"]) == 1
        out, err = capsys.readouterr()
        assert out == "" and "Traceback" not in err
        assert f"{given[0]}: only with a parameter-server point" in err
    assert main(["validate", "--from-runs", str(runs), *given, "--quiet", "--json"]) == 0
    capsys.readouterr()


def test_a_validation_says_how_its_async_workers_lined_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """check-200's cnn at W = 2: the report's Async-SGD lines give each real run's and each
    simulated seed's pattern, the step-time quantiles and the link's occupancy that its JSON
    holds (the runs drifted or pipelined, the seeds mostly did not stay in step); a
    selection without Async-SGD at W >= 2 has no such lines."""
    check = resources.files("simcore.data.validation") / "check-200"
    cnn = str(check / "cnn-b16-200-layerwise.json.gz")
    args = ["validate", "--from-runs", cnn, "--arch", "ps-async", "--workers-max", "2", "--quiet"]
    assert main([*args, "--json"]) == 0
    (point,) = [p for p in output(capsys.readouterr().out)["points"] if p["workers"] == 2]
    assert main(args) == 0
    text = capsys.readouterr().out
    (line,) = [row for row in text.splitlines() if row.startswith("  W=2: runs ")]
    assert "Async-SGD: how the workers lined up in each real run and each simulated seed" in text
    runs, seeds = line.split("; ")[:2]
    for key, segment in (("measured_phases", runs), ("simulated_phases", seeds)):
        labels = point[key]
        assert all(f"{label} {labels.count(label)}" in segment for label in labels)
    median, p95 = (1e3 * point["measured_step_s_quantiles"][i] for i in (1, 2))
    assert f"steps {median:.3g} / {p95:.3g} ms" in line
    assert len(point["measured_phases"]) == 3 and len(point["simulated_phases"]) >= 5
    # how far apart the workers started: one value per run and seed, 0 .. 0.5 of a step, and
    # their range in the line
    apart = point["measured_offsets"], point["simulated_offsets"]
    assert [len(v) for v in apart] == [3, len(point["simulated_phases"])]
    assert all(0.0 <= d <= 0.5 for v in apart for d in v)
    assert f"apart {offsets_text(apart[0])}, simulated {offsets_text(apart[1])}; " in line
    assert offsets_text([0.401, 0.47]) == "0.40-0.47" and offsets_text([0.25]) == "0.25"
    assert offsets_text([]) == "-"
    # the real pair alternated (0.40-0.47 apart), the seeds did not: the gap is named
    assert "  W=2: the simulated workers started their steps 0.30 of a step closer" in text
    assert (
        main(["validate", "--from-runs", cnn, "--arch", "ps-sync", "--workers-max", "2", "--quiet"])
        == 0
    )
    assert "Async-SGD: how the workers lined up" not in capsys.readouterr().out


@pytest.mark.slow
def test_a_gap_in_where_the_workers_start_is_named() -> None:
    """The seeds' median distance between step starts 0.15 of a step or more from the runs':
    a line saying which way (closer together: too low; farther apart: too high); less, or
    without both, nothing."""
    base = ValidationPoint("ps-async", 2, (100.0,), 80.0, math.nan, 90.0, 1.0)
    closer = dataclasses.replace(
        base, measured_offsets=(0.40, 0.46, 0.47), simulated_offsets=(0.10, 0.17, 0.20)
    )
    line = offset_gap_line(closer)
    assert line.startswith("  W=2: the simulated workers started their steps 0.29 of a step")
    assert "closer together" in line and "(medians 0.17 and 0.46)" in line
    assert "prediction too low" in line
    farther = dataclasses.replace(base, measured_offsets=(0.1,), simulated_offsets=(0.3,))
    assert "farther apart" in offset_gap_line(farther)
    assert "too high" in offset_gap_line(farther)
    near = dataclasses.replace(base, measured_offsets=(0.30,), simulated_offsets=(0.16,))
    assert offset_gap_line(near) == offset_gap_line(base) == ""


def test_an_async_prediction_shows_its_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    """check-200's cnn: the Async-SGD prediction at W = 2 is the mean of its seeds, each
    seed's examples/s is in the JSON, and the text gives their range beside the runs' and
    their spread (max - min) / mean beside the runs' spread%; at W = 1 the prediction is one
    run and has none. The campaign's JSON row carries the same spread (null at W = 1)."""
    check = resources.files("simcore.data.validation") / "check-200"
    cnn = str(check / "cnn-b16-200-layerwise.json.gz")
    args = ["validate", "--from-runs", cnn, "--arch", "ps-async", "--workers-max", "2", "--quiet"]
    assert main([*args, "--json"]) == 0
    one, two = sorted(output(capsys.readouterr().out)["points"], key=lambda p: p["workers"])
    assert one["simulated_seeds_examples_per_s"] == []
    seeds = two["simulated_seeds_examples_per_s"]
    assert len(seeds) == len(two["simulated_phases"]) >= 5
    assert statistics.fmean(seeds) == pytest.approx(two["simulated_examples_per_s"], rel=1e-12)
    assert max(seeds) > min(seeds)  # the seeds line up differently: not one value
    assert main(args) == 0
    text = capsys.readouterr().out
    (line,) = [row for row in text.splitlines() if row.startswith("  W=2: runs ")]
    measured = two["measured_examples_per_s"]
    assert (
        f"examples/s {min(measured):.4g}-{max(measured):.4g}, simulated "
        f"{min(seeds):.4g}-{max(seeds):.4g}" in line
    )
    header = next(row for row in text.splitlines() if "seeds%" in row).split()
    rows = {row.split()[0]: row.split() for row in text.splitlines() if row[:3] in ("  1", "  2")}
    column = header.index("seeds%")
    spread = 100 * (max(seeds) - min(seeds)) / statistics.fmean(seeds)
    assert rows["2"][column] == f"{spread:.1f}" and rows["1"][column] == "-"

    campaign = ["validate", "--from-runs", "check-200", "--model", "cnn", *args[3:], "--json"]
    assert main(campaign) == 0
    rows_json = output(capsys.readouterr().out)["points"]
    by_w = {p["workers"]: p for p in rows_json}
    assert by_w[1]["simulated_spread_percent"] is None
    assert by_w[2]["simulated_spread_percent"] == pytest.approx(spread, rel=1e-9)


@pytest.mark.slow
def test_the_readme_repeats_are_what_the_kept_sets_give() -> None:
    """The README's "same configuration validated twice" numbers: every configuration that two
    kept files validated, from the sets the tests above assessed (the scenario assesses only
    the files that repeat a configuration; each file's predictions are its own)."""
    sets = [("campaign", 3e8), ("campaign-2", 3e8)]
    sets += [(name, None) for name in ("check-200", "check-250", "check-rings", "check-rounds")]
    reports = [
        on_every_core([name], fit_rate_bps=rate) if rate else on_every_core([name])
        for name, rate in sets
    ]
    every = CampaignReport(
        tuple(s for r in reports for s in r.sources),
        tuple(v for r in reports for v in r.reports),
    )
    pairs = every.repeated_points()
    floor = repeat_floor(pairs, 48)
    assert floor is not None
    gaps = [abs(p.measured_gap) for p in pairs]
    shifts = [abs(p.error_shift) for p in pairs]
    phrases = [
        f"The kept sets hold {len(pairs)} configurations validated twice",
        f"came out {100 * statistics.fmean(gaps):.1f}% apart on average, and the simulator's "
        f"error moved by {100 * statistics.fmean(shifts):.1f} points on average "
        f"({100 * max(shifts):.1f} at most)",
        f"standard deviation is {100 * error_noise_sd([p.error_shift for p in pairs]):.1f}%",
        f"the model's own error {100 * repeating_error_rms([p.errors for p in pairs]):.1f}% rms",
        f"{100 * floor.mean_abs_error:.1f}% off on average and "
        f"{100 * floor.max_abs_error:.1f}% at most over 48 points, a held-out half",
    ]
    rounds = [p for p in pairs if p.sources[1].startswith("check-rounds/")]
    quiet = repeat_floor(rounds, 48)
    assert quiet is not None
    phrases.append(
        f"The {len(rounds)} pairs whose second validation took its points in rounds"
        f", predicted from the same kinds of measurement both times (check-rounds against "
        f"check-200 and check-250), moved least: sd "
        f"{100 * error_noise_sd([p.error_shift for p in rounds]):.1f}%, still "
        f"{100 * quiet.mean_abs_error:.1f}% on average and {100 * quiet.max_abs_error:.1f}% at "
        "most over 48 points"
    )
    flowing = readme_flowing()
    for phrase in phrases:
        assert phrase in flowing, f"README should say: {phrase}"
