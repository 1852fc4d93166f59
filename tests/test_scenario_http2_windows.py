"""The HTTP/2 windows scenario (ICPE'20 3.2.2, 3.3, Fig. 17-19) runs at small settings the way a
user runs it, and its numbers obey what one worker must do under each stream order."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from types import ModuleType

import pytest

from simcore.trace.io import load_trace
from simcore.units import format_number

from figure_capture import FigureRecord, record
from scenario_support import (
    assert_finding_and_files,
    assert_png,
    assert_second_run_refused,
    column,
    load_scenario,
    read_csv,
)

WORKERS = (1, 2)
SMALL = ["--trace", "cnn-b32", "--workers", "1,2", "--steps", "30", "--warmup", "5", "--quiet"]
B = 1e9  # the scenario's default link, bit/s


@pytest.fixture(scope="module")
def scenario() -> ModuleType:
    return load_scenario("http2_windows")


def printed_rows(text: str, n_workers: int) -> dict[str, list[float]]:
    """ordering label -> the numbers of its printed row (examples/s per W, step ms, idle ms)."""
    lines = text.splitlines()
    start = lines.index("examples/s by stream ordering and number of workers W") + 2
    rows = {}
    for line in lines[start:]:
        tokens = line.split()
        if not tokens:
            break
        numbers = n_workers + 2
        rows[" ".join(tokens[: -(numbers + 2)])] = [float(x) for x in tokens[-numbers:]]
    return rows


@pytest.fixture(scope="module")
def run(
    scenario: ModuleType, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, list[FigureRecord]]:
    """One small run shared by the tests: its folder, its printed output, its figures (recorded
    as the ``saved_figures`` fixture does, for the whole module)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out = tmp_path_factory.mktemp("http2")
    records: list[FigureRecord] = []
    original = Figure.savefig

    def savefig(self: Figure, fname: object, *args: object, **kwargs: object) -> object:
        records.append(record(self, fname))
        return original(self, fname, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Figure, "savefig", savefig)
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert scenario.main([*SMALL, "--out", str(out)]) == 0
    return out, buffer.getvalue(), records


def test_prints_the_table_and_saves_every_file(
    scenario: ModuleType, run: tuple[Path, str, list[FigureRecord]]
) -> None:
    out, text, _ = run
    assert "W = 1: best " in text
    names = [scenario.CSV_FILE, scenario.POINTS_FILE, scenario.FIGURE_FILE, scenario.TIMELINE_FILE]
    finding = assert_finding_and_files(text, out, names)
    assert "of the best throughput at every W" in finding
    for name in (scenario.FIGURE_FILE, scenario.TIMELINE_FILE):
        assert_png(out / name)
    for name in (scenario.CSV_FILE, scenario.POINTS_FILE):
        assert (out / name).stat().st_size > 0
    printed = printed_rows(text, len(WORKERS))
    rows = read_csv(out / scenario.CSV_FILE)
    assert [r["ordering"] for r in rows] == [o.label for o in scenario.ORDERINGS]
    assert list(printed) == [r["ordering"] for r in rows]
    for row in rows:
        keys = [f"examples_per_s_w{w}" for w in WORKERS] + ["step_ms_w1", "idle_ms_w1"]
        csv_values = [float(row[k]) for k in keys]
        rounded = [float(format_number(v)) for v in csv_values]  # as every table prints
        assert printed[row["ordering"]] == pytest.approx(rounded, abs=1e-9)


def test_figures_show_the_csv_numbers_with_titles_labels_and_legends(
    scenario: ModuleType, run: tuple[Path, str, list[FigureRecord]]
) -> None:
    out, _, records = run
    curves, gantt = records
    (ax,) = curves.axes
    assert ax.title and ax.has_legend
    assert ax.xlabel == "workers W" and ax.ylabel == "training throughput (examples/s)"
    points = read_csv(out / scenario.POINTS_FILE)
    for ordering in scenario.ORDERINGS:
        x, y = ax.lines[ordering.label]
        mine = [p for p in points if p["ordering"] == ordering.label]
        assert x.tolist() == column(mine, "workers").tolist()
        assert y.tolist() == pytest.approx(column(mine, "examples_per_s").tolist())
    shown = [o for o in scenario.ORDERINGS if o.on_timeline]
    assert gantt.suptitle and len(gantt.axes) == len(shown)
    assert gantt.axes[0].has_legend
    assert re.search(r"\((ms|s)\)", gantt.axes[-1].xlabel)
    took_ms = {}
    for axes, ordering in zip(gantt.axes, shown, strict=True):
        assert axes.title.startswith(ordering.label)
        found = re.search(r"takes (\d+) ms$", axes.title)
        assert found, axes.title
        took_ms[ordering.scheduler] = float(found.group(1))
    # Every panel runs the same profiled step: only the waiting differs, and reverse order,
    # whose forward pass waits for every pull, takes longest.
    assert took_ms["reverse"] == max(took_ms.values()) > took_ms["trace"]


def test_one_worker_waits_for_every_pull_in_reverse_order(
    run: tuple[Path, str, list[FigureRecord]], scenario: ModuleType
) -> None:
    """Reverse order sends the first layer's parameters last, so the forward pass starts only
    when every pull is done, 8 * (model bytes) / B after the step starts. Trace order sends them
    first: the convolutions (everything before the 2 MiB fully connected layer, whose pull ends
    the pulls) compute while that layer arrives, so the compute idles less by about their time.
    """
    out, _, _ = run
    rows = {r["scheduler"]: r for r in read_csv(out / scenario.CSV_FILE)}
    trace = load_trace("cnn-b32")
    pulls_ms = 8 * trace.param_nbytes / B * 1e3
    assert float(rows["reverse"]["idle_ms_w1"]) >= pulls_ms
    first_fc = next(i for i, op in enumerate(trace.ops) if op.id == "forward:classifier_0")
    convs_ms = min(
        1e3
        * sum(
            d or 0.0
            for op, d in zip(trace.ops[:first_fc], step.duration_s, strict=False)
            if op.kind.value == "forward"
        )
        for step in trace.steps
    )
    saved_ms = float(rows["reverse"]["idle_ms_w1"]) - float(rows["trace"]["idle_ms_w1"])
    assert saved_ms >= 0.9 * convs_ms
    reverse = float(rows["reverse"]["examples_per_s_w1"])
    assert all(float(r["examples_per_s_w1"]) >= reverse for r in rows.values())


def test_a_window_larger_than_every_layer_is_fifo(
    run: tuple[Path, str, list[FigureRecord]], scenario: ModuleType
) -> None:
    # HTTP/2 interrupts only streams longer than WIN; cnn-b32's largest layer is 2 MiB, so with
    # WIN = 4 MiB nothing is interrupted and the connection serves streams in order of readiness.
    out, _, _ = run
    largest = max(layer.param_nbytes for layer in load_trace("cnn-b32").layers)
    rows = {r["ordering"]: r for r in read_csv(out / scenario.CSV_FILE)}
    big = next(o for o in scenario.ORDERINGS if o.scheduler == "http2" and o.window_bytes > largest)
    for w in WORKERS:
        key = f"examples_per_s_w{w}"
        assert float(rows[big.label][key]) == float(rows[scenario.ORDERINGS[0].label][key])


def test_a_second_run_never_overwrites(
    scenario: ModuleType,
    run: tuple[Path, str, list[FigureRecord]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, _, _ = run
    assert_second_run_refused(scenario, [*SMALL, "--out", str(out)], out, capsys)
