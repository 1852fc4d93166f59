"""Convert between the JSON form of a trace and the validated :class:`Trace` model.

Validation happens once, here. Every error names the source, the place (``ops[12] 'fwd:conv1'``),
the field, the offending value and what was expected; see ``simcore/trace/FORMAT.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from simcore.errors import TraceError
from simcore.gc_pause import gc_paused
from simcore.trace.model import (
    KIND_RESOURCES,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    Layer,
    Op,
    OpKind,
    ParamTensor,
    Resource,
    StepProfile,
    Trace,
    TraceMetadata,
    _frozen_mapping,
)
from simcore.units import MAX_DURATION_S, MAX_SIZE_BYTES

MAX_BATCH_SIZE = 2**40  # examples per step; beyond it rates lose meaning (and ints overflow floats)
_REGENERATE_HINT = "regenerate it with `sgdsim profile` (see the README)"
CPU_VERSION = 3  # the first schema version with steps[].cpu_s


class _Ctx:
    """Carries the source name so that every error can say which file it is about."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, problem: str) -> NoReturn:
        raise TraceError(f"{self.source}: {where}: {problem}")

    def get(self, obj: Mapping[str, Any], key: str, where: str) -> Any:
        if type(obj) is not dict and not isinstance(obj, Mapping):  # the ABC check is slow
            self.fail(where, f"expected a JSON object, got {type(obj).__name__}")
        if key not in obj:
            self.fail(where, f"missing required field '{key}'")
        return obj[key]

    def string(self, obj: Mapping[str, Any], key: str, where: str) -> str:
        value = self.get(obj, key, where)
        if not isinstance(value, str) or not value:
            self.fail(where, f"field '{key}' must be a non-empty string, got {value!r}")
        return value

    def integer(self, obj: Mapping[str, Any], key: str, where: str, minimum: int) -> int:
        value = self.get(obj, key, where)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(where, f"field '{key}' must be an integer >= {minimum}, got {value!r}")
        return value

    def seconds(self, value: Any, where: str, field_name: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(where, f"field '{field_name}' must be a number of seconds, got {value!r}")
        seconds = float(value)
        if not 0 <= seconds <= MAX_DURATION_S:  # also refuses nan
            self.fail(
                where,
                f"field '{field_name}' must be a duration from 0 to {MAX_DURATION_S:g} s, "
                f"got {value!r}",
            )
        return seconds

    def optional_seconds(self, obj: Mapping[str, Any], key: str, where: str) -> float | None:
        value = obj.get(key)
        return None if value is None else self.seconds(value, where, key)

    def sequence(self, obj: Mapping[str, Any], key: str, where: str) -> Sequence[Any]:
        value = self.get(obj, key, where)
        if not isinstance(value, list):
            self.fail(where, f"field '{key}' must be a list, got {type(value).__name__}")
        return value


def trace_from_dict(data: Any, source: str = "<memory>") -> Trace:
    """Validate the JSON form of a trace and build a :class:`Trace`.

    Parameters
    ----------
    data : the decoded JSON document.
    source : a name for error messages, usually the file path.

    Raises
    ------
    TraceError : naming the source, the op or field, the value and what is expected.
    """
    with gc_paused():  # it allocates an object or more per op and field, and keeps them
        return _trace_from_dict(_Ctx(source), data)


def _trace_from_dict(ctx: _Ctx, data: Any) -> Trace:
    if not isinstance(data, Mapping):
        ctx.fail("top level", f"expected a JSON object, got {type(data).__name__}")
    schema = data.get("schema", SCHEMA_NAME)
    if schema != SCHEMA_NAME:
        ctx.fail("field 'schema'", f"expected {SCHEMA_NAME!r}, got {schema!r}: not an sgdsim trace")
    version = ctx.get(data, "schema_version", "top level")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
        ctx.fail(
            "field 'schema_version'",
            f"version {version!r} is not supported; this sgdsim reads version(s) {supported}; "
            f"{_REGENERATE_HINT}",
        )
    layers = _parse_layers(ctx, ctx.sequence(data, "layers", "top level"))
    ops = _parse_ops(ctx, ctx.sequence(data, "ops", "top level"), {layer.name for layer in layers})
    _check_acyclic(ctx, ops)
    steps = _parse_steps(ctx, ctx.sequence(data, "steps", "top level"), ops, version)
    metadata = _parse_metadata(ctx, ctx.get(data, "metadata", "top level"), len(steps))
    return Trace(
        metadata=metadata,
        layers=layers,
        ops=ops,
        steps=steps,
        schema_version=version,
        source=ctx.source,
    )


def _parse_metadata(ctx: _Ctx, raw: Any, n_steps: int) -> TraceMetadata:
    where = "metadata"
    profiled = ctx.integer(raw, "profiled_steps", where, minimum=1)
    if profiled != n_steps:
        ctx.fail(where, f"field 'profiled_steps' is {profiled} but the trace holds {n_steps} steps")
    for key in ("library_versions", "host", "profiler"):
        if not isinstance(raw.get(key, {}), Mapping):
            ctx.fail(where, f"field '{key}' must be a JSON object, got {raw[key]!r}")
    return TraceMetadata(
        model_name=ctx.string(raw, "model_name", where),
        batch_size=_at_most(
            ctx, ctx.integer(raw, "batch_size", where, 1), MAX_BATCH_SIZE, where, "batch_size"
        ),
        device=ctx.string(raw, "device", where),
        dtype=ctx.string(raw, "dtype", where),
        framework=ctx.string(raw, "framework", where),
        framework_version=ctx.string(raw, "framework_version", where),
        profiled_steps=profiled,
        warmup_steps=ctx.integer(raw, "warmup_steps", where, minimum=0),
        library_versions=_frozen_mapping(raw.get("library_versions")),
        host=_frozen_mapping(raw.get("host")),
        profiler=_frozen_mapping(raw.get("profiler")),
        created_utc=str(raw.get("created_utc", "")),
        notes=str(raw.get("notes", "")),
    )


def _parse_layers(ctx: _Ctx, raw_layers: Sequence[Any]) -> tuple[Layer, ...]:
    layers: list[Layer] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_layers):
        where = f"layers[{i}]"
        name = ctx.string(raw, "name", where)
        where = f"layers[{i}] {name!r}"
        if name in seen:
            ctx.fail(where, "duplicate layer name")
        seen.add(name)
        params = []
        for j, raw_param in enumerate(ctx.sequence(raw, "params", where)):
            pwhere = f"{where} params[{j}]"
            shape = ctx.get(raw_param, "shape", pwhere)
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
            ):
                ctx.fail(pwhere, f"field 'shape' must be a list of integers >= 0, got {shape!r}")
            params.append(
                ParamTensor(
                    name=ctx.string(raw_param, "name", pwhere),
                    shape=tuple(shape),
                    dtype=ctx.string(raw_param, "dtype", pwhere),
                    nbytes=_nbytes(ctx, ctx.integer(raw_param, "nbytes", pwhere, 0), pwhere),
                )
            )
        module_type = raw.get("module_type", "")
        layers.append(Layer(name=name, module_type=str(module_type), params=tuple(params)))
    return tuple(layers)


def _parse_ops(ctx: _Ctx, raw_ops: Sequence[Any], layer_names: set[str]) -> tuple[Op, ...]:
    if not raw_ops:
        ctx.fail("field 'ops'", "a trace needs at least one op")
    ids: set[str] = set()
    for i, raw in enumerate(raw_ops):
        op_id = ctx.string(raw, "id", f"ops[{i}]")
        if op_id in ids:
            ctx.fail(f"ops[{i}] {op_id!r}", "duplicate op id")
        ids.add(op_id)
    return tuple(_parse_op(ctx, i, raw, ids, layer_names) for i, raw in enumerate(raw_ops))


_RESOURCE_OF = {r.value: r for r in Resource}
_KIND_OF = {k.value: k for k in OpKind}


def _parse_op(
    ctx: _Ctx, i: int, raw: Mapping[str, Any], ids: set[str], layer_names: set[str]
) -> Op:
    """One op of ``ops`` (its id already checked); dict lookups first, as traces can be large."""
    op_id = raw["id"]
    where = f"ops[{i}] {op_id!r}"
    value = raw.get("resource")
    resource = _RESOURCE_OF.get(value) if isinstance(value, str) else None
    if resource is None:
        resource = _enum(ctx, Resource, ctx.get(raw, "resource", where), where, "resource")
    value = raw.get("kind")
    kind = _KIND_OF.get(value) if isinstance(value, str) else None
    if kind is None:
        kind = _enum(ctx, OpKind, ctx.get(raw, "kind", where), where, "kind")
    if resource not in KIND_RESOURCES[kind]:
        allowed = ", ".join(sorted(r.value for r in KIND_RESOURCES[kind]))
        ctx.fail(where, f"a {kind.value!r} op must use resource {allowed}, not {resource.value!r}")
    layer = raw.get("layer")
    if layer is not None and (not isinstance(layer, str) or layer not in layer_names):
        ctx.fail(where, f"field 'layer' names {layer!r}, which is not in 'layers'")
    nbytes = raw.get("nbytes")
    if resource.is_network:
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes <= 0:
            ctx.fail(
                where,
                f"a communication op ({resource.value}) needs field 'nbytes' as an integer "
                f"> 0, got {nbytes!r}",
            )
        _nbytes(ctx, nbytes, where)
    elif nbytes is not None:
        ctx.fail(where, f"a computation op ({resource.value}) must not carry 'nbytes' ({nbytes!r})")
    deps = raw.get("deps", [])
    if not isinstance(deps, list):
        ctx.fail(where, f"field 'deps' must be a list of op ids, got {deps!r}")
    for dep in deps:
        if not isinstance(dep, str):
            ctx.fail(where, f"field 'deps' must be a list of op ids, got {deps!r}")
        if dep not in ids:
            ctx.fail(where, f"field 'deps' names {dep!r}, which is not an op in this trace")
        if dep == op_id:
            ctx.fail(where, "an op cannot depend on itself")
    if len(deps) > 1 and len(set(deps)) != len(deps):
        ctx.fail(where, f"field 'deps' lists an op twice: {deps!r}")
    return Op(id=op_id, resource=resource, kind=kind, layer=layer, nbytes=nbytes, deps=tuple(deps))


def _nbytes(ctx: _Ctx, nbytes: int, where: str) -> int:
    """``nbytes`` if it is at most MAX_SIZE_BYTES: larger sizes would make times overflow."""
    return _at_most(ctx, nbytes, MAX_SIZE_BYTES, where, "nbytes", " (1 EiB)")


def _at_most(ctx: _Ctx, value: int, limit: int, where: str, field: str, note: str = "") -> int:
    if value > limit:
        ctx.fail(where, f"field '{field}' is {value}, more than the {limit}{note} allowed")
    return value


def _enum(ctx: _Ctx, enum_type: Any, value: Any, where: str, field_name: str) -> Any:
    try:
        return enum_type(value)
    except (ValueError, TypeError):
        allowed = ", ".join(repr(m.value) for m in enum_type)
        ctx.fail(where, f"field '{field_name}' is {value!r}; expected one of {allowed}")


def _check_acyclic(ctx: _Ctx, ops: Sequence[Op]) -> None:
    """TraceError naming the ops of a cycle if the dependencies have one; O(ops + deps).

    Kahn's algorithm takes every op whose dependencies are all taken; a cycle is looked for only
    when some ops are left over, and then among them alone.
    """
    index = {op.id: i for i, op in enumerate(ops)}
    waiting = [len(op.deps) for op in ops]
    dependents: list[list[int]] = [[] for _ in ops]
    for i, op in enumerate(ops):
        for dep in op.deps:
            dependents[index[dep]].append(i)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    taken = 0
    while ready:
        i = ready.pop()
        taken += 1
        for d in dependents[i]:
            waiting[d] -= 1
            if not waiting[d]:
                ready.append(d)
    if taken == len(ops):
        return
    cycle = _cycle_among_left(ops, index, waiting)
    path = " -> ".join(ops[i].id for i in [*cycle, cycle[0]])
    ctx.fail("field 'ops'", f"the dependencies form a cycle: {path}")


def _cycle_among_left(ops: Sequence[Op], index: Mapping[str, int], waiting: list[int]) -> list[int]:
    """A cycle among the ops Kahn's algorithm left (``waiting[i] > 0``), in dependency order.

    Every op left waits for some op that is left too, so walking from one of them to such a
    dependency, again and again, must come back to an op already met: that loop is a cycle.
    """
    seen_at: dict[int, int] = {}
    walk: list[int] = []
    op = next(i for i, n in enumerate(waiting) if n > 0)
    while op not in seen_at:
        seen_at[op] = len(walk)
        walk.append(op)
        op = next(index[d] for d in ops[op].deps if waiting[index[d]] > 0)
    loop = walk[seen_at[op] :][::-1]  # each op here is a dependency of the next one
    first = loop.index(min(loop))  # start at the op first in trace order, for a stable message
    return loop[first:] + loop[:first]


def _parse_steps(
    ctx: _Ctx, raw_steps: Sequence[Any], ops: Sequence[Op], version: int
) -> tuple[StepProfile, ...]:
    if not raw_steps:
        ctx.fail("field 'steps'", "a trace needs at least one profiled step")
    steps = []
    for s, raw in enumerate(raw_steps):
        where = f"steps[{s}]"
        durations = ctx.sequence(raw, "duration_s", where)
        if len(durations) != len(ops):
            ctx.fail(
                where,
                f"field 'duration_s' has {len(durations)} entries; "
                f"expected one per op ({len(ops)})",
            )
        parsed: list[float | None] = []
        for op, value in zip(ops, durations, strict=True):
            if type(value) is float and 0.0 <= value <= MAX_DURATION_S:  # the usual case, fast
                parsed.append(value)
            elif value is None:
                if not op.is_communication:
                    ctx.fail(
                        f"{where} op {op.id!r}",
                        "a computation op needs a measured duration_s, got null",
                    )
                parsed.append(None)
            else:
                parsed.append(ctx.seconds(value, f"{where} op {op.id!r}", "duration_s"))
        starts: tuple[float | None, ...] | None = None
        if raw.get("start_s") is not None:
            raw_starts = ctx.sequence(raw, "start_s", where)
            if len(raw_starts) != len(ops):
                ctx.fail(
                    where, f"field 'start_s' has {len(raw_starts)} entries, expected {len(ops)}"
                )
            starts = tuple(
                None if v is None else ctx.seconds(v, f"{where} op {op.id!r}", "start_s")
                for op, v in zip(ops, raw_starts, strict=True)
            )
        cpu_s = ctx.optional_seconds(raw, "cpu_s", where)
        if cpu_s is not None and version < CPU_VERSION:
            # An older reader would drop it and predict otherwise: the version must say so.
            ctx.fail(where, f"field 'cpu_s' needs schema_version {CPU_VERSION}, got {version}")
        steps.append(
            StepProfile(
                duration_s=tuple(parsed),
                start_s=starts,
                forward_s=ctx.optional_seconds(raw, "forward_s", where),
                backward_s=ctx.optional_seconds(raw, "backward_s", where),
                update_s=ctx.optional_seconds(raw, "update_s", where),
                wall_s=ctx.optional_seconds(raw, "wall_s", where),
                cpu_s=cpu_s,
            )
        )
    return tuple(steps)


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """The JSON form of ``trace`` (the inverse of :func:`trace_from_dict`)."""
    md = trace.metadata
    return {
        "schema": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "metadata": {
            "model_name": md.model_name,
            "batch_size": md.batch_size,
            "device": md.device,
            "dtype": md.dtype,
            "framework": md.framework,
            "framework_version": md.framework_version,
            "profiled_steps": md.profiled_steps,
            "warmup_steps": md.warmup_steps,
            "library_versions": dict(md.library_versions),
            "host": dict(md.host),
            "profiler": dict(md.profiler),
            "created_utc": md.created_utc,
            "notes": md.notes,
        },
        "layers": [
            {
                "name": layer.name,
                "module_type": layer.module_type,
                "params": [
                    {"name": p.name, "shape": list(p.shape), "dtype": p.dtype, "nbytes": p.nbytes}
                    for p in layer.params
                ],
            }
            for layer in trace.layers
        ],
        "ops": [_op_to_dict(op) for op in trace.ops],
        "steps": [_step_to_dict(step) for step in trace.steps],
    }


def _op_to_dict(op: Op) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": op.id,
        "resource": op.resource.value,
        "kind": op.kind.value,
        "layer": op.layer,
    }
    if op.nbytes is not None:
        out["nbytes"] = op.nbytes
    out["deps"] = list(op.deps)
    return out


def _step_to_dict(step: StepProfile) -> dict[str, Any]:
    out: dict[str, Any] = {"duration_s": list(step.duration_s)}
    if step.start_s is not None:
        out["start_s"] = list(step.start_s)
    for key in ("forward_s", "backward_s", "update_s", "wall_s", "cpu_s"):
        value = getattr(step, key)
        if value is not None:
            out[key] = value
    return out
