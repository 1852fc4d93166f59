"""DDP in the validation: its points (one per bucket setting and W), its predictions (the
computation alone, the ring's measured terms, the runs' own buckets), the shipped campaign of
real DDP runs (``simcore/data/validation/ddp``) and the README's table of it."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from test_validation_campaign import mean_max, on_every_core, readme_flowing

from profilers.distributed.campaign import architecture_label, campaign_files, shipped_campaigns
from profilers.distributed.config import Architecture, RunConfig
from profilers.distributed.measurements import load_measurements
from profilers.distributed.validation import ValidationReport, assess, simulate_argv
from simcore.cli.main import main
from simcore.sim.buckets import MIB, trace_buckets

DDP_CAMPAIGN = "ddp"
DEFAULT = "ddp 25 MiB (1 MiB first)"
ONE_MIB = "ddp 1 MiB"
needs_campaign = pytest.mark.skipif(
    DDP_CAMPAIGN not in shipped_campaigns(), reason="no DDP campaign shipped"
)


def _ddp(**fields: object) -> RunConfig:
    return RunConfig("cnn", architecture=Architecture.DDP, servers=0, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cap", "first", "limits", "text"),
    [
        (None, None, (25 * MIB, MIB), "25 MiB (1 MiB first)"),  # torch's defaults
        (1.0, None, (MIB, MIB), "1 MiB"),  # a cap given alone: the first bucket as large
        (25.0, None, (25 * MIB, 25 * MIB), "25 MiB"),  # ... even torch's default cap
        (0.5, 0.125, (MIB // 2, MIB // 8), "512 KiB (128 KiB first)"),
    ],
)
def test_a_runs_bucket_limits_are_those_torch_applies(
    cap: float | None, first: float | None, limits: tuple[int, int], text: str
) -> None:
    config = _ddp(bucket_cap_mb=cap, first_bucket_mb=first)
    assert config.bucket_limits_bytes() == limits and config.buckets_text() == text


def test_each_bucket_setting_is_an_architecture_of_its_own_in_a_campaign() -> None:
    assert architecture_label(ONE_MIB, "layerwise") == "DDP 1 MiB, layerwise"
    assert architecture_label(DEFAULT, "layerwise") == "DDP 25 MiB (1 MiB first), layerwise"
    assert architecture_label("allreduce", "layerwise") == "ring AllReduce, layerwise"


@functools.cache
def _assessed(file_name: str) -> ValidationReport:
    [path] = [p for given, p in campaign_files([DDP_CAMPAIGN]) if given.endswith(file_name)]
    return assess(load_measurements(path), ideal=False)


@needs_campaign
def test_every_ddp_point_is_predicted_with_the_buckets_its_runs_had() -> None:
    """resnet18's buckets differ between the two settings (3 and 12): each point's prediction
    replays the buckets torch's reducer built in its own runs (saved with them)."""
    report = _assessed("resnet18-b8-300-ddp.json.gz")
    assert report.measurements is not None and report.predictor is not None
    names = [(p.name, p.workers) for p in report.points]
    assert names == [(n, w) for n in (DEFAULT, ONE_MIB) for w in (1, 2, 3, 4)]
    counts = set()
    for point in report.measurements.points:
        predictor = report.predictor.for_point(point.architecture, point.runs)
        config = predictor.config(Architecture.DDP, point.workers, ideal=False)
        limits = point.runs[0].config.bucket_limits_bytes()
        assert (config.bucket_cap_bytes, config.first_bucket_bytes) == limits
        real = point.runs[0].buckets
        rule = trace_buckets(predictor.replayed_trace(Architecture.DDP), *limits)
        assert [(b.nbytes, b.params) for b in real] == [
            (b.nbytes, tuple(t.name for t in b.tensors)) for b in rule
        ]
        counts.add(len(rule))
    assert counts == {3, 12}  # the two settings' buckets are not the same
    by_name = {(p.name, p.workers): p.simulated for p in report.points}
    assert by_name[(DEFAULT, 1)] == pytest.approx(by_name[(ONE_MIB, 1)], rel=1e-12)
    assert by_name[(DEFAULT, 4)] != pytest.approx(by_name[(ONE_MIB, 4)], rel=1e-3)


@needs_campaign
def test_ddp_is_predicted_with_the_rings_measured_terms_and_w1_is_the_computation_alone() -> None:
    """DDP all-reduces its buckets over gloo's ring, as the per-layer ring: the same measured
    cost per message, segments, bytes' rate per W and CPU work, on the testbed's hosting; one
    worker is the computation alone, as a one-worker ring."""
    report = _assessed("cnn-b32-500-ddp.json.gz")
    predictor = report.predictor
    assert predictor is not None and predictor.ring_message_latency_s is not None
    fields = ("latency_s", "bandwidth_bps", "ring_segment_bytes", "parse_alpha_s_per_byte")
    fields += ("parse_placement", "host_cpu_cores", "worker_cpu_cores", "colocated_workers")
    for workers in (2, 3, 4):
        ddp = predictor.config(Architecture.DDP, workers, ideal=False)
        ring = predictor.config(Architecture.ALLREDUCE, workers, ideal=False)
        assert (ddp.arch, ddp.mode) == ("ddp", "sync")
        assert {f: getattr(ddp, f) for f in fields} == {f: getattr(ring, f) for f in fields}
        assert ddp.parse_alpha_s_per_byte > 0 and ddp.ring_segment_bytes is not None
    assert predictor.replayed_trace(Architecture.DDP) is predictor.alone
    one = predictor.simulated(Architecture.DDP, 1)
    assert one == pytest.approx(predictor.simulated(Architecture.ALLREDUCE, 1), rel=1e-12)


@needs_campaign
def test_the_simulate_line_of_a_ddp_point_gives_its_buckets(tmp_path: Path) -> None:
    report = _assessed("mlp-b32-300-ddp.json.gz")
    assert report.measurements is not None
    files = {"trace_file": "t.json", "alone_file": "a.json", "network_file": "n.json"}
    point = report.measurements.largest_named_points()[ONE_MIB]
    argv = simulate_argv(report, Architecture.DDP, point.workers, runs=point.runs, **files)
    assert argv[2] == "a.json" and argv[argv.index("--arch") + 1] == "ddp"
    assert argv[argv.index("--bucket-cap") + 1] == f"{MIB}B"
    assert argv[argv.index("--first-bucket") + 1] == f"{MIB}B"


@needs_campaign
def test_validate_from_the_ddp_campaign_reports_each_bucket_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = next(p for g, p in campaign_files([DDP_CAMPAIGN]) if "mlp-b32-300" in g)
    assert main(["validate", "--from-runs", str(path), "--json", "--quiet"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert {(p["architecture"], p["buckets"]) for p in points} == {
        ("ddp", "25 MiB (1 MiB first)"),
        ("ddp", "1 MiB"),
    }
    assert main(["validate", "--from-runs", str(path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert f"\n{DEFAULT}\n" in text and f"\n{ONE_MIB}\n" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bucket-cap", "1MB"], "--bucket-cap: a DDP setting; give --arch ddp too"),
        (["--first-bucket", "1MB", "--arch", "ps-sync"], "--first-bucket: a DDP setting"),
        (["--arch", "ddp", "--bucket-cap", "0"], "--bucket-cap: '0' must be > 0"),
        (["--arch", "ddp", "--bucket-cap", "lots"], "--bucket-cap: 'lots' is not a size"),
        (["--from-runs", "x.json.gz", "--bucket-cap", "1MB"], "--bucket-cap: not with --from"),
    ],
)
def test_bad_ddp_options_of_validate_are_one_line_each(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--model", "cnn", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@needs_campaign
def test_every_kept_ddp_file_holds_both_settings_at_every_w_and_is_compact() -> None:
    files = campaign_files([DDP_CAMPAIGN])
    assert len(files) >= 6
    for _, path in files:
        m = load_measurements(path)
        assert {(p.name, p.workers) for p in m.points} == {
            (n, w) for n in (DEFAULT, ONE_MIB) for w in (1, 2, 3, 4)
        }
        assert all(len(p.runs) == 3 and p.runs[0].buckets for p in m.points)
        assert len(m.rings) == 3 and path.stat().st_size < 700_000


@pytest.mark.slow
@needs_campaign
def test_the_readme_ddp_rows_are_what_the_shipped_ddp_campaign_gives() -> None:
    """The README's DDP table: each bucket setting's mean / max error per link rate and the
    whole campaign's, and the noise floor beside them, as the kept runs give them now."""
    report = on_every_core([DDP_CAMPAIGN])
    flowing = readme_flowing()
    labels = [architecture_label(n, "layerwise") for n in (DEFAULT, ONE_MIB)]
    for rate in sorted({r.link_rate_bps for r in report.reports if r.link_rate_bps}):
        cells = [mean_max(report.abs_errors(rate, label)) for label in labels]
        cells.append(f"**{mean_max(report.abs_errors(rate))}**")
        row = f"| {rate / 1e6:g} Mbit/s |" + "".join(f" {c} |" for c in cells)
        assert row in flowing, f"README row should read:\n{row}"
    all_cells = [mean_max(report.abs_errors(None, label)) for label in labels]
    row = "| all |" + "".join(f" {c} |" for c in all_cells)
    row += f" **{mean_max(report.abs_errors())}** |"
    assert row in flowing, f"README row should read:\n{row}"


@pytest.mark.slow
def test_validate_runs_ddp_with_each_bucket_cap_and_assesses_the_runs_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real thing at tiny settings (loopback): two bucket settings a point each at every W,
    the runs saved with their caps and buckets, the same report again from them."""
    runs = tmp_path / "runs.json.gz"
    argv = ["validate", "--model", "test_distributed_runner:TinyNet", "--batch-size", "8"]
    argv += ["--steps", "5", "--warmup", "1", "--workers-max", "2", "--repetitions", "1"]
    argv += ["--profile-runs", "1", "--arch", "ddp", "--bucket-cap", "25MiB"]
    argv += ["--bucket-cap", "512B", "--quiet", "--json", "--save-runs", str(runs)]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert [(p["buckets"], p["workers"]) for p in first["points"]] == [
        ("25 MiB", 1),
        ("25 MiB", 2),
        ("512 B", 1),
        ("512 B", 2),
    ]
    m = load_measurements(runs)
    caps = [p.runs[0].config.bucket_cap_mb for p in m.points]
    assert caps == [25.0, 25.0, 512 / MIB, 512 / MIB]
    assert all(len(p.runs[0].buckets) > 1 for p in m.points if p.runs[0].config.bucket_cap_mb < 1)
    assert main(["validate", "--from-runs", str(runs), "--json", "--quiet"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["points"] == first["points"]
