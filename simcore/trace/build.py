"""Build the parameter-server step DAG from a model's dataflow, and small synthetic traces.

The profiler measures layers and their dataflow; this module turns them into the op DAG of one
Async/Sync-SGD step against a parameter server (TPDS'22 section 2.2, Alg. 1):

- ``pull:L`` (downlink) brings layer L's parameters before ``forward:L`` may run;
- ``forward:L`` waits for the forwards of L's inputs (the real dataflow: branches and joins);
- ``backward:L`` waits for the backwards of every layer that consumed L's output;
- ``push:L`` (uplink) sends L's gradients once ``backward:L`` is done;
- ``update:L`` (ps) applies them at the server once the push has arrived.

With ``overlap=False`` the step has strict phases instead: every forward waits for all pulls and
every push waits for the whole backward pass (the coarse models' assumption, TPDS'22 Fig. 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simcore.errors import TraceError
from simcore.trace.model import (
    SCHEMA_VERSION,
    Layer,
    Op,
    OpKind,
    ParamTensor,
    Resource,
    StepProfile,
    Trace,
    TraceMetadata,
)
from simcore.trace.parse import trace_from_dict, trace_to_dict


def op_id(kind: OpKind, layer: str) -> str:
    """The conventional id of ``kind``'s op for ``layer`` (``forward:conv1``)."""
    return f"{kind.value}:{layer}"


def ps_step_ops(
    layers: Sequence[Layer],
    inputs: Mapping[str, Sequence[str]],
    *,
    overlap: bool = True,
) -> tuple[Op, ...]:
    """The ops of one parameter-server SGD step.

    Parameters
    ----------
    layers : the model's computation nodes in a topological (execution) order.
    inputs : for each layer, the layers whose outputs it consumes (absent or empty for sources).
    overlap : per-layer overlap of communication and computation (default), or strict phases.

    Returns
    -------
    The ops in trace order: pulls in forward order, forwards, then for each layer in reverse order
    its backward, push and update.
    """
    names = [layer.name for layer in layers]
    position = {name: i for i, name in enumerate(names)}
    consumers: dict[str, list[str]] = {name: [] for name in names}
    for name in names:
        for src in inputs.get(name, ()):
            if src not in position:
                raise TraceError(f"layer {name!r} consumes {src!r}, which is not a layer")
            if position[src] >= position[name]:
                raise TraceError(f"layers are not in execution order: {src!r} feeds {name!r}")
            consumers[src].append(name)
    with_params = [layer.name for layer in layers if layer.param_nbytes > 0]
    by_name = {layer.name: layer for layer in layers}
    pulls = [
        Op(op_id(OpKind.PULL, n), Resource.DOWNLINK, OpKind.PULL, n, by_name[n].param_nbytes, ())
        for n in with_params
    ]
    all_pulls = tuple(op.id for op in pulls)
    forwards = []
    for name in names:
        deps = [op_id(OpKind.FORWARD, src) for src in inputs.get(name, ())]
        if not overlap and not deps:
            deps.extend(all_pulls)
        elif overlap and by_name[name].param_nbytes > 0:
            deps.append(op_id(OpKind.PULL, name))
        forwards.append(
            Op(
                op_id(OpKind.FORWARD, name),
                Resource.WORKER,
                OpKind.FORWARD,
                name,
                None,
                tuple(deps),
            )
        )
    backward_ops: list[Op] = []
    all_backwards = tuple(op_id(OpKind.BACKWARD, n) for n in names)
    for name in reversed(names):
        after = consumers[name] or [name]
        kind_of_after = OpKind.BACKWARD if consumers[name] else OpKind.FORWARD
        bwd_deps = tuple(op_id(kind_of_after, n) for n in after)
        backward_ops.append(
            Op(op_id(OpKind.BACKWARD, name), Resource.WORKER, OpKind.BACKWARD, name, None, bwd_deps)
        )
        if by_name[name].param_nbytes > 0:
            push_deps = (op_id(OpKind.BACKWARD, name),) if overlap else all_backwards
            push = op_id(OpKind.PUSH, name)
            backward_ops.append(
                Op(push, Resource.UPLINK, OpKind.PUSH, name, by_name[name].param_nbytes, push_deps)
            )
            backward_ops.append(
                Op(op_id(OpKind.UPDATE, name), Resource.PS, OpKind.UPDATE, name, None, (push,))
            )
    return (*pulls, *forwards, *backward_ops)


def synthetic_trace(
    forward_s: Sequence[float] | Sequence[Sequence[float]],
    backward_s: Sequence[float] | Sequence[Sequence[float]],
    param_nbytes: Sequence[int],
    *,
    update_s: float | Sequence[float] = 0.0,
    inputs: Mapping[str, Sequence[str]] | None = None,
    overlap: bool = True,
    model_name: str = "synthetic",
    batch_size: int = 1,
) -> Trace:
    """A small hand-made trace: layers ``l0, l1, ...`` in a chain unless ``inputs`` says otherwise.

    ``forward_s`` and ``backward_s`` hold one duration per layer, or one list per profiled step.
    ``param_nbytes[i] == 0`` makes layer i parameter-free (no pull, push or update). Meant for
    tests, examples and closed-form checks; real traces come from ``profilers``.
    """
    n = len(param_nbytes)
    fwd_steps = _per_step(forward_s, n, "forward_s")
    bwd_steps = _per_step(backward_s, n, "backward_s")
    if len(fwd_steps) != len(bwd_steps):
        raise TraceError("forward_s and backward_s must describe the same number of steps")
    upd = (
        [float(update_s)] * n if isinstance(update_s, int | float) else [float(u) for u in update_s]
    )
    names = [f"l{i}" for i in range(n)]
    layers = tuple(
        Layer(
            name=name,
            module_type="Synthetic",
            params=(ParamTensor(f"{name}.weight", (nb // 4,), "float32", nb),) if nb > 0 else (),
        )
        for name, nb in zip(names, param_nbytes, strict=True)
    )
    if inputs is None:
        inputs = {names[i]: [names[i - 1]] for i in range(1, n)}
    ops = ps_step_ops(layers, inputs, overlap=overlap)
    index = {name: i for i, name in enumerate(names)}
    steps = []
    for fwd, bwd in zip(fwd_steps, bwd_steps, strict=True):
        durations: list[float | None] = []
        for op in ops:
            i = index[op.layer] if op.layer is not None else 0
            if op.kind is OpKind.FORWARD:
                durations.append(fwd[i])
            elif op.kind is OpKind.BACKWARD:
                durations.append(bwd[i])
            elif op.kind is OpKind.UPDATE:
                durations.append(upd[i])
            else:
                durations.append(None)
        steps.append(
            StepProfile(duration_s=tuple(durations), forward_s=sum(fwd), backward_s=sum(bwd))
        )
    metadata = TraceMetadata(
        model_name=model_name,
        batch_size=batch_size,
        device="synthetic",
        dtype="float32",
        framework="none",
        framework_version="0",
        profiled_steps=len(steps),
        warmup_steps=0,
        notes="synthetic trace built by simcore.trace.build.synthetic_trace",
    )
    built = Trace(metadata, layers, ops, tuple(steps), SCHEMA_VERSION, source="<synthetic>")
    # Round-trip through the validator so hand-made traces obey the same rules as files.
    return trace_from_dict(trace_to_dict(built), source="<synthetic>")


def _per_step(
    values: Sequence[float] | Sequence[Sequence[float]], n: int, name: str
) -> list[list[float]]:
    if len(values) and isinstance(values[0], Sequence):
        steps = [[float(v) for v in step] for step in values]  # type: ignore[union-attr]
    else:
        steps = [[float(v) for v in values]]  # type: ignore[arg-type]
    for step in steps:
        if len(step) != n:
            raise TraceError(
                f"{name} needs {n} durations per step (one per layer), got {len(step)}"
            )
    return steps
