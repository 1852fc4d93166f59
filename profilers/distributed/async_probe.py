"""How identical Async-SGD workers share a parameter server's link, timed without training.

A server rank serves each worker from a thread of its own (send the layers, receive the
gradients, no update, as ``profilers.distributed.server`` without the copies and the
optimizer); W worker ranks each loop pull, compute, push with a model's parameter bytes per
layer, the computation being a sleep of each layer's profiled forward and backward time
(:func:`probe_step`), layer by layer as the runner's workers overlap them or in strict phases.
On the emulated cluster the server's link is shaped as in the validation's runs, the server
pinned to the first core and the workers sharing the others, as the testbed pins them. It
reports all workers' steps per second and where each worker's steps start within worker 0's
(the phase: 0 together, 0.5 half a step apart).

Nothing but the transfers competes for the CPU when the computation sleeps, so what such a
probe shows is the link's own behaviour under the Async-SGD pattern. On the testbed that
pattern is not one pattern: at 200 Mbit/s two workers moving a 2.5 MB model settled in
anti-phase (one pulling while the other pushed), at 500 Mbit/s two moving 7.5 MB in a convoy,
and probes repeated minutes apart differed by 7% on average and up to 31% with two workers or
more, while one worker's repeated within 1% (``scenarios/research/async_pattern.py``). With ``burn``
each layer's time is spent as the worker thread's CPU time, and workers sharing their cores
compete for them as training's do: on the kept validation files the training runs were then
within 6% of the probe at the median, where sleeping probes ran resnet8 2-4x too fast.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from profilers.distributed.spawn import join_gloo_group, run_rank_processes
from profilers.distributed.testbed import Testbed, available_cores
from profilers.netns_cluster import BURST_S, EmulatedCluster, emulated_cluster
from simcore.errors import ConfigError, SgdsimError
from simcore.sim.occupancy import PULL, PUSH, LinkOccupancy, TransferInterval, link_occupancy
from simcore.sim.phases import offsets_within
from simcore.trace.build import synthetic_trace
from simcore.trace.model import OpKind, Resource, Trace
from simcore.units import format_bandwidth, format_seconds

__all__ = [
    "AsyncProbe",
    "ProbeStep",
    "async_probe_text",
    "measure_async_probe",
    "probe_from_dict",
    "probe_step",
    "probe_steps",
    "probe_to_dict",
    "probe_trace",
]

_GRACE_S = 10.0
# Each worker's steps: enough that the workers' pattern settles and is timed over ~PROBE_S.
PROBE_S = 8.0
WARMUP_STEPS = 5
MIN_STEPS = 20
_DECIMALS = 7  # timestamps to 0.1 us, as compacted measurements keep them


@dataclass(frozen=True)
class ProbeStep:
    """A bare step: per layer with parameters (forward order), its bytes and the computation
    before its pull is used (forward) and before its gradient is pushed (backward)."""

    layer_nbytes: tuple[int, ...]
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]

    @property
    def compute_s(self) -> float:
        return math.fsum(self.forward_s) + math.fsum(self.backward_s)


def probe_step(trace: Trace) -> ProbeStep:
    """The bare step of ``trace``: its layers with parameters, each with the mean (over the
    profiled steps) of its forward and backward time; the computation of a layer without
    parameters goes to the nearest layer before it that has some (before the first: the first
    one's forward), and the worker's other computation (fixed per-step costs) to the first
    layer's forward, so that the step computes as long as the trace's does."""

    def mean_s(index: int) -> float:
        return statistics.fmean(step.duration_s[index] or 0.0 for step in trace.steps)

    forward: dict[str, float] = {}
    backward: dict[str, float] = {}
    other = 0.0
    for i, op in enumerate(trace.ops):
        if op.resource is not Resource.WORKER:
            continue
        if op.kind is OpKind.FORWARD and op.layer is not None:
            forward[op.layer] = forward.get(op.layer, 0.0) + mean_s(i)
        elif op.kind is OpKind.BACKWARD and op.layer is not None:
            backward[op.layer] = backward.get(op.layer, 0.0) + mean_s(i)
        else:
            other += mean_s(i)
    sizes: list[int] = []
    fwd: list[float] = []
    bwd: list[float] = []
    leading = [other, 0.0]  # before the first layer with parameters: forward, backward
    for layer in trace.layers:
        f, b = forward.get(layer.name, 0.0), backward.get(layer.name, 0.0)
        if layer.param_nbytes >= 4:
            sizes.append(layer.param_nbytes)
            fwd.append(f)
            bwd.append(b)
        elif fwd:
            fwd[-1] += f
            bwd[-1] += b
        else:
            leading[0] += f
            leading[1] += b
    if not sizes:
        raise ConfigError(f"{trace.source}: no layer has parameters: nothing to pull or push")
    fwd[0] += leading[0]
    bwd[0] += leading[1]
    return ProbeStep(tuple(sizes), tuple(fwd), tuple(bwd))


def probe_trace(step: ProbeStep, *, layerwise: bool) -> Trace:
    """The simulator's trace of a bare step: a chain of the layers, no server-side update."""
    return synthetic_trace(
        list(step.forward_s),
        list(step.backward_s),
        list(step.layer_nbytes),
        overlap=layerwise,
        model_name="async probe",
    )


@dataclass(frozen=True)
class AsyncProbe:
    """``workers`` Async-SGD workers' bare steps over a link (see the module).

    ``step_times``: per worker, the (start, end) of each step after warm-up, in seconds from
    the first of them (one clock shared by the ranks). ``transfers``: each step's pull (from
    the server's send to the worker's receipt of its last layer) and push (from the worker's
    first send to the server's receipt of its last gradient) on the same clock, in step order
    per worker, pull before push (empty in probes saved before they were kept).
    """

    workers: int
    layer_nbytes: tuple[int, ...]
    forward_s: tuple[float, ...]  # per layer, the computation's sleep before its pull is used
    backward_s: tuple[float, ...]  # per layer, the sleep before its gradient is pushed
    layerwise: bool  # overlap as the runner's workers do; False: strict phases
    link_rate_bps: float | None
    step_times: tuple[tuple[tuple[float, float], ...], ...]
    # The computation burnt as CPU work (the worker thread's CPU time) rather than slept: the
    # workers then compete for their cores with each other and with their transfers.
    burn: bool = False
    transfers: tuple[TransferInterval, ...] = ()

    @property
    def step(self) -> ProbeStep:
        """The bare step the workers ran."""
        return ProbeStep(self.layer_nbytes, self.forward_s, self.backward_s)

    @property
    def compute_s(self) -> float:
        """The computation of a step (every layer's forward and backward time)."""
        return self.step.compute_s

    def window(self) -> tuple[float, float]:
        """The span every worker was in its timed steps: from the latest first start to the
        earliest last end."""
        return (
            max(steps[0][0] for steps in self.step_times),
            min(steps[-1][1] for steps in self.step_times),
        )

    def steps_per_s(self) -> float:
        """Steps of all workers together per second: the steps that ended inside
        :meth:`window`, over its length."""
        start, end = self.window()
        if end <= start:
            raise ConfigError("async probe: the workers' timed steps do not overlap")
        ended = sum(1 for steps in self.step_times for _, e in steps if start < e <= end)
        return ended / (end - start)

    def occupancy(self) -> LinkOccupancy:
        """How the server's link was occupied within :meth:`window` (transfers cut to it).
        ConfigError when the probe kept no transfers (one read back from JSON)."""
        return link_occupancy(self._transfers(), self.workers, *self.window())

    def transfer_s(self) -> float:
        """The median time a pull or push was in flight (with one worker: alone on its
        direction of the link)."""
        return statistics.median(i.end_s - i.start_s for i in self._transfers())

    def _transfers(self) -> tuple[TransferInterval, ...]:
        if not self.transfers:
            raise ConfigError("async probe: no transfers kept (saved before probes kept them)")
        return self.transfers

    def phases(self) -> tuple[float, ...]:
        """Where each other worker's step starts fall within worker 0's steps (0: together,
        0.5: half a step apart), pooled; empty with one worker."""
        first = np.array(self.step_times[0], dtype=float).reshape(-1, 2)
        return tuple(
            float(phi)
            for steps in self.step_times[1:]
            for phi in offsets_within(
                first[:, 0], first[:, 1], np.array([start for start, _ in steps], dtype=float)
            )
        )

    def phase_quartiles(self) -> tuple[float, float, float] | None:
        phases = sorted(self.phases())
        if len(phases) < 4:
            return None
        q = statistics.quantiles(phases, n=4)
        return (q[0], q[1], q[2])


def async_probe_text(probe: AsyncProbe) -> str:
    """One line: the probe's rate, and its workers' phases."""
    where = (
        f"link shaped to {format_bandwidth(probe.link_rate_bps)}"
        if probe.link_rate_bps is not None
        else "loopback"
    )
    text = (
        f"async probe ({where}, {sum(probe.layer_nbytes) / 1e6:.2f} MB in "
        f"{len(probe.layer_nbytes)} layer(s), {format_seconds(probe.compute_s)} of computation "
        f"a step): {probe.workers} worker(s) {probe.steps_per_s():.3g} steps/s"
    )
    quartiles = probe.phase_quartiles()
    if quartiles is not None:
        text += ", phases " + " / ".join(f"{q:.2f}" for q in quartiles) + " (quartiles)"
    return text


def probe_to_dict(probe: AsyncProbe) -> dict[str, Any]:
    return (
        {
            "workers": probe.workers,
            "layer_nbytes": list(probe.layer_nbytes),
            "forward_s": list(probe.forward_s),
            "backward_s": list(probe.backward_s),
            "layerwise": probe.layerwise,
            "link_rate_bps": probe.link_rate_bps,
            "step_times": [[[s, e] for s, e in steps] for steps in probe.step_times],
        }
        | ({"burn": True} if probe.burn else {})
        | _transfers_to_dict(probe)
    )


def _transfers_to_dict(probe: AsyncProbe) -> dict[str, Any]:
    """Per worker, each step's [pull start, pull end, push start, push end]."""
    if not probe.transfers:
        return {}
    steps: list[list[list[float]]] = [[] for _ in range(probe.workers)]
    pulls = [i for i in probe.transfers if i.direction == PULL]
    pushes = [i for i in probe.transfers if i.direction == PUSH]
    for pull, push in zip(pulls, pushes, strict=True):
        steps[pull.worker].append([pull.start_s, pull.end_s, push.start_s, push.end_s])
    return {"transfers": steps}


def _transfers_from_dict(raw: Any) -> tuple[TransferInterval, ...]:
    return tuple(
        interval
        for worker, steps in enumerate(raw)
        for pull_start, pull_end, push_start, push_end in steps
        for interval in (
            TransferInterval(worker, PULL, float(pull_start), float(pull_end)),
            TransferInterval(worker, PUSH, float(push_start), float(push_end)),
        )
    )


def probe_from_dict(data: Any, source: str = "<memory>", key: str = "async_probe") -> AsyncProbe:
    """Inverse of :func:`probe_to_dict`. Raises ConfigError naming ``source`` and ``key`` on
    bad data."""
    try:
        rate = data["link_rate_bps"]
        probe = AsyncProbe(
            int(data["workers"]),
            tuple(int(n) for n in data["layer_nbytes"]),
            tuple(float(x) for x in data["forward_s"]),
            tuple(float(x) for x in data["backward_s"]),
            bool(data["layerwise"]),
            None if rate is None else float(rate),
            tuple(tuple((float(s), float(e)) for s, e in steps) for steps in data["step_times"]),
            bool(data.get("burn", False)),
            _transfers_from_dict(data.get("transfers", ())),
        )
    except KeyError as err:
        raise ConfigError(f"{source}: {key}: missing field {err}") from None
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{source}: {key}: {err}") from None
    n = len(probe.layer_nbytes)
    if (
        probe.workers < 1
        or n == 0
        or len(probe.forward_s) != n
        or len(probe.backward_s) != n
        or len(probe.step_times) != probe.workers
        or any(len(steps) < 2 for steps in probe.step_times)
        or any(e < s for steps in probe.step_times for s, e in steps)
        or any(i.worker >= probe.workers for i in probe.transfers)
    ):
        raise ConfigError(
            f"{source}: {key}: needs workers >= 1, a forward and a backward time per layer, "
            f"each worker's steps (at least two, each ending after it starts) and transfers of "
            f"no more workers than that"
        )
    return probe


def probe_steps(
    layer_nbytes: Sequence[int],
    compute_s: float,
    link_rate_bps: float | None,
    workers: int,
    probe_s: float = PROBE_S,
) -> int:
    """Steps per worker for a probe of about ``probe_s``, at least ``MIN_STEPS``: a worker's
    step is at least one worker's (its computation and its bytes both ways at the link's rate)
    and at least the W workers' bytes one way."""
    one_way_s = 8 * sum(layer_nbytes) / link_rate_bps if link_rate_bps else 0.0
    step_s = max(compute_s + 2 * one_way_s, workers * one_way_s)
    return max(MIN_STEPS, math.ceil(probe_s / step_s)) if step_s > 0 else MIN_STEPS * 10


def measure_async_probe(
    layer_nbytes: Sequence[int],
    forward_s: Sequence[float],
    backward_s: Sequence[float],
    *,
    layerwise: bool,
    workers: int,
    burn: bool = False,
    link_rate_bps: float | None = None,
    steps: int | None = None,
    probe_s: float = PROBE_S,
    warmup: int = WARMUP_STEPS,
    timeout_s: float = 120.0,
    burst_s: float = BURST_S,
    cores: Sequence[int] | None = None,
) -> AsyncProbe:
    """Run the probe (see the module) with ``workers`` workers; ``steps`` per worker after
    ``warmup`` (None: :func:`probe_steps` for about ``probe_s``). ``forward_s`` and
    ``backward_s``: each layer's computation (layers in forward order, one per entry of
    ``layer_nbytes``), slept, or with ``burn`` spent on the CPU.

    Raises
    ------
    ConfigError : bad arguments, or the emulated cluster is not permitted here.
    DistributedRunError : a rank failed or did not finish within ``timeout_s`` (plus a grace).
    """
    sizes = tuple(int(n) for n in layer_nbytes)
    fwd, bwd = tuple(float(s) for s in forward_s), tuple(float(s) for s in backward_s)
    if (
        workers < 1
        or not sizes
        or min(sizes) < 4
        or len(fwd) != len(sizes)
        or len(bwd) != len(sizes)
        or min(fwd + bwd) < 0
        or warmup < 0
    ):
        raise ConfigError(
            f"async probe: needs workers >= 1, layers of >= 4 bytes with a forward and a "
            f"backward time >= 0 each, and warmup >= 0; got {workers} workers, {len(sizes)} "
            f"layers, {len(fwd)} forward and {len(bwd)} backward times, warmup {warmup}"
        )
    compute_s = sum(fwd) + sum(bwd)
    n_steps = (
        steps
        if steps is not None
        else probe_steps(sizes, compute_s, link_rate_bps, workers, probe_s)
    )
    cores = tuple(cores) if cores is not None else available_cores()
    # As the testbed pins a parameter server's ranks: the server on the first core, the workers
    # sharing the others.
    pinned = Testbed(cores=cores).server_and_worker_cpus(1, workers)
    cpus: list[set[int] | None] = list(pinned) if pinned is not None else [None] * (workers + 1)
    args = [
        (workers, sizes, fwd, bwd, layerwise, burn, warmup + n_steps, timeout_s, cpus[r])
        for r in range(workers + 1)
    ]
    if link_rate_bps is None:
        per_rank = _run(args, None, timeout_s)
    else:
        with emulated_cluster(workers + 1, {0: link_rate_bps}, burst_s=burst_s) as cluster:
            per_rank = _run(args, cluster, timeout_s)
    timed = [times[warmup:] for times in per_rank[1:]]
    origin = min(steps[0][0] for steps in timed)

    def rel(t: float) -> float:
        return round(t - origin, _DECIMALS)

    step_times = tuple(tuple((rel(s), rel(e)) for s, e, _, _ in mine) for mine in timed)
    transfers = []
    for worker, mine in enumerate(timed):
        served = per_rank[0][worker + 1][warmup:]  # (sends posted, last gradient arrived)
        for (_, _, pulled, pushing), (posted, arrived) in zip(mine, served, strict=True):
            transfers.append(TransferInterval(worker, PULL, rel(posted), rel(pulled)))
            transfers.append(TransferInterval(worker, PUSH, rel(pushing), rel(arrived)))
    return AsyncProbe(
        workers, sizes, fwd, bwd, layerwise, link_rate_bps, step_times, burn, tuple(transfers)
    )


def _run(
    args: list[tuple[Any, ...]], cluster: EmulatedCluster | None, timeout_s: float
) -> list[Any]:
    rank_args = [(*a, cluster) for a in args]
    return run_rank_processes("async probe", _rank_main, rank_args, timeout_s + _GRACE_S)


def _rank_main(
    rank: int,
    init: str,
    workers: int,
    sizes: tuple[int, ...],
    forward_s: tuple[float, ...],
    backward_s: tuple[float, ...],
    layerwise: bool,
    burn: bool,
    steps: int,
    timeout_s: float,
    cpus: set[int] | None,
    cluster: EmulatedCluster | None,
    results: Any,
) -> None:
    try:
        dist = join_gloo_group(rank, workers + 1, init, timeout_s, cluster, cpus)
        import torch

        times: Any = (
            _serve(dist, torch, workers, sizes, steps)
            if rank == 0
            else _work(dist, torch, sizes, forward_s, backward_s, layerwise, burn, steps)
        )
        dist.barrier()
        dist.destroy_process_group()
        results.put(("times", rank, times))
    except (SgdsimError, RuntimeError, OSError) as err:
        results.put(("error", rank, str(err)))
        raise SystemExit(1) from err


def _serve(
    dist: Any, torch: Any, workers: int, sizes: tuple[int, ...], steps: int
) -> dict[int, list[tuple[float, float]]]:
    """The server: a thread per worker sending the layers and receiving their gradients, as
    ``profilers.distributed.server`` does without the copies and updates. Per worker rank, for
    each step when the sends were posted and when the last gradient had arrived."""
    errors: list[BaseException] = []
    spans: dict[int, list[tuple[float, float]]] = {w + 1: [] for w in range(workers)}

    def serve(peer: int) -> None:
        try:
            params = [torch.ones(n // 4) for n in sizes]
            grads = [torch.empty(n // 4) for n in sizes]
            for _ in range(steps):
                posted = time.perf_counter()
                sends = [dist.isend(p, dst=peer, tag=i) for i, p in enumerate(params)]
                recvs = [dist.irecv(grads[i], src=peer, tag=i) for i in reversed(range(len(sizes)))]
                for work in recvs:
                    work.wait()
                spans[peer].append((posted, time.perf_counter()))
                for work in sends:
                    work.wait()
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=serve, args=(w + 1,), daemon=True) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"serving a worker: {errors[0]}")
    return spans


def _work(
    dist: Any,
    torch: Any,
    sizes: tuple[int, ...],
    forward_s: tuple[float, ...],
    backward_s: tuple[float, ...],
    layerwise: bool,
    burn: bool,
    steps: int,
) -> list[tuple[float, float, float, float]]:
    """A worker: pull every layer, compute forward and backward (sleep, or ``burn`` the CPU),
    push every layer's gradient, last layer first; layerwise, each layer's forward waits only
    for its own pull and each gradient is pushed as its backward ends, as the runner's workers
    do. Returns, for each step, its start and end, when the last layer's pull had arrived and
    when the first gradient was sent."""
    spend: _Burner | _Sleeper = _Burner() if burn else _Sleeper()
    params = [torch.empty(n // 4) for n in sizes]
    grads = [torch.ones(n // 4) for n in sizes]
    order = list(reversed(range(len(sizes))))
    times: list[tuple[float, float, float, float]] = []
    for _ in range(steps):
        start = time.perf_counter()
        pulls = [dist.irecv(p, src=0, tag=i) for i, p in enumerate(params)]
        if not layerwise:
            for work in pulls:
                work.wait()  # once only: a second wait on a gloo receive waits for another
            pulled = time.perf_counter()
        spend.resume()
        for i, work in enumerate(pulls):
            if layerwise:
                work.wait()
                pulled = time.perf_counter()  # the last layer's counts
                spend.resume()
            spend(forward_s[i])
        pushes: list[Any] = []
        pushing = math.nan
        for i in order:
            spend(backward_s[i])
            if layerwise:
                if not pushes:  # the step's first gradient
                    pushing = time.perf_counter()
                pushes.append(dist.isend(grads[i], dst=0, tag=i))
        if not layerwise:
            pushing = time.perf_counter()
            pushes = [dist.isend(grads[i], dst=0, tag=i) for i in order]
        for work in pushes:
            work.wait()
        times.append((start, time.perf_counter(), pulled, pushing))
    return times


class _Sleeper:
    """Sleeps to deadlines rather than for durations, so that many short layers do not add up
    each sleep's overshoot; after a wait for a transfer (:meth:`resume`) the next deadline
    counts from then."""

    def __init__(self) -> None:
        self.due = 0.0

    def resume(self) -> None:
        self.due = max(self.due, time.perf_counter())

    def __call__(self, seconds: float) -> None:
        self.due += seconds
        left = self.due - time.perf_counter()
        if left > 0:
            time.sleep(left)


class _Burner:
    """Spends each computation as this thread's CPU time (spinning): sharing a core with other
    work, it takes longer in wall time, as a real computation does."""

    def resume(self) -> None:
        pass  # CPU time does not pass while the thread waits

    def __call__(self, seconds: float) -> None:
        until = time.thread_time() + seconds
        while time.thread_time() < until:
            pass
