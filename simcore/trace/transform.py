"""What-if edits of a trace that keep it a valid trace (pure)."""

from __future__ import annotations

import dataclasses
import math

from simcore.errors import ConfigError
from simcore.trace.model import StepProfile, Trace

__all__ = ["with_faster_computation"]


def with_faster_computation(trace: Trace, speed: float) -> Trace:
    """``trace`` on a device ``speed`` times faster: every computation op's duration (forward,
    backward, update and other computation, on workers and servers) and every phase total divided
    by ``speed``; bytes and measured transfers unchanged; measured start times dropped (they
    described the step as it was measured).

    A crude but explicit stand-in for profiling on the target device (e.g. a CPU profile scaled to
    a GPU's step time): it assumes every layer speeds up alike, which real accelerators do not.
    """
    if not (isinstance(speed, int | float) and math.isfinite(speed) and speed > 0):
        raise ConfigError(f"speed: must be a finite number > 0, got {speed!r}")
    compute = [not op.is_communication for op in trace.ops]

    def scaled(value: float | None) -> float | None:
        return None if value is None else value / speed

    steps = []
    for step in trace.steps:
        durations = tuple(
            scaled(d) if is_compute else d
            for d, is_compute in zip(step.duration_s, compute, strict=True)
        )
        steps.append(
            StepProfile(
                duration_s=durations,
                start_s=None,
                forward_s=scaled(step.forward_s),
                backward_s=scaled(step.backward_s),
                update_s=scaled(step.update_s),
            )
        )
    return dataclasses.replace(trace, steps=tuple(steps), source=f"{trace.source} (x{speed:g})")
