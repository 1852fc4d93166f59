"""The one progress line of every long CLI job, on stderr, only when stderr is a terminal.

A line says what is counted, how far it is, the rate and the time left::

    simulate: 68,040/136,000 worker-steps (50%), 920 worker-steps/s, 1 min 14 s left

and is redrawn in place at most every :data:`REDRAW_S` seconds; the last one says how long it
took. Logs, pipes and CI get nothing, so that output files and captured stderr stay clean; a
command's ``--quiet`` and ``--json`` turn it off on a terminal too (``enabled=False``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

REDRAW_S = 0.2  # seconds between two redraws of the line at least


class Progress:
    """Callable ``progress(done, total)`` that draws ``label: done/total unit``, rate and ETA.

    Parameters
    ----------
    label : what runs (``simulate``).
    unit : what ``done`` and ``total`` count, plural (``worker-steps``); "" for plain numbers.
    stream : where to draw (default ``sys.stderr``); nothing is drawn unless it is a terminal.
    enabled : False draws nothing (``--quiet``, ``--json``).
    clock : seconds, monotonic (for tests).
    """

    def __init__(
        self,
        label: str,
        unit: str = "",
        stream: TextIO | None = None,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self.clock = clock
        self.started = clock()
        self._drawn_at = -float("inf")
        self._width = 0

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        now = self.clock()
        finished = done >= total
        if not finished and now - self._drawn_at < REDRAW_S:
            return
        self._drawn_at = now
        text = progress_line(self.label, self.unit, done, total, now - self.started)
        pad = " " * max(0, self._width - len(text))  # wipe what a longer line left
        self._width = len(text)
        self.stream.write(f"\r{text}{pad}" + ("\n" if finished else ""))
        self.stream.flush()


def progress_line(label: str, unit: str, done: int, total: int, elapsed_s: float) -> str:
    """The text of a progress line after ``elapsed_s`` seconds (see the module docstring)."""
    counted = f"{done:,}/{total:,}" + (f" {unit}" if unit else "")
    per_s = f" {unit}/s" if unit else "/s"
    if done >= total:
        overall = f", {done / elapsed_s:,.0f}{per_s}" if elapsed_s > 0 else ""
        return f"{label}: {counted} in {duration_text(elapsed_s)}{overall}"
    share = f" ({100 * done / total:.0f}%)"
    if done <= 0 or elapsed_s <= 0:
        return f"{label}: {counted}{share}, {duration_text(elapsed_s)} so far"
    rate = done / elapsed_s
    left = (total - done) / rate
    return f"{label}: {counted}{share}, {rate:,.0f}{per_s}, {duration_text(left)} left"


def duration_text(seconds: float) -> str:
    """``0.4 s``, ``42 s``, ``3 min 05 s``, ``2 h 13 min``, ``3 d 04 h``: two units at most."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    for big, big_s, small, small_s in (
        ("d", 86400, "h", 3600),
        ("h", 3600, "min", 60),
        ("min", 60, "s", 1),
    ):
        if whole >= big_s:
            return f"{whole // big_s} {big} {(whole % big_s) // small_s:02d} {small}"
    return f"{whole} s"
