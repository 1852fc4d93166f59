"""Independent simulations on several processes, with the results of running them one by one.

The simulator is pure Python, so one process uses one core whatever it does; a sweep's points and
a configuration's replications are independent of each other, and a machine with C cores runs C
of them at once. :func:`run_tasks` is the one place where that happens: the sweeps of ``simulate``,
the candidates of ``advise``, the scenarios' points (:func:`simcore.sim.precision.simulate_many`)
and the replications inside one :func:`simcore.sim.simulate` all go through it.

- **The same results.** A task is a pure function of what it is given (the seeds travel in the
  configuration), so the results, returned in the order of the tasks, are bit-identical for any
  number of processes; tests compare them.
- **How many**: :func:`jobs` sets it for a block (the CLI's ``--jobs``, default: the cores this
  process may use); the library's default is 1, everything in this process. A process of the pool
  runs its task's own sub-tasks one by one (no pools inside pools).
- **When**: only when the tasks together are worth a pool (``cost``, in the caller's units, at
  least ``min_cost``): starting processes and shipping a trace to them costs tens of milliseconds.
- **Progress**: a task reports ``(done, total)`` of its own; each lands in the task's slot of an
  array the processes share, and the caller's ``progress`` sees the sums (a task not started yet
  counts as its planned total), whether the tasks ran here or in the pool.
- **Ctrl-C**: the pool's processes ignore SIGINT; the caller's process stops them and raises
  :class:`Interrupted` (a KeyboardInterrupt) that carries the tasks that finished.

The pool forks on Linux (milliseconds, nothing to re-import); where torch is loaded (its thread
pools do not survive a fork) or elsewhere it spawns fresh interpreters, so tasks and their
arguments are module-level functions and picklable values.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from simcore.errors import ResourceError

__all__ = [
    "CallerSettings",
    "Interrupted",
    "current_jobs",
    "jobs",
    "run_tasks",
    "usable_cores",
]

T = TypeVar("T")
R = TypeVar("R")

#: (done, total) of one task, in its own units, from 0.
TaskProgress = Callable[[int, int], None]

POLL_S = 0.1  # how often the caller's process looks at the pool's progress

_jobs = 1  # processes for run_tasks; set by jobs()
_in_pool = False  # True in a pool's process: its tasks' sub-tasks run there, one by one
_slots: Any = None  # the shared progress array, in a pool's process


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


@contextmanager
def jobs(count: int | None) -> Iterator[None]:
    """Run :func:`run_tasks` on up to ``count`` processes inside the block (1: in this one;
    None: one per usable core, the CLI's default for ``--jobs``)."""
    global _jobs
    if count is None:
        count = usable_cores()
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"jobs: must be an integer >= 1, got {count!r}")
    before, _jobs = _jobs, count
    try:
        yield
    finally:
        _jobs = before


def current_jobs() -> int:
    """Processes :func:`run_tasks` would use now (1 inside a pool's process)."""
    return 1 if _in_pool else _jobs


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_tasks`: ``finished`` maps the index of each task that finished
    to its result."""

    def __init__(self, finished: dict[int, Any]) -> None:
        super().__init__("interrupted")
        self.finished = finished


def run_tasks(
    task: Callable[[T, TaskProgress | None], R],
    items: Sequence[T],
    *,
    planned: Sequence[int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    cost: float = 0.0,
    min_cost: float = 0.0,
    finished: Callable[[int, R], None] | None = None,
) -> list[R]:
    """``[task(item, its_progress) for item in items]``, on up to :func:`current_jobs` processes.

    Parameters
    ----------
    task : a module-level function (picklable), called with an item and a progress callback (or
        None when nobody listens) that takes ``(done, total)`` of that item alone.
    items : its inputs, picklable.
    planned : each item's expected total before it starts (default 0): the overall total counts
        it until the item reports its own.
    progress : ``progress(done, total)`` over all items; ``done`` never goes back.
    cost, min_cost : the pool is used only when ``cost >= min_cost`` (and there are two items
        or more, and more than one job).
    finished : ``finished(index, result)`` in this process as each item finishes, in the order
        they finish (a sweep writes its results as they come); what it raises stops the run.

    Raises
    ------
    Interrupted
        On Ctrl-C, with the results of the items that finished.
    Exception
        The first exception an item raised (the pool is stopped first).
    """
    n = len(items)
    plan = list(planned) if planned is not None else [0] * n
    if len(plan) != n:
        raise ValueError(f"planned: {len(plan)} values for {n} items")
    tally = _Tally(plan, progress)
    processes = min(current_jobs(), n)
    if processes <= 1 or cost < min_cost:
        return _run_here(task, items, tally, finished)
    return _run_pool(task, items, tally, processes, finished)


class _Tally:
    """The items' (done, total) and what the caller's progress callback is told."""

    def __init__(self, planned: list[int], progress: Callable[[int, int], None] | None) -> None:
        self.planned = planned
        self.progress = progress
        self.done = [0] * len(planned)
        self.total = [-1] * len(planned)  # -1: not reported yet (the plan counts)
        self._told = 0

    def set(self, i: int, done: int, total: int) -> None:
        self.done[i], self.total[i] = done, total

    def finish(self, i: int) -> None:
        """Item ``i`` returned: all of it is done, whatever it last reported."""
        whole = max(self.done[i], self.total[i] if self.total[i] >= 0 else self.planned[i])
        self.done[i] = self.total[i] = whole

    def item_progress(self, i: int) -> TaskProgress | None:
        if self.progress is None:
            return None

        def report(done: int, total: int) -> None:
            self.set(i, done, total)
            self.tell()

        return report

    def tell(self) -> None:
        if self.progress is None:
            return
        done = sum(self.done)
        total = sum(t if t >= 0 else p for t, p in zip(self.total, self.planned, strict=True))
        done = max(done, self._told)  # never back, even if a task re-counts
        self._told = done
        self.progress(done, max(total, done))


def _run_here(
    task: Callable[[T, TaskProgress | None], R],
    items: Sequence[T],
    tally: _Tally,
    finished: Callable[[int, R], None] | None,
) -> list[R]:
    out: dict[int, R] = {}
    try:
        for i, item in enumerate(items):
            out[i] = task(item, tally.item_progress(i))
            if finished is not None:
                finished(i, out[i])
            tally.finish(i)
            tally.tell()
    except KeyboardInterrupt:
        raise Interrupted(out) from None
    return [out[i] for i in range(len(items))]


def _run_pool(
    task: Callable[[T, TaskProgress | None], R],
    items: Sequence[T],
    tally: _Tally,
    processes: int,
    finished: Callable[[int, R], None] | None,
) -> list[R]:
    n = len(items)
    context = multiprocessing.get_context(_start_method())
    slots = context.Array("d", 2 * n, lock=False)  # done, total per item; -1: not reported
    for i in range(n):
        slots[2 * i], slots[2 * i + 1] = 0.0, -1.0
    # The largest first: the last to start then is a small one, and the processes end together.
    order = sorted(range(n), key=lambda i: -tally.planned[i])
    settings = _Settings.of_caller()
    listened = tally.progress is not None
    # concurrent.futures rather than multiprocessing.Pool: a process that dies (the kernel's
    # out-of-memory killer) breaks the pool with an error instead of leaving its task pending.
    pool = ProcessPoolExecutor(processes, context, _start_child, (slots,))
    out: dict[int, R] = {}
    try:
        pending = {
            pool.submit(_child_task, task, i, items[i], listened, settings): i for i in order
        }
        while pending:
            ready, _ = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in ready:
                i = pending.pop(future)
                out[i] = future.result()  # raises what the task raised
                if finished is not None:
                    finished(i, out[i])
            for i in range(n):
                if slots[2 * i + 1] >= 0:
                    tally.set(i, int(slots[2 * i]), int(slots[2 * i + 1]))
                if i in out:
                    tally.finish(i)
            tally.tell()
    except KeyboardInterrupt:
        _stop(pool)
        raise Interrupted(out) from None
    except BrokenProcessPool as err:
        _stop(pool)
        raise ResourceError(
            f"a simulation process ended abruptly ({err}): most likely the system ran out of "
            "memory; run fewer at once (--jobs 1)"
        ) from None
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    return [out[i] for i in range(n)]


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop the pool now: queued tasks cancelled, running ones killed, every process reaped."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # private: hence care
    for process in processes:
        process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
    for process in processes:
        process.join()


def _start_method() -> str:
    """``fork`` where it is safe and fast (Linux, torch not loaded), else ``spawn``."""
    if sys.platform.startswith("linux") and "torch" not in sys.modules:
        return "fork"
    return "spawn"


class _Settings:
    """What the caller's process set that a task's numbers depend on: numpy's floating-point
    error handling and the warning filters (the CLI turns overflows and RuntimeWarnings into
    errors); a spawned process would not have them."""

    def __init__(self, errors: dict[str, Any], filters: list[Any]) -> None:
        self.errors = errors
        self.filters = filters

    @classmethod
    def of_caller(cls) -> _Settings:
        return cls(dict(np.geterr()), list(warnings.filters))

    @contextmanager
    def applied(self) -> Iterator[None]:
        with np.errstate(**self.errors), warnings.catch_warnings():
            warnings.filters[:] = self.filters  # type: ignore[index]
            yield


CallerSettings = _Settings  # for the executors that run tasks elsewhere (simcore.executors)


def _start_child(slots: Any) -> None:
    """A pool process starts: Ctrl-C is for the caller's process to handle."""
    global _in_pool, _slots
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _in_pool, _slots = True, slots


def _child_task(
    task: Callable[[T, TaskProgress | None], R],
    index: int,
    item: T,
    listened: bool,
    settings: _Settings,
) -> R:
    slots = _slots

    def report(done: int, total: int) -> None:
        slots[2 * index], slots[2 * index + 1] = float(done), float(total)

    with settings.applied():
        return task(item, report if listened else None)
