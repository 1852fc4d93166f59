"""How much of the machine other work used while a measurement ran.

A real run's examples/s are only worth comparing with a prediction if the run had the machine to
itself: on the 2-core VM one background process turned a validation's run of a small model's
computation alone from 13,700 into 5,600 examples/s, and nothing said so. This module reads the
kernel's counters before and after a measurement: the CPU time every process spent
(``/proc/stat``'s user, nice and system time; interrupts and softirqs, which the measurement's
own traffic causes, are left out), less what the measuring process and its descendants spent
(``/proc/<pid>/stat``; a descendant that exited counts through the parent that reaped it).
The rest is other work. Linux only; elsewhere there is nothing to read and no note.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Other work using at least this many cores on average during a run earns it a note: below it
# is what an idle VM's own daemons and a shell use (0.00-0.05 cores here).
NOTE_CORES = 0.2


@dataclass(frozen=True)
class HostSample:
    """The counters at one moment: wall time, the machine's busy CPU time and the process
    tree's (both in seconds); ``busy_s`` is None where ``/proc/stat`` cannot be read."""

    wall_s: float
    busy_s: float | None
    own_s: float
    root: int


@dataclass(frozen=True)
class HostLoad:
    """Between two samples: the wall time and the cores other work used on average."""

    wall_s: float
    others_cores: float
    cores: int

    def note(self, what: str) -> str:
        """One line saying that ``what`` shared the machine ("" below NOTE_CORES)."""
        if self.others_cores < NOTE_CORES:
            return ""
        return (
            f"note: other processes used {self.others_cores:.2f} of the machine's {self.cores} "
            f"cores on average during {what}: its measurement is not of an idle machine"
        )


def machine_busy_s(stat_text: str, ticks_per_s: float) -> float:
    """Seconds of CPU every process spent in user, nice and system mode (the ``cpu`` line of
    ``/proc/stat``)."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            user, nice, system = (int(x) for x in fields[1:4])
            return (user + nice + system) / ticks_per_s
    raise ValueError("/proc/stat has no cpu line")


def process_times(stat_text: str) -> tuple[int, int, float]:
    """(pid, parent pid, CPU ticks of the process and of its reaped children) from a
    ``/proc/<pid>/stat`` line; the command name may hold spaces and parentheses."""
    pid = int(stat_text.split(" ", 1)[0])
    rest = stat_text[stat_text.rindex(")") + 2 :].split()
    # After the name: state, ppid, ... utime (14th field of the line), stime, cutime, cstime.
    ppid = int(rest[1])
    utime, stime, cutime, cstime = (int(x) for x in rest[11:15])
    return pid, ppid, float(utime + stime + cutime + cstime)


def tree_ticks(processes: Iterable[tuple[int, int, float]], root: int) -> float:
    """CPU ticks of ``root`` and every process descending from it, from (pid, parent pid,
    ticks) of every process."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, float] = {}
    for pid, ppid, own in processes:
        ticks[pid] = own
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += ticks.get(pid, 0.0)
        stack.extend(children.get(pid, ()))
    return total


def _processes() -> list[tuple[int, int, float]]:
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found.append(process_times((entry / "stat").read_text()))
        except (OSError, ValueError, IndexError):  # gone meanwhile, or unreadable
            continue
    return found


def sample(root: int | None = None) -> HostSample:
    """The counters now, for the tree of ``root`` (default: this process)."""
    root = os.getpid() if root is None else root
    ticks_per_s = float(os.sysconf("SC_CLK_TCK"))
    try:
        busy: float | None = machine_busy_s((PROC / "stat").read_text(), ticks_per_s)
        own = tree_ticks(_processes(), root) / ticks_per_s
    except (OSError, ValueError):
        busy, own = None, 0.0
    return HostSample(time.monotonic(), busy, own, root)


def load_since(start: HostSample) -> HostLoad | None:
    """What other work used since ``start``; None where the counters cannot be read.

    A descendant of the root still running has its CPU counted whole, including what it
    spent before ``start``; the measurements here start their processes after it.
    """
    end = sample(start.root)
    wall = end.wall_s - start.wall_s
    if start.busy_s is None or end.busy_s is None or wall <= 0.0:
        return None
    others = (end.busy_s - start.busy_s) - (end.own_s - start.own_s)
    return HostLoad(wall, max(0.0, others / wall), os.cpu_count() or 1)
