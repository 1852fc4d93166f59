"""Pause Python's cyclic garbage collector around work that allocates much and frees little.

Loading a trace, compiling it and running the engine create hundreds of thousands of objects that
all stay alive. The collector's automatic passes are triggered by allocations, and every full
pass walks every live object, so they cost more the bigger the input: a third of the CPU time of
loading a 125,000-op trace, and of a 16,000-worker run. None of this work makes reference cycles
in numbers (the engine leaves 14 cyclic objects however long it runs), so reference counting
frees what it drops; the collector runs again as soon as the work is done.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable automatic cyclic collections while the body runs, then restore them.

    Nests: only the outermost pause turns the collector back on, and only if it was on.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
