"""The command line's progress reporter: :class:`simcore.report.progress.Progress` (it lives in
``simcore.report`` so that ``profilers`` can use it without importing the command line)."""

from __future__ import annotations

from simcore.report.progress import REDRAW_S, Progress, duration_text, progress_line

__all__ = ["REDRAW_S", "Progress", "duration_text", "progress_line"]
