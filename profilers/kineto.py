"""Turn a torch.profiler (Kineto) trace of training steps into an sgdsim trace.

A user who already profiles their real job with ``torch.profiler`` and ``export_chrome_trace``
should not have to profile it again with ``sgdsim profile``. This module reads that JSON (the
Chrome Trace Event dialect Kineto writes) and recovers what the simulator needs, one worker's
step as layers:

- **Steps** are the ``ProfilerStep#N`` annotations that ``prof.step()`` leaves; each becomes one
  profiled step of the trace (schedule warm-up steps are not in the file).
- **Layers** are the calls of leaf ``nn.Module`` s (the ``nn.Module: Conv2d_0`` events that
  ``with_stack=True, with_modules=True`` record), plus the top-level aten ops a module runs outside
  its children (a residual ``add``, a ``flatten``), plus ``loss``: what runs after the model's
  forward and before the backward pass. This mirrors ``sgdsim profile``, whose layers are torch.fx
  call nodes.
- **Backward.** Every autograd node Kineto records (``autograd::engine::evaluate_function: X``)
  carries the sequence number of the forward op that created it; that op lies inside one layer's
  forward, so the node's time is that layer's backward. ``AccumulateGrad`` nodes have no sequence
  number: autograd runs them right after the node that produced the gradient (they have the
  highest priority in its ready queue), so they belong to the layer of the node before them.
- **Parameters** are the tensors ``AccumulateGrad`` receives (their shapes and types, from
  ``record_shapes=True``), each under the layer whose backward produced it; with a model
  (:func:`import_kineto` ``model=``) they come from the model itself, and so do the layers' names
  and the dataflow graph (torch.fx, as ``sgdsim profile`` has them).
- **GPU.** Where the trace has GPU kernels, a layer's time is the time of the kernels its ops
  launched (``cudaLaunchKernel`` and the kernel share a ``correlation`` id); communication kernels
  (NCCL) are the network's, not a layer's, and are left out.
- **Update** is the optimizer's step (``Optimizer.step#...``), which a fused or ``foreach``
  optimizer runs for all layers at once: it is split over the layers in proportion to their
  parameter bytes, the simulator's per-layer update at the server.
- **The dataflow DAG.** A Kineto trace records no tensor identities, so without the model the
  layers form a chain in the order they ran: on one device that is the order they would run in
  anyway. With the model, the DAG is torch.fx's.
- **Fixed costs.** What the step's wall time (its ``ProfilerStep`` span) holds beyond its layers'
  ops becomes the step's ``overhead:begin`` (before the backward pass) and ``overhead:end``, as
  the profiler does (:mod:`simcore.trace.overhead`).
- **Communication** in a trace of a distributed job (DDP's ``c10d::allreduce_`` started from
  autograd hooks, gloo's and NCCL's ops, ``record_param_comms``) is neither a layer's time nor a
  fixed cost: the simulator predicts it for the W asked. The main thread's time in it is
  recorded per step (``metadata.profiler.communication_s``), and left out of the step.

What cannot be recovered (no steps, no backward pass, no module annotations, no shapes) is a
:class:`~simcore.errors.TraceError` naming the file and what to record. Reading JSON needs no
torch; only the model path imports it.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simcore import __version__
from simcore.errors import TraceError
from simcore.files import read_json_file
from simcore.trace.build import ps_step_ops
from simcore.trace.model import (
    SCHEMA_VERSION,
    Layer,
    OpKind,
    ParamTensor,
    StepProfile,
    Trace,
    TraceMetadata,
)
from simcore.trace.overhead import fill_overhead, is_overhead, with_overhead_ops
from simcore.trace.parse import trace_from_dict, trace_to_dict

LOSS_LAYER = "loss"
ROUND_DIGITS = 9  # as the profiler keeps them: to the nanosecond
US = 1e-6

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
MODULE_PREFIX = "nn.Module: "
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
OPTIMIZER_STEP = "Optimizer.step#"
OPTIMIZER_ZERO_GRAD = "Optimizer.zero_grad#"
COMM_OP_PREFIXES = ("c10d::", "record_param_comms", "gloo:", "nccl:")
# Wrappers whose own module call holds the model: the model is the module inside.
WRAPPERS = frozenset({"DistributedDataParallel", "FullyShardedDataParallel", "DataParallel"})
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver"})

# Bytes per element of the type names Kineto records under "Input type" (c10's scalar type names).
ELEMENT_BYTES: Mapping[str, tuple[str, int]] = {
    "float": ("float32", 4),
    "double": ("float64", 8),
    "c10::Half": ("float16", 2),
    "c10::BFloat16": ("bfloat16", 2),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1),
    "c10::Float8_e5m2": ("float8_e5m2", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}


@dataclass(frozen=True, slots=True)
class _Event:
    """One complete event (``ph: "X"``), times in microseconds."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    args: Mapping[str, Any]

    @property
    def end(self) -> float:
        return self.ts + self.dur

    def within(self, start: float, end: float) -> bool:
        return start <= self.ts and self.end <= end


@dataclass
class _Unit:
    """A forward layer as one step ran it: a leaf module call, a top-level op, or the loss."""

    name: str
    module_type: str
    is_module: bool
    spans: list[_Event]  # the module call, or the op(s); their union is the layer's forward

    @property
    def start(self) -> float:
        return self.spans[0].ts


@dataclass
class _StepLayers:
    """One step resolved into layers (seconds, relative to the step's start)."""

    forward: dict[str, tuple[float, float]] = field(default_factory=dict)  # start, duration
    backward: dict[str, tuple[float, float]] = field(default_factory=dict)
    params: dict[str, list[tuple[tuple[int, ...], str]]] = field(default_factory=dict)
    update_s: float = 0.0
    wall_s: float = 0.0
    before_backward_s: float = 0.0
    forward_s: float = 0.0
    backward_s: float = 0.0
    outside_backward_s: float = 0.0  # autograd work of no layer (it goes to the fixed costs)
    # the main thread's time in communication ops (DDP's), before the backward and in all:
    # the simulator models communication itself, so it is neither a layer's nor a fixed cost
    comm_before_backward_s: float = 0.0
    comm_s: float = 0.0


def read_kineto(path: str | Path) -> dict[str, Any]:
    """The JSON object of a Kineto trace file (``.json`` or ``.json.gz``); one-line errors."""
    doc = read_json_file(path, error=TraceError)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(
            f"{path}: not a torch.profiler trace (no 'traceEvents' list); write one with "
            "prof.export_chrome_trace(...)"
        )
    return doc


def import_kineto(
    path: str | Path,
    *,
    model: Any = None,
    model_name: str | None = None,
    batch_size: int | None = None,
) -> Trace:
    """The sgdsim trace of a torch.profiler trace file (see the module docstring).

    Parameters
    ----------
    path : the ``export_chrome_trace`` JSON (``.json`` or ``.json.gz``).
    model : optional: a built-in model name, a ``package.module:factory`` path or an
        ``nn.Module``; then the layers' names, parameters and dataflow come from it (torch.fx),
        checked against the layers the trace ran.
    model_name : recorded in the trace (default: the model's, else the profiled root module's
        class).
    batch_size : examples per step (default: the first dimension of the model's input, which
        ``record_shapes=True`` records).

    Raises
    ------
    TraceError : what the trace lacks, naming the file and what to record.
    ConfigError, ProfilingError : a model that cannot be loaded or traced.
    """
    doc = read_kineto(path)
    return kineto_trace(
        doc, source=str(path), model=model, model_name=model_name, batch_size=batch_size
    )


def kineto_trace(
    doc: Mapping[str, Any],
    *,
    source: str = "<kineto>",
    model: Any = None,
    model_name: str | None = None,
    batch_size: int | None = None,
) -> Trace:
    """:func:`import_kineto` of an already parsed trace object."""
    events = _complete_events(doc["traceEvents"], source)
    steps = sorted(
        (e for e in events if STEP_NAME.match(e.name)), key=lambda e: int(e.name.split("#")[1])
    )
    if not steps:
        raise TraceError(
            f"{source}: no ProfilerStep#N annotations; profile with a schedule "
            "(torch.profiler.schedule) and call prof.step() after every training step"
        )
    main_tid = steps[0].tid
    kernels = _kernel_time_by_correlation(events)
    launches = [e for e in events if e.cat in LAUNCH_CATEGORIES and "correlation" in e.args]
    units_of_steps: list[list[_Unit]] = []
    resolved: list[_StepLayers] = []
    for step in steps:
        backward_start = _backward_start(events, step, source)
        units = _forward_units(events, step, backward_start, main_tid, source)
        if units_of_steps and [u.name for u in units] != [u.name for u in units_of_steps[0]]:
            first = [u.name for u in units_of_steps[0]]
            raise TraceError(
                f"{source}: {step.name} ran other layers than {steps[0].name} "
                f"({len(units)} vs {len(first)}: {_first_difference(units, first)}); "
                "the steps of one trace must train the same model"
            )
        units_of_steps.append(units)
        resolved.append(_resolve_step(events, step, backward_start, units, kernels, launches))
    gpu = bool(kernels)
    first_units = units_of_steps[0]
    rename: dict[str, str] = {}
    if model is None:
        layers = _layers_from_trace(first_units, resolved[0], source)
        # the executed order: Kineto records no tensor identities
        inputs = {layers[i].name: [layers[i - 1].name] for i in range(1, len(layers))}
        dag_source = "executed order (a Kineto trace records no tensor identities)"
    else:
        fx_layers = _model_layers(model, first_units, events, source)
        rename = {u.name: fx.name for u, fx in zip(first_units, fx_layers, strict=True)}
        layers = [fx.to_layer() for fx in fx_layers]
        inputs = {fx.name: list(fx.inputs) for fx in fx_layers}
        dag_source = "torch.fx symbolic trace of the model given (forward dataflow)"
    for step_layers in resolved:
        step_layers.forward = {rename.get(k, k): v for k, v in step_layers.forward.items()}
        step_layers.backward = {rename.get(k, k): v for k, v in step_layers.backward.items()}
    ops = with_overhead_ops(ps_step_ops(layers, inputs))
    param_bytes = {layer.name: layer.param_nbytes for layer in layers}
    profiles = tuple(_step_profile(ops, s, param_bytes) for s in resolved)
    root = _root_class(events, steps[0], main_tid)
    batch = batch_size if batch_size is not None else _batch_size(events, steps[0], main_tid)
    if batch is None:
        raise TraceError(
            f"{source}: the batch size is not in the trace (record with record_shapes=True, "
            "or give it: --batch-size)"
        )
    dtypes = sorted({p.dtype for layer in layers for p in layer.params}) or ["float32"]
    name = model_name or (model if isinstance(model, str) and ":" not in model else None) or root
    metadata = TraceMetadata(
        model_name=name,
        batch_size=int(batch),
        device=_device(doc, gpu),
        dtype=dtypes[0] if len(dtypes) == 1 else "mixed",
        framework="torch",
        framework_version=str(doc.get("torchVersion", "unknown (not in the Kineto trace)")),
        profiled_steps=len(profiles),
        warmup_steps=0,
        library_versions={"sgdsim": __version__},
        host={"hostname": str(doc.get("host_name", ""))} if doc.get("host_name") else {},
        profiler={
            "name": "sgdsim.profilers.kineto",
            "version": __version__,
            "source": Path(source).name,
            "timer": "torch.profiler (Kineto)" + (", GPU kernel time" if gpu else ""),
            "dag_source": dag_source,
            "granularity": "leaf nn.Module call or a module's top-level aten op",
            "optimizer": sorted(
                {e.name.split("#", 1)[1] for e in events if e.name.startswith(OPTIMIZER_STEP)}
            ),
            "update": "the optimizer step, split over layers by parameter bytes",
            "communication_s": [round(s.comm_s, ROUND_DIGITS) for s in resolved],
            "steps": [s.name for s in steps],
        },
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        notes=f"imported from the torch.profiler trace {Path(source).name}",
    )
    trace = Trace(metadata, tuple(layers), ops, profiles, SCHEMA_VERSION, source=source)
    return trace_from_dict(trace_to_dict(trace), source=source)


# -- reading events -------------------------------------------------------------------------------


def _complete_events(raw: Sequence[Any], source: str) -> list[_Event]:
    events = []
    for i, e in enumerate(raw):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            events.append(
                _Event(
                    name=str(e["name"]),
                    cat=str(e.get("cat", "")),
                    ts=float(e["ts"]),
                    dur=float(e.get("dur", 0.0)),
                    pid=e.get("pid"),
                    tid=e.get("tid"),
                    args=e.get("args") or {},
                )
            )
        except (KeyError, TypeError, ValueError):
            raise TraceError(
                f"{source}: traceEvents[{i}] is a complete event without a name or a numeric "
                f"ts/dur: {json.dumps(e)[:120]}"
            ) from None
    events.sort(key=lambda e: (e.ts, -e.dur))
    return events


def _kernel_time_by_correlation(events: Sequence[_Event]) -> dict[Any, float]:
    """GPU time (us) of the kernels, copies and sets each launch (correlation id) made; NCCL's
    kernels are communication, which the simulator models itself."""
    out: dict[Any, float] = {}
    for e in events:
        if e.cat in GPU_CATEGORIES and "correlation" in e.args and "nccl" not in e.name.lower():
            key = e.args["correlation"]
            out[key] = out.get(key, 0.0) + e.dur
    return out


def _forward_units(
    events: Sequence[_Event], step: _Event, backward_start: float, main_tid: Any, source: str
) -> list[_Unit]:
    """The step's forward layers in the order they ran."""
    in_forward = [
        e for e in events if e.tid == main_tid and e.ts >= step.ts and e.end <= backward_start
    ]
    modules = [
        e for e in in_forward if e.cat == "python_function" and e.name.startswith(MODULE_PREFIX)
    ]
    if not modules:
        raise TraceError(
            f"{source}: {step.name} has no nn.Module annotations, so its layers cannot be told "
            "apart; profile with with_stack=True and with_modules=True"
        )
    outermost = _outermost(modules)
    leaf_calls = _innermost(modules)
    # The model: the first outermost module call and any later one with modules inside. An
    # outermost call after them with none inside (nn.CrossEntropyLoss()) is the loss's.
    is_leaf = {id(m) for m in leaf_calls}
    model_calls = [m for i, m in enumerate(outermost) if i == 0 or id(m) not in is_leaf]
    model_end = max(m.end for m in model_calls)
    roots = _Spans(model_calls)
    leaves = _Spans([m for m in leaf_calls if m.ts < model_end])
    optimizer = _Spans(
        _outermost(
            [
                e
                for e in in_forward
                if e.cat == "user_annotation" and e.name.startswith("Optimizer.")
            ]
        )
    )
    top_ops = [
        op
        for op in _outermost([e for e in in_forward if e.cat == "cpu_op"])
        if optimizer.find(op) is None
    ]
    units: list[_Unit] = [
        _Unit(m.name.removeprefix(MODULE_PREFIX), _class_of(m.name), True, [m])
        for m in leaves.spans
    ]
    for op in top_ops:
        if leaves.find(op) is None and roots.find(op) is not None:
            short = op.name.split("::")[-1]
            units.append(_Unit(short, short, False, [op]))
    units.sort(key=lambda u: u.start)
    loss_ops = [op for op in top_ops if op.ts >= model_end]
    if loss_ops:
        loss_module = next((m for m in outermost if m.ts >= model_end), None)
        kind = _class_of(loss_module.name) if loss_module else loss_ops[0].name.split("::")[-1]
        units.append(_Unit(LOSS_LAYER, kind, False, loss_ops))
    _unique_names(units)
    return units


def _resolve_step(
    events: Sequence[_Event],
    step: _Event,
    backward_start: float,
    units: Sequence[_Unit],
    kernels: Mapping[Any, float],
    launches: Sequence[_Event],
) -> _StepLayers:
    out = _StepLayers()
    t0, end = step.ts, step.end
    in_step = [e for e in events if e.within(t0, end)]
    gpu = _GpuTime(kernels, [e for e in launches if e.within(t0, end)])

    # DDP's reducer starts its AllReduces from autograd hooks, inside the backward's nodes:
    # that is communication, which the simulator models itself, so it is no layer's time.
    comm = _Spans(_outermost([e for e in in_step if e.cat == "cpu_op" and _is_comm(e.name)]))

    def busy_us(spans: Sequence[_Event]) -> float:
        """A CPU span's time without the communication it started, or on a GPU the time of
        the (non-NCCL) kernels launched inside it."""
        if kernels:
            return gpu.of(spans)
        return sum(s.dur - sum(c.dur for c in comm.inside(s)) for s in spans)

    forward_spans = _Spans([s for u in units for s in u.spans])
    unit_of_span = {id(s): u.name for u in units for s in u.spans}
    layer_of_seq: dict[Any, str] = {}
    for op in in_step:
        seq = op.args.get("Sequence number")
        if op.cat != "cpu_op" or seq is None or op.ts >= backward_start:
            continue
        span = forward_spans.find(op)
        if span is not None:
            layer_of_seq.setdefault(seq, unit_of_span[id(span)])
    for unit in units:
        out.forward[unit.name] = ((unit.start - t0) * US, busy_us(unit.spans) * US)
    nodes = _outermost(
        [e for e in in_step if e.cat == "cpu_op" and e.name.startswith(BACKWARD_PREFIX)]
    )
    accumulate_ops = _Spans([e for e in in_step if e.name == ACCUMULATE_GRAD])
    backward: dict[str, list[_Event]] = {}
    previous: str | None = None
    for node in nodes:
        if node.name.endswith(ACCUMULATE_GRAD):
            layer = previous
            tensor = _accumulated_tensor(node, accumulate_ops)
            if layer is not None and tensor is not None:
                out.params.setdefault(layer, []).append(tensor)
        else:
            layer = layer_of_seq.get(node.args.get("Sequence number"))
            previous = layer
        if layer is None:
            out.outside_backward_s += busy_us([node]) * US
            continue
        backward.setdefault(layer, []).append(node)
    for layer, spans in backward.items():
        out.backward[layer] = ((spans[0].ts - t0) * US, busy_us(spans) * US)
    optimizer = _outermost(
        [e for e in in_step if e.cat == "user_annotation" and e.name.startswith(OPTIMIZER_STEP)]
    )
    out.update_s = busy_us(optimizer) * US
    out.wall_s = step.dur * US
    out.before_backward_s = (backward_start - t0) * US
    on_main = [c for c in comm.spans if c.tid == step.tid]
    out.comm_s = sum(c.dur for c in on_main) * US
    out.comm_before_backward_s = sum(c.dur for c in on_main if c.ts < backward_start) * US
    out.forward_s = (max(s.end for u in units for s in u.spans) - units[0].start) * US
    out.backward_s = (max(n.end for n in nodes) - backward_start) * US
    return out


def _backward_start(events: Sequence[_Event], step: _Event, source: str) -> float:
    for e in events:  # sorted by start
        if e.ts > step.end:
            break
        if e.ts >= step.ts and e.cat == "cpu_op" and e.name.startswith(BACKWARD_PREFIX):
            return e.ts
    raise TraceError(
        f"{source}: {step.name} has no backward pass (no autograd::engine events): an "
        "inference-only trace cannot predict training; profile steps that call loss.backward()"
    )


def _accumulated_tensor(node: _Event, accumulate_ops: _Spans) -> tuple[tuple[int, ...], str] | None:
    """(shape, type) of the gradient an ``AccumulateGrad`` node received, when shapes were
    recorded: the node's own op (nested in the engine's event) carries them."""
    for e in (node, *accumulate_ops.inside(node)):
        dims = e.args.get("Input Dims")
        types = e.args.get("Input type")
        if dims and types and isinstance(dims[0], list):
            return tuple(int(d) for d in dims[0]), str(types[0])
    return None


class _Spans:
    """Events of which no two on one thread overlap, indexed to find the one around another
    event in O(log n): a trace of a large model holds tens of thousands of ops per step."""

    def __init__(self, spans: Sequence[_Event]) -> None:
        self.spans = sorted(spans, key=lambda e: e.ts)
        self._by_tid: dict[Any, tuple[list[float], list[_Event]]] = {}
        for e in self.spans:
            starts, members = self._by_tid.setdefault(e.tid, ([], []))
            starts.append(e.ts)
            members.append(e)

    def find(self, inner: _Event) -> _Event | None:
        """The span that contains ``inner`` (same thread), if any."""
        starts, members = self._by_tid.get(inner.tid, ([], []))
        i = bisect.bisect_right(starts, inner.ts) - 1
        if i >= 0 and _contains(members[i], inner):
            return members[i]
        return None

    def inside(self, outer: _Event) -> list[_Event]:
        """The spans that start inside ``outer`` (same thread)."""
        starts, members = self._by_tid.get(outer.tid, ([], []))
        lo = bisect.bisect_left(starts, outer.ts)
        hi = bisect.bisect_right(starts, outer.end)
        return [m for m in members[lo:hi] if _contains(outer, m)]


class _GpuTime:
    """The GPU time of the kernels that CPU spans launched (by correlation id)."""

    def __init__(self, kernels: Mapping[Any, float], launches: Sequence[_Event]) -> None:
        self.kernels = kernels
        self.launches = _Spans(launches)

    def of(self, spans: Sequence[_Event]) -> float:
        return sum(
            self.kernels.get(launch.args["correlation"], 0.0)
            for span in spans
            for launch in self.launches.inside(span)
        )


def _outermost(events: Sequence[_Event]) -> list[_Event]:
    """The events no other of ``events`` on their thread contains (start order)."""
    out: list[_Event] = []
    last_end: dict[Any, float] = {}
    for e in sorted(events, key=lambda e: (e.ts, -e.dur)):
        if e.end <= last_end.get(e.tid, float("-inf")):
            continue  # inside the last outermost event of its thread
        out.append(e)
        last_end[e.tid] = e.end
    return out


def _innermost(events: Sequence[_Event]) -> list[_Event]:
    """The events that contain no other of ``events`` on their thread (start order): properly
    nested events, so an event holds another exactly when its thread's next one starts inside it."""
    ordered = sorted(events, key=lambda e: (e.ts, -e.dur))
    out = []
    for i, e in enumerate(ordered):
        after = next((o for o in ordered[i + 1 :] if o.tid == e.tid), None)
        if after is None or not _contains(e, after):
            out.append(e)
    return out


# -- layers ---------------------------------------------------------------------------------------


def _layers_from_trace(units: Sequence[_Unit], first: _StepLayers, source: str) -> list[Layer]:
    layers = []
    for unit in units:
        tensors = []
        for i, (shape, type_name) in enumerate(first.params.get(unit.name, ())):
            if type_name not in ELEMENT_BYTES:
                raise TraceError(
                    f"{source}: layer {unit.name}: parameter type {type_name!r} is not one "
                    f"sgdsim knows ({', '.join(ELEMENT_BYTES)}); give the model (--model-path)"
                )
            dtype, size = ELEMENT_BYTES[type_name]
            count = 1
            for d in shape:
                count *= d
            tensors.append(ParamTensor(f"{unit.name}.param{i}", shape, dtype, count * size))
        layers.append(Layer(unit.name, unit.module_type, tuple(tensors)))
    if not any(layer.params for layer in layers):
        raise TraceError(
            f"{source}: no parameter shapes in the trace (its AccumulateGrad ops carry no "
            "'Input Dims'); profile with record_shapes=True, or give the model (--model-path)"
        )
    return layers


def _model_layers(
    model: Any, units: Sequence[_Unit], events: Sequence[_Event], source: str
) -> list[Any]:
    """The model's torch.fx layers, checked one by one against the layers the trace ran."""
    from profilers.layer_profiler import model_layers  # torch: only on this path

    shape = _input_dims(events, units[0].spans[0])  # the model's input, as its first layer got it
    fx_layers, label = model_layers(model, None if shape is None else tuple(shape[1:]))
    if len(fx_layers) != len(units):
        raise TraceError(
            f"{source}: the trace ran {len(units)} layers, model {label} has {len(fx_layers)} "
            f"({_first_difference(units, [layer.name for layer in fx_layers])}); is it the "
            "model that was profiled?"
        )
    for i, (unit, fx_layer) in enumerate(zip(units, fx_layers, strict=True)):
        if unit.is_module and unit.module_type != fx_layer.module_type:
            raise TraceError(
                f"{source}: layer {i} of the trace is a {unit.module_type} ({unit.name}), of "
                f"model {label} a {fx_layer.module_type} ({fx_layer.name}); is it the model "
                "that was profiled?"
            )
    return list(fx_layers)


def _step_profile(
    ops: Sequence[Any], step: _StepLayers, param_bytes: Mapping[str, int]
) -> StepProfile:
    total_bytes = sum(param_bytes.values())
    durations: list[float | None] = []
    starts: list[float | None] = []
    for op in ops:
        start: float | None = None
        duration: float | None = None
        if op.kind is OpKind.FORWARD:
            start, duration = step.forward.get(op.layer, (None, 0.0))
        elif op.kind is OpKind.BACKWARD:
            start, duration = step.backward.get(op.layer, (None, 0.0))
        elif op.kind is OpKind.UPDATE:
            duration = step.update_s * param_bytes[op.layer] / total_bytes if total_bytes else 0.0
        elif is_overhead(op):
            duration = 0.0  # below
        durations.append(None if duration is None else round(max(duration, 0.0), ROUND_DIGITS))
        starts.append(None if start is None else round(start, ROUND_DIGITS))
    wall = round(step.wall_s, ROUND_DIGITS)
    # as the profiler splits the fixed costs, from the step's time outside communication
    fill_overhead(
        ops,
        durations,
        wall - step.comm_s,
        step.before_backward_s - step.comm_before_backward_s,
        ROUND_DIGITS,
    )
    return StepProfile(
        duration_s=tuple(durations),
        start_s=tuple(starts),
        forward_s=round(step.forward_s, ROUND_DIGITS),
        backward_s=round(step.backward_s, ROUND_DIGITS),
        update_s=round(step.update_s, ROUND_DIGITS),
        wall_s=wall,
    )


# -- small helpers --------------------------------------------------------------------------------


def _contains(outer: _Event, inner: _Event) -> bool:
    return outer.tid == inner.tid and outer.ts <= inner.ts and inner.end <= outer.end


def _is_comm(name: str) -> bool:
    """A communication op as torch.distributed records it on the CPU."""
    return name.startswith(COMM_OP_PREFIXES)


def _class_of(module_event_name: str) -> str:
    """``nn.Module: Conv2d_3`` -> ``Conv2d`` (Kineto numbers the instances of each class)."""
    return re.sub(r"_\d+$", "", module_event_name.removeprefix(MODULE_PREFIX))


def _unique_names(units: Sequence[_Unit]) -> None:
    """Repeated names get ``_1``, ``_2``... in the order they ran, as torch.fx names nodes."""
    seen: dict[str, int] = {}
    for unit in units:
        count = seen.get(unit.name, 0)
        seen[unit.name] = count + 1
        if count:
            unit.name = f"{unit.name}_{count}"


def _first_difference(units: Sequence[_Unit], names: Sequence[str]) -> str:
    for i, (unit, name) in enumerate(zip(units, names, strict=False)):
        if unit.name != name:
            return f"first difference at layer {i}: {unit.name} vs {name}"
    return f"the first {min(len(units), len(names))} agree"


def _root_class(events: Sequence[_Event], step: _Event, main_tid: Any) -> str:
    """The profiled model's class: the outermost module call, inside a DDP-like wrapper."""
    for e in events:
        in_step = e.tid == main_tid and e.within(step.ts, step.end)
        if in_step and e.name.startswith(MODULE_PREFIX) and _class_of(e.name) not in WRAPPERS:
            return _class_of(e.name)
    return "model"


def _input_dims(events: Sequence[_Event], first: _Event) -> list[int] | None:
    """The shape of the input of the module call ``first``: the first input of its first op."""
    for e in events:
        if e.cat == "cpu_op" and e.tid == first.tid and e.within(first.ts, first.end):
            dims = e.args.get("Input Dims")
            if dims and isinstance(dims[0], list) and dims[0]:
                return [int(d) for d in dims[0]]
    return None


def _batch_size(events: Sequence[_Event], step: _Event, main_tid: Any) -> int | None:
    modules = [
        e
        for e in events
        if e.tid == main_tid and e.within(step.ts, step.end) and e.name.startswith(MODULE_PREFIX)
    ]
    dims = _input_dims(events, modules[0]) if modules else None
    return dims[0] if dims else None


def _device(doc: Mapping[str, Any], gpu: bool) -> str:
    if not gpu:
        return "cpu"
    props = doc.get("deviceProperties") or []
    if props and isinstance(props[0], dict) and props[0].get("name"):
        return f"cuda ({props[0]['name']})"
    return "cuda"
