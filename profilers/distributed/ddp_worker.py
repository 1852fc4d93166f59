"""A DDP worker rank: real ``torch.nn.parallel.DistributedDataParallel``, every bucket timed.

The model runs inside DDP exactly as a user's would (torch's reducer, its bucket rule, its
rebuild after the first step, its wait for every bucket at the end of the backward pass); what
this module adds is only measurement:

- the forward pass is the profiler's timed ``fx`` interpreter, wrapped in a module so that DDP's
  own pre- and post-forward run around it (``prepare_for_backward``, bucket rebuilding);
- the backward pass is timed per layer by the profiler's autograd hooks;
- a comm hook, registered with ``register_comm_hook``, does what torch's default hook does
  (average the bucket by an AllReduce; with ``fp16``, torch's ``fp16_compress_hook``: cast to
  float16, all-reduce, cast back) and records when each bucket was launched and when its
  AllReduce completed (a span of kind ``allreduce``, layer ``bucket<N>``), and which parameters
  the bucket holds;
- after ``backward`` returns (DDP has then waited for every bucket), each layer's SGD step is
  timed on its own (spans of kind ``update``), as the ring runner's are.

DDP reduces a bucket only once all of its gradients are ready and launches buckets in index
order (``Reducer::mark_bucket_ready``), which is what the simulator's ``--arch ddp`` assumes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from profilers.clocks import Clock
from profilers.distributed.config import CommHook, RunConfig
from profilers.distributed.records import DdpBucketRecord, Span, StepRecord
from profilers.distributed.task import ModelSetup, synthetic_batch
from profilers.distributed.worker import (
    BATCH_POOL,
    batch_index,
    record_compute_spans,
    timed_loss_and_backward,
)
from profilers.layer_profiler import (
    StepMarks,
    TimedInterpreter,
)

__all__ = ["DdpWorkerLoop", "ddp_module"]


class _InterpretedForward(nn.Module):
    """The model's ``fx`` graph as a module whose forward is the step's timed interpreter.

    Its parameters are the graph's, which are the model's, so DDP buckets exactly what the
    model would have had it been wrapped directly."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__()
        self.gm = gm
        self.interpreter: TimedInterpreter | None = None

    def forward(self, inputs: torch.Tensor) -> Any:
        assert self.interpreter is not None, "set the step's interpreter first"
        return self.interpreter.run(inputs)


def ddp_module(config: RunConfig, module: nn.Module) -> DistributedDataParallel:
    """``module`` in DDP with ``config``'s bucket limits, as a user would write it.

    torch's rule (``_BucketCapacityConfig`` in ``torch/nn/parallel/distributed.py``): no cap
    given, 25 MiB with a 1 MiB first bucket; a cap given alone, the first bucket as large; a
    first bucket of its own goes through ``bucket_cap_mb_list`` as ``[first, cap]`` (the last
    limit repeats for every later bucket).
    """
    options: dict[str, Any] = {"gradient_as_bucket_view": config.gradient_as_bucket_view}
    if config.first_bucket_mb is not None:
        options["bucket_cap_mb_list"] = [config.first_bucket_mb, config.bucket_cap_mb or 25]
    elif config.bucket_cap_mb is not None:
        options["bucket_cap_mb"] = config.bucket_cap_mb
    return DistributedDataParallel(module, **options)


class DdpWorkerLoop:
    """Runs DDP worker ``worker`` (global rank ``rank``; DDP has no servers) for every step."""

    def __init__(
        self, config: RunConfig, setup: ModelSetup, rank: int, worker: int, clock: Clock
    ) -> None:
        self.config, self.setup, self.rank, self.worker, self.clock = (
            config,
            setup,
            rank,
            worker,
            clock,
        )
        self.spans: list[Span] = []
        self.steps: list[StepRecord] = []
        self.forward = _InterpretedForward(setup.gm)
        self.ddp = ddp_module(config, self.forward)  # broadcasts rank 0's parameters
        # A lambda, not the method: torch checks the hook's annotations against the classes
        # themselves, and this module's annotations are strings.
        self.ddp.register_comm_hook(None, lambda state, bucket: self._comm_hook(state, bucket))
        self._names = {id(p): n for n, p in setup.module.named_parameters()}
        self._buckets: dict[int, DdpBucketRecord] = {}
        self._step_no = 0
        self.optimizers = {
            layer.index: torch.optim.SGD(layer.params, lr=config.lr, momentum=config.momentum)
            for layer in setup.param_layers
        }
        self.batches = [
            tuple(
                t.to(setup.device)
                for t in synthetic_batch(setup, config.seed, worker, b, config.batch_size)
            )
            for b in range(min(BATCH_POOL, config.steps))
        ]

    @property
    def buckets(self) -> tuple[DdpBucketRecord, ...]:
        """The buckets of the last step, in index order."""
        return tuple(self._buckets[i] for i in sorted(self._buckets))

    def run(self, progress: Callable[[int], None]) -> None:
        """All steps; ``progress(step)`` after each."""
        for step in range(self.config.steps):
            self._step(step)
            progress(step)

    # --- the comm hook ---------------------------------------------------------------------------

    def _comm_hook(self, _state: object, bucket: Any) -> torch.futures.Future[Any]:
        """torch's default averaging (or fp16 compression), with the bucket's span recorded;
        ``bucket`` is a ``dist.GradBucket``."""
        step, index = self._step_no, bucket.index()
        if step <= 1:  # torch rebuilds the buckets after step 0; they stay from step 1 on
            buffer = bucket.buffer()
            names = tuple(self._names.get(id(p), "?") for p in bucket.parameters())
            nbytes = buffer.numel() * buffer.element_size()
            self._buckets[index] = DdpBucketRecord(index, nbytes, names)
        world = dist.get_world_size()
        fp16 = self.config.comm_hook is CommHook.FP16
        tensor = bucket.buffer()
        wire = tensor.to(torch.float16).div_(world) if fp16 else tensor.div_(world)
        start = time.perf_counter()
        future = dist.all_reduce(wire, async_op=True).get_future()

        def done(fut: torch.futures.Future[Any]) -> torch.Tensor:
            end = time.perf_counter()
            self.spans.append(
                Span(
                    self.rank, self.worker, step, f"bucket{index}", "allreduce", start, end - start
                )
            )
            reduced = fut.value()[0]
            if fp16:
                tensor.copy_(reduced)
                return tensor
            return reduced

        return future.then(done)

    # --- one step --------------------------------------------------------------------------------

    def _step(self, step: int) -> None:
        self._step_no = step
        if step == 1:
            self._buckets.clear()  # step 0's one bucket is not DDP's steady state
        setup, clock = self.setup, self.clock
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        inputs, labels = self.batches[batch_index(step)]
        marks = StepMarks()
        setup.module.zero_grad(set_to_none=not self.config.gradient_as_bucket_view)
        interpreter = TimedInterpreter(setup.gm, clock, marks)
        self.forward.interpreter = interpreter
        marks.start = clock.mark()
        output = self.ddp(inputs)
        self.forward.interpreter = None
        # backward returns once DDP has every bucket reduced
        loss = timed_loss_and_backward(setup, clock, marks, interpreter, output, labels)
        del output, interpreter
        for layer in reversed(setup.param_layers):  # the order DDP's gradients came in
            start = time.perf_counter()
            self.optimizers[layer.index].step()
            self.spans.append(
                Span(
                    self.rank,
                    self.worker,
                    step,
                    layer.name,
                    "update",
                    start,
                    time.perf_counter() - start,
                )
            )
        end = time.perf_counter()
        cpu_s = time.process_time() - cpu0
        record_compute_spans(self.spans, self.rank, self.worker, step, t0, clock, marks, {})
        self.steps.append(StepRecord(self.worker, step, t0, end, loss, cpu_s))
