"""Throughput against the number of workers, with confidence bands and annotated points."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simcore.plots.common import new_figure, save_figure


@dataclass(frozen=True)
class Curve:
    """One line of a throughput-versus-workers figure; ``ci_*`` may be empty (no band drawn)."""

    label: str
    workers: Sequence[int]
    examples_per_s: Sequence[float]
    ci_low: Sequence[float] = ()
    ci_high: Sequence[float] = ()
    style: str = "-o"
    color: str | None = None  # matplotlib color; None: the next color of the cycle


def plot_throughput_curves(
    curves: Sequence[Curve],
    path: str | os.PathLike[str],
    *,
    title: str,
    markers: Mapping[str, tuple[int, float]] | None = None,
    overwrite: bool = False,
) -> Path:
    """Draw examples/s against the number of workers, with 95% CI bands, and save it as PNG.

    ``markers`` maps a label to a point (workers, examples/s) to annotate, e.g. the saturation
    point. The file is written atomically; an existing file is replaced only with ``overwrite``.
    """
    fig, ax = new_figure()
    draw_throughput_curves(ax, curves, title=title, markers=markers)
    fig.tight_layout()
    return save_figure(fig, path, overwrite=overwrite)


def draw_throughput_curves(
    ax: Any,
    curves: Sequence[Curve],
    *,
    title: str = "",
    markers: Mapping[str, tuple[int, float]] | None = None,
) -> None:
    """Draw the curves on a matplotlib axes (a notebook's, or one panel of a larger figure)."""
    for curve in curves:
        (line,) = ax.plot(
            curve.workers,
            curve.examples_per_s,
            curve.style,
            label=curve.label,
            ms=4,
            color=curve.color,
        )
        if curve.ci_low and curve.ci_high:
            ax.fill_between(
                curve.workers, curve.ci_low, curve.ci_high, alpha=0.2, color=line.get_color()
            )
    for text, (w, value) in (markers or {}).items():
        ax.annotate(
            text,
            (w, value),
            xytext=(12, 30),
            textcoords="offset points",
            ha="left",
            fontsize=8,
            bbox={"boxstyle": "round", "fc": "white", "ec": "0.7", "alpha": 0.9},
            arrowprops={"arrowstyle": "->", "lw": 0.8},
        )
    ax.set_xlabel("workers W")
    ax.set_ylabel("training throughput (examples/s)")
    ax.set_title(title, fontsize=10)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
