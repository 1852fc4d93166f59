"""MLCommons Chakra execution traces of one simulated step, one file per rank, for ASTRA-sim.

:func:`chakra_ranks` turns a :class:`~simcore.sim.results.SimulationResult` (run with
``timeline=True``) and the trace(s) it simulated into one Chakra graph per rank;
:func:`simcore.export.chakra_files.write_chakra_dir` writes them as ``<prefix>.<rank>.et``,
the names ASTRA-sim opens (``Workload.cc``: ``<workload prefix> + "." + <npu id> + ".et"``),
and ``read_chakra_file`` reads one back. Schema: Chakra's ``et_def.proto``, vendored in
:mod:`simcore.export.chakra_schema` (its header names the commit). Each file is, as Chakra's
``protolib.encodeMessage`` writes it, a ``GlobalMetadata`` and then the ``Node`` messages, each
prefixed with its length as a varint.

Ranks: ``0..W-1`` are the workers. With parameter servers (``arch="ps"``) the S servers are
ranks ``W..W+S-1`` (server i is rank W+i), so that every transfer is a send on one rank and the
matching receive on another; ``world_size`` in the metadata is W+S. Ring AllReduce and DDP have
no servers: W ranks.

What becomes which node (one exported step, the same simulated step index on every worker):

- computation on a worker (forward, backward, the local updates of ring/DDP, parsing, DDP's
  bucket copies and casts, the fixed-cost ``overhead:`` ops, the communication thread's
  ``comm:`` work, intra-host reduce/broadcast of hosts of several devices): ``COMP_NODE``;
- a server's computation for a worker (``update:``, ``parse:push:``): ``COMP_NODE`` on the
  server's rank, named ``<op> (worker w)``;
- a pull: ``COMM_RECV_NODE`` on the worker (``comm_src`` the server's rank) and
  ``COMM_SEND_NODE`` on the server; a push: ``COMM_SEND_NODE`` on the worker and
  ``COMM_RECV_NODE`` on the server. Both ends carry the same ``comm_size`` (the layer's bytes)
  and ``comm_tag`` (the op's index in the worker's step DAG: unique per pair of ranks);
- a ring AllReduce of a layer, or DDP's of a bucket: ``COMM_COLL_NODE``, ``comm_type``
  ``ALL_REDUCE``, ``comm_size`` the bytes each rank reduces (the layer's; the bucket's, halved
  with ``fp16``). ASTRA-sim derives the ring's traffic from it, so it is not the simulator's
  2(K-1)/K share. A ring simulated as its messages (``<id>#j``) is one node, from the first
  message's start to the last one's end; their per-message work stays ``COMP_NODE``.

Folded out (not nodes, they occupy no resource): latency (``latency:``), joins (``join:``),
DDP's bucket readiness (``ready:``) and rendezvous (``gate:``, ``done:``). A dependency through
them is kept: a node depends on the nearest nodes of its rank before them. A dependency on an
op of another rank only (a push's backward, seen from the server) is dropped: the message
pairing carries it.

``data_deps`` are the simulator's step DAG. ``ctrl_deps`` add the order in which a rank's
resource ran its ops (the compute stream, a link, a server's core for one worker) where the DAG
does not imply it: each node depends on the node of its resource that finished last before it
started. Ids are 0, 1, ... in a topological order of both kinds, which the file follows.
Times: ``duration_micros`` is the simulated duration rounded to the microsecond,
``start_time_micros`` the start from the first exported op of the step (all ranks one clock).

Not given: ``num_ops``/``tensor_size`` (ASTRA-sim's roofline mode; the trace holds no FLOPs),
``involved_dim`` and process groups (every collective spans all ranks, ASTRA-sim's default).
"""

from __future__ import annotations

import heapq
import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from simcore import __version__
from simcore.errors import ConfigError
from simcore.export.chrome import resource_base, server_of
from simcore.sim.config import SimulationConfig, trace_of_worker
from simcore.sim.dag import DELAY, RENDEZVOUS, CompiledDag, compile_trace
from simcore.sim.ddp_dag import ddp_buckets, wire_nbytes
from simcore.sim.results import SimulationResult, Timeline
from simcore.trace.model import Resource, Trace

#: ``GlobalMetadata.version``: the schema version Chakra's own converters write.
SCHEMA_VERSION = "0.0.4"
EXTRA = "chakra"  # the pip extra that installs protobuf
FILE_SUFFIX = ".et"
_FOLDED = (DELAY, RENDEZVOUS)  # resources of the ops that are no nodes


def schema(what: str = "Chakra export") -> ModuleType:
    """The generated Chakra schema module (``et_def_pb2``), imported on first use.

    ``what`` starts the error line (an option such as ``--chakra-dir``).

    Raises
    ------
    ConfigError
        If protobuf is missing or too old for the generated module: says what to install.
    """
    try:
        return importlib.import_module("simcore.export.chakra_schema.et_def_pb2")
    except ImportError as err:
        raise ConfigError(
            f"{what}: needs protobuf ({err}); install it with: pip install 'sgdsim[{EXTRA}]'"
        ) from err
    except Exception as err:  # protobuf's VersionError: a runtime older than the generated code
        raise ConfigError(
            f"{what}: the installed protobuf cannot load the Chakra schema ({err}); "
            f"upgrade it with: pip install -U 'sgdsim[{EXTRA}]'"
        ) from err


def require_protobuf(option: str) -> None:
    """ConfigError naming ``option`` unless the Chakra schema loads: checked before a run."""
    schema(option)


@dataclass(frozen=True)
class ChakraRank:
    """One rank's execution trace: its ``GlobalMetadata`` and ``Node`` messages, file order."""

    rank: int
    role: str  # "worker" or "server"
    metadata: Any  # et_def_pb2.GlobalMetadata
    nodes: tuple[Any, ...]  # et_def_pb2.Node, topological order, ids 0, 1, ...

    def file_name(self, prefix: str) -> str:
        return f"{prefix}.{self.rank}{FILE_SUFFIX}"


@dataclass
class _Node:
    """A node before it becomes a message: timing, dependencies by key on its rank."""

    name: str
    node_type: str  # an et_def NodeType name
    lane: str  # the resource whose order ctrl_deps record
    start_s: float
    end_s: float
    attrs: dict[str, tuple[str, Any]]  # name -> (AttributeProto field, value)
    deps: set[str] = field(default_factory=set)
    ctrl: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Row:
    start_s: float
    end_s: float
    slot: str


def chakra_ranks(
    result: SimulationResult, trace: Trace | Sequence[Trace], *, step: int | None = None
) -> list[ChakraRank]:
    """The Chakra graphs of simulated step ``step`` on every rank (see the module docstring).

    Parameters
    ----------
    result : a run with ``timeline=True`` (the timeline of the replication it keeps).
    trace : the trace(s) ``result`` simulated, as given to ``simulate``.
    step : the simulated step to export; None: a representative measured one, the step after
        warm-up whose mean duration over workers is nearest the median (ties: the earliest).

    Returns
    -------
    One :class:`ChakraRank` per rank, rank order: workers, then parameter servers.

    Raises
    ------
    ConfigError
        The result has no timeline, ``step`` was not simulated, the traces do not match the
        result, or protobuf is missing.
    """
    pb = schema()
    timeline = result.timeline
    if timeline is None:
        raise ConfigError("result: has no timeline; simulate with timeline=True to export it")
    config = result.config
    traces = [trace] if isinstance(trace, Trace) else list(trace)
    used, dags, worker_dag = _compiled(traces, config, timeline)
    step = _chosen_step(timeline, config) if step is None else _checked_step(step, config)
    servers = 0 if config.is_collective else config.servers
    graphs: list[dict[str, _Node]] = [{} for _ in range(config.workers + servers)]
    offsets = np.cumsum([0, *(d.n_ops for d in dags)])
    for w, d in enumerate(worker_dag):
        rows = _rows(timeline, w, step, int(offsets[d]), dags[d].n_ops)
        sizes = _comm_sizes(traces[used[d]], config)
        _add_worker(graphs, w, dags[d], rows, sizes, config)
    starts = [n.start_s for g in graphs for n in g.values()]
    origin_s = min(starts) if starts else 0.0
    ranks = []
    for rank, graph in enumerate(graphs):
        _add_ctrl_deps(graph)
        role = "worker" if rank < config.workers else "server"
        meta = _metadata(pb, config, rank, role, step, origin_s, servers, traces)
        ranks.append(ChakraRank(rank, role, meta, _messages(pb, graph, origin_s)))
    return ranks


def _compiled(
    traces: Sequence[Trace], config: SimulationConfig, timeline: Timeline
) -> tuple[list[int], list[CompiledDag], list[int]]:
    """As the simulator compiles them (``simcore.sim.api``): used traces, DAGs, each worker's."""
    worker_trace = trace_of_worker(config, len(traces))
    if not traces or max(worker_trace) >= len(traces):
        raise ConfigError(f"trace: {len(traces)} trace(s) given; the result's workers use more")
    used = sorted(set(worker_trace))
    dags = [compile_trace(traces[i], config) for i in used]
    if tuple(op for dag in dags for op in dag.op_ids) != timeline.op_ids:
        raise ConfigError(
            "trace: its ops differ from those the result simulated; pass the trace(s) the "
            "result was simulated from"
        )
    return used, dags, [used.index(t) for t in worker_trace]


def _checked_step(step: int, config: SimulationConfig) -> int:
    if not 0 <= step < config.steps:
        raise ConfigError(
            f"step: {step} was not simulated; the result holds steps 0..{config.steps - 1}"
        )
    return step


def _chosen_step(timeline: Timeline, config: SimulationConfig) -> int:
    """The measured step whose mean duration over workers is nearest the median of them."""
    first = config.warmup_steps if config.warmup_steps < config.steps else 0
    totals = np.zeros(config.steps)
    counts = np.zeros(config.steps)
    for record in timeline.steps:
        totals[record.step] += record.end_s - record.start_s
        counts[record.step] += 1
    measured = np.arange(first, config.steps)
    means = totals[measured] / np.maximum(counts[measured], 1)
    return int(measured[np.argmin(np.abs(means - np.median(means)))])


def _rows(timeline: Timeline, worker: int, step: int, offset: int, n_ops: int) -> dict[int, _Row]:
    """Local op index -> when it ran in ``step`` on ``worker`` (HTTP/2 chunks of an op merged)."""
    mask = (timeline.worker == worker) & (timeline.step == step)
    rows: dict[int, _Row] = {}
    for i in np.flatnonzero(mask):
        op = int(timeline.op[i]) - offset
        if not 0 <= op < n_ops:
            continue
        start, end = float(timeline.start_s[i]), float(timeline.end_s[i])
        seen = rows.get(op)
        if seen is not None:
            start, end = min(start, seen.start_s), max(end, seen.end_s)
        rows[op] = _Row(start, end, timeline.slot_names[int(timeline.slot[i])])
    return rows


def _comm_sizes(trace: Trace, config: SimulationConfig) -> dict[str, int]:
    """Op id (a ring message's first) -> Chakra ``comm_size`` in bytes."""
    if config.arch == "ddp":
        buckets = ddp_buckets(trace, config)
        return {
            f"allreduce:{b.label}": round(wire_nbytes(b, config.ddp_compression)) for b in buckets
        }
    return {op.id: op.nbytes or 0 for op in trace.ops if op.is_communication}


def _base_id(op_id: str) -> str:
    """A ring message's collective: ``push:fc#3`` -> ``push:fc``."""
    head, sep, tail = op_id.rpartition("#")
    return head if sep and tail.isdigit() else op_id


def _add_worker(
    graphs: list[dict[str, _Node]],
    w: int,
    dag: CompiledDag,
    rows: dict[int, _Row],
    sizes: dict[str, int],
    config: SimulationConfig,
) -> None:
    """Worker ``w``'s ops of the step as nodes on its rank and its servers' ranks."""
    owner: list[dict[int, str]] = []  # per op: rank -> key of its node there
    for i, op_id in enumerate(dag.op_ids):
        row = rows.get(i)
        base = resource_base(row.slot) if row is not None else DELAY
        if row is None or base in _FOLDED:
            owner.append({})
            continue
        owner.append(_place(graphs, w, i, op_id, row, dag.kinds[i], sizes, config))
    parents: list[list[int]] = [[] for _ in dag.op_ids]
    for i, after in enumerate(dag.dependents):
        for j in after:
            parents[j].append(i)
    for rank in {r for o in owner for r in o}:
        reach = _reach(rank, owner, parents, _topological(dag))
        for i, keys in enumerate(owner):
            if rank in keys:
                node = graphs[rank][keys[rank]]
                node.deps.update(k for p in parents[i] for k in reach[p])
                node.deps.discard(keys[rank])


def _place(
    graphs: list[dict[str, _Node]],
    w: int,
    i: int,
    op_id: str,
    row: _Row,
    kind: str,
    sizes: dict[str, int],
    config: SimulationConfig,
) -> dict[int, str]:
    """Add op ``i``'s node(s); returns rank -> key."""
    base = resource_base(row.slot)
    server_rank = config.workers + server_of(row.slot)
    on_server = f"{op_id} (worker {w})"
    attrs: dict[str, tuple[str, Any]] = {
        "is_cpu_op": ("bool_val", False),
        "sgdsim_op": ("string_val", op_id),
        "sgdsim_kind": ("string_val", kind),
    }
    if base == Resource.UPLINK.value and config.is_collective:
        key = _base_id(op_id)
        attrs["sgdsim_op"] = ("string_val", key)
        attrs["comm_type"] = ("int64_val", schema().ALL_REDUCE)
        attrs["comm_size"] = ("int64_val", sizes.get(key, 0))
        _merge(graphs[w], key, _Node(key, "COMM_COLL_NODE", row.slot, *_times(row), attrs))
        return {w: key}
    if base in (Resource.DOWNLINK.value, Resource.UPLINK.value):
        pull = base == Resource.DOWNLINK.value
        src, dst = (server_rank, w) if pull else (w, server_rank)
        attrs["comm_src"] = ("int32_val", src)
        attrs["comm_dst"] = ("int32_val", dst)
        attrs["comm_tag"] = ("int32_val", i)
        attrs["comm_size"] = ("int64_val", sizes.get(op_id, 0))
        mine, theirs = ("COMM_RECV_NODE", "COMM_SEND_NODE")[:: 1 if pull else -1]
        graphs[w][op_id] = _Node(op_id, mine, row.slot, *_times(row), attrs)
        lane = f"{row.slot} (worker {w})"
        server_attrs = {**attrs, "sgdsim_worker": ("int64_val", w)}
        graphs[server_rank][on_server] = _Node(on_server, theirs, lane, *_times(row), server_attrs)
        return {w: op_id, server_rank: on_server}
    if base == Resource.PS.value and not config.is_collective:
        lane = f"{row.slot} (worker {w})"  # each worker has its own core at a server
        attrs["sgdsim_worker"] = ("int64_val", w)
        graphs[server_rank][on_server] = _Node(on_server, "COMP_NODE", lane, *_times(row), attrs)
        return {server_rank: on_server}
    graphs[w][op_id] = _Node(op_id, "COMP_NODE", row.slot, *_times(row), attrs)
    return {w: op_id}


def _times(row: _Row) -> tuple[float, float]:
    return row.start_s, row.end_s


def _merge(graph: dict[str, _Node], key: str, node: _Node) -> None:
    """Add ``node``, or widen the node of ``key`` to cover it (a ring's messages)."""
    seen = graph.get(key)
    if seen is None:
        graph[key] = node
        return
    seen.start_s = min(seen.start_s, node.start_s)
    seen.end_s = max(seen.end_s, node.end_s)


def _topological(dag: CompiledDag) -> list[int]:
    waiting = list(dag.ndeps)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order: list[int] = []
    while ready:
        op = ready.pop()
        order.append(op)
        for d in dag.dependents[op]:
            waiting[d] -= 1
            if waiting[d] == 0:
                ready.append(d)
    return order


def _reach(
    rank: int, owner: list[dict[int, str]], parents: list[list[int]], order: list[int]
) -> list[frozenset[str]]:
    """Per op, the keys its dependents on ``rank`` wait for: its own node there; for a folded
    op, those of its parents (transitively); for an op of other ranks only, none."""
    reach: list[frozenset[str]] = [frozenset()] * len(owner)
    for i in order:  # parents first
        if rank in owner[i]:
            reach[i] = frozenset((owner[i][rank],))
        elif not owner[i]:
            reach[i] = frozenset(k for p in parents[i] for k in reach[p])
    return reach


def _order(graph: dict[str, _Node]) -> list[str]:
    """Keys in a topological order of the data deps, earliest start first among ready ones."""
    children: dict[str, list[str]] = {k: [] for k in graph}
    waiting = {k: len(n.deps) for k, n in graph.items()}
    for k, n in graph.items():
        for d in n.deps:
            children[d].append(k)
    heap = [(n.start_s, k) for k, n in graph.items() if not n.deps]
    heapq.heapify(heap)
    order = []
    while heap:
        _, key = heapq.heappop(heap)
        order.append(key)
        for c in children[key]:
            waiting[c] -= 1
            if waiting[c] == 0:
                heapq.heappush(heap, (graph[c].start_s, c))
    return order


def _add_ctrl_deps(graph: dict[str, _Node]) -> None:
    """Each node waits for the node of its lane that ended last before it started, unless the
    data deps already order them.

    Lane nodes are visited in the order of :func:`_order` (which every data dep follows, since a
    node starts no earlier than its parents), and a ctrl dep only points back in it, so the
    graph stays acyclic.
    """
    lanes: dict[str, list[str]] = {}
    for key in _order(graph):
        node = graph[key]
        before = lanes.setdefault(node.lane, [])
        done = [k for k in before if graph[k].end_s <= node.start_s]
        if done:
            last = max(done, key=lambda k: graph[k].end_s)
            if not _is_ancestor(graph, last, key):
                node.ctrl.add(last)
        before.append(key)


def _is_ancestor(graph: dict[str, _Node], ancestor: str, key: str) -> bool:
    stack, seen = [key], {key}
    while stack:
        node = graph[stack.pop()]
        for parent in (*node.deps, *node.ctrl):
            if parent == ancestor:
                return True
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return False


def _messages(pb: ModuleType, graph: dict[str, _Node], origin_s: float) -> tuple[Any, ...]:
    order = _order(graph)  # also topological for ctrl deps: each points back in this order
    ids = {key: i for i, key in enumerate(order)}
    out = []
    for key in order:
        node = graph[key]
        message = pb.Node(
            id=ids[key],
            name=node.name,
            type=pb.NodeType.Value(node.node_type),
            ctrl_deps=sorted(ids[k] for k in node.ctrl),
            data_deps=sorted(ids[k] for k in node.deps),
            start_time_micros=max(0, round((node.start_s - origin_s) * 1e6)),
            duration_micros=max(0, round((node.end_s - node.start_s) * 1e6)),
        )
        message.attr.extend(pb.AttributeProto(name=n, **{f: v}) for n, (f, v) in node.attrs.items())
        out.append(message)
    return tuple(out)


def _metadata(
    pb: ModuleType,
    config: SimulationConfig,
    rank: int,
    role: str,
    step: int,
    origin_s: float,
    servers: int,
    traces: Sequence[Trace],
) -> Any:
    values: dict[str, tuple[str, Any]] = {
        "producer": ("string_val", f"sgdsim {__version__}"),
        "sgdsim_note": ("string_val", "a simulated step, not a measurement"),
        "rank": ("int64_val", rank),
        "role": ("string_val", role),
        "world_size": ("int64_val", config.workers + servers),
        "workers": ("int64_val", config.workers),
        "servers": ("int64_val", servers),
        "ranks": ("string_val", _ranks_text(config.workers, servers)),
        "arch": ("string_val", config.arch),
        "mode": ("string_val", config.mode),
        "sharing": ("string_val", config.policy_name),
        "bandwidth_bps": ("double_val", float(config.bandwidth_bps)),
        "latency_s": ("double_val", float(config.latency_s)),
        "step": ("int64_val", step),
        "time_origin_s": ("double_val", origin_s),
        "models": ("string_val", ", ".join(t.metadata.model_name for t in traces)),
    }
    return pb.GlobalMetadata(
        version=SCHEMA_VERSION,
        attr=[pb.AttributeProto(name=n, **{f: v}) for n, (f, v) in values.items()],
    )


def _ranks_text(workers: int, servers: int) -> str:
    text = f"0..{workers - 1}: workers" if workers > 1 else "0: worker"
    if servers > 1:
        text += f"; {workers}..{workers + servers - 1}: parameter servers"
    elif servers:
        text += f"; {workers}: parameter server"
    return text
