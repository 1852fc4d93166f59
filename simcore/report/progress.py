"""A small progress reporter for long CLI work, written to stderr.

On a terminal it redraws one line; in logs (CI, pipes) it prints a line at most every ten percent so
that output stays short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Callable ``progress(done, total)`` that reports ``label: done/total`` with elapsed time."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.started = time.perf_counter()
        self.last_decile = -1
        self.interactive = self.stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total <= 0:
            return
        elapsed = time.perf_counter() - self.started
        text = f"{self.label}: {done}/{total} ({elapsed:.1f} s)"
        if self.interactive:
            end = "\n" if done >= total else ""
            self.stream.write(f"\r{text}{end}")
        else:
            decile = (10 * done) // total
            if decile == self.last_decile and done < total:
                return
            self.last_decile = decile
            self.stream.write(f"{text}\n")
        self.stream.flush()
