"""Record what a figure shows at the moment it is saved, so tests can compare a scenario's plotted
numbers with the table it printed and check titles, axis labels and legends.

Use the ``saved_figures`` fixture (tests/conftest.py): every ``Figure.savefig`` during the test
appends a :class:`FigureRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class AxesRecord:
    title: str
    xlabel: str
    ylabel: str
    has_legend: bool
    lines: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # label -> x, y
    bar_heights: list[float] = field(default_factory=list)
    bar_widths: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def values(self) -> np.ndarray:
        """Every y value this axes shows: line points and bar heights."""
        ys = [y for _, y in self.lines.values()] + [np.asarray(self.bar_heights)]
        return np.concatenate([np.asarray(y, dtype=float).ravel() for y in ys])


@dataclass
class FigureRecord:
    path: str
    suptitle: str
    axes: list[AxesRecord]

    def titled(self) -> bool:
        return bool(self.suptitle) or all(a.title for a in self.axes)

    def values(self) -> np.ndarray:
        return np.concatenate([a.values() for a in self.axes]) if self.axes else np.array([])


def record(fig: Any, path: Any) -> FigureRecord:
    from matplotlib.patches import Rectangle

    axes = []
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        rec = AxesRecord(
            title=ax.get_title() or ax.get_title(loc="left"),
            xlabel=ax.get_xlabel(),
            ylabel=ax.get_ylabel(),
            has_legend=ax.get_legend() is not None,
        )
        for i, line in enumerate(ax.get_lines()):
            label = line.get_label()
            key = label if not label.startswith("_") else f"_line{i}"
            rec.lines[key] = (
                np.asarray(line.get_xdata(), dtype=float),
                np.asarray(line.get_ydata(), dtype=float),
            )
        for patch in ax.patches:
            if isinstance(patch, Rectangle):
                rec.bar_heights.append(float(patch.get_height()))
                rec.bar_widths.append(float(patch.get_width()))
        rec.texts = [t.get_text() for t in ax.texts]
        axes.append(rec)
    suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    return FigureRecord(str(path), suptitle, axes)
