"""Per-layer profiling of one worker's SGD step on a real PyTorch model.

How a step is measured (TPDS'22 section 2.2.1):

- **Dataflow.** ``torch.fx`` traces the model once; its call nodes are the trace's layers and its
  edges the real dataflow, so residual joins and parallel branches appear as they are.
- **Forward.** An ``fx.Interpreter`` runs the graph node by node and timestamps each call; the
  loss (cross entropy on synthetic labels) is the last layer.
- **Backward.** Every autograd node that a layer's forward created is found by walking its output's
  ``grad_fn`` graph (stopping at nodes an earlier layer created, so in-place ops are attributed to
  the layer that ran them); a pre-hook and a post-hook on each autograd node timestamp it while
  ``loss.backward()`` runs. A layer's backward time is the sum over its autograd nodes (their
  ``AccumulateGrad`` nodes included), which stays right when autograd interleaves layers.
- **Update.** One ``torch.optim.SGD`` (momentum 0.9) per parameterized layer is stepped and timed
  layer by layer: the measured cost of applying that layer's gradients, which the simulator
  charges to the parameter server.

Per-op sums cover most but not all of each phase's wall time: the interpreter's bookkeeping between
nodes, hook calls and (on CPU) autograd's scheduling fall between ops. The trace keeps both, and
the tests check the coverage (see ``tests/test_profiler.py``).

- **Fixed costs.** Each step's wall time is measured too, from before zeroing the gradients to
  after the last update, and what no layer's op covers becomes the step's two fixed-cost ops
  (``simcore.trace.overhead``): ``overhead:begin``, the time before the backward pass outside the
  forward ops, and ``overhead:end``, the rest. Together they equal the wall time minus the sum of
  the step's forward, backward and update ops. The wall includes the profiler's own
  instrumentation (timed interpreter, hooks), which the distributed runner carries as well.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

from profilers import models
from profilers.clocks import Clock, CpuClock, clock_for
from profilers.dataflow import (
    CALL_OPS,
    LayerNode,
    layer_inputs,
    layer_nodes,
    tensors_in,
    trace_graph,
)
from profilers.synthetic import probe_inputs, synthetic_inputs, token_vocab
from simcore import __version__
from simcore.errors import ConfigError, ProfilingError
from simcore.trace.build import ps_step_ops
from simcore.trace.model import SCHEMA_VERSION, OpKind, StepProfile, Trace, TraceMetadata
from simcore.trace.overhead import fill_overhead, is_overhead, with_overhead_ops
from simcore.trace.parse import trace_from_dict, trace_to_dict

Progress = Callable[[int, int], None]
ModelArg = str | nn.Module | Callable[[], nn.Module]

LOSS_LAYER = "loss"
LEARNING_RATE = 0.01
MOMENTUM = 0.9
ROUND_DIGITS = 9  # timestamps are kept to the nanosecond; finer digits are noise


@dataclass
class StepMarks:
    """Raw clock marks of one step, resolved into seconds after the step."""

    step_start: Any = None  # before zeroing the gradients: the step's wall time starts here
    cpu_start: float = 0.0  # the process's CPU time (every thread) there, and at the step's end
    cpu_end: float = 0.0
    start: Any = None  # the forward phase's start: op start times are relative to it
    forward_end: Any = None
    backward_start: Any = None
    backward_end: Any = None
    update_start: Any = None
    update_end: Any = None
    forward: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    backward: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)
    update: dict[str, tuple[Any, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class _StepTimes:
    """One step in seconds: per-layer (start, duration) per phase, and the phase wall times."""

    forward: dict[str, tuple[float, float]]
    backward: dict[str, tuple[float, float]]
    update: dict[str, tuple[float, float]]
    forward_s: float
    backward_s: float
    update_s: float
    wall_s: float  # the whole step
    before_backward_s: float  # from the step's start to the backward phase's start
    # The process's CPU time over the step, every thread's (on CPU: what torch's intra-op
    # threads used beside the wall time); None on a GPU, where the host's CPU is not the work.
    cpu_s: float | None = None


class TimedInterpreter(fx.Interpreter):
    """Runs the traced graph, timestamping each call node and keeping its output's grad_fns."""

    def __init__(self, gm: fx.GraphModule, clock: Clock, marks: StepMarks) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self.clock = clock
        self.marks = marks
        self.roots: dict[str, list[Any]] = {}  # node -> grad_fns of the tensors it returned
        self.tensor_nodes: list[str] = []

    def run_node(self, n: fx.Node) -> Any:
        if n.op not in CALL_OPS:
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        call = getattr(self, n.op)
        start = self.clock.mark()
        result = call(n.target, args, kwargs)
        self.marks.forward[n.name] = (start, self.clock.mark())
        tensors = tensors_in(result)
        if tensors:
            self.tensor_nodes.append(n.name)
            # Only the grad_fn is kept now: an in-place op later in the graph replaces the
            # tensor's grad_fn, which would misattribute it.
            self.roots[n.name] = [t.grad_fn for t in tensors if t.grad_fn is not None]
        return result


def attribute_grad_fns(order: Sequence[str], roots: Mapping[str, list[Any]]) -> dict[Any, str]:
    """Autograd node -> the layer whose forward created it (walking layers in execution order)."""
    owner: dict[Any, str] = {}
    for name in order:
        stack = list(roots.get(name, ()))
        while stack:
            fn = stack.pop()
            if fn is None or fn in owner:
                continue
            owner[fn] = name
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return owner


def hook_backward(owner: Mapping[Any, str], clock: Clock, marks: StepMarks) -> list[Any]:
    """Timestamp every autograd node of every layer; returns the hook handles to remove."""
    handles = []
    for fn, name in owner.items():
        spans = marks.backward.setdefault(name, [])
        pending: list[Any] = []

        def pre(_grad_out: Any, pending: list[Any] = pending) -> None:
            pending.append(clock.mark())

        def post(
            _grad_in: Any, _grad_out: Any, pending: list[Any] = pending, spans: list[Any] = spans
        ) -> None:
            spans.append((pending.pop(), clock.mark()))

        handles.append(fn.register_prehook(pre))
        handles.append(fn.register_hook(post))
    return handles


@dataclass
class _Session:
    """Everything that stays the same from step to step."""

    model: nn.Module
    gm: fx.GraphModule
    clock: Clock
    inputs: torch.Tensor
    labels: torch.Tensor
    layers: list[LayerNode] = field(default_factory=list)
    optimizers: dict[str, torch.optim.Optimizer] = field(default_factory=dict)

    def run_step(self) -> _StepTimes:
        marks = StepMarks()
        clock = self.clock
        marks.cpu_start = time.process_time()
        marks.step_start = clock.mark()
        self.model.zero_grad(set_to_none=True)
        interpreter = TimedInterpreter(self.gm, clock, marks)
        marks.start = clock.mark()
        output = interpreter.run(self.inputs)
        loss_start = clock.mark()
        loss = F.cross_entropy(output, self.labels)
        marks.forward[LOSS_LAYER] = (loss_start, clock.mark())
        marks.forward_end = clock.mark()
        if not self.layers:
            self._learn_layers(interpreter.tensor_nodes)
        order = [layer.name for layer in self.layers]
        roots = {**interpreter.roots, LOSS_LAYER: [loss.grad_fn]}
        handles = hook_backward(attribute_grad_fns(order, roots), clock, marks)
        del output, interpreter, roots
        try:
            marks.backward_start = clock.mark()
            torch.autograd.backward(loss)
            marks.backward_end = clock.mark()
        finally:
            for handle in handles:
                handle.remove()
        marks.update_start = clock.mark()
        # Gradients reach the server last layer first, so updates are applied in that order.
        for name, optimizer in reversed(self.optimizers.items()):
            start = clock.mark()
            optimizer.step()
            marks.update[name] = (start, clock.mark())
        marks.update_end = clock.mark()
        marks.cpu_end = time.process_time()
        clock.finish()
        return self._resolve(marks)

    def _learn_layers(self, tensor_nodes: Sequence[str]) -> None:
        """Fix the layers from the first run (which nodes return tensors), then the optimizers."""
        output = next(n for n in reversed(self.gm.graph.nodes) if n.op == "output")
        loss_inputs = tuple(layer_inputs(output, set(tensor_nodes)))
        self.layers = [
            *layer_nodes(self.gm, tensor_nodes),
            LayerNode(LOSS_LAYER, "cross_entropy", loss_inputs, ()),
        ]
        for layer in self.layers:
            if layer.params:
                params = [p for _, p in layer.params]
                self.optimizers[layer.name] = torch.optim.SGD(
                    params, lr=LEARNING_RATE, momentum=MOMENTUM
                )

    def _resolve(self, marks: StepMarks) -> _StepTimes:
        clock, t0 = self.clock, marks.start

        def span(pair: tuple[Any, Any]) -> tuple[float, float]:
            return clock.seconds(t0, pair[0]), clock.seconds(pair[0], pair[1])

        backward = {}
        for name, spans in marks.backward.items():
            if spans:
                starts = [clock.seconds(t0, a) for a, _ in spans]
                backward[name] = (min(starts), sum(clock.seconds(a, b) for a, b in spans))
        return _StepTimes(
            forward={name: span(pair) for name, pair in marks.forward.items()},
            backward=backward,
            update={name: span(pair) for name, pair in marks.update.items()},
            forward_s=clock.seconds(t0, marks.forward_end),
            backward_s=clock.seconds(marks.backward_start, marks.backward_end),
            update_s=clock.seconds(marks.update_start, marks.update_end),
            wall_s=clock.seconds(marks.step_start, marks.update_end),
            before_backward_s=clock.seconds(marks.step_start, marks.backward_start),
            cpu_s=marks.cpu_end - marks.cpu_start if isinstance(clock, CpuClock) else None,
        )


def profile_model(
    model: ModelArg,
    *,
    batch_size: int = 32,
    steps: int = 20,
    warmup: int = 5,
    device: str = "cpu",
    input_shape: Sequence[int] | None = None,
    num_classes: int | None = None,
    model_name: str | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    threads: int | None = None,
) -> Trace:
    """Profile ``steps`` SGD steps (after ``warmup`` discarded ones) of a model on one worker.

    Parameters
    ----------
    model : a built-in model name (``profilers.models.MODELS``), an ``nn.Module``, or a
        zero-argument factory returning one. A user model may carry ``input_shape`` and
        ``num_classes``.
    batch_size, steps, warmup : examples per step, profiled steps kept, warm-up steps discarded.
    device : ``cpu`` or ``cuda[:N]``; on CUDA every op is timed with CUDA events.
    input_shape : one example's shape without the batch dimension (overrides the model's own).
    num_classes : classes of the synthetic labels (default: the model's output size).
    model_name : recorded in the trace (default: the built-in name or the class name).
    seed : seeds the model's initialization (built-in models) and the synthetic batch.
    progress : called as ``progress(done, total)`` after every step.
    threads : torch's intra-op threads while profiling (``torch.set_num_threads``, restored
        afterwards; recorded as the trace's ``host.torch_threads``); None = torch's default.
        A worker that will share a host's cores with others should be profiled with the
        threads it will have there: its ops' durations depend on them.

    Returns
    -------
    A validated :class:`~simcore.trace.model.Trace` with every profiled step.

    Raises
    ------
    ConfigError : a bad argument (named), an unusable device, a model without an input shape.
    ProfilingError : the model cannot be traced by torch.fx or does not train as a classifier.
    """
    _check_counts(batch_size=batch_size, steps=steps, warmup=warmup)
    if threads is not None:
        _check_counts(threads=threads)
    torch_device = _device(device)
    with _torch_threads(threads):  # the whole profile, the model's first run included
        torch.manual_seed(seed)
        module, name, shape, classes = _resolve_model(model, model_name, input_shape, num_classes)
        module.to(torch_device).train()
        gm = trace_graph(module, name)
        generator = torch.Generator().manual_seed(seed)
        vocab = token_vocab(gm)
        inputs = synthetic_inputs(batch_size, shape, vocab, generator).to(torch_device)
        classes = classes or _output_classes(gm, inputs, name)
        labels = torch.randint(0, classes, (batch_size,), generator=generator).to(torch_device)
        session = _Session(module, gm, clock_for(torch_device), inputs, labels)
        total = warmup + steps
        measured = []
        for i in range(total):
            try:
                times = session.run_step()
            except (RuntimeError, ValueError, TypeError, IndexError) as err:
                first_line = (str(err).strip().splitlines() or [type(err).__name__])[0]
                raise ProfilingError(
                    f"model {name!r}: a training step failed on input {batch_size}x"
                    f"{'x'.join(map(str, shape))}: {first_line}"
                ) from err
            if i >= warmup:
                measured.append(times)
            if progress is not None:
                progress(i + 1, total)
        return _build_trace(session, measured, name, batch_size, warmup, torch_device, shape, seed)


def model_layers(
    model: ModelArg, input_shape: Sequence[int] | None = None
) -> tuple[list[LayerNode], str]:
    """The layers ``profile_model`` would time for ``model`` (torch.fx call nodes that return
    tensors, then ``loss``), with their dataflow and parameters, found by running the graph once
    on one example of ``input_shape`` (default: the model's own); and the model's name.

    For traces made elsewhere (:mod:`profilers.kineto`): the names, parameters and DAG of the
    model they profiled.
    """
    module, name, shape, _ = _resolve_model(model, None, input_shape, None)
    module.eval()  # one example through batch norm: eval mode takes it, the layers are the same
    gm = trace_graph(module, name)
    interpreter = TimedInterpreter(gm, clock_for(torch.device("cpu")), StepMarks())
    with torch.no_grad():
        interpreter.run(probe_inputs(shape, token_vocab(gm)))
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    tensor_nodes = interpreter.tensor_nodes
    loss_inputs = tuple(layer_inputs(output, set(tensor_nodes)))
    layers = [
        *layer_nodes(gm, tensor_nodes),
        LayerNode(LOSS_LAYER, "cross_entropy", loss_inputs, ()),
    ]
    return layers, name


@contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op threads set to ``threads`` inside (None: left as they are), restored
    after: the setting is the process's, and a library call must not leave it changed."""
    if threads is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _check_counts(**counts: int) -> None:
    minimum = {"batch_size": 1, "steps": 1, "warmup": 0, "threads": 1}
    for key, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum[key]:
            option = "--" + key.replace("_", "-")
            raise ConfigError(f"{option}: must be an integer >= {minimum[key]}, got {value!r}")


def _device(device: str) -> torch.device:
    try:
        parsed = torch.device(device)
    except RuntimeError as err:
        raise ConfigError(f"--device: {device!r} is not a device; use cpu or cuda[:N]") from err
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"--device: {device!r} requested, but this torch sees no CUDA GPU")
        index = parsed.index or 0
        if index >= torch.cuda.device_count():
            raise ConfigError(
                f"--device: {device!r}: only {torch.cuda.device_count()} CUDA device(s) here"
            )
    elif parsed.type != "cpu":
        raise ConfigError(f"--device: {device!r} is not supported; use cpu or cuda[:N]")
    return parsed


def _resolve_model(
    model: ModelArg,
    model_name: str | None,
    input_shape: Sequence[int] | None,
    num_classes: int | None,
) -> tuple[nn.Module, str, tuple[int, ...], int | None]:
    """The module to profile, its name, one example's shape and the label classes (if known)."""
    if isinstance(model, str):
        spec = models.get_spec(model)
        module = models.build_model(model, num_classes)
        shape = tuple(input_shape) if input_shape else spec.input_shape
        return module, model_name or spec.name, shape, num_classes or spec.num_classes
    module = model if isinstance(model, nn.Module) else models.instantiate(model)
    name = model_name or type(module).__name__
    shape_attr = getattr(module, "input_shape", None)
    if input_shape:
        shape = tuple(input_shape)
    elif shape_attr is not None:
        shape = tuple(int(d) for d in shape_attr)
    else:
        raise ConfigError(
            f"--input-shape: required for model {name!r} (it has no `input_shape` attribute); "
            "give one example's shape without the batch dimension, e.g. 3x224x224"
        )
    return module, name, shape, num_classes or getattr(module, "num_classes", None)


def _output_classes(gm: fx.GraphModule, inputs: torch.Tensor, name: str) -> int:
    """The number of classes a classifier outputs (its output's last dimension)."""
    with torch.no_grad():
        output = gm(inputs[:1])
    if not isinstance(output, torch.Tensor) or output.dim() != 2:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ProfilingError(
            f"model {name!r}: output {shape} is not (batch, classes); the profiler trains it "
            "as a classifier with cross entropy"
        )
    return int(output.shape[1])


def _build_trace(
    session: _Session,
    measured: Sequence[_StepTimes],
    name: str,
    batch_size: int,
    warmup: int,
    device: torch.device,
    shape: tuple[int, ...],
    seed: int,
) -> Trace:
    layers = [layer.to_layer() for layer in session.layers]
    ops = with_overhead_ops(
        ps_step_ops(layers, {layer.name: layer.inputs for layer in session.layers})
    )
    steps = tuple(_step_profile(ops, times) for times in measured)
    metadata = TraceMetadata(
        model_name=name,
        batch_size=batch_size,
        device=str(device),
        dtype=_dtype(session.model),
        framework="torch",
        framework_version=torch.__version__,
        profiled_steps=len(steps),
        warmup_steps=warmup,
        library_versions=_library_versions(),
        host=_host(device),
        profiler=_profiler_settings(session.clock, shape, seed),
        created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        notes=f"synthetic batch of shape {batch_size}x{'x'.join(map(str, shape))}, "
        f"the same batch every step",
    )
    trace = Trace(metadata, tuple(layers), ops, steps, SCHEMA_VERSION, source=f"<profile {name}>")
    # Round-trip through the validator: a profiled trace obeys the same rules as a file.
    return trace_from_dict(trace_to_dict(trace), source=f"<profile {name}>")


def _step_profile(ops: Sequence[Any], times: _StepTimes) -> StepProfile:
    by_kind = {
        OpKind.FORWARD: times.forward,
        OpKind.BACKWARD: times.backward,
        OpKind.UPDATE: times.update,
    }
    durations: list[float | None] = []
    starts: list[float | None] = []
    for op in ops:
        if is_overhead(op):  # filled in below, from the other ops' rounded durations
            durations.append(0.0)
            starts.append(None)
            continue
        table = by_kind.get(op.kind)
        if table is None:  # communication: derived from bytes and bandwidth by the simulator
            durations.append(None)
            starts.append(None)
            continue
        start, duration = table.get(op.layer, (None, 0.0))  # no autograd node: no backward
        durations.append(round(max(duration, 0.0), ROUND_DIGITS))
        starts.append(None if start is None else round(start, ROUND_DIGITS))
    wall_s = round(times.wall_s, ROUND_DIGITS)
    fill_overhead(
        ops, durations, wall_s, round(times.before_backward_s, ROUND_DIGITS), ROUND_DIGITS
    )
    return StepProfile(
        duration_s=tuple(durations),
        start_s=tuple(starts),
        forward_s=round(times.forward_s, ROUND_DIGITS),
        backward_s=round(times.backward_s, ROUND_DIGITS),
        update_s=round(times.update_s, ROUND_DIGITS),
        wall_s=wall_s,
        cpu_s=None if times.cpu_s is None else round(max(times.cpu_s, 0.0), ROUND_DIGITS),
    )


def _dtype(model: nn.Module) -> str:
    dtypes = {str(p.dtype).removeprefix("torch.") for p in model.parameters()}
    return dtypes.pop() if len(dtypes) == 1 else ",".join(sorted(dtypes)) or "none"


def _library_versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
    }


def _host(device: torch.device) -> dict[str, Any]:
    host: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": _cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        host["gpu"] = torch.cuda.get_device_name(device)
    return host


def _cpu_count() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _profiler_settings(clock: Clock, shape: tuple[int, ...], seed: int) -> dict[str, Any]:
    return {
        "name": "sgdsim.profilers.layer_profiler",
        "version": __version__,
        "timer": clock.name,
        "dag_source": "torch.fx symbolic trace (forward dataflow) + autograd graph (backward ops)",
        "granularity": "fx call node",
        "loss": "cross_entropy",
        "optimizer": f"SGD(lr={LEARNING_RATE}, momentum={MOMENTUM}), stepped per layer",
        "input_shape": list(shape),
        "seed": seed,
        "python": sys.version.split()[0],
    }
