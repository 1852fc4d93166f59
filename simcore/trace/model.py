"""Typed, immutable data model of an sgdsim trace (the profiler-simulator boundary).

A trace describes one SGD step of one worker talking to a parameter server, as a DAG of operations
(TPDS'22 section 2.2.1, ICPE'20 section 2), plus the measurements of every profiled step. The DAG is
the same for every step (it comes from one computational graph); what varies from step to step are
the measured durations, so a step is stored as a vector of durations aligned with ``Trace.ops``.

Objects here are built and validated by :func:`simcore.trace.parse.trace_from_dict`; code that
consumes a ``Trace`` can trust it (ids unique, dependencies exist and are acyclic, durations finite
and non-negative, communication ops carry bytes).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from types import MappingProxyType
from typing import Any

SCHEMA_NAME = "sgdsim.trace"
SCHEMA_VERSION = 3
# Version 1 traces still load: they lack the per-step fixed costs (FORMAT.md, "Versions").
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1, 2, 3)


class Resource(str, enum.Enum):
    """The resource an operation occupies (TPDS'22 Alg. 1: op.res)."""

    DOWNLINK = "downlink"  # parameter server -> worker link (parameter pulls)
    WORKER = "worker"  # the worker's compute device (forward, backward)
    UPLINK = "uplink"  # worker -> parameter server link (gradient pushes)
    PS = "ps"  # the parameter server's compute (applying updates)

    @property
    def is_network(self) -> bool:
        return self in (Resource.DOWNLINK, Resource.UPLINK)


class OpKind(str, enum.Enum):
    """What an operation does; the simulator's transformations key on this."""

    PULL = "pull"  # parameters of one layer, server -> worker
    FORWARD = "forward"
    BACKWARD = "backward"
    PUSH = "push"  # gradients of one layer, worker -> server
    UPDATE = "update"  # server applies one layer's gradients
    OTHER = "other"


# Which resources each kind may use; checked on load so that a pull never lands on the PS CPU.
KIND_RESOURCES: Mapping[OpKind, frozenset[Resource]] = MappingProxyType(
    {
        OpKind.PULL: frozenset({Resource.DOWNLINK}),
        OpKind.PUSH: frozenset({Resource.UPLINK}),
        OpKind.FORWARD: frozenset({Resource.WORKER}),
        OpKind.BACKWARD: frozenset({Resource.WORKER}),
        OpKind.UPDATE: frozenset({Resource.PS}),
        OpKind.OTHER: frozenset(Resource),
    }
)


@dataclass(frozen=True, slots=True)
class ParamTensor:
    """One parameter tensor of a layer."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass(frozen=True, slots=True)
class Layer:
    """A computation node of the model (a module call or a function such as ``add``).

    ``params`` is empty for parameter-free nodes (activations, pooling, residual adds). A module
    whose parameters are used by several nodes lists them under the first node that uses them.
    """

    name: str
    module_type: str
    params: tuple[ParamTensor, ...] = ()

    @property
    def param_nbytes(self) -> int:
        return sum(p.nbytes for p in self.params)

    @property
    def param_count(self) -> int:
        count = 0
        for p in self.params:
            n = 1
            for d in p.shape:
                n *= d
            count += n
        return count


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of the step DAG.

    ``nbytes`` is the payload of a communication op (``downlink``/``uplink``) and ``None`` for
    computation. ``deps`` are ids of ops that must complete before this one may start.
    """

    id: str
    resource: Resource
    kind: OpKind
    layer: str | None
    nbytes: int | None
    deps: tuple[str, ...]

    @property
    def is_communication(self) -> bool:
        return self.resource.is_network


@dataclass(frozen=True, slots=True)
class StepProfile:
    """Measurements of one profiled step.

    ``duration_s[i]`` is the measured duration of ``Trace.ops[i]`` in seconds: always present for
    computation ops; for communication ops it is ``None`` in a solo profile (the simulator derives
    transfer time from bytes and bandwidth) or the measured transfer time when the profile came from
    a run with a real parameter server. ``start_s[i]`` is the op's measured start relative to the
    step's start, or ``None`` when not recorded. ``forward_s``, ``backward_s`` and ``update_s`` are
    the wall-clock times of the whole phases, measured around them in the same step. ``wall_s``
    (schema version 2) is the wall-clock time of the whole step, from before zeroing the
    gradients to after the last update; the step's fixed-cost ops carry what its layers' ops do
    not cover (``simcore.trace.overhead``). ``cpu_s`` (schema version 3) is the CPU time the
    worker's process used during the step, every thread's: in a run beside a real parameter
    server it holds its communication threads' work, which the computation ops do not
    (``simcore.trace.cpu``).
    """

    duration_s: tuple[float | None, ...]
    start_s: tuple[float | None, ...] | None = None
    forward_s: float | None = None
    backward_s: float | None = None
    update_s: float | None = None
    wall_s: float | None = None
    cpu_s: float | None = None


def _frozen_mapping(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(data or {}))


@dataclass(frozen=True, slots=True)
class TraceMetadata:
    """Where and how a trace was made."""

    model_name: str
    batch_size: int
    device: str
    dtype: str
    framework: str
    framework_version: str
    profiled_steps: int
    warmup_steps: int
    library_versions: Mapping[str, str] = field(default_factory=lambda: _frozen_mapping(None))
    host: Mapping[str, Any] = field(default_factory=lambda: _frozen_mapping(None))
    profiler: Mapping[str, Any] = field(default_factory=lambda: _frozen_mapping(None))
    created_utc: str = ""
    notes: str = ""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled for a pool of processes (simcore.parallel): the read-only views are not
        # picklable, so they travel as dicts and are frozen again on arrival.
        values = tuple(getattr(self, f.name) for f in fields(self))
        return (_metadata_of, tuple(dict(v) if isinstance(v, Mapping) else v for v in values))


def _metadata_of(*values: Any) -> TraceMetadata:
    frozen: list[Any] = [_frozen_mapping(v) if isinstance(v, dict) else v for v in values]
    return TraceMetadata(*frozen)


@dataclass(frozen=True)
class Trace:
    """A validated single-worker trace: metadata, layers, the step DAG and every profiled step."""

    metadata: TraceMetadata
    layers: tuple[Layer, ...]
    ops: tuple[Op, ...]
    steps: tuple[StepProfile, ...]
    schema_version: int = SCHEMA_VERSION
    source: str = "<memory>"  # the file it came from, for error messages; not serialized

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Its fields only: the cached views (op_index, layer_by_name) are rebuilt on demand.
        return (Trace, tuple(getattr(self, f.name) for f in fields(self)))

    @cached_property
    def op_index(self) -> Mapping[str, int]:
        """Position of each op id in ``ops``."""
        return MappingProxyType({op.id: i for i, op in enumerate(self.ops)})

    @cached_property
    def layer_by_name(self) -> Mapping[str, Layer]:
        return MappingProxyType({layer.name: layer for layer in self.layers})

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def param_nbytes(self) -> int:
        """Model size in bytes (sum over all parameter tensors)."""
        return sum(layer.param_nbytes for layer in self.layers)

    @property
    def param_count(self) -> int:
        return sum(layer.param_count for layer in self.layers)

    @property
    def transfer_nbytes(self) -> int:
        """Bytes a worker's transfers move per step (its communication ops' sizes)."""
        return sum(op.nbytes or 0 for op in self.ops if op.is_communication)

    def ops_of_kind(self, kind: OpKind) -> tuple[Op, ...]:
        return tuple(op for op in self.ops if op.kind is kind)

    def phase_time_s(self, step: int, kind: OpKind) -> float:
        """Sum of the measured durations of all ops of ``kind`` in profiled step ``step``."""
        durations = self.steps[step].duration_s
        return sum(
            d
            for op, d in zip(self.ops, durations, strict=True)
            if op.kind is kind and d is not None
        )
