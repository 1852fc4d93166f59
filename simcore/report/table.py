"""A table a scenario prints and saves: one definition of its columns, so the printed text and the
CSV file hold the same numbers (the CSV at full precision, the text rounded for reading).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from simcore.sim.results import Estimate
from simcore.units import format_number

Cell = str | int | float | None


@dataclass(frozen=True)
class Column:
    """One column: ``key`` names it in the CSV header and in the row mappings, ``title`` heads
    the printed table, ``fmt`` formats a printed value (``None`` prints as ``-``); without a
    ``fmt``, a float is printed as every sgdsim table prints numbers
    (:func:`simcore.units.format_number`: 4 significant digits)."""

    key: str
    title: str
    fmt: str = ""

    def text(self, value: Cell) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        if not self.fmt:
            return format_number(value) if isinstance(value, float) else str(value)
        return self.fmt.format(value)


@dataclass
class Table:
    """Rows of named values under ``columns``; ``title`` is printed above the table."""

    title: str
    columns: Sequence[Column]
    rows: list[Mapping[str, Cell]] = field(default_factory=list)

    def add(self, **values: Cell) -> None:
        """Append a row; every column needs a value (``None`` for not applicable)."""
        missing = [c.key for c in self.columns if c.key not in values]
        extra = sorted(set(values) - {c.key for c in self.columns})
        if missing or extra:
            raise ValueError(f"table {self.title!r}: missing {missing}, unknown {extra}")
        self.rows.append(values)

    def column(self, key: str) -> list[Cell]:
        """The values of one column, in row order."""
        return [row[key] for row in self.rows]

    def text(self, indent: str = "  ") -> str:
        """The table as aligned text: title, header, one line per row."""
        cells = [[c.title for c in self.columns]]
        cells += [[c.text(row[c.key]) for c in self.columns] for row in self.rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(self.columns))]
        lines = [self.title] if self.title else []
        for line in cells:
            lines.append(indent + "  ".join(v.rjust(w) for v, w in zip(line, widths, strict=True)))
        return "\n".join(lines)

    def csv_text(self) -> str:
        """The rows as CSV with a header of column keys, values at full precision."""
        return _csv([self], None)


def estimate_columns(
    key: str = "examples_per_s", title: str = "examples/s", fmt: str = ""
) -> tuple[Column, Column, Column]:
    """The columns of an estimate with its 95% confidence interval: ``key``, ``ci_low`` and
    ``ci_high``; fill them with :func:`estimate_cells`."""
    return (
        Column(key, title, fmt),
        Column("ci_low", "95% CI low", fmt),
        Column("ci_high", "high", fmt),
    )


def estimate_cells(estimate: Estimate, key: str = "examples_per_s") -> dict[str, Cell]:
    """The cells of :func:`estimate_columns` for ``estimate`` (CI cells None without one)."""
    return {key: estimate.value, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high}


def tables_csv_text(tables: Sequence[Table], key: str = "table") -> str:
    """Several tables with the same columns as one CSV, with a leading column ``key`` holding
    each row's table title."""
    return _csv(tables, key)


def _csv(tables: Sequence[Table], title_key: str | None) -> str:
    keys = [c.key for c in tables[0].columns]
    for table in tables[1:]:
        if [c.key for c in table.columns] != keys:
            raise ValueError(f"table {table.title!r}: columns differ from {tables[0].title!r}")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(([title_key] if title_key else []) + keys)
    for table in tables:
        lead = [table.title] if title_key else []
        for row in table.rows:
            writer.writerow(lead + [_csv_cell(row[k]) for k in keys])
    return buffer.getvalue()


def _csv_cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # full precision: the CSV is the data, the text is for reading
    return str(value)
