"""What every sgdsim figure shares: a headless backend, the size, and atomic saving."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from simcore.files import atomic_output

DPI = 110


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (scripts, CI, notebooks' files)."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_figure(
    nrows: int = 1, ncols: int = 1, *, size: tuple[float, float] = (7.0, 4.2), **kwargs: Any
) -> tuple[Any, Any]:
    """``plt.subplots`` at sgdsim's size and resolution; close the figure when done."""
    return pyplot().subplots(nrows, ncols, figsize=size, dpi=DPI, **kwargs)  # type: ignore[no-any-return]


def save_figure(fig: Any, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``fig`` atomically as SVG or PDF if ``path`` ends so, else as PNG; an existing file
    is replaced only with ``overwrite``. The figure is closed afterwards, so callers can draw many
    without leaking memory."""
    target = Path(path)
    kind = target.suffix.lower().lstrip(".")
    try:
        with atomic_output(target, overwrite=overwrite) as tmp:
            fig.savefig(tmp, format=kind if kind in ("svg", "pdf") else "png")
    finally:
        pyplot().close(fig)
    return target
