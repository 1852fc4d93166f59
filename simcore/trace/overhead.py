"""A step's fixed costs outside its layers: the ``overhead:begin`` and ``overhead:end`` ops.

A training step spends time that no layer's op covers: zeroing the gradients, handing the batch
over, Python between layers (the interpreter's bookkeeping, hooks), the loss-to-backward hand-off,
autograd's scheduling between nodes and the optimizer's own bookkeeping. Small models spend a large
share of a step there, so a trace without it predicts them too fast. Since schema version 2 the
profiler measures each step's wall time and carries ``wall - (its forward, backward and update
ops)`` as two computation ops of kind ``other`` on the worker (``FORMAT.md``, "Fixed costs"):

- ``overhead:begin``: what the step spent before its backward pass that no forward op covers
  (zeroing gradients, building the step, Python between the forward's layers, the loss-to-backward
  hand-off). It has no dependencies and every forward without a forward input waits for it, so it
  may overlap the step's first pulls, as the real step's preamble does;
- ``overhead:end``: the rest (autograd's scheduling between nodes, the optimizer's bookkeeping
  between per-layer updates). It waits for every backward op and nothing waits for it within the
  step, so it delays the worker's next step but no push.

Pure: builds ops and traces, reads nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from simcore.errors import TraceError
from simcore.trace.model import Op, OpKind, Resource, StepProfile, Trace

BEGIN_ID = "overhead:begin"
END_ID = "overhead:end"
OVERHEAD_IDS = (BEGIN_ID, END_ID)


def is_overhead(op: Op) -> bool:
    """True for the two fixed-cost ops of a step."""
    return op.kind is OpKind.OTHER and op.id in OVERHEAD_IDS


def with_overhead_ops(ops: Sequence[Op]) -> tuple[Op, ...]:
    """``ops`` with ``overhead:begin`` first and ``overhead:end`` last (see the module docstring).

    The first forwards (those without a forward input) gain ``overhead:begin`` as a dependency;
    ``overhead:end`` depends on the last backwards (those no other backward waits for), which
    every other backward precedes.
    """
    if any(op.id in OVERHEAD_IDS for op in ops):
        raise TraceError(f"the step already has its fixed-cost ops {OVERHEAD_IDS}")
    kind_of = {op.id: op.kind for op in ops}
    waited_by_backward: set[str] = set()
    for op in ops:
        if op.kind is OpKind.BACKWARD:
            waited_by_backward.update(d for d in op.deps if kind_of[d] is OpKind.BACKWARD)
    begin = Op(BEGIN_ID, Resource.WORKER, OpKind.OTHER, None, None, ())
    out = [begin]
    for op in ops:
        if op.kind is OpKind.FORWARD and not any(kind_of[d] is OpKind.FORWARD for d in op.deps):
            op = dataclasses.replace(op, deps=(BEGIN_ID, *op.deps))
        out.append(op)
    last_backwards = tuple(
        op.id for op in ops if op.kind is OpKind.BACKWARD and op.id not in waited_by_backward
    )
    out.append(Op(END_ID, Resource.WORKER, OpKind.OTHER, None, None, last_backwards))
    return tuple(out)


def add_overhead(
    trace: Trace, begin_s: float | Sequence[float], end_s: float | Sequence[float]
) -> Trace:
    """``trace`` with fixed-cost ops of ``begin_s`` and ``end_s`` seconds (one value, or one per
    profiled step). For hand-made traces (tests, what-if studies); the profiler measures them.
    """
    n = trace.n_steps
    begins, ends = _per_step(begin_s, n, "begin_s"), _per_step(end_s, n, "end_s")
    ops = with_overhead_ops(trace.ops)
    steps = tuple(
        dataclasses.replace(
            step,
            duration_s=(b, *step.duration_s, e),
            start_s=None if step.start_s is None else (None, *step.start_s, None),
        )
        for step, b, e in zip(trace.steps, begins, ends, strict=True)
    )
    return dataclasses.replace(trace, ops=ops, steps=steps)


def _per_step(value: float | Sequence[float], n: int, name: str) -> list[float]:
    values = [float(value)] * n if isinstance(value, int | float) else [float(v) for v in value]
    if len(values) != n or not all(np.isfinite(v) and v >= 0 for v in values):
        raise TraceError(f"{name}: needs one finite duration >= 0 s per step ({n}), got {value!r}")
    return values


def overhead_matrix(trace: Trace) -> np.ndarray | None:
    """Per profiled step, the (begin, end) fixed costs in seconds: shape (steps, 2); ``None``
    when the trace has no fixed-cost ops (version 1, or made by another tool)."""
    index = trace.op_index
    if not all(op_id in index for op_id in OVERHEAD_IDS):
        return None
    cols = [index[op_id] for op_id in OVERHEAD_IDS]
    return np.array([[step.duration_s[c] or 0.0 for c in cols] for step in trace.steps], float)


def fill_overhead(
    ops: Sequence[Op],
    durations: list[float | None],
    wall_s: float,
    before_backward_s: float,
    digits: int,
) -> None:
    """Set the fixed-cost ops of one step in ``durations`` (aligned with ``ops``):
    ``overhead:begin`` = the time before the backward phase minus the forward ops,
    ``overhead:end`` = the rest of the wall minus the backward and update ops, so that together
    they are ``wall_s`` minus every layer op (from the durations as rounded to ``digits``). Ops
    run one after another inside the wall, so neither is negative beyond rounding; 0 bounds
    that."""
    forward = sum(
        d or 0.0 for op, d in zip(ops, durations, strict=True) if op.kind is OpKind.FORWARD
    )
    layers = sum(
        d or 0.0
        for op, d in zip(ops, durations, strict=True)
        if op.kind in (OpKind.FORWARD, OpKind.BACKWARD, OpKind.UPDATE)
    )
    begin = max(before_backward_s - forward, 0.0)
    end = max(wall_s - layers - begin, 0.0)
    for i, op in enumerate(ops):
        if op.id == BEGIN_ID:
            durations[i] = round(begin, digits)
        elif op.id == END_ID:
            durations[i] = round(end, digits)


def step_layer_sum_s(step: StepProfile, ops: Sequence[Op]) -> float:
    """Sum of one step's forward, backward and update op durations (s): what its layers took."""
    layer_kinds = (OpKind.FORWARD, OpKind.BACKWARD, OpKind.UPDATE)
    return sum(
        d or 0.0 for op, d in zip(ops, step.duration_s, strict=True) if op.kind in layer_kinds
    )
