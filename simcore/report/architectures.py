"""The three data-parallel architectures scenarios compare, with the labels they print."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Architecture:
    """How workers exchange parameters: ``arch`` and ``mode`` as in ``SimulationConfig``."""

    label: str
    arch: str  # "ps" or "allreduce"
    mode: str  # "async" or "sync"


DATA_PARALLEL = (
    Architecture("PS Async-SGD", "ps", "async"),
    Architecture("PS Sync-SGD", "ps", "sync"),
    Architecture("ring AllReduce", "allreduce", "sync"),
)
