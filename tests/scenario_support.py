"""What the scenario tests share: loading a script from ``scenarios/``, reading the CSV files it
wrote, comparing its printed tables with them, and checking that a second run never overwrites.

The tests import it as ``from scenario_support import ...`` (``tests/`` is on the path, as for
``figure_capture``).
"""

from __future__ import annotations

import csv
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from figure_capture import AxesRecord, FigureRecord

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

Rows = list[dict[str, str]]


def load_scenario(name: str) -> ModuleType:
    """Execute ``scenarios/NAME.py`` (or ``scenarios/research/NAME.py``, the scenarios that
    explain the validation) afresh as the module ``NAME``.

    The module is registered in ``sys.modules`` before it runs: dataclasses look their module up
    there.
    """
    path = SCENARIOS / f"{name}.py"
    if not path.exists():
        path = SCENARIOS / "research" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def read_csv(path: Path) -> Rows:
    """The rows of a CSV file with a header line, as dicts of strings, in the file's order."""
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def column(rows: Rows, key: str) -> np.ndarray:
    """The column ``key`` of CSV rows, as floats."""
    return np.array([float(r[key]) for r in rows])


def assert_png(path: Path, *, min_bytes: int = 0) -> None:
    """``path`` is a PNG file of more than ``min_bytes`` bytes."""
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC), path
    assert len(data) > min_bytes, (path, len(data))


def saved_as(figures: Iterable[FigureRecord], names: Sequence[str]) -> dict[str, FigureRecord]:
    """Each of ``names`` -> the one recorded figure saved under it, and no other figure saved.

    Figures are written to a temporary name, then renamed: they are matched by the final name
    being part of the name they were saved under.
    """
    figures = list(figures)
    found = {n: f for f in figures for n in names if n in Path(f.path).name}
    assert len(figures) == len(found) == len(names), ([f.path for f in figures], names)
    return found


def assert_lines_plot(ax: AxesRecord, rows: Rows, x_key: str, lines: dict[str, str]) -> None:
    """Each line of ``ax`` labelled L in ``lines`` plots exactly the CSV column ``lines[L]``
    against the column ``x_key``."""
    for label, y_key in lines.items():
        x, y = ax.lines[label]
        np.testing.assert_allclose(x, column(rows, x_key), err_msg=label)
        np.testing.assert_allclose(y, column(rows, y_key), err_msg=label)


def printed_rows(out: str, title: str, *, prefix: bool = False) -> list[list[str]]:
    """The rows of the printed table titled ``title``, each split into its cells.

    A table is its title line, a header line, then one line a row; it ends before the first line
    whose first cell is not a whole number (a blank line, a finding, the next table). The title
    line is the first line equal to ``title``, or starting with it if ``prefix``.
    """
    lines = out.splitlines()
    if prefix:
        at = next(i for i, line in enumerate(lines) if line.startswith(title))
    else:
        at = lines.index(title)
    rows = []
    for line in lines[at + 2 :]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        rows.append(cells)
    return rows


def same(printed: str, value: str) -> bool:
    """A printed cell shows the CSV's value, rounded to the printed digits.

    ``-`` shows an empty value; a leading ``±`` or ``+`` is ignored; a cell that is not a number
    must equal the value.
    """
    if printed == "-":
        return value == ""
    text = printed.lstrip("±+")
    try:
        number = float(text)
    except ValueError:
        return printed == value
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(number - float(value)) <= 0.5 * 10**-decimals + 1e-9


def assert_rows_show_csv(
    printed: list[list[str]], rows: Rows, keys: Sequence[str] | None = None, where: str = ""
) -> None:
    """Printed rows show the CSV rows one for one, each cell its value at ``keys`` (by default
    every column, in the file's order), rounded as printed (:func:`same`)."""
    assert len(printed) == len(rows), (where, printed, rows)
    for cells, row in zip(printed, rows, strict=True):
        values = [row[k] for k in keys] if keys is not None else list(row.values())
        assert len(cells) == len(values), (where, cells, values)
        for cell, value in zip(cells, values, strict=True):
            assert same(cell, value), (where, cell, value)


def assert_printed_equals_csv(
    out: str,
    title: str,
    rows: Rows,
    *,
    keys: Sequence[str] | None = None,
    prefix: bool = False,
) -> None:
    """The printed table titled ``title`` (see :func:`printed_rows`) shows exactly ``rows``:
    as many rows, each cell the row's value at ``keys`` (by default every column), rounded."""
    assert_rows_show_csv(printed_rows(out, title, prefix=prefix), rows, keys, title)


def files_in(folder: Path) -> dict[str, bytes]:
    """Every file directly in ``folder``: name -> contents."""
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def assert_second_run_refused(
    scenario: ModuleType, argv: list[str], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``scenario.main(argv)``, run again into ``folder`` that holds a finished run's files, and
    without ``--force``: exits 1, says ``NAME: error: ... already exists; pass --force ...`` in
    one line on stderr, and leaves every file in ``folder`` as it was. Drops what was captured
    before."""
    capsys.readouterr()
    before = files_in(folder)
    assert before, folder
    assert scenario.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"{scenario.__name__}: error: "), err
    assert "already exists; pass --force" in err, err
    assert files_in(folder) == before


def assert_one_sentence_finding(out: str) -> str:
    """The scenario's ``finding: ...`` line, exactly one, is one sentence (ends with a full stop,
    no full stop followed by a space inside); returns the sentence."""
    found = [line for line in out.splitlines() if line.startswith("finding: ")]
    assert len(found) == 1, found
    sentence = found[0].removeprefix("finding: ")
    assert sentence.endswith(".") and ". " not in sentence, sentence
    assert sentence[0].isalnum() or sentence[0] in "<(", sentence
    return sentence


def assert_finding_and_files(out: str, folder: Path, names: Sequence[str]) -> str:
    """What every scenario does: its one-sentence finding; its CSV table and PNG figure written
    side by side in ``folder`` (``--out``), each announced as ``wrote PATH``; returns the
    finding."""
    suffixes = {Path(name).suffix for name in names}
    assert {".csv", ".png"} <= suffixes, names
    for name in names:
        path = folder / name
        assert f"wrote {path}" in out, (name, out[-500:])
        if path.suffix == ".png":
            assert_png(path)
        elif path.suffix == ".csv":
            rows = read_csv(path)
            assert rows and all(None not in row for row in rows), path  # no ragged rows
    return assert_one_sentence_finding(out)
