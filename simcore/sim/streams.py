"""Stream schedulers: which ready op (stream) a worker's connection serves next.

Every (worker, resource) pair has a queue of ready ops; a scheduler orders it. Computation
resources always use :class:`FifoScheduler`; the network connections (a worker's downlink and
uplink to each server) use the scheduler named by ``SimulationConfig.scheduler``.

One hook, :meth:`StreamScheduler.key`: the sort key of an op that became ready at ``ready_s``;
the smallest key goes next. Schedulers that split streams into chunks (HTTP/2) also set
``chunking`` and override :meth:`StreamScheduler.chunk`.

- ``fifo`` (default): order of readiness, ties in trace order.
- ``http2`` (ICPE'20 3.2.2): like ``fifo``, but a stream picked the first time sends at most
  ``WIN`` bytes; it then re-enters the queue with ready time = the end of that chunk (queues are
  ordered by (ready time, trace order)), and when picked the second time it runs to its end.
- flow control off (ICPE'20 3.3), whole streams by a fixed priority among the ready ones:
  ``trace`` (trace order), ``critical-path`` (longest path to the end of the step first, as
  TicTac), ``reverse`` (reverse trace order) and ``random`` (a random order drawn once per run
  from the run's seed). A stream that is not ready yet never blocks a ready one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any, ClassVar

import numpy as np

from simcore.errors import ConfigError

__all__ = [
    "CriticalPathScheduler",
    "FifoScheduler",
    "Http2Scheduler",
    "RandomOrderScheduler",
    "ReverseOrderScheduler",
    "StreamContext",
    "StreamScheduler",
    "TraceOrderScheduler",
    "make_stream_scheduler",
    "register_stream_scheduler",
    "stream_scheduler_names",
]


@dataclass(frozen=True)
class StreamContext:
    """What a scheduler may know about the step DAG (ops indexed in trace order).

    Attributes
    ----------
    n_ops : number of ops of the (transformed) step DAG.
    critical_path_s : per op, the longest path in seconds from its start to the end of the step
        (mean profiled durations, transfers at full bandwidth).
    window_bits : the HTTP/2 flow-control window WIN, in bits.
    rank : a random permutation of ``range(n_ops)`` drawn from the run's seed.
    """

    n_ops: int
    critical_path_s: Sequence[float]
    window_bits: float
    rank: Sequence[int]


class StreamScheduler(ABC):
    """A priority queue of ready ops; subclasses supply :meth:`key`."""

    name: ClassVar[str] = ""
    chunking: ClassVar[bool] = False
    #: True when an op offered to an idle connection may start at once because it would be the
    #: head of the queue anyway (FIFO). Otherwise the connection chooses a zero time later, among
    #: every op that became ready at that instant.
    immediate: ClassVar[bool] = False

    def __init__(self, context: StreamContext) -> None:
        self.context = context
        self._heap: list[tuple[Any, int]] = []

    @abstractmethod
    def key(self, op: int, ready_s: float) -> Any:
        """Sort key of ``op`` (index in trace order) that became ready at ``ready_s``."""

    def push(self, op: int, ready_s: float) -> None:
        heappush(self._heap, (self.key(op, ready_s), op))

    def pop(self) -> int:
        return heappop(self._heap)[1]

    def __len__(self) -> int:
        return len(self._heap)

    def chunk(self, op: int, remaining_bits: float) -> tuple[float, bool]:
        """Bits of ``op`` to send now, and whether that ends the stream (default: all of it)."""
        return remaining_bits, True


class FifoScheduler(StreamScheduler):
    """Order of readiness, then trace order."""

    name = "fifo"
    immediate = True

    def key(self, op: int, ready_s: float) -> Any:
        return (ready_s, op)

    def push(self, op: int, ready_s: float) -> None:
        heappush(self._heap, ((ready_s, op), op))


class Http2Scheduler(FifoScheduler):
    """HTTP/2 multiplexing with window WIN: first pick sends <= WIN, second pick runs to the end."""

    name = "http2"
    chunking = True

    def __init__(self, context: StreamContext) -> None:
        super().__init__(context)
        self._preempted: set[int] = set()

    def chunk(self, op: int, remaining_bits: float) -> tuple[float, bool]:
        if op in self._preempted:
            self._preempted.discard(op)
            return remaining_bits, True
        window = self.context.window_bits
        if remaining_bits > window:
            self._preempted.add(op)
            return window, False
        return remaining_bits, True


class TraceOrderScheduler(StreamScheduler):
    """Flow control off, streams in trace order."""

    name = "trace"

    def key(self, op: int, ready_s: float) -> Any:
        return op


class ReverseOrderScheduler(StreamScheduler):
    """Flow control off, streams in reverse trace order."""

    name = "reverse"

    def key(self, op: int, ready_s: float) -> Any:
        return -op


class CriticalPathScheduler(StreamScheduler):
    """Flow control off, the stream with the longest path to the end of the step first (TicTac)."""

    name = "critical-path"

    def key(self, op: int, ready_s: float) -> Any:
        return (-self.context.critical_path_s[op], op)


class RandomOrderScheduler(StreamScheduler):
    """Flow control off, streams in a random order fixed for the run (from its seed)."""

    name = "random"

    def key(self, op: int, ready_s: float) -> Any:
        return self.context.rank[op]


_SCHEDULERS: dict[str, type[StreamScheduler]] = {}


def register_stream_scheduler(name: str, cls: type[StreamScheduler]) -> None:
    """Make ``cls`` available as stream scheduler ``name`` (replacing one of that name)."""
    if not name or not isinstance(name, str):
        raise ConfigError(f"stream scheduler name must be a non-empty string, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, StreamScheduler)):
        raise ConfigError(f"stream scheduler {name!r}: {cls!r} is not a StreamScheduler subclass")
    _SCHEDULERS[name] = cls


def stream_scheduler_names() -> list[str]:
    """The registered stream scheduler names, sorted."""
    return sorted(_SCHEDULERS)


def make_stream_scheduler(name: str, context: StreamContext) -> StreamScheduler:
    """A new scheduler registered as ``name``; ConfigError lists the known ones."""
    try:
        cls = _SCHEDULERS[name]
    except KeyError:
        known = ", ".join(stream_scheduler_names())
        raise ConfigError(
            f"scheduler: unknown stream scheduler {name!r}; registered: {known}"
        ) from None
    return cls(context)


def random_rank(n_ops: int, rng: np.random.Generator) -> list[int]:
    """A random priority per op: position in a random permutation."""
    rank = [0] * n_ops
    for position, op in enumerate(rng.permutation(n_ops).tolist()):
        rank[op] = position
    return rank


for _cls in (
    FifoScheduler,
    Http2Scheduler,
    TraceOrderScheduler,
    ReverseOrderScheduler,
    CriticalPathScheduler,
    RandomOrderScheduler,
):
    register_stream_scheduler(_cls.name, _cls)
