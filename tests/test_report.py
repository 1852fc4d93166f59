"""The scenario harness: tables (text and CSV from one definition), options, output folders."""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

import pytest

from simcore.errors import ConfigError
from simcore.report import Column, ScenarioOutput, Table, link_from_args, scenario_parser
from simcore.report.scenario import format_workers, run_scenario, worker_list
from simcore.report.table import tables_csv_text


def table() -> Table:
    t = Table("demo", [Column("w", "W"), Column("x", "examples/s", "{:.2f}")])
    t.add(w=1, x=1 / 3)
    t.add(w=16, x=None)
    return t


def test_text_is_aligned_and_rounded_while_csv_keeps_full_precision() -> None:
    t = table()
    assert t.text().splitlines() == [
        "demo",
        "   W  examples/s",
        "   1        0.33",
        "  16           -",
    ]
    rows = list(csv.DictReader(io.StringIO(t.csv_text())))
    assert rows == [{"w": "1", "x": repr(1 / 3)}, {"w": "16", "x": ""}]
    assert t.column("w") == [1, 16]


def test_rows_must_fill_every_column_and_tables_must_match_to_share_a_file() -> None:
    t = table()
    with pytest.raises(ValueError, match=r"missing \['x'\], unknown \['y'\]"):
        t.add(w=2, y=3)
    other = Table("other", [Column("w", "W")])
    with pytest.raises(ValueError, match="columns differ"):
        tables_csv_text([t, other])
    both = list(csv.reader(io.StringIO(tables_csv_text([t, table()]))))
    assert both[0] == ["table", "w", "x"] and both[1][0] == "demo" and len(both) == 5


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1-4", (1, 2, 3, 4)), ("8,1,2", (1, 2, 8)), ("1-3,8,2", (1, 2, 3, 8)), ("5", (5,))],
)
def test_worker_lists(text: str, expected: tuple[int, ...]) -> None:
    assert worker_list(text) == expected


@pytest.mark.parametrize("text", ["0-3", "4-2", "a", "", "1,,2", "-1"])
def test_bad_worker_lists_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="positive worker counts"):
        worker_list(text)


def test_format_workers() -> None:
    assert format_workers([1, 2, 3, 4]) == "1-4"
    assert format_workers([1, 2, 4, 8]) == "1,2,4,8"


def parser() -> argparse.ArgumentParser:
    return scenario_parser(
        "demo",
        "Demo.\n\nMore.",
        trace="cnn-b32",
        workers=(1, 2),
        steps=10,
        warmup=2,
        bandwidth="1Gbps",
    )


def test_defaults_and_the_link() -> None:
    args = parser().parse_args([])
    assert (args.trace, args.workers, args.steps, args.warmup, args.seed) == (
        "cnn-b32",
        (1, 2),
        10,
        2,
        1,
    )
    assert args.out == str(Path("results") / "demo")
    assert link_from_args(args) == (1e9, 0.0, "1.00 Gbit/s")
    explicit = parser().parse_args(["--bandwidth", "10Gbps", "--latency", "50us"])
    assert link_from_args(explicit)[:2] == (10e9, pytest.approx(50e-6))
    measured = parser().parse_args(["--network", "veth-1gbit"])
    bandwidth_bps, latency_s, label = link_from_args(measured)
    assert 0.5e9 < bandwidth_bps < 1e9 and latency_s > 0 and "veth-1gbit" in label


def test_usage_errors_are_one_line_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["--steps", "0"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--steps" in err[0] and "'0'" in err[0]


def test_outputs_are_claimed_before_the_run_and_written_atomically(tmp_path: Path) -> None:
    out = ScenarioOutput(tmp_path / "r", ["a.csv", "b.json"], force=False)
    out.write_csv("a.csv", table())
    out.write_json("b.json", {"x": 1})
    assert (tmp_path / "r" / "b.json").read_text() == '{\n "x": 1\n}\n'
    assert out.summary().splitlines() == [
        f"wrote {tmp_path / 'r' / n}" for n in ("a.csv", "b.json")
    ]
    with pytest.raises(ValueError, match="not among the files"):
        out.path("c.png")
    with pytest.raises(ConfigError, match="already exists; pass --force"):
        ScenarioOutput(tmp_path / "r", ["z.png", "a.csv"], force=False)
    ScenarioOutput(tmp_path / "r", ["a.csv"], force=True).write_text("a.csv", "new\n")
    assert (tmp_path / "r" / "a.csv").read_text() == "new\n"
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="not a folder"):
        ScenarioOutput(tmp_path / "file", ["a.csv"], force=False)
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["a.csv", "b.json"]  # no temps


def test_run_scenario_turns_errors_into_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def fail() -> None:
        raise ConfigError("--trace: nope")

    assert run_scenario("demo", fail) == 1
    assert capsys.readouterr().err == "demo: error: --trace: nope\n"
    assert run_scenario("demo", lambda: None) == 0


def test_estimate_columns_and_cells_fill_a_table() -> None:
    from simcore.report import estimate_cells, estimate_columns
    from simcore.sim import Estimate

    t = Table("x", [Column("w", "W"), *estimate_columns(fmt="{:.1f}")])
    t.add(w=1, **estimate_cells(Estimate(2.0, 1.5, 2.5, "batch-means", 10)))
    t.add(w=2, **estimate_cells(Estimate(3.0, None, None, "single", 1)))
    assert t.text().splitlines()[1:] == [
        "  W  examples/s  95% CI low  high",
        "  1         2.0         1.5   2.5",
        "  2         3.0           -     -",
    ]
