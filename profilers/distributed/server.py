"""A parameter-server rank: holds some layers, sends them to workers, applies their gradients.

The server runs one thread per worker, so that a slow worker never holds up the others (gloo
point-to-point operations release the GIL while they wait). Each thread loops over the steps:

1. send the worker the server's layers, in forward order (the worker's pulls), each a copy taken
   under the lock so that an update in progress is never sent half-applied;
2. receive the worker's gradients of those layers (last layer first, as they are sent) and apply
   each layer as it arrives:

   - ``ps-async``: at once, with that layer's SGD optimizer (the profiler's lr and momentum);
   - ``ps-sync``: added to the step's sum; the last worker's arrival applies the mean and, once
     every layer of the step is applied, releases the next step's sends to every worker.

The averaged step of ``ps-sync`` equals one SGD step on the union of the workers' batches: the
mean of per-worker mean losses over equal batches is the mean loss over the union, and the
gradient of a mean is the mean of the gradients.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from profilers.distributed.config import Architecture, DistributedRunError, RunConfig
from profilers.distributed.records import Span
from profilers.distributed.task import ParamLayer

__all__ = ["ServerLoop"]


class ServerLoop:
    """Serves ``layers`` (those placed on this server) to every worker for ``config.steps``."""

    def __init__(self, config: RunConfig, rank: int, layers: Sequence[ParamLayer]) -> None:
        self.config, self.rank, self.layers = config, rank, list(layers)
        self.sync = config.architecture is Architecture.PS_SYNC
        self.optimizers = {
            layer.index: torch.optim.SGD(layer.params, lr=config.lr, momentum=config.momentum)
            for layer in self.layers
        }
        self.spans: list[Span] = []
        self._lock = threading.Lock()  # parameters, optimizers, sums and spans
        self._released = threading.Condition(self._lock)
        self._applied_steps = 0  # ps-sync: steps whose every layer has been applied
        self._sums: dict[int, torch.Tensor] = {}
        self._counts: dict[int, int] = {}
        self._layers_done = 0
        self._errors: list[BaseException] = []
        self._finished = 0  # worker threads that have ended, well or not

    def run(self, progress: Callable[[int], None]) -> None:
        """Serve every worker until all steps are done; ``progress(step)`` after any worker's step.

        Raises
        ------
        DistributedRunError : a worker's connection failed or a worker stopped sending.
        """
        threads = [
            threading.Thread(
                target=self._guarded, args=(w, progress), name=f"serve w{w}", daemon=True
            )
            for w in range(self.config.workers)
        ]
        for thread in threads:
            thread.start()
        # Fail as soon as one worker's connection fails (the other threads are daemons and end
        # with the process): without a parent watchdog (torchrun), nobody else would stop us.
        with self._released:
            self._released.wait_for(lambda: bool(self._errors) or self._finished == len(threads))
        if self._errors:
            raise self._errors[0]

    def _guarded(self, worker: int, progress: Callable[[int], None]) -> None:
        try:
            self._serve(worker, progress)
        except BaseException as err:
            peer = self.config.worker_rank(worker)
            wrapped = DistributedRunError(f"serving worker {worker} (rank {peer}): {err}")
            wrapped.__cause__ = err
            with self._released:
                self._errors.append(wrapped)
        finally:
            with self._released:  # wake run() and threads waiting for a ps-sync release
                self._finished += 1
                self._released.notify_all()

    def _serve(self, worker: int, progress: Callable[[int], None]) -> None:
        peer = self.config.worker_rank(worker)
        timeout = self.config.timeout_s
        for step in range(self.config.steps):
            if self.sync:
                self._wait_release(step, timeout)
            sends = []
            for layer in self.layers:
                with self._lock:
                    flat = layer.flat_params()
                sends.append((dist.isend(flat, dst=peer, tag=layer.index), flat))
            grads = [
                (layer, torch.empty(layer.numel, dtype=layer.params[0].dtype))
                for layer in reversed(self.layers)
            ]
            works = [dist.irecv(buf, src=peer, tag=layer.index) for layer, buf in grads]
            for (layer, buf), work in zip(grads, works, strict=True):
                _wait(work)
                self._apply(worker, step, layer, buf)
            for work, _ in sends:
                _wait(work)
            progress(step)  # from every worker's thread: the parent's watchdog hears us

    def _wait_release(self, step: int, timeout_s: float) -> None:
        with self._released:
            ok = self._released.wait_for(
                lambda: self._applied_steps >= step or bool(self._errors), timeout_s
            )
            if self._errors:
                raise DistributedRunError("another worker's connection failed")
            if not ok:
                raise DistributedRunError(
                    f"step {step}: not every worker's gradients arrived within {timeout_s:.0f} s"
                )

    def _apply(self, worker: int, step: int, layer: ParamLayer, grad: torch.Tensor) -> None:
        with self._lock:
            if not self.sync:
                self._step_layer(worker, step, layer, grad)
                return
            if layer.index in self._sums:
                self._sums[layer.index] += grad
                self._counts[layer.index] += 1
            else:
                self._sums[layer.index], self._counts[layer.index] = grad, 1
            if self._counts[layer.index] < self.config.workers:
                return
            mean = self._sums.pop(layer.index) / self.config.workers
            del self._counts[layer.index]
            self._step_layer(-1, step, layer, mean)
            self._layers_done += 1
            if self._layers_done == len(self.layers):
                self._layers_done = 0
                self._applied_steps = step + 1
                self._released.notify_all()

    def _step_layer(self, worker: int, step: int, layer: ParamLayer, grad: torch.Tensor) -> None:
        """Apply ``grad`` to ``layer`` (lock held) and record the update's span."""
        start = time.perf_counter()
        layer.load_grads(grad)
        self.optimizers[layer.index].step()
        end = time.perf_counter()
        self.spans.append(Span(self.rank, worker, step, layer.name, "update", start, end - start))


def _wait(work: dist.Work | None) -> None:
    """Wait for a point-to-point operation (typed optional by torch; gloo always gives one)."""
    if work is not None:
        work.wait()
