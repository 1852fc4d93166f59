"""How a parameter server's link was occupied (``simcore.sim.occupancy``): hand-computed cases,
the closed forms of a 3-layer chain (``test_sim_overlap``'s: pulls and pushes 28 ms each way at
1 Gbit/s, computation 180 ms), measured runs' spans, and ``sgdsim timeline``'s report of it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profilers.distributed.__main__ import print_run_summary
from profilers.distributed.campaign import CampaignReport, campaign_async_table
from profilers.distributed.config import Architecture, RunConfig
from profilers.distributed.measurements import load_measurements
from profilers.distributed.records import (
    RunResult,
    Span,
    StepRecord,
    load_run,
    run_from_dict,
    run_to_dict,
)
from profilers.distributed.validation import assess
from simcore.cli.main import main
from simcore.errors import ConfigError
from simcore.sim import SimulationConfig, simulate
from simcore.sim.occupancy import (
    PULL,
    PUSH,
    LinkOccupancy,
    TransferInterval,
    link_occupancy,
    occupancy_text,
    pooled_occupancy,
    short_occupancy_text,
    timeline_intervals,
)
from simcore.trace.build import synthetic_trace

B = 1e9
TRANSFER_S = 0.028  # each way, one worker alone
COMPUTE_S = 0.180
LAYERWISE_STEP_S = 0.202  # test_sim_overlap's critical path
VALIDATION = Path(__file__).resolve().parent.parent / "simcore" / "data" / "validation"


def chain_occupancy(workers: int, **config: object) -> LinkOccupancy:
    """The occupancy of steps 1-5 of ``workers`` workers replaying the 3-layer chain."""
    forward_s, backward_s = [0.010, 0.020, 0.030], [0.020, 0.040, 0.060]
    trace = synthetic_trace(forward_s, backward_s, [1_000_000, 2_000_000, 500_000])
    base = SimulationConfig(
        workers=workers, bandwidth_bps=B, steps=6, warmup_steps=1, seed=3, timeline=True
    )
    result = simulate(trace, dataclasses.replace(base, **config))  # type: ignore[arg-type]
    assert result.timeline is not None
    return link_occupancy(timeline_intervals(result.timeline, from_step=1), workers)


def test_every_combination_of_pulling_and_pushing_workers_gets_its_time() -> None:
    # 0-1: worker 0 pulls; 1-2: both pull; 2-3: worker 1 pulls, worker 0 pushes; 3-4: a push.
    intervals = [
        TransferInterval(0, PULL, 0.0, 2.0),
        TransferInterval(1, PULL, 1.0, 3.0),
        TransferInterval(0, PUSH, 2.0, 4.0),
    ]
    occupancy = link_occupancy(intervals, workers=2)
    assert occupancy.span_s == 4.0
    assert occupancy.shares == ((0, 1, 0.25), (1, 0, 0.25), (1, 1, 0.25), (2, 0, 0.25))
    assert occupancy.all_pulling == 0.25 and occupancy.all_pushing == 0.0
    assert occupancy.both_directions == 0.25 and occupancy.idle == 0.0
    assert occupancy_text(occupancy) == (
        "all 2 workers pulling 25%, all 2 workers pushing 0%, both directions busy 25%, "
        "idle 0%, fewer workers one way 50%"
    )


def test_a_workers_overlapping_transfers_count_once_and_the_window_clips() -> None:
    # One worker pulling two layers at once over 0-3 is one worker pulling, not two.
    intervals = [TransferInterval(0, PULL, 0.0, 2.0), TransferInterval(0, PULL, 1.0, 3.0)]
    assert link_occupancy(intervals, workers=2).shares == ((1, 0, 1.0),)
    clipped = link_occupancy(intervals, workers=1, start_s=2.0, end_s=6.0)
    assert clipped.span_s == 4.0
    assert clipped.all_pulling == pytest.approx(0.25) and clipped.idle == pytest.approx(0.75)
    assert link_occupancy([], workers=2).shares == ()
    assert occupancy_text(link_occupancy([], workers=2)) == "no transfers"


def test_bad_intervals_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="direction: 'send'"):
        TransferInterval(0, "send", 0.0, 1.0)
    with pytest.raises(ValueError, match="ends"):
        TransferInterval(0, PULL, 2.0, 1.0)
    with pytest.raises(ValueError, match="workers"):
        link_occupancy([], workers=0)


@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.sampled_from([PULL, PUSH]),
            st.floats(0, 10, allow_nan=False),
            st.floats(0, 5, allow_nan=False),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_shares_sum_to_one_and_never_count_more_workers_than_there_are(
    raw: list[tuple[int, str, float, float]],
) -> None:
    intervals = [TransferInterval(w, d, a, a + length) for w, d, a, length in raw]
    occupancy = link_occupancy(intervals, workers=4)
    if occupancy.span_s == 0:
        return
    assert sum(s for _, _, s in occupancy.shares) == pytest.approx(1.0)
    assert all(0 <= i <= 4 and 0 <= j <= 4 and s > 0 for i, j, s in occupancy.shares)


def test_one_worker_strict_phases_pull_compute_push() -> None:
    # Every step: 28 ms pulling, 180 ms computing (the link idle), 28 ms pushing.
    occupancy = chain_occupancy(1, overlap="none")
    step = 2 * TRANSFER_S + COMPUTE_S
    assert occupancy.all_pulling == pytest.approx(TRANSFER_S / step)
    assert occupancy.all_pushing == pytest.approx(TRANSFER_S / step)
    assert occupancy.idle == pytest.approx(COMPUTE_S / step)
    assert occupancy.both_directions == 0.0


def test_one_worker_layerwise_pulls_and_pushes_each_take_their_28_ms_of_a_step() -> None:
    # Pulls 0-28 ms, pushes 134-138, 174-190 and 194-202 ms of each 202 ms step.
    occupancy = chain_occupancy(1)
    assert occupancy.all_pulling == pytest.approx(TRANSFER_S / LAYERWISE_STEP_S)
    assert occupancy.all_pushing == pytest.approx(TRANSFER_S / LAYERWISE_STEP_S)
    assert occupancy.both_directions == 0.0


@pytest.mark.parametrize("sharing", ["ps", "fcfs"])
def test_sync_workers_never_pull_while_another_pushes(sharing: str) -> None:
    # Two workers, strict phases: the barrier keeps pulls and pushes apart. Under processor
    # sharing both pull at half rate for 56 ms; first come first served serves one, then the other.
    occupancy = chain_occupancy(2, mode="sync", overlap="none", sharing=sharing)
    step = 4 * TRANSFER_S + COMPUTE_S
    assert occupancy.both_directions == 0.0
    if sharing == "ps":
        assert occupancy.all_pulling == pytest.approx(2 * TRANSFER_S / step)
        assert occupancy.all_pushing == pytest.approx(2 * TRANSFER_S / step)
    else:
        assert occupancy.share(1, 0) > 0 and occupancy.share(0, 1) > 0


def _run(arch: Architecture, spans: tuple[Span, ...]) -> RunResult:
    servers = 1 if arch.uses_servers else 0
    config = RunConfig(
        model="mlp", architecture=arch, workers=2, servers=servers, steps=3, warmup=1
    )
    steps = tuple(StepRecord(w, s, s * 1.0, s + 1.0, 0.0) for w in (0, 1) for s in range(3))
    return RunResult(config, "mlp", {"fc": 4}, spans, steps)


def test_a_measured_run_after_warm_up_from_its_spans_and_the_servers() -> None:
    # Rank 0 is the server, ranks 1 and 2 the workers. Step 0 is warm-up, but the server's
    # updates of it say when it could start sending step 1's pulls: worker 0's at 1.2 s
    # (posted at 1.0 s), worker 1's at once. Worker 0's push was handed to the socket at 1.8 s
    # and reached the server at 2.0 s, when its update began.
    spans = (
        Span(1, 0, 0, "fc", "pull", 0.0, 0.5),
        Span(0, 0, 0, "fc", "update", 1.1, 0.1),
        Span(0, 1, 0, "fc", "update", 0.9, 0.1),
        Span(1, 0, 1, "fc", "pull", 1.0, 0.5),
        Span(2, 1, 1, "fc", "pull", 1.0, 0.5),
        Span(1, 0, 1, "fc", "forward", 1.5, 0.1),
        Span(1, 0, 1, "fc", "push", 1.75, 0.05),
        Span(2, 1, 1, "fc", "push", 1.75, 0.25),
        Span(0, 0, 1, "fc", "update", 2.0, 0.01),
        Span(0, 1, 1, "fc", "update", 2.0, 0.01),
    )
    occupancy = _run(Architecture.PS_ASYNC, spans).link_occupancy()
    assert occupancy is not None and occupancy.span_s == pytest.approx(1.0)
    assert occupancy.share(1, 0) == pytest.approx(0.2)  # 1.0-1.2: worker 1 alone
    assert occupancy.all_pulling == pytest.approx(0.3)  # 1.2-1.5
    assert occupancy.idle == pytest.approx(0.25)  # 1.5-1.75
    assert occupancy.all_pushing == pytest.approx(0.25)  # 1.75-2.0, not 1.75-1.8 for worker 0
    assert _run(Architecture.ALLREDUCE, spans).link_occupancy() is None
    assert _run(Architecture.PS_ASYNC, ()).link_occupancy() is None


def test_timeline_reports_the_servers_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["timeline", "cnn-b32", "--bandwidth", "1Gbps", "--steps", "8", "--workers", "2"]
    args += ["--mode", "sync", "-o", str(tmp_path / "t.png"), "--json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "the servers' links after warm-up: all 2 workers pulling" in captured.err
    shares = json.loads(captured.out)["context"]["link_occupancy"]["shares"]
    assert sum(s["share"] for s in shares) == pytest.approx(1.0)
    assert all(s["pulling"] == 0 or s["pushing"] == 0 for s in shares)  # sync: never both
    ring = ["timeline", "cnn-b32", "--bandwidth", "1Gbps", "--steps", "8", "--workers", "2"]
    ring += ["--arch", "allreduce", "-o", str(tmp_path / "r.png"), "--json"]
    assert main(ring) == 0
    captured = capsys.readouterr()
    assert "servers' links" not in captured.err
    assert json.loads(captured.out)["context"]["link_occupancy"] is None


def test_pooled_runs_weigh_by_their_span_and_the_short_text() -> None:
    first = link_occupancy([TransferInterval(0, PULL, 0.0, 1.0)], workers=1)  # all pulling
    second = link_occupancy(  # 1 s pushing of 3 s
        [TransferInterval(0, PUSH, 0.0, 1.0)], workers=1, start_s=0.0, end_s=3.0
    )
    pooled = pooled_occupancy([first, second])
    assert pooled is not None and pooled.span_s == 4.0
    assert pooled.all_pulling == pytest.approx(0.25)
    assert pooled.all_pushing == pytest.approx(0.25)
    assert pooled.idle == pytest.approx(0.5)
    assert short_occupancy_text(pooled) == "25/25/0" and short_occupancy_text(None) == "-"
    assert pooled_occupancy([]) is None
    with pytest.raises(ValueError, match="different numbers of workers"):
        pooled_occupancy([first, link_occupancy([TransferInterval(0, PULL, 0, 1)], workers=2)])


def test_a_compacted_run_keeps_its_occupancy_through_json(tmp_path: Path) -> None:
    spans = (
        Span(1, 0, 1, "fc", "pull", 1.0, 0.5),
        Span(2, 1, 1, "fc", "pull", 1.0, 0.5),
        Span(1, 0, 1, "fc", "push", 1.5, 0.5),
    )
    run = _run(Architecture.PS_ASYNC, spans)
    compact = run.without_spans()
    assert compact.spans == () and compact.link_occupancy() == run.link_occupancy()
    back = run_from_dict(json.loads(json.dumps(run_to_dict(compact))))
    assert back.link_occupancy() == run.link_occupancy()
    doc = run_to_dict(compact)
    doc["link_occupancy"]["shares"][0]["share"] = 1.5
    with pytest.raises(ConfigError, match=r"link_occupancy: shares must be within 0\.\.1"):
        run_from_dict(doc, "run.json")
    doc["link_occupancy"]["shares"][0] = {"pulling": 3, "pushing": 0, "share": 0.5}
    with pytest.raises(ConfigError, match="counts more workers than the run's 2"):
        run_from_dict(doc, "run.json")
    doc["link_occupancy"]["workers"] = 0
    with pytest.raises(ConfigError, match=r"run\.json: link_occupancy: workers must be >= 1"):
        run_from_dict(doc, "run.json")


def test_validation_compares_the_measured_and_simulated_link_of_async_points() -> None:
    # The campaign keeps the spans of the first run at the largest W: mlp at 500 Mbit/s, W = 4.
    measured = load_measurements(VALIDATION / "campaign" / "mlp-500-layerwise.json.gz")
    kept = tuple(
        p
        for p in measured.points
        if p.architecture is Architecture.PS_ASYNC and p.workers in (1, 4)
    )
    report = assess(dataclasses.replace(measured, points=kept), ideal=False)
    one, four = report.points
    assert one.measured_occupancy is None and one.simulated_occupancy is None
    for occupancy in (four.measured_occupancy, four.simulated_occupancy):
        assert occupancy is not None and occupancy.workers == 4
        assert sum(s for _, _, s in occupancy.shares) == pytest.approx(1.0)
    row = campaign_async_table(CampaignReport(("mlp-500",), (report,))).rows[0]
    assert row["measured_link"] == short_occupancy_text(four.measured_occupancy)


def test_the_kept_runs_say_what_their_readme_says() -> None:
    kept = VALIDATION.parent / "runs"
    readme = (kept / "README.md").read_text()
    for path in sorted(kept.glob("*.json.gz")):
        run = load_run(path)
        name = path.name.removesuffix(".json.gz")
        pull_push_both = short_occupancy_text(run.link_occupancy()).replace("/", " / ")
        assert f"| `{name}` | {run.examples_per_s:.1f} | {pull_push_both} |" in readme


def test_the_runner_prints_the_occupancy_of_a_run_with_servers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spans = (Span(1, 0, 1, "fc", "pull", 1.0, 0.5), Span(2, 1, 1, "fc", "push", 1.2, 0.5))
    print_run_summary(_run(Architecture.PS_ASYNC, spans))
    out = capsys.readouterr().out
    assert "the servers' links after warm-up: all 2 workers pulling 0%" in out
    assert "(a push until the server began to apply it)" in out
    print_run_summary(_run(Architecture.PS_SYNC, spans))
    assert "(a push until its bytes were handed to the socket)" in capsys.readouterr().out
    print_run_summary(_run(Architecture.ALLREDUCE, spans))
    assert "servers' links" not in capsys.readouterr().out
