"""Timestamp the completion of asynchronous torch.distributed operations, in issue order.

A worker issues its per-layer receives, sends and all-reduces asynchronously and carries on
computing. To know when each one *really* completed (not when the worker got round to checking),
a helper thread waits on them one after another, in the order they were issued, and stamps each
with ``time.perf_counter()``. Operations on one connection complete in order, so waiting in issue
order loses nothing. The thread spends its time blocked in ``Work.wait`` (outside the GIL), so it
costs the worker almost no CPU.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from profilers.distributed.config import DistributedRunError

__all__ = ["Issuer", "Watcher"]

_STOP = object()


class Watcher:
    """Waits on issued works in order on its own thread; :meth:`wait` returns a work's end time.

    Parameters
    ----------
    name : what the works are (``pulls from server 0``), for error messages.
    timeout_s : how long :meth:`wait` waits for one work before declaring the peer hung.
    """

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._events: dict[Hashable, threading.Event] = {}
        self._ends: dict[Hashable, float] = {}
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch {name}", daemon=True)
        self._thread.start()

    def add(self, key: Hashable, work: Any) -> None:
        """Watch ``work`` (a ``torch.distributed`` Work) under ``key``."""
        with self._lock:
            event = self._events[key] = threading.Event()
            if self._error is not None:  # the thread has stopped: fail this one at once too
                event.set()
                return
        self._todo.put((key, work))

    def wait(self, key: Hashable) -> float:
        """The perf_counter time (s) at which ``key``'s work completed; blocks until then.

        Raises
        ------
        DistributedRunError : the work failed (a peer died), or did not complete in ``timeout_s``.
        """
        with self._lock:
            event = self._events[key]
        if not event.wait(self.timeout_s):
            raise DistributedRunError(
                f"{self.name}: {key} not complete after {self.timeout_s:.0f} s; a peer hangs"
            )
        if self._error is not None:
            raise DistributedRunError(f"{self.name}: {key} failed: {self._error}") from self._error
        with self._lock:
            del self._events[key]
            return self._ends.pop(key)

    def close(self) -> None:
        """Let the thread end once the works already added are done (or failed).

        It is not joined: after a failure it may be blocked on a dead peer's work, and the rank
        must report its error now, not after gloo's timeout. It is a daemon thread.
        """
        self._todo.put(_STOP)

    def _run(self) -> None:
        while True:
            item = self._todo.get()
            if item is _STOP:
                return
            key, work = item
            try:
                work.wait()
            except BaseException as err:  # a dead peer shows up here; wake every waiter
                self._error = err
                with self._lock:
                    for event in self._events.values():
                        event.set()
                return
            end = time.perf_counter()
            with self._lock:
                self._ends[key] = end
                self._events[key].set()


class Issuer:
    """Issues a worker's sends from a thread of its own, in the order they were queued.

    gloo's ``isend`` writes what the socket takes at once in the calling thread; called from an
    autograd hook, that copying would stall the backward pass for milliseconds per layer (and be
    timed as backward computation). From this thread it overlaps the backward pass instead, as
    a framework's communication thread does.
    """

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._pending = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"issue {name}", daemon=True)
        self._thread.start()

    def put(self, issue: Callable[[], None]) -> None:
        """Run ``issue()`` on the thread after everything queued before it."""
        with self._idle:
            self._pending += 1
        self._todo.put(issue)

    def flush(self) -> None:
        """Block until everything queued has been issued.

        Raises
        ------
        DistributedRunError : issuing failed (a peer died), or took longer than ``timeout_s``.
        """
        with self._idle:
            done = self._idle.wait_for(lambda: self._pending == 0, self.timeout_s)
        if self._error is not None:
            raise DistributedRunError(f"{self.name}: {self._error}") from self._error
        if not done:
            raise DistributedRunError(f"{self.name}: sends not issued in {self.timeout_s:.0f} s")

    def close(self) -> None:
        """Let the thread end (not joined, like :meth:`Watcher.close`)."""
        self._todo.put(_STOP)

    def _run(self) -> None:
        while True:
            issue = self._todo.get()
            if issue is _STOP:
                return
            try:
                if self._error is None:  # after a failure, only drain the queue
                    issue()
            except BaseException as err:
                self._error = err
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()
