"""Ranked horizontal bars: one panel per group (e.g. per network), the best at the top."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simcore.plots.common import new_figure, save_figure


@dataclass(frozen=True)
class BarGroup:
    """One panel: ``labels[i]`` has ``values[i]``; ``marked`` labels are drawn in a second
    color and named in ``marked_legend`` (e.g. the paper's best configuration)."""

    title: str
    labels: Sequence[str]
    values: Sequence[float]
    marked: frozenset[str] = frozenset()
    marked_legend: str = ""


def plot_ranked_bars(
    groups: Sequence[BarGroup],
    path: str | os.PathLike[str],
    *,
    xlabel: str,
    title: str,
    overwrite: bool = False,
) -> Path:
    """Save one panel of horizontal bars per group, in the given order from the top."""
    fig, axes = new_figure(1, len(groups), size=(5.5 * len(groups), 4.2), squeeze=False)
    for ax, group in zip(axes[0], groups, strict=True):
        ys = range(len(group.labels))
        colors = ["C1" if label in group.marked else "C0" for label in group.labels]
        ax.barh(list(ys), list(group.values), color=colors)
        ax.set_yticks(list(ys), list(group.labels))
        ax.invert_yaxis()  # first (best) at the top
        ax.set_xlabel(xlabel)
        ax.set_title(group.title)
        if group.marked and group.marked_legend:
            ax.barh([0], [0], color="C1", label=group.marked_legend)
            ax.legend(loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path, overwrite=overwrite)
