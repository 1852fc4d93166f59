"""The small synthetic trace several test modules simulate: two layers of 400 kB and 200 kB,
two profiled steps, batch 16 (fast to simulate, with transfers that matter at 1 Gbit/s)."""

from __future__ import annotations

from simcore.trace.build import synthetic_trace
from simcore.trace.model import Trace


def tiny_trace() -> Trace:
    return synthetic_trace(
        [[0.002, 0.004], [0.003, 0.005]],
        [[0.004, 0.006], [0.005, 0.007]],
        [400_000, 200_000],
        update_s=0.0005,
        batch_size=16,
    )
