"""A worker rank: per-layer pulls, timed forward and backward, per-layer pushes or all-reduces.

One step of a parameter-server worker (TPDS'22 Alg. 1, section 4.1):

1. post one asynchronous receive per parameterized layer, from the server that holds it (the tag
   is the layer's index);
2. run the forward pass node by node (an ``fx.Interpreter``, timed per node as the per-layer
   profiler does). ``strict``: every pull is awaited first. ``layerwise``: a layer waits only for
   its own pull, just before it runs;
3. run the backward pass, timed per layer by hooks on its autograd nodes. ``layerwise``: a hook on
   each parameter's gradient accumulation sends a layer's gradients the moment its last parameter
   has one. ``strict``: all gradients are sent after the backward pass, last layer first;
4. wait for every send to complete: the step ends.

A ring-AllReduce worker has no pulls; it all-reduces each layer's gradients instead of pushing
them, then averages and applies them with a local SGD step per layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.fx as fx
import torch.nn.functional as F

from profilers.clocks import Clock
from profilers.dataflow import CALL_OPS
from profilers.distributed.config import Overlap, RunConfig
from profilers.distributed.records import Span, StepRecord
from profilers.distributed.task import ModelSetup, ParamLayer, synthetic_batch
from profilers.distributed.watch import Issuer, Watcher
from profilers.layer_profiler import (
    LOSS_LAYER,
    StepMarks,
    TimedInterpreter,
    attribute_grad_fns,
    hook_backward,
)

__all__ = [
    "BATCH_POOL",
    "WorkerLoop",
    "batch_index",
    "record_compute_spans",
    "timed_loss_and_backward",
]

# Batches are made before the run, outside the timed steps, and reused: step n uses batch
# n % BATCH_POOL. Making a 32x3x224x224 batch takes tens of ms, which would otherwise be counted
# as part of the step; a pool bounds the memory (4 ImageNet batches of 32: 77 MB per worker).
BATCH_POOL = 4


def batch_index(step: int) -> int:
    """Which pooled batch a step trains on."""
    return step % BATCH_POOL


class _GatedInterpreter(TimedInterpreter):
    """The profiler's timed interpreter, calling ``before(node_name)`` before each call node."""

    def __init__(
        self, gm: fx.GraphModule, clock: Clock, marks: StepMarks, before: Callable[[str], None]
    ) -> None:
        super().__init__(gm, clock, marks)
        self.before = before

    def run_node(self, n: fx.Node) -> Any:
        if n.op in CALL_OPS:
            self.before(n.name)
        return super().run_node(n)


@dataclass
class _StepState:
    """What one step has in flight: receive buffers, sent tensors and their issue times (s)."""

    step: int
    pull_bufs: dict[int, torch.Tensor] = field(default_factory=dict)
    pull_posted: dict[int, float] = field(default_factory=dict)
    loaded: set[int] = field(default_factory=set)
    sent: dict[int, torch.Tensor] = field(default_factory=dict)  # kept alive until complete
    sent_at: dict[int, float] = field(default_factory=dict)
    # Seconds spent issuing each layer's push from inside its autograd hook: not backward work.
    send_call_s: dict[str, float] = field(default_factory=dict)


class WorkerLoop:
    """Runs worker ``worker`` (global rank ``rank``) for ``config.steps`` steps.

    ``owners[i]`` is the global rank of the server holding parameterized layer ``i`` (PS only).
    """

    def __init__(
        self,
        config: RunConfig,
        setup: ModelSetup,
        rank: int,
        worker: int,
        owners: dict[int, int],
        clock: Clock,
    ) -> None:
        self.config, self.setup, self.rank, self.worker = config, setup, rank, worker
        self.owners, self.clock = owners, clock
        self.spans: list[Span] = []
        self.steps: list[StepRecord] = []
        self.by_node = {layer.name: layer for layer in setup.param_layers}
        self.ps = config.architecture.uses_servers
        self.layerwise = config.overlap is Overlap.LAYERWISE
        timeout = config.timeout_s
        # One watcher per connection and direction (ring AllReduce: one, keyed -1), since
        # transfers on one connection complete in order.
        servers = sorted(set(owners.values())) if self.ps else []
        self.pull_watch = {
            s: Watcher(f"worker {worker}: pulls from rank {s}", timeout) for s in servers
        }
        self.send_watch = {
            s: Watcher(f"worker {worker}: pushes to rank {s}", timeout) for s in servers
        } or {-1: Watcher(f"worker {worker}: all-reduces", timeout)}
        self.issuer = Issuer(f"worker {worker}: sends", timeout)
        self.optimizers = self._local_optimizers()
        self.batches = [
            tuple(
                t.to(setup.device)
                for t in synthetic_batch(setup, config.seed, worker, b, config.batch_size)
            )
            for b in range(min(BATCH_POOL, config.steps))
        ]
        self.state: _StepState | None = None
        self._remaining: dict[int, int] = {}
        self._hooks = [
            p.register_post_accumulate_grad_hook(lambda _p, layer=layer: self._grad_ready(layer))
            for layer in setup.param_layers
            for p in layer.params
        ]

    def _local_optimizers(self) -> dict[int, torch.optim.Optimizer]:
        if self.ps:
            return {}
        return {
            layer.index: torch.optim.SGD(
                layer.params, lr=self.config.lr, momentum=self.config.momentum
            )
            for layer in self.setup.param_layers
        }

    def run(self, progress: Callable[[int], None]) -> None:
        """All steps; ``progress(step)`` after each. Closes the watcher threads at the end."""
        try:
            if not self.ps:
                for layer in self.setup.param_layers:  # start from identical parameters
                    for p in layer.params:
                        dist.broadcast(p.data, src=0)
            for step in range(self.config.steps):
                self._step(step)
                progress(step)
        finally:
            for hook in self._hooks:
                hook.remove()
            self.issuer.close()
            for watcher in (*self.pull_watch.values(), *self.send_watch.values()):
                watcher.close()

    # --- one step --------------------------------------------------------------------------------

    def _step(self, step: int) -> None:
        state = self.state = _StepState(step)
        cpu0 = time.process_time()  # the whole process: the communication threads' work too
        t0 = time.perf_counter()
        if self.ps:
            self._post_pulls(state)
            if not self.layerwise:
                for layer in self.setup.param_layers:
                    self._load(state, layer)
        self._remaining = {layer.index: len(layer.params) for layer in self.setup.param_layers}
        inputs, labels = self.batches[batch_index(step)]
        marks, loss = self._compute(state, inputs, labels)
        for layer in reversed(self.setup.param_layers):  # strict, or a layer without gradients
            if layer.index not in state.sent:
                self._send(state, layer)
        self._finish_sends(state)
        end = time.perf_counter()
        cpu_s = time.process_time() - cpu0
        self.state = None
        record_compute_spans(
            self.spans, self.rank, self.worker, step, t0, self.clock, marks, state.send_call_s
        )
        self.steps.append(StepRecord(self.worker, step, t0, end, loss, cpu_s))

    def _post_pulls(self, state: _StepState) -> None:
        for layer in self.setup.param_layers:
            buf = torch.empty(layer.numel, dtype=layer.params[0].dtype)
            owner = self.owners[layer.index]
            state.pull_posted[layer.index] = time.perf_counter()
            work = dist.irecv(buf, src=owner, tag=layer.index)
            state.pull_bufs[layer.index] = buf
            self.pull_watch[owner].add(layer.index, work)

    def _load(self, state: _StepState, layer: ParamLayer) -> None:
        """Wait for ``layer``'s pull (once per step), copy it in and record its span."""
        if layer.index in state.loaded:
            return
        end = self.pull_watch[self.owners[layer.index]].wait(layer.index)
        layer.load_params(state.pull_bufs.pop(layer.index))
        state.loaded.add(layer.index)
        start = state.pull_posted[layer.index]
        self.spans.append(
            Span(self.rank, self.worker, state.step, layer.name, "pull", start, end - start)
        )

    def _before_node(self, name: str) -> None:
        layer = self.by_node.get(name)
        if layer is not None and self.ps and self.state is not None:
            self._load(self.state, layer)

    def _compute(
        self, state: _StepState, inputs: torch.Tensor, labels: torch.Tensor
    ) -> tuple[StepMarks, float]:
        """Forward and backward with per-layer marks; gradients go out as hooks see them ready."""
        setup, clock = self.setup, self.clock
        marks = StepMarks()
        setup.module.zero_grad(set_to_none=True)
        interpreter = _GatedInterpreter(setup.gm, clock, marks, self._before_node)
        marks.start = clock.mark()
        output = interpreter.run(inputs)
        return marks, timed_loss_and_backward(setup, clock, marks, interpreter, output, labels)

    def _grad_ready(self, layer: ParamLayer) -> None:
        """Autograd hook: one parameter of ``layer`` has its gradient; send when all have."""
        self._remaining[layer.index] -= 1
        if self._remaining[layer.index] == 0 and self.layerwise and self.state is not None:
            start = time.perf_counter()
            self._send(self.state, layer)
            # This runs inside the layer's AccumulateGrad node, whose timing would count copying
            # the gradients for the push as backward computation: note it to take it out.
            self.state.send_call_s[layer.name] = time.perf_counter() - start

    def _send(self, state: _StepState, layer: ParamLayer) -> None:
        """Copy ``layer``'s gradients and queue their push (or all-reduce) on the issuer."""
        flat = layer.flat_grads()
        if self.ps and flat.device.type != "cpu":
            flat = flat.cpu()  # the servers talk gloo, which sends host memory
        state.sent_at[layer.index] = time.perf_counter()
        state.sent[layer.index] = flat
        self.issuer.put(lambda: self._issue(layer.index, flat))

    def _issue(self, index: int, flat: torch.Tensor) -> None:
        """On the issuer thread: start the transfer and hand it to its connection's watcher."""
        if self.ps:
            owner = self.owners[index]
            work = dist.isend(flat, dst=owner, tag=index)
        else:
            owner = -1
            work = dist.all_reduce(flat, async_op=True)
        self.send_watch[owner].add(index, work)

    def _finish_sends(self, state: _StepState) -> None:
        """Wait for every push (or all-reduce) in issue order; AllReduce applies each one."""
        kind = "push" if self.ps else "allreduce"
        self.issuer.flush()
        by_index = {layer.index: layer for layer in self.setup.param_layers}
        for index, flat in state.sent.items():  # dicts keep issue order
            layer = by_index[index]
            owner = self.owners[index] if self.ps else -1
            end = self.send_watch[owner].wait(index)
            start = state.sent_at[index]
            self.spans.append(
                Span(self.rank, self.worker, state.step, layer.name, kind, start, end - start)
            )
            if not self.ps:
                self._local_update(state.step, layer, flat)

    def _local_update(self, step: int, layer: ParamLayer, summed: torch.Tensor) -> None:
        start = time.perf_counter()
        layer.load_grads(summed / self.config.workers)
        self.optimizers[layer.index].step()
        end = time.perf_counter()
        self.spans.append(
            Span(self.rank, self.worker, step, layer.name, "update", start, end - start)
        )


def record_compute_spans(
    spans: list[Span],
    rank: int,
    worker: int,
    step: int,
    t0: float,
    clock: Clock,
    marks: StepMarks,
    send_call_s: dict[str, float],
) -> None:
    """Turn a step's clock marks into forward and backward spans (perf_counter seconds),
    appended to ``spans``; ``t0`` is when the step started.

    A layer's backward excludes ``send_call_s[layer]``, the time its gradient hook spent
    issuing the push (layerwise overlap), which its autograd node's timing includes.
    """
    clock.finish()
    # On CPU marks are perf_counter values; on CUDA they are events, placed relative to t0.
    origin = marks.start

    def at(mark: Any) -> float:
        return t0 + clock.seconds(origin, mark) if not isinstance(mark, float) else mark

    for name, (a, b) in marks.forward.items():
        spans.append(Span(rank, worker, step, name, "forward", at(a), clock.seconds(a, b)))
    for name, pairs in marks.backward.items():
        if pairs:
            start = min(at(a) for a, _ in pairs)
            total = sum(clock.seconds(a, b) for a, b in pairs)
            total = max(total - send_call_s.get(name, 0.0), 0.0)
            spans.append(Span(rank, worker, step, name, "backward", start, total))


def timed_loss_and_backward(
    setup: ModelSetup,
    clock: Clock,
    marks: StepMarks,
    interpreter: TimedInterpreter,
    output: torch.Tensor,
    labels: torch.Tensor,
) -> float:
    """After ``interpreter`` ran the forward pass into ``output``: the loss, timed as the loss
    layer's forward, then the backward pass timed per layer into ``marks``; the loss."""
    loss_start = clock.mark()
    loss = F.cross_entropy(output, labels)
    marks.forward[LOSS_LAYER] = (loss_start, clock.mark())
    order = [layer.name for layer in setup.layers]
    roots = {**interpreter.roots, LOSS_LAYER: [loss.grad_fn]}
    handles = hook_backward(attribute_grad_fns(order, roots), clock, marks)
    del output, roots
    try:
        torch.autograd.backward(loss)
    finally:
        for handle in handles:
            handle.remove()
    return float(loss.detach())
