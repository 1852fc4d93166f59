"""PyTorch DDP's Sync-SGD step in closed form: the chain of bucket AllReduces beside the backward.

A DDP step (:mod:`simcore.sim.ddp_dag`) runs the computation on the worker's device and the
buckets' AllReduces one after another on the communication stream. With the computation in
trace order on the device (exact for a model whose forward and backward are chains, as the
simulator's FIFO device then runs them), bucket b's gradients are ready at ``r_b``, the end of
the backward (and the copy into the bucket) of its last layer, and

- ``s_b = max(r_b, e_{b-1})``: it starts once every rank has it ready (``r_b``, the latest over
  the worker types) and the previous bucket is done;
- ``e_b = s_b + T_b`` with ``T_b = hops * alpha + bits_b / B`` for the collective
  (:mod:`simcore.sim.collectives`: ring ``2(K-1)`` hops and ``2(K-1)/K`` of the bytes; tree),
  ``B`` the slowest rank's rate (its link, at most its per-flow cap);
- the step ends after the device's last computation ``c`` (the backward's end, its fixed cost
  ``overhead:end``) and the last bucket: ``T = max(c, e_last) + copy_out + U``, the copy of
  the reduced buckets into the gradients, then the optimizer's update ``U`` on the device.

Where no bucket can overlap the computation (strict phases, or one bucket that waits for the
last gradient) this is ``T = c + sum_b T_b + copy_out + U``; with one worker (no bytes, no
hops) ``T`` is the computation alone. What it leaves out: the fp16 casts and a ring's receive
side work, which run on the device between backward ops (counted here as part of their
bucket's AllReduce: exact when they cost nothing), a pipelined ring's CPU work and contention
with co-located workers; the simulator has them.

Pure: traces in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simcore.errors import ConfigError
from simcore.sim.buckets import (
    DEFAULT_BUCKET_CAP_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    Bucket,
    trace_buckets,
)
from simcore.sim.collectives import get_collective
from simcore.sim.ddp_dag import wire_nbytes
from simcore.trace.model import OpKind, Resource, Trace

__all__ = ["DdpEstimate", "DdpWorker", "bucket_times_s", "ddp_worker_from_trace", "predict_ddp"]


@dataclass(frozen=True)
class DdpWorker:
    """One worker type's side of a DDP step (seconds from the step's start; bytes).

    ``ready_s[b]``: when bucket b's gradients are all in it; ``compute_s``: when the device's
    computation before the update ends; ``copy_out_s``: the copy of the reduced buckets into
    the gradients; ``update_s``: the optimizer's update; ``cast_s[b]``: bucket b's fp16 casts
    (before and after, together); ``wire_nbytes[b]``: what bucket b's AllReduce reduces.
    """

    name: str
    ready_s: tuple[float, ...]
    compute_s: float
    copy_out_s: float
    update_s: float
    batch_size: int
    wire_nbytes: tuple[float, ...]
    cast_s: tuple[float, ...]
    buckets: tuple[Bucket, ...]


@dataclass(frozen=True)
class DdpEstimate:
    """The closed form's step: its time, throughput and what of it communication exposed.

    ``exposed_s``: the step's time beyond the slowest worker type's computation, copies and
    update, i.e. what the AllReduces did not hide under the backward pass.
    """

    step_s: float
    steps_per_s: float
    examples_per_s: float
    exposed_s: float
    bucket_s: tuple[float, ...]
    buckets: int


def ddp_worker_from_trace(
    trace: Trace,
    *,
    bucket_cap_bytes: int = DEFAULT_BUCKET_CAP_BYTES,
    first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES,
    overlap: str = "layerwise",
    copy_s_per_byte: float = 0.0,
    gradient_as_bucket_view: bool = False,
    compression: str = "none",
) -> DdpWorker:
    """The times of ``trace`` (means over its profiled steps), its computation in trace order.

    ``overlap="none"``: strict phases, every bucket ready once the computation has ended.
    """
    buckets = trace_buckets(trace, bucket_cap_bytes, first_bucket_bytes)
    durations = _mean_durations(trace)
    copies = copy_s_per_byte > 0 and not gradient_as_bucket_view
    clock = 0.0
    ready_of: dict[str, float] = {}
    update_s = 0.0
    for op, seconds in zip(trace.ops, durations, strict=True):
        if op.resource is Resource.PS or op.kind is OpKind.UPDATE:
            update_s += seconds  # on the device, after the last bucket
        elif op.resource is Resource.WORKER:
            clock += seconds
        elif op.resource is Resource.UPLINK and op.layer is not None:
            if copies:
                clock += copy_s_per_byte * (op.nbytes or 0)
            ready_of[op.layer] = clock
    compute_s = clock
    ready = tuple(
        compute_s if overlap == "none" else max(ready_of[layer] for layer in b.layers)
        for b in buckets
    )
    return DdpWorker(
        name=trace.metadata.model_name,
        ready_s=ready,
        compute_s=compute_s,
        copy_out_s=copy_s_per_byte * sum(b.nbytes for b in buckets) if copies else 0.0,
        update_s=update_s,
        batch_size=trace.metadata.batch_size,
        wire_nbytes=tuple(wire_nbytes(b, compression) for b in buckets),
        cast_s=tuple(
            2 * copy_s_per_byte * b.nbytes if compression == "fp16" else 0.0 for b in buckets
        ),
        buckets=buckets,
    )


def _mean_durations(trace: Trace) -> list[float]:
    table = np.array(
        [[0.0 if d is None else d for d in step.duration_s] for step in trace.steps], float
    )
    means: list[float] = table.mean(axis=0).tolist()
    return means


def bucket_times_s(
    wire: Sequence[float],
    workers: int,
    bandwidth_bps: float,
    latency_s: float = 0.0,
    collective: str = "ring",
) -> tuple[float, ...]:
    """``T_b = hops * latency + bits_b / bandwidth`` for every bucket (see the module)."""
    algorithm = get_collective(collective)
    return tuple(algorithm.time_s(n, workers, bandwidth_bps, latency_s) for n in wire)


def predict_ddp(
    workers: Sequence[DdpWorker],
    counts: Sequence[int],
    bandwidth_bps: float,
    *,
    latency_s: float = 0.0,
    collective: str = "ring",
    devices_per_host: int = 1,
    intra_bandwidth_bps: float | None = None,
) -> DdpEstimate:
    """The step of ``counts[i]`` workers of type ``workers[i]`` (see the module docstring).

    ``bandwidth_bps``: the slowest rank's rate (its link, or its per-flow cap if lower).
    ``devices_per_host`` G > 1: each worker is a host of G devices that reduce each bucket
    among themselves before the hosts' AllReduce and share the result after, ``(G-1)/G`` of
    the bucket each way over ``intra_bandwidth_bps``, counted in the bucket's time (the
    simulator overlaps a bucket's reduce inside the host with the previous bucket's AllReduce:
    this errs on the slow side); a step trains G batches.

    Raises
    ------
    ConfigError : the types' buckets differ (DDP replicates one model), no worker, or a tree
        among fewer than two.
    """
    if not workers or len(workers) != len(counts) or min(counts, default=0) < 1:
        raise ConfigError("workers: one count >= 1 per worker type is needed")
    shapes = {tuple(b.nbytes for b in w.buckets) for w in workers}
    if len(shapes) > 1:
        raise ConfigError("workers: DDP replicates one model; the worker types' buckets differ")
    k = sum(counts)
    if collective == "tree" and k < 2:
        raise ConfigError(f"collective: a tree needs at least 2 workers, got {k}")
    if not (math.isfinite(bandwidth_bps) and bandwidth_bps > 0):
        raise ConfigError(f"bandwidth_bps: must be a finite number > 0, got {bandwidth_bps!r}")
    first = workers[0]
    casts = [max(w.cast_s[b] for w in workers) for b in range(len(first.buckets))]
    times = bucket_times_s(first.wire_nbytes, k, bandwidth_bps, latency_s, collective)
    inside = [0.0] * len(times)
    if devices_per_host > 1:
        if intra_bandwidth_bps is None or not intra_bandwidth_bps > 0:
            raise ConfigError(
                f"intra_bandwidth_bps: needed with devices_per_host={devices_per_host}"
            )
        g = devices_per_host
        inside = [2 * (g - 1) / g * 8 * n / intra_bandwidth_bps for n in first.wire_nbytes]
    bucket_s = tuple(t + c + i for t, c, i in zip(times, casts, inside, strict=True))
    end = 0.0
    for b, seconds in enumerate(bucket_s):
        end = max(max(w.ready_s[b] for w in workers), end) + seconds
    # Each type's device updates once its own computation and every bucket are done.
    step = max(max(w.compute_s, end) + w.copy_out_s + w.update_s for w in workers)
    examples = devices_per_host * sum(
        w.batch_size * n for w, n in zip(workers, counts, strict=True)
    )
    return DdpEstimate(
        step_s=step,
        steps_per_s=k / step,
        examples_per_s=examples / step,
        exposed_s=step - max(w.compute_s + w.copy_out_s + w.update_s for w in workers),
        bucket_s=bucket_s,
        buckets=len(bucket_s),
    )
