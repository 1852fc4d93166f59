"""Edge package: figures of traces and simulation results. matplotlib is imported inside each
function, so importing these modules costs nothing and the engine never depends on them.

Every figure is written through :func:`save_figure` (atomic, never replacing a file silently).
"""

from simcore.plots.common import new_figure, save_figure
from simcore.plots.throughput import Curve, draw_throughput_curves, plot_throughput_curves

__all__ = [
    "Curve",
    "draw_throughput_curves",
    "new_figure",
    "plot_throughput_curves",
    "save_figure",
]
