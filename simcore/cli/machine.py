"""Edge module: what this machine has to offer a run (memory), read from the operating system."""

from __future__ import annotations

import os
from pathlib import Path

MEMINFO = Path("/proc/meminfo")


def available_memory_bytes() -> float | None:
    """Memory available to new work without swapping (Linux ``MemAvailable``), in bytes.

    Falls back to the free physical pages where there is no ``/proc/meminfo``; None when the
    system tells neither.
    """
    try:
        for line in MEMINFO.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024  # the kernel writes kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None
