"""The two-servers scenario (ICPE'20 section 5) runs at small settings the way a user runs it, its
placements split the bytes as claimed, and saturated throughput follows the busiest link."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from simcore.sim.dag import assign_servers
from simcore.trace.build import synthetic_trace
from simcore.trace.io import load_trace, save_trace

from figure_capture import FigureRecord
from scenario_support import (
    assert_finding_and_files,
    assert_png,
    assert_rows_show_csv,
    assert_second_run_refused,
    column,
    load_scenario,
    printed_rows,
    read_csv,
)

SMALL = ["--workers", "1,2", "--steps", "20", "--warmup", "4", "--quiet"]
FAST = ["--trace", "cnn-b32", "--bandwidth", "1Gbps", *SMALL]


@pytest.fixture(scope="module")
def scenario() -> ModuleType:
    return load_scenario("two_servers")


def test_prints_tables_and_saves_data_and_figure(
    scenario: ModuleType,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    saved_figures: list[FigureRecord],
) -> None:
    assert scenario.main([*FAST, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = [scenario.CSV_FILE, scenario.BYTES_CSV_FILE, scenario.FIGURE_FILE]
    finding = assert_finding_and_files(out, tmp_path, names)
    assert finding.startswith("two parameter servers raise the best throughput over one server")
    assert "finding" in out and "bytes held by each server" in out
    assert_png(tmp_path / scenario.FIGURE_FILE, min_bytes=10_000)
    rows = read_csv(tmp_path / scenario.CSV_FILE)
    split = read_csv(tmp_path / scenario.BYTES_CSV_FILE)
    assert len(split) == 1 + 2 + 2  # one server, then two placements of two servers

    [figure] = saved_figures
    assert figure.titled() and len(figure.axes) == len(scenario.MODES)
    keys = [c.key for c in scenario.COLUMNS]
    for axes, (label, _) in zip(figure.axes, scenario.MODES, strict=True):
        assert axes.title == label and axes.has_legend
        assert "W" in axes.xlabel and "(examples/s)" in axes.ylabel
        mine = [r for r in rows if r["table"] == label]
        assert len(mine) == 2 * 3
        # The printed table shows the CSV's rows, rounded; a placement's label is several words.
        printed = [[c[0], " ".join(c[1:-6]), *c[-6:]] for c in printed_rows(out, label)]
        assert_rows_show_csv(printed, mine, keys, label)
        for placement in {r["placement"] for r in mine}:
            values = column([r for r in mine if r["placement"] == placement], "examples_per_s")
            np.testing.assert_allclose(axes.lines[placement][1], values)

    assert_second_run_refused(scenario, [*FAST, "--out", str(tmp_path)], tmp_path, capsys)


@pytest.mark.parametrize("name", ["resnet18-b32", "cnn-b32", "mlp-b64"])
def test_the_even_split_is_the_best_partition_of_whole_layers(
    scenario: ModuleType, name: str
) -> None:
    trace = load_trace(name)
    mapping = scenario.balanced_placement(trace)
    sizes = {la.name: la.param_nbytes for la in trace.layers if la.param_nbytes}
    assert set(mapping) == set(sizes) and set(mapping.values()) <= {0, 1}
    loads = [sum(b for n, b in sizes.items() if mapping[n] == s) for s in (0, 1)]
    greedy = assign_servers(trace, 2, "greedy")
    greedy_loads = [sum(b for n, b in sizes.items() if greedy[n] == s) for s in (0, 1)]
    largest = max(sizes.values())
    tolerance = len(sizes) * trace.param_nbytes / scenario.PARTITION_UNITS
    # No partition does better than half the bytes or than the largest layer on its own server.
    assert max(loads) <= max(trace.param_nbytes / 2, largest) + tolerance
    assert max(loads) <= max(greedy_loads)


def test_saturated_throughput_follows_the_busiest_link(
    scenario: ModuleType, tmp_path: Path
) -> None:
    """Layers of 1, 1 and 2 MB in that order: the greedy split puts 3 MB on server 0 (the
    third layer ties and goes to the lowest index) and 1 MB on server 1, the even split 2 and 2.

    With 1 ms layers the link is the bottleneck at W = 8. Sync-SGD with processor sharing then
    pulls for ``8 * 8 * bytes / B`` and pushes as long, the busiest server setting the pace, so
    the saturated throughput is ``B / (2 * 8 * busiest bytes)`` steps/s: with 4 MB on one server,
    2x that with 2 MB each, 4/3x with 3 MB on the busier. The computation (6 ms of ~500) and the
    partial overlap of the last pulls with the first forwards move it by under 3%.
    """
    trace = synthetic_trace([0.001] * 3, [0.001] * 3, [1_000_000, 1_000_000, 2_000_000])
    path = save_trace(trace, tmp_path / "three.json")
    args = ["--trace", str(path), "--bandwidth", "1Gbps", "--workers", "8", "--steps", "30"]
    curves, split, _, _ = scenario.run(
        scenario.parse_args([*args, "--warmup", "5", "--quiet", "--out", str(tmp_path)])
    )
    held = {(r["placement"], r["server"]): r["mib"] * scenario.MIB for r in split.rows}
    assert held[("2 servers, greedy split", 0)] == 3_000_000
    assert held[("2 servers, even split", 0)] == held[("2 servers, even split", 1)] == 2_000_000
    sync = {c.placement.label: c for c in curves if c.mode == "sync"}
    one = sync["1 server"].points[-1].examples_per_s.value
    greedy = sync["2 servers, greedy split"].points[-1].examples_per_s.value
    even = sync["2 servers, even split"].points[-1].examples_per_s.value
    for curve in sync.values():
        value = curve.points[-1].examples_per_s.value
        assert 0.97 * curve.bound <= value <= curve.bound * (1 + 1e-9)
    assert 1.94 <= even / one <= 2.06
    assert one < greedy < even
    assert greedy / one == pytest.approx(4 / 3, rel=0.03)
