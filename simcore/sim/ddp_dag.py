"""PyTorch DDP's step as a DAG: the backward pass, one AllReduce per bucket, the local update.

What DistributedDataParallel does in a step (``torch/nn/parallel/distributed.py`` and
``torch/csrc/distributed/c10d/reducer.cpp``), and the ops it becomes here:

- forward and backward as profiled; there are no pulls (every rank holds the parameters);
- a gradient's autograd hook marks it ready, and without ``gradient_as_bucket_view`` copies it
  into its bucket (``bucket-copy:<layer>``, on the worker's device, delaying the backward
  ops after it, as the hook runs on the backward's thread);
- a bucket is ready when all of its gradients are (``ready:bucket<b>``, an instant) and the
  reducer launches the buckets' AllReduces in bucket order; they run one after another on the
  communication stream. Every rank takes part in every one, so bucket b's AllReduce starts
  when **every** rank has it ready and has finished bucket b-1 (``gate:bucket<b>``, a
  rendezvous of all workers), and it is over for all of them when the slowest rank is done
  (``done:bucket<b>``, again a rendezvous): a slow worker delays everyone's buckets, and a
  rank whose link is slower paces the collective;
- between the two, each rank's part of the collective on its own link
  (``allreduce:bucket<b>``: :mod:`simcore.sim.collectives` says how many bits and hops; as a
  pipelined ring, its messages with their CPU work, as for the per-layer ring), its latency
  and, with parsing, its receive-side work;
- with ``fp16`` (torch's ``fp16_compress_hook``) the bucket is cast to float16 before
  (``compress:bucket<b>``) and back after (``decompress:bucket<b>``), and half the bytes
  travel;
- on hosts of several devices, the host's devices reduce the bucket among themselves first
  (``intra-reduce:bucket<b>``) and share the result after (``intra-broadcast:bucket<b>``);
- ``backward()`` returns once every bucket is reduced (``join:buckets``); without
  ``gradient_as_bucket_view`` the reduced buckets are copied back into the gradients
  (``bucket-copy:out``); then the optimizer updates every layer locally (the trace's update
  ops, on the worker's device).

Pure: a :class:`~simcore.trace.model.Trace` and a config in, :class:`DagNode` records out.
"""

from __future__ import annotations

from collections.abc import Sequence

from simcore.errors import ConfigError
from simcore.sim.buckets import Bucket, trace_buckets
from simcore.sim.collectives import get_collective
from simcore.sim.config import SimulationConfig
from simcore.sim.dag_ops import (
    OTHER,
    RENDEZVOUS,
    DagNode,
    IntraHostOp,
    delay_node,
    intra_host_op,
    ring_messages,
    strict_phase_deps,
)
from simcore.trace.model import OpKind, Resource, Trace

__all__ = ["ddp_buckets", "ddp_nodes", "wire_nbytes"]

_WORKER = Resource.WORKER.value
_UPLINK = Resource.UPLINK.value
_PUSH = OpKind.PUSH.value
# Bytes per element of the dtypes a bucket may hold, to size its float16 copy.
_ELEMENT_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
FINAL = "join:buckets"
COPY_OUT = "bucket-copy:out"


def ddp_buckets(trace: Trace, config: SimulationConfig) -> tuple[Bucket, ...]:
    """The buckets ``config``'s limits make of ``trace``'s gradients (:mod:`.buckets`)."""
    return trace_buckets(trace, config.bucket_cap_bytes, config.first_bucket_bytes)


def wire_nbytes(bucket: Bucket, compression: str) -> float:
    """The bytes one rank's AllReduce of ``bucket`` reduces: its own, or half of float32's
    with ``fp16`` (a bucket already in 16 bits stays as it is)."""
    if compression != "fp16":
        return float(bucket.nbytes)
    return float(sum(t.nbytes * 2 / _ELEMENT_BYTES.get(t.dtype, 2) for t in bucket.tensors))


def ddp_nodes(trace: Trace, config: SimulationConfig) -> tuple[list[DagNode], dict[str, str]]:
    """The transformed op list, and op id -> the op its dependents wait for (see the module).

    Trace ops keep their order; a bucket's ops follow the push of its last layer, so that
    trace-order tie-breaks stay meaningful.
    """
    buckets = ddp_buckets(trace, config)
    dropped = {op.id: op.deps for op in trace.ops if op.resource is Resource.DOWNLINK}

    def resolve(deps: Sequence[str]) -> list[str]:
        out: list[str] = []
        for d in deps:
            out.extend(resolve(dropped[d]) if d in dropped else [d])
        return out

    phases = strict_phase_deps(trace) if config.overlap == "none" else {}
    copies = config.bucket_copy_s_per_byte > 0 and not config.gradient_as_bucket_view
    builder = _BucketBuilder(config, intra_host_op(config))
    nodes: list[DagNode] = []
    pushes: list[str] = []
    ready_of: dict[str, list[str]] = {}  # layer -> the ops after which its gradients are ready
    pending = list(buckets)
    for col, op in enumerate(trace.ops):
        if op.id in dropped:
            continue
        if op.resource is Resource.UPLINK and op.layer is not None:
            pushes.append(op.id)
            ready = resolve([*op.deps, *phases.get(op.id, ())])
            if copies:  # the autograd hook copies the gradients into the bucket
                cost = config.bucket_copy_s_per_byte * (op.nbytes or 0)
                copy = f"bucket-copy:{op.layer}"
                nodes.append(DagNode(copy, OTHER, _WORKER, 0, 0.0, -1, cost, ready))
                ready = [copy]
            ready_of[op.layer] = ready
            while pending and all(layer in ready_of for layer in pending[0].layers):
                nodes.extend(builder.bucket(pending.pop(0), ready_of))
            continue
        resource = _WORKER if op.resource is Resource.PS else op.resource.value
        # Trace names: compile resolves them through alias (an update's push -> FINAL).
        deps = [*op.deps] if op.resource is Resource.PS else resolve(op.deps)
        nodes.append(DagNode(op.id, op.kind.value, resource, 0, 0.0, col, 0.0, deps))
    if pending:  # a gradient of the buckets without a push in the trace: cannot happen
        raise ConfigError(f"arch: DDP's buckets of trace {trace.source} name unknown layers")
    nodes.extend(builder.finish(sum(b.nbytes for b in buckets), copies))
    # Every update waits for the last op of the reduction: trace ops name their push.
    alias = dict.fromkeys(pushes, nodes[-1].op_id)
    return nodes, alias


class _BucketBuilder:
    """Emits each bucket's ops in turn, chaining the collectives one after another."""

    def __init__(self, config: SimulationConfig, intra: IntraHostOp | None) -> None:
        self.config = config
        self.intra = intra
        self.collective = get_collective(config.collective)
        self.previous_done: str | None = None
        self.ends: list[str] = []

    def bucket(self, bucket: Bucket, ready_of: dict[str, list[str]]) -> list[DagNode]:
        cfg = self.config
        name = bucket.label
        wire = wire_nbytes(bucket, cfg.ddp_compression)
        ready = list(dict.fromkeys(d for layer in bucket.layers for d in ready_of[layer]))
        nodes = [delay_node(f"ready:{name}", 0.0, ready)]
        last = nodes[-1].op_id
        cast_s = cfg.bucket_copy_s_per_byte * bucket.nbytes
        if cfg.ddp_compression == "fp16":
            nodes.append(DagNode(f"compress:{name}", OTHER, _WORKER, 0, 0.0, -1, cast_s, [last]))
            last = nodes[-1].op_id
        if self.intra is not None:
            nodes.append(self.intra(f"intra-reduce:{name}", wire, [last]))
            last = nodes[-1].op_id
        gate_deps = [last] if self.previous_done is None else [last, self.previous_done]
        nodes.append(DagNode(f"gate:{name}", OTHER, RENDEZVOUS, 0, 0.0, -1, 0.0, gate_deps))
        nodes.extend(self._transfer(f"allreduce:{name}", wire, [nodes[-1].op_id]))
        nodes.append(DagNode(f"done:{name}", OTHER, RENDEZVOUS, 0, 0.0, -1, 0.0, [nodes[-1].op_id]))
        last = self.previous_done = nodes[-1].op_id
        if cfg.ddp_compression == "fp16":
            nodes.append(DagNode(f"decompress:{name}", OTHER, _WORKER, 0, 0.0, -1, cast_s, [last]))
            last = nodes[-1].op_id
        if self.intra is not None:
            nodes.append(self.intra(f"intra-broadcast:{name}", wire, [last]))
            last = nodes[-1].op_id
        self.ends.append(last)
        return nodes

    def _transfer(self, op_id: str, nbytes: float, deps: list[str]) -> list[DagNode]:
        """One rank's part of the collective: on its link, then its latency and parsing."""
        cfg = self.config
        k = cfg.workers
        bits = self.collective.bits(nbytes, k)
        work_s = cfg.parse_alpha_s_per_byte * nbytes + cfg.parse_beta_s if k > 1 else 0.0
        if cfg.ring_pipelined:
            after = cfg.parse_placement == "after"
            nodes = ring_messages(
                op_id, _PUSH, _UPLINK, nbytes, bits, deps, 0 if after else work_s, cfg
            )
            if after and work_s > 0:
                nodes.append(
                    DagNode(f"parse:{op_id}", OTHER, _WORKER, 0, 0.0, -1, work_s, [nodes[-1].op_id])
                )
            return nodes
        nodes = [DagNode(op_id, _PUSH, _UPLINK, 0, bits, -1, 0.0, deps)]
        latency_s = self.collective.hops(k) * cfg.latency_s
        if latency_s > 0:
            nodes.append(delay_node(f"latency:{op_id}", latency_s, [op_id]))
        if work_s > 0:
            last = nodes[-1].op_id
            nodes.append(DagNode(f"parse:{op_id}", OTHER, _WORKER, 0, 0.0, -1, work_s, [last]))
        return nodes

    def finish(self, nbytes: int, copies: bool) -> list[DagNode]:
        """``join:buckets`` after every bucket, then the copy back into the gradients."""
        nodes = [delay_node(FINAL, 0.0, list(self.ends))]
        if copies:
            cost = self.config.bucket_copy_s_per_byte * nbytes
            nodes.append(DagNode(COPY_OUT, OTHER, _WORKER, 0, 0.0, -1, cost, [FINAL]))
        return nodes
