"""When the testbed's tbf bucket splits TCP's GSO packets (profilers.netns.tbf_segments_gso), what
the testbed's descriptions say about it, and what it costs a ring's ranks
(scenarios/research/testbed_segmentation.py, on the emulated cluster: root only)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profilers.netns import TBF_GSO_PACKET_NBYTES, tbf_burst_nbytes, tbf_segments_gso
from profilers.netns_cluster import BURST_S, EmulatedCluster

from scenario_support import assert_png, load_scenario, read_csv


def test_a_gso_packet_is_45_segments_with_their_headers() -> None:
    # 64 KiB of TCP payload in 1448-byte segments is 45 whole ones; tbf counts 66 B of headers
    # (Ethernet 14, IPv4 20, TCP with timestamps 32) for each.
    assert TBF_GSO_PACKET_NBYTES == 45 * 1448 + 45 * 66 == 68_130
    assert 67_000 < TBF_GSO_PACKET_NBYTES < 69_000  # the testbed's buckets that split / did not


def test_the_testbeds_1ms_bucket_splits_below_545_mbit_s() -> None:
    # 1 ms at 500 Mbit/s is 62,500 B, at 550 Mbit/s 68,750 B.
    assert tbf_burst_nbytes(500e6, BURST_S) == 62_500
    assert tbf_segments_gso(500e6, BURST_S)
    assert not tbf_segments_gso(550e6, BURST_S)
    assert tbf_segments_gso(300e6, 1e-3) and not tbf_segments_gso(300e6, 2e-3)  # 37.5 / 75 kB
    assert tbf_segments_gso(1e9, 100e-6)  # the ping-pong's 100 us bucket at 1 Gbit/s: 12.5 kB


@given(
    rate=st.floats(1e6, 1e11),
    burst=st.floats(1e-6, 1e-1),
    more=st.floats(1.0, 100.0),
)
def test_a_larger_bucket_never_splits_what_a_smaller_one_does_not(
    rate: float, burst: float, more: float
) -> None:
    if not tbf_segments_gso(rate, burst):
        assert not tbf_segments_gso(rate * more, burst)
        assert not tbf_segments_gso(rate, burst * more)


def test_a_cluster_says_when_its_buckets_split_gso_packets() -> None:
    def cluster(rate: float) -> EmulatedCluster:
        return EmulatedCluster(("a", "b"), ("10.0.0.1", "10.0.0.2"), "br", {0: rate, 1: rate})

    assert "tbf segments TCP's sends in software" in cluster(300e6).describe()
    assert "segments" not in cluster(1e9).describe()
    assert "segments" not in EmulatedCluster(("a",), ("10.0.0.1",), "br").describe()


def test_the_scenario_refuses_a_ring_of_one_and_a_bad_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    scenario = load_scenario("testbed_segmentation")
    for argv, named in ((["--workers", "1,2"], "--workers"), (["--rates", "fast"], "--rates")):
        with pytest.raises(SystemExit) as exit_info:
            scenario.main(argv)
        assert exit_info.value.code == 2
        assert named in capsys.readouterr().err


def test_splitting_gso_packets_costs_a_rings_ranks_many_times_the_cpu(
    root_only: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = load_scenario("testbed_segmentation")
    argv = ["--rates", "300Mbit/s", "--workers", "2", "--repeats", "2", "--out", str(tmp_path)]
    assert scenario.main([*argv, "--quiet"]) == 0
    out = capsys.readouterr().out
    rows = read_csv(tmp_path / "testbed_segmentation.csv")
    assert_png(tmp_path / "testbed_segmentation.png", min_bytes=10_000)
    assert [(r["bucket_bytes"], r["splits_gso"]) for r in rows] == [
        ("37500", "yes"),
        (str(tbf_burst_nbytes(300e6, 2 * TBF_GSO_PACKET_NBYTES * 8 / 300e6)), "no"),
    ]
    split, whole = (float(r["cpu_ns_per_byte"]) for r in rows)
    # Measured: ~5-6 ns/B split, ~0.3 whole; a factor of 5 leaves room for a busy machine.
    assert split > 5 * whole > 0
    for row in rows:
        assert 0.5 < float(row["of_link"]) <= 1.0  # shaped to 300 Mbit/s either way
        assert math.isclose(float(row["goodput_mbps"]) / 300, float(row["of_link"]), rel_tol=1e-9)
    assert f"{split:.1f}-{split:.1f} ns of CPU per byte" in out
    # A second run does not overwrite the first's files without --force.
    assert scenario.main([*argv, "--quiet"]) == 1


@pytest.mark.slow
def test_a_validation_says_whether_its_testbed_split_gso_packets() -> None:
    from profilers.distributed.campaign import campaign_files
    from profilers.distributed.measurements import load_measurements
    from profilers.distributed.validation import assess, report_text

    files = dict(campaign_files(["check-rings-2"]))
    runs = load_measurements(files["check-rings-2/resnet8-b16-300-layerwise.json.gz"])
    assert runs.link_rate_bps == 300e6 and runs.link_burst_s == BURST_S
    text = report_text(assess(runs, ideal=False))
    assert "(tbf's bucket of 36.6 KiB splits TCP's GSO packets" in text
    assert "Async-SGD workers sharing a core take turns on the link for it" in text
    wide = dataclasses.replace(runs, link_burst_s=4e-3)  # as `--testbed-burst 4ms` records it
    text = report_text(assess(wide, ideal=False))
    assert "links shaped to 300 Mbit/s (tbf's bucket 146 KiB, 4 ms at the rate)" in text
    assert "splits" not in text
