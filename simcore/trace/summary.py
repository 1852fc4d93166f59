"""Summary statistics of a trace, for ``sgdsim trace show`` and the coarse models."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from simcore.trace.model import OpKind, Trace
from simcore.trace.overhead import overhead_matrix


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean, standard deviation, minimum and maximum of a quantity across profiled steps."""

    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def of(cls, values: np.ndarray) -> Spread:
        return cls(
            float(values.mean()), float(values.std()), float(values.min()), float(values.max())
        )


@dataclass(frozen=True, slots=True)
class LayerTime:
    name: str
    module_type: str
    forward_s: float  # mean over profiled steps
    backward_s: float
    param_nbytes: int


@dataclass(frozen=True, slots=True)
class TraceSummary:
    n_layers: int
    n_param_layers: int
    param_count: int
    param_nbytes: int
    op_counts: dict[str, int]
    pull_nbytes: int
    push_nbytes: int
    phase_s: dict[str, Spread]  # per OpKind value, sum of op durations per step
    measured_s: dict[str, Spread]  # whole-phase (and whole-step: "step") wall times, same steps
    overhead_s: dict[str, Spread]  # fixed costs per step: "begin", "end", "total"; {} if none
    layers: tuple[LayerTime, ...]  # every layer, in trace order
    # The process's CPU time per step (schema version 3); None unless every step recorded it.
    cpu_s: Spread | None = None


def duration_matrix(trace: Trace) -> np.ndarray:
    """Durations as an array of shape (steps, ops); NaN where a communication op has none."""
    return np.array(
        [[np.nan if d is None else d for d in step.duration_s] for step in trace.steps], dtype=float
    )


def summarize(trace: Trace) -> TraceSummary:
    """Per-phase and per-layer statistics over all profiled steps of ``trace``."""
    matrix = duration_matrix(trace)
    kinds = np.array([op.kind.value for op in trace.ops])
    phase_s = {
        kind.value: Spread.of(np.nansum(matrix[:, kinds == kind.value], axis=1))
        for kind in (OpKind.FORWARD, OpKind.BACKWARD, OpKind.UPDATE)
        if (kinds == kind.value).any()
    }
    measured_s = {}
    for key in ("forward_s", "backward_s", "update_s", "wall_s"):
        values = [getattr(step, key) for step in trace.steps]
        if all(v is not None for v in values):
            name = "step" if key == "wall_s" else key.removesuffix("_s")
            measured_s[name] = Spread.of(np.array(values, dtype=float))
    cpu = [step.cpu_s for step in trace.steps]
    cpu_s = Spread.of(np.array(cpu, dtype=float)) if all(c is not None for c in cpu) else None
    overhead = overhead_matrix(trace)
    overhead_s = {}
    if overhead is not None:
        overhead_s = {
            "begin": Spread.of(overhead[:, 0]),
            "end": Spread.of(overhead[:, 1]),
            "total": Spread.of(overhead.sum(axis=1)),
        }
    # Communication ops have no duration in a solo profile (NaN); only compute columns are read.
    mean = np.nan_to_num(matrix).mean(axis=0)
    fwd: dict[str, float] = {}
    bwd: dict[str, float] = {}
    for i, op in enumerate(trace.ops):
        if op.layer is None:
            continue
        if op.kind is OpKind.FORWARD:
            fwd[op.layer] = fwd.get(op.layer, 0.0) + float(mean[i])
        elif op.kind is OpKind.BACKWARD:
            bwd[op.layer] = bwd.get(op.layer, 0.0) + float(mean[i])
    layers = tuple(
        LayerTime(
            layer.name,
            layer.module_type,
            fwd.get(layer.name, 0.0),
            bwd.get(layer.name, 0.0),
            layer.param_nbytes,
        )
        for layer in trace.layers
    )
    return TraceSummary(
        n_layers=len(trace.layers),
        n_param_layers=sum(1 for layer in trace.layers if layer.params),
        param_count=trace.param_count,
        param_nbytes=trace.param_nbytes,
        op_counts=dict(Counter(op.kind.value for op in trace.ops)),
        pull_nbytes=sum(op.nbytes or 0 for op in trace.ops if op.kind is OpKind.PULL),
        push_nbytes=sum(op.nbytes or 0 for op in trace.ops if op.kind is OpKind.PUSH),
        phase_s=phase_s,
        measured_s=measured_s,
        overhead_s=overhead_s,
        layers=layers,
        cpu_s=cpu_s,
    )
